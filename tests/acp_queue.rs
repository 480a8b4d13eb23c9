//! `oml acp` with prompts sent while a turn runs, end to end: queued in arrival order and each
//! answered with its own stop reason, steered into the running turn (`_meta.oml.steer`, or
//! `agent.prompt-while-busy` `:steer`) before its next model call, run as a turn of their own
//! when the turn ended before taking them, cancelled together with the running turn (or alone,
//! by `$/cancel_request`), refused over the queue's cap, and as a v2 client sees them. The scripted ACP client (tests/support/acp.rs) drives the real
//! binary against the fake model.

mod support;

use serde_json::{Value, json};
use support::acp::*;
use support::fake_model::{FakeModel, Reply, Step, delta_chunk, text_chunks};
use support::home::Env;
use support::model::user_texts;

/// The cap of waiting prompts per session (`MAX_WAITING_PROMPTS` in src/front/acp/queue.rs).
const MAX_WAITING_PROMPTS: usize = 16;

/// A reply that says `text`, then takes `ms` before it ends: a turn still running when the
/// test sends its next prompt.
fn slow_text(text: &str, ms: u64) -> Reply {
    Reply::from(vec![
        Step::Chunk(delta_chunk(json!({"content": text}), None)),
        Step::Sleep(ms),
        Step::Chunk(delta_chunk(json!({}), Some("stop"))),
    ])
}

/// A prompt whose `_meta` asks to steer.
fn steer(c: &mut Client, sid: &str, text: &str) -> u64 {
    c.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": text}],
               "_meta": {"oml": {"steer": true}}}),
    )
}

/// The updates of `ms` that carry a user message, with their text.
fn user_chunks(ms: &[Value]) -> Vec<String> {
    ms.iter()
        .filter(|m| update_kind(m).as_deref() == Some("user_message_chunk"))
        .map(|m| {
            m["params"]["update"]["content"]["text"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect()
}

/// The answers to the requests `ids`, in whatever order they come.
fn answers(c: &mut Client, ids: &[u64]) -> Vec<(u64, Value)> {
    let mut got = Vec::new();
    while got.len() < ids.len() {
        let m = c.next();
        if m.get("method").is_none()
            && let Some(id) = m["id"].as_u64().filter(|id| ids.contains(id))
        {
            got.push((id, m));
        }
    }
    got
}

#[test]
fn a_prompt_sent_while_a_turn_runs_waits_and_both_answer_in_order() {
    let env = Env::new();
    let fake = FakeModel::start([
        slow_text("first answer", 800),
        Reply::from(text_chunks(&["second answer"])),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let first = c.prompt(&sid, "first prompt");
    let shown = c.until(|m| update_kind(m).is_some());
    let second = c.prompt(&sid, "second prompt");
    let (mut before, r) = c.until_response(first);
    before.insert(0, shown);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert!(
        !before.iter().any(|m| m["id"] == json!(second)),
        "the second prompt answered before the first: {before:?}"
    );
    assert_eq!(texts(&before), "first answer");
    let (updates, r) = c.until_response(second);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert_eq!(texts(&updates), "second answer");
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(user_texts(&requests[0].body), ["first prompt"]);
    assert_eq!(
        user_texts(&requests[1].body),
        ["first prompt", "second prompt"]
    );
}

#[test]
fn a_steered_prompt_joins_the_running_turn_before_its_next_model_call() {
    let env = Env::new();
    env.file("notes.txt", "some notes\n");
    let mut looking = vec![
        Step::Chunk(delta_chunk(json!({"content": "Looking."}), None)),
        Step::Sleep(1500),
    ];
    looking.extend(support::fake_model::tool_call_chunks(
        "call_1",
        "read",
        &[r#"{"path":"notes.txt"}"#],
    ));
    let fake = FakeModel::start([
        Reply::from(looking),
        Reply::from(text_chunks(&["Done, in French."])),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let first = c.prompt(&sid, "summarise notes.txt");
    c.until(|m| update_kind(m).is_some());
    let steered = steer(&mut c, &sid, "answer in French");
    let (updates, r) = c.until_response(first);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    // The editor is shown the steered text as the user's, where it joined.
    assert_eq!(user_chunks(&updates), ["answer in French"]);
    let (_, r) = c.until_response(steered);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert_eq!(r["result"]["_meta"]["oml"]["steered"], true, "{r}");
    let requests = fake.requests();
    assert_eq!(
        requests.len(),
        2,
        "the steered prompt made no turn of its own"
    );
    assert_eq!(
        user_texts(&requests[1].body),
        ["summarise notes.txt", "answer in French"]
    );
    // It joined after the tool's result, before the model's next answer.
    let roles = support::model::roles(&requests[1].body);
    assert_eq!(roles.last().map(String::as_str), Some("user"), "{roles:?}");
    assert!(roles.contains(&"tool".to_owned()), "{roles:?}");
}

#[test]
fn a_steered_prompt_the_turn_did_not_take_runs_as_a_turn_of_its_own() {
    let env = Env::new();
    // The setting, not `_meta`, asks for steering here.
    env.init("(setq agent.prompt-while-busy :steer)\n");
    let fake = FakeModel::start([
        slow_text("short answer", 800),
        Reply::from(text_chunks(&["its own turn"])),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let first = c.prompt(&sid, "first prompt");
    c.until(|m| update_kind(m).is_some());
    let late = c.prompt(&sid, "too late to steer");
    let (_, r) = c.until_response(first);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    let (updates, r) = c.until_response(late);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert!(r["result"]["_meta"]["oml"]["steered"].is_null(), "{r}");
    assert_eq!(texts(&updates), "its own turn");
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    // Once, as the prompt of its own turn: taken back from the inbox, not left there.
    assert_eq!(
        user_texts(&requests[1].body),
        ["first prompt", "too late to steer"]
    );
}

#[test]
fn cancel_cancels_the_running_turn_and_every_queued_prompt() {
    let env = Env::new();
    let fake = FakeModel::start([partial_then_hang("working")]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let first = c.prompt(&sid, "first");
    c.until(|m| update_kind(m).is_some());
    let queued = [c.prompt(&sid, "second"), c.prompt(&sid, "third")];
    let steered = steer(&mut c, &sid, "and steer");
    c.notify("session/cancel", json!({"sessionId": sid}));
    for (id, r) in answers(&mut c, &[first, queued[0], queued[1], steered]) {
        assert_eq!(r["result"]["stopReason"], "cancelled", "{id}: {r}");
    }
    assert_eq!(
        fake.requests().len(),
        1,
        "nothing queued ran after the cancel"
    );
    // The session is free again: the next prompt runs at once, without the steered text.
    fake.push(Reply::from(text_chunks(&["fresh"])));
    let id = c.prompt(&sid, "after the cancel");
    let (updates, r) = c.until_response(id);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert_eq!(texts(&updates), "fresh");
    let texts = user_texts(&fake.requests()[1].body);
    assert_eq!(texts, ["first", "after the cancel"]);
}

#[test]
fn a_prompt_over_the_queue_s_cap_is_refused_with_its_own_error() {
    let env = Env::new();
    let fake = FakeModel::start([partial_then_hang("working")]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let first = c.prompt(&sid, "first");
    c.until(|m| update_kind(m).is_some());
    let waiting: Vec<u64> = (0..MAX_WAITING_PROMPTS)
        .map(|n| c.prompt(&sid, &format!("waiting {n}")))
        .collect();
    let over = c.prompt(&sid, "one too many");
    let (before, r) = c.until_response(over);
    assert_eq!(r["error"]["code"], -32011, "{r}");
    assert_eq!(r["error"]["data"]["limit"], MAX_WAITING_PROMPTS, "{r}");
    assert_eq!(r["error"]["data"]["category"], "busy", "{r}");
    let message = r["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("16 prompts already wait"), "{message}");
    assert!(
        !before.iter().any(|m| m.get("id").is_some()),
        "nothing else was answered: {before:?}"
    );
    c.notify("session/cancel", json!({"sessionId": sid}));
    let ids: Vec<u64> = std::iter::once(first).chain(waiting).collect();
    for (id, r) in answers(&mut c, &ids) {
        assert_eq!(r["result"]["stopReason"], "cancelled", "{id}: {r}");
    }
}

/// A v2 client's view of the same line: a prompt sent while a turn runs is acknowledged when
/// its turn starts (after the running turn's `idle`), then come its message, `running` and
/// `idle`; a steered one that came too late runs next, as a turn of its own; a queued one
/// cancelled before it started is a cancelled request (`-32800`).
#[test]
fn over_v2_a_queued_prompt_is_acknowledged_when_its_turn_starts() {
    let env = Env::new();
    env.init("(setq acp.protocol-versions [1 2])\n");
    let fake = FakeModel::start([
        slow_text("first answer", 800),
        Reply::from(text_chunks(&["steered answer"])),
        Reply::from(text_chunks(&["second answer"])),
        partial_then_hang("fourth"),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    c.call(
        "initialize",
        json!({"protocolVersion": 2, "info": {"name": "x", "version": "1"}, "capabilities": {}}),
    );
    let r = c.call("session/new", json!({"cwd": env.project, "mcpServers": []}));
    let sid = r["result"]["sessionId"].as_str().unwrap().to_owned();
    let first = c.prompt(&sid, "first prompt");
    let second = c.prompt(&sid, "second prompt");
    // What the client sees, in order, until the third turn's idle; the steered prompt is sent
    // once the first turn's only model call answers, too late for it.
    let mut seen: Vec<String> = Vec::new();
    let mut steered = None;
    while seen.iter().filter(|s| *s == "idle").count() < 3 {
        let m = c.next();
        if m.get("method").is_none() {
            assert!(m["result"]["messageId"].is_string(), "{m}");
            seen.push(format!("ack:{}", m["id"]));
            continue;
        }
        let u = &m["params"]["update"];
        if u["sessionUpdate"] == "state_update" {
            seen.push(u["state"].as_str().unwrap_or("?").to_owned());
        }
        if u["sessionUpdate"] == "agent_message_chunk" && steered.is_none() {
            steered = Some(steer(&mut c, &sid, "steered late"));
        }
    }
    let steered = steered.expect("the first turn's answer");
    let (a, s, b) = (first, steered, second);
    let expected = [
        format!("ack:{a}"),
        "running".into(),
        "idle".into(),
        format!("ack:{s}"),
        "running".into(),
        "idle".into(),
        format!("ack:{b}"),
        "running".into(),
        "idle".into(),
    ];
    assert_eq!(seen, expected);
    let requests = fake.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(
        user_texts(&requests[2].body),
        ["first prompt", "steered late", "second prompt"]
    );
    // A prompt queued behind a running turn, then a cancel: the request is cancelled.
    c.prompt(&sid, "runs");
    fake.wait_for_requests(4, std::time::Duration::from_secs(10));
    let queued = c.prompt(&sid, "never runs");
    c.notify("session/cancel", json!({"sessionId": sid}));
    let (_, r) = c.until_response(queued);
    assert_eq!(r["error"]["code"], -32800, "{r}");
    assert_eq!(fake.requests().len(), 4, "the cancelled prompt never ran");
}

/// `$/cancel_request` naming a waiting prompt takes only that one out of the line: the running
/// turn goes on, and the prompt behind it still runs.
#[test]
fn cancel_request_naming_a_waiting_prompt_takes_only_it_out_of_the_line() {
    let env = Env::new();
    let fake = FakeModel::start([
        slow_text("first answer", 1200),
        Reply::from(text_chunks(&["third answer"])),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let first = c.prompt(&sid, "first");
    c.until(|m| update_kind(m).is_some());
    let second = c.prompt(&sid, "second");
    let third = c.prompt(&sid, "third");
    c.notify("$/cancel_request", json!({"requestId": second}));
    let (_, r) = c.until_response(second);
    assert_eq!(r["result"]["stopReason"], "cancelled", "{r}");
    let (_, r) = c.until_response(first);
    assert_eq!(
        r["result"]["stopReason"], "end_turn",
        "the running turn went on: {r}"
    );
    let (_, r) = c.until_response(third);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(user_texts(&requests[1].body), ["first", "third"]);
}

/// A prompt refused while it waits (it has no text) leaves the line as it was: the prompt behind
/// it runs when the turn ends.
#[test]
fn a_refused_prompt_in_line_does_not_hold_it() {
    let env = Env::new();
    let fake = FakeModel::start([
        slow_text("first answer", 800),
        Reply::from(text_chunks(&["third answer"])),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let first = c.prompt(&sid, "first");
    c.until(|m| update_kind(m).is_some());
    let blank = c.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "  "}]}),
    );
    let third = c.prompt(&sid, "third");
    let (_, r) = c.until_response(blank);
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let (_, r) = c.until_response(first);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    let (updates, r) = c.until_response(third);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert_eq!(texts(&updates), "third answer");
}
