//! `oml acp` end to end: the scripted ACP client (tests/support/acp.rs) drives the real binary
//! over pipes, against the fake model server, with fresh XDG and HOME directories per test.
//! This file: the original's end-to-end list and bad input; `acp_cancel.rs` cancelling a turn;
//! `acp_sessions.rs` interoperability and stored sessions; `acp_terminal.rs` the editor's
//! terminal, images and the model picker.

mod support;

use std::io::{Read, Write};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use support::acp::*;
use support::editor::WAIT;
use support::fake_model::{
    FakeModel, Reply, reasoning_chunks, text_chunks, tool_call_chunks, usage_chunk,
};
use support::home::Env;
use support::model::roles;

// --- the original's end-to-end list

#[test]
fn a_session_with_a_tool_call() {
    let env = Env::new();
    env.file("notes.txt", "hello from notes\n");
    let fake = FakeModel::start([
        Reply::from(text_then_tool(
            "Let me read it.",
            "call_1",
            "read",
            r#"{"path":"notes.txt"}"#,
        )),
        Reply::from(text_chunks(&["The file ", "says hello."])),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    let init = c.initialize();
    assert_eq!(init["protocolVersion"], 1);
    assert_eq!(init["authMethods"], json!([]));
    assert_eq!(init["agentCapabilities"]["loadSession"], true);
    assert_eq!(init["agentInfo"]["name"], "oml");

    let (sid, _) = c.new_session(&env.project);
    let start = c.log.len();
    let id = c.prompt(&sid, "What do my notes say?");
    c.until_response(id);
    // The wire output of the whole turn, ids and paths normalised: the text, the card (kind,
    // title, raw input, absolute location), its end with the file's lines, the second text,
    // the answer.
    insta::assert_snapshot!(normalise(&c.log[start..], &sid, &env));

    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        roles(&requests[1].body),
        ["system", "user", "assistant", "tool"]
    );

    let unknown = c.call("no/such", json!({}));
    assert_eq!(unknown["error"]["code"], -32601);
    assert_eq!(unknown["error"]["message"], "Method not found: no/such");
    assert_eq!(
        c.stderr.lock().unwrap().as_str(),
        "",
        "quiet on stderr by default"
    );
}

#[test]
fn token_usage_ends_the_turn_as_a_usage_update() {
    let env = Env::new();
    let mut steps = text_chunks(&["hi"]);
    steps.insert(steps.len() - 1, usage_chunk(1200, 34));
    let fake = FakeModel::start([Reply::from(steps)]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let id = c.prompt(&sid, "hello");
    let (updates, response) = c.until_response(id);
    assert_eq!(kinds(&updates), ["agent_message_chunk", "usage_update"]);
    assert_eq!(
        updates[1]["params"]["update"],
        json!({"sessionUpdate": "usage_update", "size": 128000, "used": 1234})
    );
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert_eq!(
        response["result"]["_meta"]["oml"]["usage"]["prompt_tokens"], 1200,
        "{response}"
    );
}

#[test]
fn slash_commands_are_advertised_and_run_without_the_model() {
    let env = Env::new();
    let fake = FakeModel::start([Reply::from(text_chunks(&["model here"]))]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, setup) = c.new_session(&env.project);
    let adv = setup
        .iter()
        .find(|m| update_kind(m).as_deref() == Some("available_commands_update"))
        .unwrap();
    let commands = adv["params"]["update"]["availableCommands"]
        .as_array()
        .unwrap();
    let names: Vec<&str> = commands
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    for n in [
        "doc", "apropos", "source", "eval", "reload", "settings", "tools", "commands",
    ] {
        assert!(names.contains(&n), "{n} advertised: {names:?}");
    }
    let doc = commands.iter().find(|c| c["name"] == "doc").unwrap();
    assert!(
        doc["description"]
            .as_str()
            .unwrap()
            .starts_with("Show the documentation")
    );
    assert!(doc["input"]["hint"].is_string());

    let id = c.prompt(&sid, "/doc agent.max-turns");
    let (updates, response) = c.until_response(id);
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert!(texts(&updates).contains("30"), "{}", texts(&updates));
    // Commands are re-advertised after every command, before the response.
    assert_eq!(kinds(&updates).last().unwrap(), "available_commands_update");

    let id = c.prompt(&sid, "/eval (+ 1 2)");
    let (updates, _) = c.until_response(id);
    assert!(texts(&updates).contains('3'));
    assert!(fake.requests().is_empty(), "no model calls for commands");

    let id = c.prompt(&sid, "/x hello");
    let (_, response) = c.until_response(id);
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert_eq!(fake.requests().len(), 1, "an unknown /x goes to the model");
}

#[test]
fn init_files_run_and_their_errors_are_reported() {
    let env = Env::new();
    env.init(
        "(print \"init prints go to stderr\")\n(io.write \"so does io.write\\n\")\n(fn commands.hello [input]\n  {:fnl/docstring \"Say hello.\"}\n  (.. \"hello \" input))\n",
    );
    env.file(".oml/init.fnl", "(this is (not closed\n");
    // Trust the project as it is now.
    let out = env.command(None, &["trust"]).output().expect("oml trust");
    assert!(out.status.success());
    let fake = FakeModel::start([Reply::from(text_chunks(&["still here"]))]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, setup) = c.new_session(&env.project);
    let warnings = texts(&setup);
    assert!(warnings.starts_with("Warning: "), "{warnings}");
    assert!(warnings.contains(".oml/init.fnl"), "{warnings}");
    let adv = setup.last().unwrap();
    assert!(
        adv["params"]["update"]["availableCommands"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "hello"),
        "the user init's command is advertised"
    );
    let id = c.prompt(&sid, "/hello you");
    let (updates, _) = c.until_response(id);
    assert_eq!(texts(&updates), "hello you");
    let id = c.prompt(&sid, "are you there?");
    let (_, r) = c.until_response(id);
    assert_eq!(r["result"]["stopReason"], "end_turn");
    assert!(
        c.stderr
            .lock()
            .unwrap()
            .contains("init prints go to stderr")
    );
}

#[test]
fn the_live_repl_changes_the_running_agent() {
    let env = Env::new();
    let fake = FakeModel::start([Reply::from(text_chunks(&["ok"]))]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let record = env.root.join("state/oml/repl-socket");
    let socket = std::fs::read_to_string(&record).expect("the socket path is recorded");
    let mut s = std::os::unix::net::UnixStream::connect(socket.trim()).expect("connect");
    s.set_read_timeout(Some(WAIT)).unwrap();
    s.write_all(b"(fn agent.system-prompt [] \"Redefined over the REPL.\")\n(+ 20 22)\n")
        .unwrap();
    let mut seen = String::new();
    let mut buf = [0u8; 1024];
    while !seen.contains("42") {
        let n = s.read(&mut buf).expect("read the REPL");
        assert!(n > 0, "the REPL closed: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    let id = c.prompt(&sid, "hi");
    c.until_response(id);
    assert_eq!(
        fake.requests()[0].body["messages"][0]["content"],
        "Redefined over the REPL."
    );

    // A REPL form that names no session acts on the one whose prompt is running.
    fake.push(partial_then_hang("waiting"));
    let id = c.prompt(&sid, "wait");
    c.until(|m| update_kind(m).is_some());
    s.write_all(b"(session.say \"from the repl\")\n").unwrap();
    let said = c.until(|m| update_kind(m).is_some());
    assert_eq!(said["params"]["sessionId"], sid.as_str());
    assert_eq!(said["params"]["update"]["content"]["text"], "from the repl");
    c.notify("session/cancel", json!({"sessionId": sid}));
    let (_, r) = c.until_response(id);
    assert_eq!(r["result"]["stopReason"], "cancelled");
}

/// A `write` of a long text: its card and its question show the input capped
/// (`agent.card-arg-max-chars`), saying how much was cut, while the diff the question shows and
/// the file written are whole. (A 20 MB write was sent to the editor as input three times.)
#[test]
fn a_long_argument_is_capped_on_the_card_but_written_whole() {
    let env = Env::new();
    env.init("(setq agent.card-arg-max-chars 100)");
    let content = format!("{}abcdef", "0123456789".repeat(10));
    let args = json!({"path": "long.txt", "content": &content}).to_string();
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks("call_1", "write", &[&args])),
        Reply::from(text_chunks(&["written"])),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let id = c.prompt(&sid, "write it");
    let start = c.log.len();
    let ask = c.until(|m| m["method"] == "session/request_permission");
    c.answer(
        &ask["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}}),
    );
    let (_, r) = c.until_response(id);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    // The card and the question: rawInput's content capped, with how much was cut; the
    // question's diff and the card's end whole.
    let shown: Vec<Value> = c.log[start..]
        .iter()
        .filter(|m| {
            m["method"] == "session/request_permission"
                || matches!(
                    update_kind(m).as_deref(),
                    Some("tool_call" | "tool_call_update")
                )
        })
        .cloned()
        .collect();
    insta::assert_snapshot!(normalise(&shown, &sid, &env));
    let written = std::fs::read_to_string(env.project.join("long.txt")).unwrap();
    assert_eq!(written, content);
    // The model's own record of its call is whole too.
    let replayed =
        &fake.requests()[1].body["messages"][2]["tool_calls"][0]["function"]["arguments"];
    assert_eq!(replayed, args.as_str());
}

/// A `write` or `edit` whose new text is over `acp.diff-max-bytes` is asked about by
/// its size, not as a diff (each copy of a diff costs as much memory as the file), and still
/// runs whole once allowed.
#[test]
fn a_change_over_the_question_cap_is_asked_about_by_its_size() {
    let env = Env::new();
    env.init("(setq acp.diff-max-bytes 50)");
    std::fs::write(env.project.join("old.txt"), "short\n").unwrap();
    let content = "0123456789".repeat(8);
    let write = json!({"path": "big.txt", "content": &content}).to_string();
    let edit = json!({"path": "old.txt", "old_text": "short", "new_text": &content}).to_string();
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks("call_1", "write", &[&write])),
        Reply::from(text_chunks(&["written"])),
        Reply::from(tool_call_chunks("call_2", "edit", &[&edit])),
        Reply::from(text_chunks(&["edited"])),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    for (prompt, name, bytes) in [("write it", "write", 80), ("edit it", "edit", 81)] {
        let id = c.prompt(&sid, prompt);
        let ask = c.until(|m| m["method"] == "session/request_permission");
        let shown = &ask["params"]["toolCall"]["content"];
        assert_eq!(shown.as_array().map(Vec::len), Some(1), "{shown}");
        assert_eq!(shown[0]["type"], "content", "no diff: {shown}");
        let text = shown[0]["content"]["text"].as_str().unwrap_or_default();
        assert!(
            text.starts_with(&format!("This {name} changes "))
                && text.contains(&format!(": {bytes} bytes of new text, too large to show")),
            "{text}"
        );
        c.answer(
            &ask["id"],
            json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}}),
        );
        let (_, r) = c.until_response(id);
        assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    }
    let read = |f: &str| std::fs::read_to_string(env.project.join(f)).unwrap();
    assert_eq!(read("big.txt"), content);
    assert_eq!(read("old.txt"), format!("{content}\n"));
}

#[test]
fn permission_requests_round_trip() {
    let env = Env::new();
    let write = |id: &str, name: &str| {
        Reply::from(tool_call_chunks(
            id,
            "write",
            &[&format!(r#"{{"path":"{name}","content":"x"}}"#)],
        ))
    };
    let fake = FakeModel::start([
        write("call_1", "a.txt"),
        Reply::from(text_chunks(&["rejected"])),
        write("call_2", "b.txt"),
        Reply::from(text_chunks(&["written"])),
        write("call_3", "c.txt"),
        Reply::from(text_chunks(&["written again"])),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let start = c.log.len();
    // Each prompt, with the permission question answered `answer` (none when not asked).
    let turn = |c: &mut Client, text: &str, answer: Option<&str>| {
        let id = c.prompt(&sid, text);
        if let Some(option) = answer {
            let ask = c.until(|m| m["method"] == "session/request_permission");
            c.answer(
                &ask["id"],
                json!({"outcome": {"outcome": "selected", "optionId": option}}),
            );
        }
        let (_, r) = c.until_response(id);
        assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    };
    // reject_once: the file is not written, and the model reads why.
    turn(&mut c, "write a", Some("reject_once"));
    assert!(!env.project.join("a.txt").exists());
    assert_eq!(
        fake.requests()[1].body["messages"][3]["content"],
        "Blocked: the user rejected it"
    );
    // allow_always: asked once, remembered for the session.
    turn(&mut c, "write b", Some("allow_always"));
    turn(&mut c, "write c", None);
    assert!(env.project.join("b.txt").exists() && env.project.join("c.txt").exists());
    // The whole exchange as the editor saw it: each card first, pending; then the question,
    // showing what it allows (the card's title and kind, the input as the tool gets it, the
    // path resolved and checked, the location, the proposed file as a diff computed before
    // anything is written, and the "always" options naming their rule); the rejected card
    // failed; the allowed one in progress, then completed with one copy of the change (the
    // text's first line and the diff); the third write not asked at all.
    insta::assert_snapshot!(normalise(&c.log[start..], &sid, &env));
}

#[test]
fn reasoning_streams_as_thought_chunks() {
    let env = Env::new();
    let mut steps = reasoning_chunks("reasoning_content", &["think ", "more"]);
    steps.extend(text_chunks(&["answer"]));
    let fake = FakeModel::start([Reply::from(steps)]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let id = c.prompt(&sid, "think");
    let (updates, _) = c.until_response(id);
    assert_eq!(
        kinds(&updates),
        ["agent_thought_chunk", "agent_message_chunk"]
    );
}

#[test]
fn a_message_and_a_thought_each_carry_one_message_id_and_the_replay_keeps_them_apart() {
    let env = Env::new();
    let mut first = reasoning_chunks("reasoning_content", &["think ", "more"]);
    first.extend(support::acp::text_then_tool(
        "let me ",
        "c1",
        "read",
        r#"{"path": "a.txt"}"#,
    ));
    let fake = FakeModel::start([
        Reply::from(first),
        Reply::from(text_chunks(&["done ", "now"])),
    ]);
    std::fs::write(env.project.join("a.txt"), "a").unwrap();
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let id = c.prompt(&sid, "go");
    let (updates, _) = c.until_response(id);
    let ids = |kind: &str| -> Vec<String> {
        updates
            .iter()
            .filter(|u| u["params"]["update"]["sessionUpdate"] == kind)
            .map(|u| {
                u["params"]["update"]["messageId"]
                    .as_str()
                    .expect("a messageId")
                    .to_owned()
            })
            .collect()
    };
    let (thoughts, texts) = (ids("agent_thought_chunk"), ids("agent_message_chunk"));
    assert!(
        !thoughts.is_empty() && thoughts.iter().all(|t| *t == thoughts[0]),
        "{thoughts:?}"
    );
    let before_tool = &texts[0];
    let after_tool = texts.last().unwrap();
    assert_ne!(
        before_tool, after_tool,
        "a message after the tool call is another one"
    );
    assert!(!texts.contains(&thoughts[0]), "the thought has its own id");
    drop(c);
    let mut d = support::acp::Client::start(&env, None);
    d.initialize();
    let (replay, _) = support::acp::load_session(&mut d, "session/load", &sid, &env.project);
    let replayed: Vec<(String, String)> = replay
        .iter()
        .filter_map(|u| {
            let u = &u["params"]["update"];
            Some((
                u["sessionUpdate"].as_str()?.to_owned(),
                u["messageId"].as_str()?.to_owned(),
            ))
        })
        .collect();
    let kinds: Vec<&str> = replayed.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "user_message_chunk",
            "agent_thought_chunk",
            "agent_message_chunk",
            "agent_message_chunk"
        ]
    );
    let mut distinct: Vec<&str> = replayed.iter().map(|(_, id)| id.as_str()).collect();
    distinct.dedup();
    assert_eq!(distinct.len(), 4, "{replayed:?}");
}

#[test]
fn render_event_can_be_advised_to_drop_updates() {
    let env = Env::new();
    env.init(
        "(advise! acp.render-event :no-thoughts\n  (fn [render event sid] (when (not= event.type :thought-delta) (render event sid))))\n",
    );
    let mut steps = reasoning_chunks("reasoning_content", &["hidden"]);
    steps.extend(text_chunks(&["shown"]));
    let fake = FakeModel::start([Reply::from(steps)]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let id = c.prompt(&sid, "think");
    let (updates, _) = c.until_response(id);
    assert_eq!(kinds(&updates), ["agent_message_chunk"]);
    assert_eq!(texts(&updates), "shown");
}

#[test]
fn hooks_ask_the_client_and_extension_methods_answer() {
    let env = Env::new();
    env.init(
        r#"(fn session.on-session-start [sid]
  (let [r (acp.request! "_test/ping" {:x 1})]
    (session.say "pong " r.y)))
(tset acp.methods "_oml/echo" (fn [params] {:echo params.x}))
(setq llm.model "configured/one")
"#,
    );
    let mut c = Client::start(&env, None);
    c.initialize();
    let id = c.request(
        "session/new",
        json!({"cwd": env.project.display().to_string(), "mcpServers": [{"name": "fs", "command": "/bin/true", "args": [], "env": []}]}),
    );
    let (_, r) = c.until_response(id);
    let sid = r["result"]["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(r["result"]["modes"]["currentModeId"], "ask");
    let options = r["result"]["configOptions"].as_array().unwrap();
    assert!(options.iter().any(|o| o["category"] == "model"));
    let ping = c.until(|m| m["method"] == "_test/ping");
    assert_eq!(ping["params"], json!({"x": 1}));
    c.answer(&ping["id"], json!({"y": 2}));
    let adv = c.until(|m| update_kind(m).as_deref() == Some("available_commands_update"));
    let before: Vec<Value> = c.log[..c.log.len() - 1].to_vec();
    let said = texts(&before);
    // The MCP server's failure (/bin/true is no server) is a notice that may come at any time
    // after the answer; tests/mcp.rs checks those.
    assert!(said.contains("pong 2"), "{said}");
    assert_eq!(adv["params"]["sessionId"], sid.as_str());

    let r = c.call("_oml/echo", json!({"x": "hi"}));
    assert_eq!(r["result"], json!({"echo": "hi"}));

    let id = c.request(
        "session/set_mode",
        json!({"sessionId": sid, "modeId": "yolo"}),
    );
    let (updates, r) = c.until_response(id);
    assert_eq!(r["result"], json!({}));
    // The MCP server's failure notice may come first: look for the mode update among them.
    let mode = updates
        .iter()
        .find(|m| update_kind(m).as_deref() == Some("current_mode_update"))
        .unwrap_or_else(|| panic!("no current_mode_update before the answer: {updates:?}"));
    assert_eq!(mode["params"]["update"]["currentModeId"], "yolo");
    let r = c.call(
        "session/set_config_option",
        json!({"sessionId": sid, "configId": "model", "value": "other/model"}),
    );
    let model = r["result"]["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "model")
        .unwrap()
        .clone();
    assert_eq!(model["currentValue"], "other/model");
    // The configured model is still offered: there is a way back.
    let values: Vec<&Value> = model["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| &o["value"])
        .collect();
    assert_eq!(values, [&json!("other/model"), &json!("configured/one")]);
    let bad = c.call(
        "session/set_mode",
        json!({"sessionId": sid, "modeId": "nope"}),
    );
    assert_eq!(bad["error"]["code"], -32602);
}

#[test]
fn request_errors_and_a_closing_client_reach_lisp() {
    let env = Env::new();
    env.init(
        r#"(fn commands.ask [method]
  {:fnl/docstring "Ask the client."}
  (acp.request! method {}))
"#,
    );
    let mut c = Client::start(&env, None);
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let id = c.prompt(&sid, "/ask _test/fail");
    let asked = c.until(|m| m["method"] == "_test/fail");
    c.send(&json!({"jsonrpc": "2.0", "id": asked["id"], "error": {"code": -1, "message": "boom"}}));
    let (updates, _) = c.until_response(id);
    assert_eq!(texts(&updates), "Error in /ask: _test/fail failed: boom");

    let id = c.prompt(&sid, "/ask _test/never");
    c.until(|m| m["method"] == "_test/never");
    c.close_stdin();
    let (updates, r) = c.until_response(id);
    assert_eq!(
        texts(&updates),
        "Error in /ask: ACP client closed before answering _test/never"
    );
    // The prompt still answers: `end_turn` when the command finished before shutdown cancelled
    // the session (the failed request ends it at once), `cancelled` when shutdown came first.
    let stop = r["result"]["stopReason"].as_str().unwrap();
    assert!(stop == "end_turn" || stop == "cancelled", "{r}");
    assert_eq!(c.wait_exit(Duration::from_secs(3)), Some(0));
}

// --- bad input

#[test]
fn bad_lines_get_errors_and_the_agent_carries_on() {
    let env = Env::new();
    let mut c = Client::start_with(&env, None, &[("OML_ACP_MAX_LINE_BYTES", "1000")]);
    c.raw(b"this is not json\n");
    let m = c.next();
    assert_eq!(m["error"]["code"], -32700);
    assert_eq!(m["id"], Value::Null);
    c.raw(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\xff\"}\n");
    assert_eq!(c.next()["error"]["code"], -32700);
    let long = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"{}\"}}\n",
        "a".repeat(2000)
    );
    c.raw(long.as_bytes());
    assert_eq!(c.next()["error"]["code"], -32700);
    c.raw(b"[1,2]\n");
    assert_eq!(c.next()["error"]["code"], -32600);
    // Notifications are never answered, known or not.
    c.notify("_unknown/thing", json!({}));
    c.notify("session/cancel", json!({"sessionId": "nope"}));
    let r = c.call("initialize", json!({"protocolVersion": 1}));
    assert_eq!(r["result"]["protocolVersion"], 1);
    let r = c.call("_oml/nothing", json!({}));
    assert_eq!(r["error"]["code"], -32601);
    let r = c.call(
        "session/prompt",
        json!({"sessionId": "sess_nope", "prompt": [{"type": "text", "text": "hi"}]}),
    );
    assert_eq!(r["error"]["code"], -32602);
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Unknown session: sess_nope")
    );
    let r = c.call(
        "session/new",
        json!({"cwd": "relative/dir", "mcpServers": []}),
    );
    assert_eq!(r["error"]["code"], -32602);
    let r = c.call("initialize", json!({"protocolVersion": "1.0.0"}));
    assert_eq!(r["error"]["code"], -32602);
    let r = c.call("session/new", json!({"cwd": "/", "mcpServers": []}));
    let sid = r["result"]["sessionId"].as_str().unwrap().to_owned();
    let r = c.call(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "audio", "data": "AA==", "mimeType": "audio/wav"}]}),
    );
    assert_eq!(r["error"]["code"], -32602);
}

/// Request ids come back as they were sent, to the byte: numbers beyond 64 bits and numbers
/// written as floats too (serde_json alone would answer 2^64+1 as `1.8446744073709552e+19`).
#[test]
fn request_ids_are_echoed_exactly() {
    let env = Env::new();
    let mut c = Client::start(&env, None);
    for id in [
        "18446744073709551617",
        "-18446744073709551617",
        "1e3",
        "2.50",
        "7",
        "\"x\"",
    ] {
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"initialize","params":{{"protocolVersion":1}}}}"#
        );
        c.raw(format!("{line}\n").as_bytes());
        let answer = c.lines.recv_timeout(WAIT).expect("an answer");
        assert!(
            answer.contains(&format!(r#""id":{id},"#)),
            "sent {id}, got {answer}"
        );
        // An error answer (unknown method) echoes it the same way.
        let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"_oml/none"}}"#);
        c.raw(format!("{line}\n").as_bytes());
        let answer = c.lines.recv_timeout(WAIT).expect("an answer");
        assert!(
            answer.contains(&format!(r#""id":{id},"#)),
            "sent {id}, got {answer}"
        );
    }
}

#[test]
fn two_prompts_at_once() {
    let env = Env::new();
    let fake = FakeModel::start([
        partial_then_hang("slow"),
        Reply::from(text_chunks(&["fast"])),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (a, _) = c.new_session(&env.project);
    let (b, _) = c.new_session(&env.project);
    let first = c.prompt(&a, "slow one");
    c.until(|m| update_kind(m).is_some());
    // A second prompt in the same session waits for the first (tests/acp_queue.rs): it is not
    // answered while the first runs.
    let second = c.prompt(&a, "again");
    // Another session runs while the first still waits for its model.
    let other = c.prompt(&b, "other session");
    let (updates, r) = c.until_response(other);
    assert_eq!(r["result"]["stopReason"], "end_turn");
    assert_eq!(texts(&updates), "fast");
    assert!(
        !updates.iter().any(|m| m["id"] == json!(second)),
        "the queued prompt was answered while the first ran: {updates:?}"
    );
    c.notify("session/cancel", json!({"sessionId": a}));
    // Both are answered `cancelled`, the waiting one without waiting for the running one.
    let mut answered = Vec::new();
    while answered.len() < 2 {
        let m = c.next();
        if m.get("method").is_none() && [json!(first), json!(second)].contains(&m["id"]) {
            assert_eq!(m["result"]["stopReason"], "cancelled", "{m}");
            answered.push(m["id"].clone());
        }
    }
    assert_eq!(fake.requests().len(), 2, "the queued prompt never ran");
}

#[test]
fn closing_stdin_mid_turn_exits_cleanly() {
    let env = Env::new();
    let fake = FakeModel::start([partial_then_hang("working")]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    c.prompt(&sid, "go");
    c.until(|m| update_kind(m).is_some());
    c.close_stdin();
    let code = c.wait_exit(Duration::from_secs(4));
    assert_eq!(code, Some(0), "stderr: {}", c.stderr.lock().unwrap());
}

#[test]
fn sigterm_mid_turn_exits_cleanly() {
    let env = Env::new();
    let fake = FakeModel::start([partial_then_hang("working")]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let id = c.prompt(&sid, "go");
    c.until(|m| update_kind(m).is_some());
    let pid = c.child.id().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    // The running prompt still answers, with `cancelled`, before the process exits.
    let (_, r) = c.until_response(id);
    assert_eq!(r["result"]["stopReason"], "cancelled");
    let code = c.wait_exit(Duration::from_secs(3));
    assert_eq!(code, Some(0), "stderr: {}", c.stderr.lock().unwrap());
}

/// A tool's card completes in the editor when the tool ends, not when the turn next waits for
/// something: here the next model request is held up in Lisp (which the renderer needs too)
/// until the test has seen the card complete.
#[test]
fn a_tool_card_completes_while_the_turn_is_still_busy_in_lisp() {
    let env = Env::new();
    let go = env.root.join("go");
    env.init(&format!(
        "(var calls 0)
(advise! agent.build-request :hold
  (fn [build messages]
    (set calls (+ calls 1))
    (when (= calls 2)
      (let [until (+ (os.time) 20)]
        (while (and (< (os.time) until) (not (io.open {:?}))) nil)))
    (build messages)))",
        go.display().to_string()
    ));
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks(
            "call_1",
            "bash",
            &[r#"{"command":"echo hi"}"#],
        )),
        Reply::from(text_chunks(&["done"])),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let id = c.prompt(&sid, "run it");
    let ask = c.until(|m| m["method"] == "session/request_permission");
    c.answer(
        &ask["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}}),
    );
    c.until(|m| {
        m["params"]["update"]["sessionUpdate"] == "tool_call_update"
            && m["params"]["update"]["status"] == "completed"
    });
    let held = fake.requests().len();
    std::fs::write(&go, "").expect("let the turn go on");
    let (_, r) = c.until_response(id);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert_eq!(
        held, 1,
        "the card completed only after the next request went out"
    );
}
