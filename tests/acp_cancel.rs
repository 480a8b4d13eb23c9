//! `oml acp` cancelling a turn end to end: `session/cancel` and `$/cancel_request` while the
//! answer streams, while the client is asked, while a command runs, sent right behind the prompt
//! or after a refused one; the partial answer kept, the next answer a message of its own. The
//! scripted ACP client (tests/support/acp.rs) drives the real binary against the fake model.

mod support;

use serde_json::{Value, json};
use support::acp::*;
use support::editor::WAIT;
use support::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};
use support::home::Env;

#[test]
fn cancel_answers_cancelled_and_keeps_the_partial_answer() {
    let env = Env::new();
    let fake = FakeModel::start([partial_then_hang("partial")]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let id = c.prompt(&sid, "Write a long story");
    let first = c.until(|m| update_kind(m).is_some());
    assert_eq!(update_kind(&first).as_deref(), Some("agent_message_chunk"));
    c.notify("session/cancel", json!({"sessionId": sid}));
    let (_, response) = c.until_response(id);
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");

    fake.push(Reply::from(text_chunks(&["ok"])));
    let id = c.prompt(&sid, "Again");
    let (_, response) = c.until_response(id);
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let second = &fake.requests()[1].body;
    let kept = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["role"] == "assistant" && m["content"] == "partial");
    assert!(kept, "the partial answer is in the transcript: {second}");
}

#[test]
fn a_cancel_sent_right_after_the_prompt_is_not_lost() {
    // The cancel is read before the prompt's task has set up the turn; it must still stop it.
    let env = Env::new();
    let fake = FakeModel::start([partial_then_hang("partial")]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    for round in 0..5 {
        c.next_id += 1;
        let id = c.next_id;
        let prompt = json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
                            "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}});
        let cancel = json!({"jsonrpc": "2.0", "method": "session/cancel",
                            "params": {"sessionId": sid}});
        c.raw(format!("{prompt}\n{cancel}\n").as_bytes());
        let (_, response) = c.until_response(id);
        assert_eq!(
            response["result"]["stopReason"], "cancelled",
            "round {round}: {response}"
        );
    }
}

/// A prompt that is refused (it has no text) must not leave its armed cancel token behind: a
/// cancel sent while nothing runs would otherwise stop the next prompt before it starts.
#[test]
fn a_refused_prompt_leaves_no_armed_token() {
    let env = Env::new();
    let fake = FakeModel::start([Reply::from(text_chunks(&["answered"]))]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let blank = json!({"sessionId": sid, "prompt": [{"type": "text", "text": "  "}]});
    let refused = c.call("session/prompt", blank);
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let cancel =
        json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}});
    c.raw(format!("{cancel}\n").as_bytes());
    let id = c.prompt(&sid, "hello");
    let (updates, response) = c.until_response(id);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(texts(&updates), "answered");
}

#[test]
fn cancel_while_asking_answers_cancelled() {
    let env = Env::new();
    let fake = FakeModel::start([Reply::from(tool_call_chunks(
        "call_1",
        "bash",
        &[r#"{"command":"echo hi"}"#],
    ))]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let id = c.prompt(&sid, "run it");
    let ask = c.until(|m| m["method"] == "session/request_permission");
    c.notify("session/cancel", json!({"sessionId": sid}));
    let (before, r) = c.until_response(id);
    assert_eq!(r["result"]["stopReason"], "cancelled");
    // oml stopped waiting for the question, and says so.
    assert!(
        before
            .iter()
            .any(|m| m["method"] == "$/cancel_request" && m["params"]["requestId"] == ask["id"]),
        "{before:?}"
    );
    // The client's late answer is harmless.
    c.answer(&ask["id"], json!({"outcome": {"outcome": "cancelled"}}));
    let r = c.call("initialize", json!({"protocolVersion": 1}));
    assert_eq!(r["result"]["protocolVersion"], 1);
}

#[test]
fn cancel_request_naming_a_prompt_cancels_it_with_its_partial_answer() {
    let env = Env::new();
    let fake = FakeModel::start([
        support::acp::partial_then_hang("so far"),
        Reply::from(text_chunks(&["ok"])),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let id = c.prompt(&sid, "go");
    c.until(|m| support::acp::update_kind(m).as_deref() == Some("agent_message_chunk"));
    // An id that names nothing running is ignored; the prompt's own stops it.
    c.notify("$/cancel_request", json!({"requestId": 999}));
    c.notify("$/cancel_request", json!({"requestId": id}));
    let (_, r) = c.until_response(id);
    assert_eq!(r["result"]["stopReason"], "cancelled", "{r}");
    let (_, again) = c.turn(&sid, "and now");
    assert_eq!(again, "end_turn", "the session goes on");
}

/// Issue 43 item 2: a prompt cancelled while its answer streams (by `session/cancel`, then by
/// `$/cancel_request`) leaves no message running: each next answer is a message of its own.
#[test]
fn an_answer_after_a_cancelled_one_has_a_message_id_of_its_own() {
    let env = Env::new();
    let fake = FakeModel::start([
        partial_then_hang("first"),
        partial_then_hang("second"),
        Reply::from(text_chunks(&["third"])),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let chunk_id = |m: &Value| {
        m["params"]["update"]["messageId"]
            .as_str()
            .map(str::to_owned)
    };
    let mut ids = Vec::new();
    for cancel in ["session/cancel", "$/cancel_request"] {
        let id = c.prompt(&sid, "go");
        let chunk = c.until(|m| update_kind(m).as_deref() == Some("agent_message_chunk"));
        ids.push(chunk_id(&chunk).expect("a messageId"));
        let params = if cancel == "session/cancel" {
            json!({"sessionId": sid})
        } else {
            json!({"requestId": id})
        };
        c.notify(cancel, params);
        let (_, r) = c.until_response(id);
        assert_eq!(r["result"]["stopReason"], "cancelled", "{r}");
    }
    let (updates, _) = c.turn(&sid, "go");
    let last = updates
        .iter()
        .find(|m| update_kind(m).as_deref() == Some("agent_message_chunk"))
        .and_then(chunk_id)
        .expect("the answer's messageId");
    ids.push(last);
    let mut distinct = ids.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 3, "each answer is its own message: {ids:?}");
}

#[test]
fn cancel_kills_a_running_command() {
    let env = Env::new();
    let fake = FakeModel::start([Reply::from(tool_call_chunks(
        "call_sleep",
        "bash",
        // The sleep is the scenario, the command to cancel; `started` says it runs.
        &[r#"{"command":"touch started; sleep 3600"}"#],
    ))]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let r = c.call(
        "session/set_mode",
        json!({"sessionId": sid, "modeId": "yolo"}),
    );
    assert_eq!(r["result"], json!({}));
    let id = c.prompt(&sid, "sleep");
    c.until(|m| update_kind(m).as_deref() == Some("tool_call"));
    let started = env.project.join("started");
    assert!(
        support::home::poll_until(WAIT, || started.exists()),
        "the command never started"
    );
    c.notify("session/cancel", json!({"sessionId": sid}));
    // The command never ends by itself: an answer at all means the cancel stopped it.
    let (updates, r) = c.until_response(id);
    assert_eq!(r["result"]["stopReason"], "cancelled");
    let end = updates
        .iter()
        .find(|m| update_kind(m).as_deref() == Some("tool_call_update"))
        .expect("the tool's end is reported before the response");
    assert_eq!(end["params"]["update"]["toolCallId"], "call_sleep");
}
