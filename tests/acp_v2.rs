//! The v2 draft of ACP (2026-07-15) beside v1 on the same `oml acp`: offered only when
//! `acp.protocol-versions` holds 2; a v2 client gets the v2 lifecycle (the prompt acknowledged
//! with a message id, the turn ended by an `idle` state update) and update shapes, checked by the
//! official TypeScript SDK's `experimental/v2` schemas; a v1 client on the same binary and
//! setting gets v1 as before.

mod support;

use serde_json::{Value, json};
use support::acp::Client;
use support::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};
use support::home::Env;

/// `initialize` asking for version 2; the answer.
fn v2_initialize(c: &mut Client) -> Value {
    c.call(
        "initialize",
        json!({"protocolVersion": 2, "info": {"name": "x", "version": "1"}, "capabilities": {}}),
    )
}

/// `session/new` in the project, in v2's shape; the session id.
fn v2_session(c: &mut Client, env: &Env) -> String {
    c.call("session/new", json!({"cwd": env.project, "mcpServers": []}))["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned()
}

const OFFER_V2: &str = "(setq acp.protocol-versions [1 2])\n";

#[test]
fn the_typescript_sdks_v2_client_drives_a_turn_with_a_permission_and_a_replay() {
    sdk_v2_turn(false);
}

#[test]
fn the_typescript_sdks_v2_client_does_the_same_over_http() {
    sdk_v2_turn(true);
}

/// The SDK's v2 client through a turn (an elicitation, a permission, a diff) and a replay:
/// over stdio, or over `oml acp --listen` with the SDK's HTTP client.
fn sdk_v2_turn(http: bool) {
    let env = Env::new();
    env.init(OFFER_V2);
    let args = r#"{"path": "notes.txt", "content": "one\ntwo\n"}"#;
    let ask = r#"{"question": "Which database?", "choices": ["postgres", "sqlite"]}"#;
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks("c0", "ask_user", &[ask])),
        Reply::from(tool_call_chunks("c1", "write", &[args])),
        Reply::from(text_chunks(&["Written."])),
    ]);
    let listener = http.then(|| support::listener::Listener::start(&env, Some(&fake), &[]));
    let Some(mut cmd) = support::sdk::driver(&[], "drive_oml_v2.mjs", &env, &fake) else {
        return;
    };
    match &listener {
        Some(l) => cmd.arg(&l.url).arg(&env.project).arg(&l.token_file),
        None => cmd.arg(env!("CARGO_BIN_EXE_oml")).arg(&env.project),
    };
    let seen = support::sdk::seen(&mut cmd);
    assert_eq!(seen["protocolVersion"], 2, "{seen}");
    assert_eq!(seen["agent"], "oml");
    assert!(
        seen["configIds"]
            .as_array()
            .unwrap()
            .contains(&json!("mode")),
        "{seen}"
    );
    assert_eq!(seen["stopReason"], "end_turn", "{seen}");
    // The prompt's answer names the user message the first update inserts.
    assert!(seen["ackMessageId"].is_string(), "{seen}");
    assert_eq!(seen["userMessage"]["messageId"], seen["ackMessageId"]);
    assert_eq!(seen["userMessage"]["content"][0]["text"], "write the file");
    let turn: Vec<&str> = seen["turn"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    assert!(
        !turn.contains(&"tool_call") && !turn.contains(&"plan"),
        "{turn:?}"
    );
    assert!(turn.contains(&"tool_call_update"), "{turn:?}");
    assert_eq!(
        turn.last(),
        Some(&"state_update"),
        "the idle state ends the turn: {turn:?}"
    );
    // running, requires_action for the question, running again, idle with the stop reason.
    let states = seen["turnStates"].as_array().unwrap();
    assert_eq!(states.first(), Some(&json!("running")), "{seen}");
    assert!(states.contains(&json!("requires_action")), "{seen}");
    assert_eq!(states.last(), Some(&json!("idle:end_turn")), "{seen}");
    assert_eq!(seen["elicitations"][0]["mode"], "form", "{seen}");
    assert_eq!(seen["elicitations"][0]["message"], "Which database?");
    let asked = fake.requests()[1].body["messages"].to_string();
    assert!(asked.contains("The user answered: sqlite"), "{asked}");
    assert_eq!(seen["permissions"][0]["subject"], "tool_call", "{seen}");
    assert_eq!(seen["permissions"][0]["toolCallId"], "c1");
    let diff = &seen["diffs"][0];
    assert_eq!(diff["changes"][0]["operation"], "add", "{seen}");
    assert!(
        diff["patch"]["text"]
            .as_str()
            .unwrap()
            .contains("+one\n+two\n"),
        "{seen}"
    );
    assert_eq!(
        std::fs::read_to_string(env.project.join("notes.txt")).unwrap(),
        "one\ntwo\n"
    );
    // session/resume with a replay: the history, then the current state, then the answer.
    let replay: Vec<&str> = seen["replay"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    assert!(replay.contains(&"user_message_chunk"), "{replay:?}");
    assert!(replay.contains(&"agent_message_chunk"), "{replay:?}");
    assert_eq!(replay.last(), Some(&"state_update"), "{replay:?}");
    assert_eq!(seen["replayStates"], json!(["idle"]));
}

#[test]
fn a_v2_resume_reports_the_state_after_the_replay_and_before_its_answer() {
    let env = Env::new();
    env.init(OFFER_V2);
    let fake = FakeModel::start([Reply::from(text_chunks(&["hi there"]))]);
    let mut c = Client::start(&env, Some(&fake));
    v2_initialize(&mut c);
    let sid = v2_session(&mut c, &env);
    let id = c.prompt(&sid, "hello");
    let (_, ack) = c.until_response(id);
    assert!(ack["result"]["messageId"].is_string(), "{ack}");
    c.until(|m| m["params"]["update"]["state"] == "idle");
    let id = c.request(
        "session/resume",
        json!({"sessionId": sid, "cwd": env.project, "replayFrom": {"type": "start"}}),
    );
    let (before, answer) = c.until_response(id);
    let kinds: Vec<String> = before
        .iter()
        .filter_map(support::acp::update_kind)
        .collect();
    assert_eq!(
        kinds,
        ["user_message_chunk", "agent_message_chunk", "state_update"],
        "{before:?}"
    );
    assert!(answer["result"].get("modes").is_none(), "{answer}");
    // Without a cursor, no replay: the state alone.
    let id = c.request(
        "session/resume",
        json!({"sessionId": sid, "cwd": env.project}),
    );
    let (before, _) = c.until_response(id);
    let kinds: Vec<String> = before
        .iter()
        .filter_map(support::acp::update_kind)
        .collect();
    assert_eq!(kinds, ["state_update"], "{before:?}");
}

#[test]
fn a_v1_client_on_the_same_binary_and_setting_speaks_v1() {
    let env = Env::new();
    env.init(OFFER_V2);
    let fake = FakeModel::start([Reply::from(text_chunks(&["hi"]))]);
    let mut c = Client::start(&env, Some(&fake));
    let init = c.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    assert_eq!(init["result"]["protocolVersion"], 1);
    assert!(init["result"]["agentCapabilities"].is_object());
    let (sid, _) = c.new_session(&env.project);
    let (updates, stop) = c.turn(&sid, "hello");
    assert_eq!(stop, "end_turn");
    assert!(
        updates
            .iter()
            .all(|m| m["params"]["update"]["sessionUpdate"] != "state_update"),
        "no v2 updates for a v1 client"
    );
}

#[test]
fn v2_is_not_offered_by_default() {
    let env = Env::new();
    let mut c = Client::start(&env, None);
    let init = v2_initialize(&mut c);
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    assert!(init["result"]["agentCapabilities"].is_object());
}

#[test]
fn a_v2_prompt_refused_before_it_is_taken_is_an_error_not_an_acknowledgement() {
    let env = Env::new();
    env.init(OFFER_V2);
    let mut c = Client::start(&env, None);
    let init = v2_initialize(&mut c);
    assert_eq!(init["result"]["protocolVersion"], 2, "{init}");
    let r = c.call(
        "session/prompt",
        json!({"sessionId": "nope", "prompt": [{"type": "text", "text": "hi"}]}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(r.get("result").is_none());
}

/// oml's client and oml's agent both offering v2: the client asks for it, speaks it, and the
/// program sees v1's shapes (the turn's answer, `tool_call`, the replay of `load-session`).
fn oml_client_speaks_v2_to(target: &str, env: &Env, fake: &FakeModel, extra: &[&str]) {
    let script = env.file(
        "drive.fnl",
        r#"(local [target token-arg cwd] arg)
(local token-file (if (= token-arg "-") nil token-arg))
(var asked nil)
(fn connect []
  (client.connect target (if token-file [] ["acp"])
                  {:token-file token-file
                   :on-permission (fn [req] (set asked req.tool-call.title) :allow)}))
(local conn (connect))
(print "version" (. (client.capabilities conn) :protocol-version))
(local s (client.new-session conn cwd))
(local r (client.prompt conn s.session-id "write it"))
(print "stop" r.stop-reason "asked" asked)
(print "kinds" (table.concat (icollect [_ u (ipairs r.updates)] u.kind) " "))
(client.close conn)
;; A new connection loads the session: v2's session/resume with a replay, seen as session/load.
(local again (connect))
(local loaded (client.load-session again s.session-id cwd))
(print "replayed" (table.concat (icollect [_ u (ipairs loaded.updates)] u.kind) " "))
(print "closed" (client.close again))
"#,
    );
    let project = env.project.display().to_string();
    let mut args = vec!["run", script.to_str().unwrap(), target];
    args.extend_from_slice(extra);
    if extra.is_empty() {
        args.push("-");
    }
    args.push(&project);
    let run = env.run(Some(fake), &args);
    let out = run.stdout.replace('\t', " ");
    assert_eq!(run.code, 0, "{run:?}");
    assert!(out.contains("version 2"), "{out}");
    assert!(out.contains("stop end-turn asked Write v2.txt"), "{out}");
    let kinds = out
        .lines()
        .find(|l| l.starts_with("kinds"))
        .unwrap_or_default();
    assert!(
        kinds.contains("tool-call ") && kinds.contains("tool-call-update"),
        "{out}"
    );
    assert!(!kinds.contains("state-update"), "{out}");
    let replayed = out
        .lines()
        .find(|l| l.starts_with("replayed"))
        .unwrap_or_default();
    assert!(
        replayed.contains("user-message-chunk") && replayed.contains("agent-message-chunk"),
        "{out}"
    );
    assert!(out.contains("closed true"), "{out}");
    assert_eq!(
        std::fs::read_to_string(env.project.join("v2.txt")).unwrap(),
        "two\n"
    );
}

fn write_then_answer() -> FakeModel {
    let args = r#"{"path": "v2.txt", "content": "two\n"}"#;
    FakeModel::start([
        Reply::from(tool_call_chunks("c1", "write", &[args])),
        Reply::from(text_chunks(&["Done."])),
    ])
}

#[test]
fn oml_s_client_speaks_v2_to_oml_acp_over_stdio() {
    let env = Env::new();
    env.init(OFFER_V2);
    let fake = write_then_answer();
    oml_client_speaks_v2_to(env!("CARGO_BIN_EXE_oml"), &env, &fake, &[]);
}

#[test]
fn oml_s_client_speaks_v2_to_oml_acp_listen_over_http() {
    let env = Env::new();
    env.init(OFFER_V2);
    let fake = write_then_answer();
    let listener = support::listener::Listener::start(&env, Some(&fake), &[]);
    let token_file = listener.token_file.display().to_string();
    oml_client_speaks_v2_to(&listener.url, &env, &fake, &[&token_file]);
}

/// A slash command runs no model and answers at once: still the client hears the prompt and
/// `running` before any of its output, and `idle` after all of it.
#[test]
fn a_v2_turn_s_output_comes_between_running_and_idle() {
    let env = Env::new();
    env.init(OFFER_V2);
    let mut c = Client::start(&env, None);
    v2_initialize(&mut c);
    let sid = v2_session(&mut c, &env);
    let id = c.prompt(&sid, "/eval (+ 1 2)");
    let mut seen = Vec::new();
    loop {
        let m = c.next();
        if m["id"] == json!(id) && m.get("method").is_none() {
            seen.push("answer".to_owned());
            continue;
        }
        let u = &m["params"]["update"];
        let kind = match u["sessionUpdate"].as_str() {
            Some("state_update") => format!("state:{}", u["state"].as_str().unwrap_or("?")),
            Some(k) => k.to_owned(),
            None => continue,
        };
        seen.push(kind.clone());
        if kind == "state:idle" {
            break;
        }
    }
    let at = |k: &str| seen.iter().position(|s| s == k).unwrap_or(usize::MAX);
    assert!(at("user_message") < at("state:running"), "{seen:?}");
    assert!(at("agent_message_chunk") > at("state:running"), "{seen:?}");
    assert!(at("agent_message_chunk") < at("state:idle"), "{seen:?}");
    assert_eq!(
        seen.last().map(String::as_str),
        Some("state:idle"),
        "{seen:?}"
    );
}

#[test]
fn a_v2_resume_from_an_unknown_cursor_is_refused() {
    let env = Env::new();
    env.init(OFFER_V2);
    let mut c = Client::start(&env, None);
    v2_initialize(&mut c);
    let sid = v2_session(&mut c, &env);
    let r = c.call(
        "session/resume",
        json!({"sessionId": sid, "cwd": env.project, "replayFrom": {"type": "message", "messageId": "m"}}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
}

/// The agent dies in the middle of a v2 turn: oml's client hears of it (the prompt fails with a
/// connection error) rather than waiting for an `idle` that never comes.
#[test]
fn a_v2_agent_that_dies_mid_turn_fails_the_prompt() {
    let env = Env::new();
    env.init(OFFER_V2);
    let fake = FakeModel::start([support::acp::partial_then_hang("working")]);
    let script = env.file(
        "drive.fnl",
        r#"(local [oml cwd] arg)
(local conn (client.connect oml ["acp"]))
(print "version" (. (client.capabilities conn) :protocol-version))
(local s (client.new-session conn cwd))
(local (ok e) (pcall client.prompt conn s.session-id "work"
                     {:on-update (fn [u] (when (= u.kind :agent-message-chunk)
                                           (os.execute (.. "kill -9 " (conn:pid)))))}))
(print "prompt" ok (and e e.category))
"#,
    );
    let project = env.project.display().to_string();
    let run = env.run(
        Some(&fake),
        &[
            "run",
            script.to_str().unwrap(),
            env!("CARGO_BIN_EXE_oml"),
            &project,
        ],
    );
    let out = run.stdout.replace('\t', " ");
    assert_eq!(run.code, 0, "{run:?}");
    assert!(out.contains("version 2"), "{out}");
    assert!(out.contains("prompt false connection"), "{out}");
}
