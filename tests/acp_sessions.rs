//! `oml acp` end to end, continued: other clients driving it (the official Python SDK, oml's own
//! client) and sessions that outlive the process (load, resume, list, a killed agent).

mod support;

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use support::acp::*;
use support::editor::WAIT;
use support::fake_model::{
    FakeModel, Reply, Step, delta_chunk, reasoning_chunks, text_chunks, tool_call_chunks,
};
use support::home::Env;
use support::model::{roles, user_texts};

// --- interoperability

/// The official Python SDK drives `oml acp`: initialize, session/new, a prompt with a tool call
/// and a permission request, a cancel, and (as an editor offering fs and a terminal) a read, a
/// write and a command that go through the client. It needs `python3 -m venv` and `pip install
/// agent-client-protocol` (network, once per run); without them [`support::home::skip`] rules.
#[test]
fn the_official_python_sdk_drives_oml_acp() {
    let env = Env::new();
    let python = match support::home::python_sdk_venv(&env.root) {
        Ok(p) => p,
        Err(why) => return support::home::skip(&why, support::home::INSTALL_PYTHON_SDK),
    };
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks(
            "call_py",
            "write",
            &[r#"{"path":"py.txt","content":"from python"}"#],
        )),
        Reply::from(text_chunks(&["done"])),
        partial_then_hang("slow"),
        Reply::from(text_chunks(&["in the fork"])),
        // As an editor: read the buffer, write through the client, run a command in its
        // terminal.
        Reply::from(tool_call_chunks(
            "c_r",
            "read",
            &[r#"{"path":"notes.txt"}"#],
        )),
        Reply::from(tool_call_chunks(
            "c_w",
            "write",
            &[r#"{"path":"out.txt","content":"written by the editor"}"#],
        )),
        Reply::from(tool_call_chunks(
            "c_b",
            "bash",
            &[r#"{"command":"echo from the terminal key=$OPENAI_API_KEY; exit 2"}"#],
        )),
        Reply::from(text_chunks(&["finished"])),
    ]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/acp_python_client.py");
    // The Python client gets the environment the agent would get, and passes it on.
    let oml = env.command(Some(&fake), &[]);
    let mut python = Command::new(python);
    python
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_oml"))
        .arg(&env.project)
        .current_dir(&env.project)
        .env_clear();
    for (k, v) in oml.get_envs() {
        if let Some(v) = v {
            python.env(k, v);
        }
    }
    let out = python.output().expect("run the Python client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the Python client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("\"ok\": true"), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(env.project.join("py.txt")).unwrap(),
        "from python"
    );
    // The fork's first request holds the parent's conversation, then its own prompt.
    let users = user_texts(&fake.requests()[3].body);
    assert_eq!(users, ["write the file", "take your time", "in the fork"]);
    // What the model read of the editor's fs and terminal.
    let results: Vec<String> = fake.requests()[5..]
        .iter()
        .map(|r| r.body["messages"].as_array().unwrap().last().unwrap()["content"].to_string())
        .collect();
    assert!(results[0].contains("unsaved buffer"), "{results:?}");
    assert!(results[1].contains("Wrote 21 bytes"), "{results:?}");
    assert_eq!(
        results[2], "\"from the terminal key=\\n[exit code 2]\"",
        "the command ran in the editor's terminal, without the key"
    );
}

/// oml's own ACP client (the `client` table, through `oml run`) drives `oml acp`: a prompt whose
/// write asks for permission, allowed by the Lisp handler, a prompt cancelled from another
/// coroutine while the model hangs, and a prompt in a `client.fork-session` of the session.
#[test]
fn omls_own_client_drives_oml_acp() {
    let env = Env::new();
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks(
            "call_w",
            "write",
            &[r#"{"path":"own.txt","content":"from oml"}"#],
        )),
        Reply::from(text_chunks(&["written"])),
        partial_then_hang("slow"),
        Reply::from(text_chunks(&["forked"])),
    ]);
    let script = env.file(
        "drive.fnl",
        r#"(var asked nil)
(local conn (client.connect (. arg 1) [:acp]
                            {:on-permission (fn [req] (set asked req.tool-call.toolCallId) :allow)}))
(local s (client.new-session conn))
(local r (client.prompt conn s.session-id "write own.txt"))
(print r.stop-reason)
;; Setup updates may arrive once the prompt is sent; only the turn's own matter here.
(each [_ u (ipairs r.updates)]
  (when (not= u.kind :available-commands-update) (print u.kind)))
(print "asked" asked)
;; A turn cancelled from another coroutine once its first chunk has arrived.
(var started false)
(local h (client.spawn (fn [] (client.prompt conn s.session-id "take your time"
                                             {:on-update (fn [u] (when (= u.kind :agent-message-chunk)
                                                                   (set started true)))}))))
;; Poll the flag the update handler sets once the turn runs; oml.sleep yields to it.
(while (not started) (oml.sleep 5))
(client.cancel conn s.session-id)
(print (. (client.join h) :stop-reason))
;; A fork of the session, when the agent offers session/fork: a new id, the same history.
(print "fork" (. (client.capabilities conn) :fork-session))
(local f (client.fork-session conn s.session-id))
(print (not= f.session-id s.session-id) (. (client.prompt conn f.session-id "in the fork") :stop-reason))
;; The fork deleted: the agent's list no longer has it.
(client.close-session conn f.session-id)
(client.delete-session conn f.session-id)
(local listed (icollect [_ x (ipairs (. (client.list-sessions conn) :sessions))] x.sessionId))
(print "listed" (length listed) (accumulate [has false _ id (ipairs listed)] (or has (= id f.session-id))))
(client.close conn)
"#,
    );
    let out = env
        .command(Some(&fake), &["run"])
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_oml"))
        .stdin(Stdio::null())
        .output()
        .expect("oml run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "end-turn",
            "session-info-update",
            "tool-call",
            // in_progress once allowed, then completed.
            "tool-call-update",
            "tool-call-update",
            "agent-message-chunk",
            "asked\tcall_w",
            "cancelled",
            "fork\ttrue",
            "true\tend-turn",
            "listed\t1\tfalse"
        ]
    );
    // The fork's request holds the parent's conversation, then its own prompt.
    let last = fake.requests().pop().expect("a request").body;
    assert_eq!(
        user_texts(&last),
        ["write own.txt", "take your time", "in the fork"]
    );
    assert_eq!(
        std::fs::read_to_string(env.project.join("own.txt")).unwrap(),
        "from oml"
    );
}

// --- persistent sessions

#[test]
fn a_loaded_session_replays_its_history_and_goes_on() {
    let env = Env::new();
    env.file("notes.txt", "hello from notes\n");
    let mut first = reasoning_chunks("reasoning_content", &["I should read it."]);
    first.extend(text_then_tool(
        "Let me read it.",
        "call_1",
        "read",
        r#"{"path":"notes.txt"}"#,
    ));
    let fake = FakeModel::start([
        Reply::from(first),
        Reply::from(text_chunks(&["The file says hello."])),
        Reply::from(text_chunks(&["Still here."])),
    ]);
    env.init("(setq llm.send-reasoning :always)\n");
    let sid = {
        let mut c = Client::start(&env, Some(&fake));
        let init = c.initialize();
        assert_eq!(init["agentCapabilities"]["loadSession"], true);
        assert_eq!(
            init["agentCapabilities"]["sessionCapabilities"],
            json!({"list": {}, "resume": {}, "close": {}, "delete": {}, "fork": {}, "additionalDirectories": {}})
        );
        let (sid, _) = c.new_session(&env.project);
        let id = c.prompt(&sid, "What do my notes say?");
        let (_, r) = c.until_response(id);
        assert_eq!(r["result"]["stopReason"], "end_turn");
        sid
    };

    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (before, r) = load_session(&mut c, "session/load", &sid, &env.project);
    assert_eq!(r["result"]["modes"]["currentModeId"], "ask", "{r}");
    let replay: Vec<Value> = before
        .into_iter()
        .filter(|m| m["method"] == "session/update")
        .collect();
    insta::assert_snapshot!(normalise(&replay, &sid, &env));

    // The loaded session goes on with its whole transcript.
    while update_kind(&c.next()).as_deref() != Some("available_commands_update") {}
    let id = c.prompt(&sid, "Again?");
    let (_, r) = c.until_response(id);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    let requests = fake.requests();
    assert_eq!(
        roles(&requests[2].body),
        ["system", "user", "assistant", "tool", "assistant", "user"]
    );
    assert_eq!(
        requests[2].body["messages"][2]["reasoning_content"], "I should read it.",
        "the kept reasoning survives the session file"
    );

    // Another process cannot open it while this one has it open.
    let mut other = Client::start(&env, Some(&fake));
    other.initialize();
    let (_, r) = load_session(&mut other, "session/resume", &sid, &env.project);
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("is open in another oml process"), "{r}");
    drop(other);
    let r = c.call("session/close", json!({"sessionId": sid}));
    assert_eq!(r["result"], json!({}), "{r}");

    // Resume: no replay; close frees the session; delete removes it for good.
    let mut c2 = Client::start(&env, Some(&fake));
    c2.initialize();
    let (before, r) = load_session(&mut c2, "session/resume", &sid, &env.project);
    assert!(r.get("result").is_some(), "{r}");
    assert!(kinds(&before).is_empty(), "{before:?}");
    let r = c2.call("session/close", json!({"sessionId": sid}));
    assert_eq!(r["result"], json!({}), "{r}");
    let r = c2.call(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let r = c2.call("session/delete", json!({"sessionId": sid}));
    assert_eq!(r["result"], json!({}), "{r}");
    let r = c2.call("session/delete", json!({"sessionId": sid}));
    assert_eq!(r["result"], json!({}), "{r}");
    let (_, r) = load_session(&mut c2, "session/load", &sid, &env.project);
    assert_eq!(r["error"]["code"], -32602, "{r}");
}

#[test]
fn a_killed_agent_loses_nothing_but_the_turn_in_flight() {
    let env = Env::new();
    env.file("notes.txt", "hello from notes\n");
    let fake = FakeModel::start([
        Reply::from(text_then_tool(
            "Let me read it.",
            "call_1",
            "read",
            r#"{"path":"notes.txt"}"#,
        )),
        Reply::from(vec![
            Step::Chunk(delta_chunk(json!({"content": "Half an ans"}), None)),
            Step::Hang,
        ]),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    c.prompt(&sid, "What do my notes say?");
    fake.wait_for_requests(2, WAIT);
    c.until(|m| m["params"]["update"]["content"]["text"] == "Half an ans");
    // kill -9 mid-turn.
    c.child.kill().expect("kill");
    c.child.wait().expect("wait");

    let mut c = Client::start(&env, None);
    c.initialize();
    let (before, r) = load_session(&mut c, "session/load", &sid, &env.project);
    assert!(r.get("result").is_some(), "{r}");
    assert_eq!(
        kinds(&before),
        [
            "user_message_chunk",
            "agent_message_chunk",
            "tool_call",
            "tool_call_update"
        ]
    );
    assert!(
        before[3]["params"]["update"]["content"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("hello from notes")
    );
}

#[test]
fn a_torn_last_line_is_skipped() {
    let env = Env::new();
    let dir = env.root.join("state/oml/sessions");
    std::fs::create_dir_all(&dir).unwrap();
    let cwd = env.project.display().to_string();
    let lines = [
        json!({"type": "session", "id": "s-torn", "cwd": cwd, "created": 0, "version": "0"})
            .to_string(),
        json!({"type": "message", "message": {"role": "user", "content": "hi"}}).to_string(),
        json!({"type": "message", "message": {"role": "assistant", "content": "hello"}})
            .to_string(),
        r#"{"type":"message","message":{"role":"user","cont"#.to_owned(),
    ];
    std::fs::write(dir.join("s-torn.jsonl"), lines.join("\n")).unwrap();
    let fake = FakeModel::start([Reply::from(text_chunks(&["ok"]))]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (before, r) = load_session(&mut c, "session/load", "s-torn", &env.project);
    assert!(r.get("result").is_some(), "{r}");
    assert_eq!(
        kinds(&before),
        ["user_message_chunk", "agent_message_chunk"]
    );
    while update_kind(&c.next()).as_deref() != Some("available_commands_update") {}
    let id = c.prompt("s-torn", "more");
    let (_, r) = c.until_response(id);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert_eq!(
        roles(&fake.requests()[0].body),
        ["system", "user", "assistant", "user"]
    );
    // The next entry went on a fresh line: the file reads back whole.
    let text = std::fs::read_to_string(dir.join("s-torn.jsonl")).unwrap();
    let good = text
        .lines()
        .filter(|l| serde_json::from_str::<Value>(l).is_ok())
        .count();
    assert_eq!(good, text.lines().count() - 1, "{text}");
}

#[test]
fn session_list_pages_and_filters_by_cwd() {
    let env = Env::new();
    let dir = env.root.join("state/oml/sessions");
    std::fs::create_dir_all(&dir).unwrap();
    let here = env.project.display().to_string();
    for i in 0..60 {
        let cwd = if i % 10 == 0 {
            "/elsewhere"
        } else {
            here.as_str()
        };
        let id = format!("s-{i:03}");
        let lines = [
            json!({"type": "session", "id": id, "cwd": cwd, "created": 0, "version": "0"})
                .to_string(),
            json!({"type": "message", "message": {"role": "user", "content": format!("task {i}\nmore")}})
                .to_string(),
        ];
        std::fs::write(dir.join(format!("{id}.jsonl")), lines.join("\n") + "\n").unwrap();
    }
    let mut c = Client::start(&env, None);
    c.initialize();
    let r = c.call("session/list", json!({"cwd": here}));
    let page = r["result"]["sessions"]
        .as_array()
        .expect("sessions")
        .clone();
    let cursor = r["result"]["nextCursor"]
        .as_str()
        .expect("a next page")
        .to_owned();
    assert_eq!(page.len(), 50);
    assert!(page.iter().all(|s| s["cwd"] == here.as_str()));
    assert!(
        page.iter()
            .all(|s| s["updatedAt"].as_str().unwrap().ends_with('Z'))
    );
    let r = c.call("session/list", json!({"cwd": here, "cursor": cursor}));
    let rest = r["result"]["sessions"]
        .as_array()
        .expect("sessions")
        .clone();
    assert_eq!(rest.len(), 4);
    assert!(r["result"].get("nextCursor").is_none(), "{r}");
    let mut ids: Vec<&str> = page
        .iter()
        .chain(&rest)
        .map(|s| s["sessionId"].as_str().unwrap())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 54);
    let s7 = page
        .iter()
        .chain(&rest)
        .find(|s| s["sessionId"] == "s-007")
        .unwrap();
    assert_eq!(s7["title"], "task 7 more");
    let r = c.call("session/list", json!({}));
    assert_eq!(r["result"]["sessions"].as_array().unwrap().len(), 50);
    let r = c.call("session/list", json!({"cwd": "/elsewhere"}));
    assert_eq!(r["result"]["sessions"].as_array().unwrap().len(), 6);
}

/// With no model configured, the editor's model picker and `/model` say the same thing: both ask
/// `agent.current-model`. After `/model x`, both say x.
#[test]
fn the_model_picker_and_slash_model_agree() {
    let env = Env::new();
    let mut c = Client::start_with(&env, None, &[("OPENAI_MODEL", "")]);
    c.initialize();
    let id = c.request(
        "session/new",
        json!({"cwd": env.project.display().to_string(), "mcpServers": []}),
    );
    let (_, r) = c.until_response(id);
    let sid = r["result"]["sessionId"].as_str().unwrap().to_owned();
    let picker = |r: &Value| {
        r["result"]["configOptions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["id"] == "model")
            .unwrap()["currentValue"]
            .clone()
    };
    assert_eq!(picker(&r), "none");
    c.until(|m| update_kind(m).as_deref() == Some("available_commands_update"));
    let id = c.prompt(&sid, "/model");
    let (updates, _) = c.until_response(id);
    assert!(texts(&updates).contains("Model: none"), "{updates:?}");
    let id = c.prompt(&sid, "/model fast/one");
    c.until_response(id);
    let r = c.call(
        "session/set_config_option",
        json!({"sessionId": sid, "configId": "mode", "value": "ask"}),
    );
    assert_eq!(picker(&r), "fast/one");
}

/// A command run from Lisp (`os.execute`, `io.popen` in write mode) inherits oml's stdout,
/// which is the protocol's: its output must go to stderr instead.
#[test]
fn commands_run_from_lisp_never_write_into_the_protocol() {
    use std::io::{Read as _, Write as _};
    let env = Env::new();
    env.init(
        r#"(os.execute "echo FROM-EXECUTE")
(with-open [p (io.popen "cat" :w)] (p:write "FROM-POPEN\n"))
(with-open [p (io.popen "echo READ-BY-LISP")] (log (p:read :l)))"#,
    );
    let mut child = env
        .command(None, &["acp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn oml acp");
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1}}\n")
        .unwrap();
    drop(stdin);
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    for line in stdout.lines() {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|_| panic!("not a protocol line: {line:?}\n{stdout}"));
        assert_eq!(v["jsonrpc"], "2.0", "{line}");
    }
    assert!(stdout.contains(r#""id":1"#), "{stdout}");
    for text in ["FROM-EXECUTE", "FROM-POPEN", "[oml] READ-BY-LISP"] {
        assert!(stderr.contains(text), "{text} on stderr: {stderr}");
    }
}

#[test]
fn a_running_command_streams_its_output_into_the_card() {
    let env = Env::new();
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks(
            "call_1",
            "bash",
            &[r#"{"command":"for i in 1 2 3 4; do echo line$i; sleep 0.3; done"}"#],
        )),
        Reply::from(text_chunks(&["done"])),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    c.call(
        "session/set_mode",
        json!({"sessionId": sid, "modeId": "yolo"}),
    );
    let id = c.prompt(&sid, "count");
    let (updates, _) = c.until_response(id);
    let cards: Vec<&Value> = updates
        .iter()
        .filter(|m| update_kind(m).as_deref() == Some("tool_call_update"))
        .map(|m| &m["params"]["update"])
        .collect();
    // Live tails first (no status: the card stays in progress), then the completed card.
    let (last, live) = cards.split_last().expect("a completed card");
    assert_eq!(last["status"], "completed");
    assert!(
        live.len() >= 2,
        "the output came as it was written: {cards:?}"
    );
    assert!(live.iter().all(|u| u.get("status").is_none()));
    let first = live[0]["content"][0]["content"]["text"].as_str().unwrap();
    assert!(first.starts_with("```\nline1"), "{first:?}");
    assert!(
        !first.contains("line4"),
        "the first tail came before the end: {first:?}"
    );
}

#[test]
fn the_first_prompt_names_the_session_and_the_answer_counts_tokens() {
    let env = Env::new();
    let fake = FakeModel::start([
        Reply::from(vec![
            support::fake_model::Step::Chunk(support::fake_model::delta_chunk(
                json!({"content": "hi"}),
                Some("stop"),
            )),
            support::fake_model::usage_chunk(12, 3),
        ]),
        Reply::from(text_chunks(&["again"])),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let id = c.prompt(&sid, "Explain   the build\nin detail");
    let (_, r) = c.until_response(id);
    assert_eq!(
        r["result"]["usage"],
        json!({"inputTokens": 12, "outputTokens": 3, "totalTokens": 15})
    );
    let id = c.prompt(&sid, "and the tests");
    c.until_response(id);
    assert_eq!(
        c.titles.len(),
        1,
        "only the first prompt names it: {:?}",
        c.titles
    );
    assert_eq!(c.titles[0]["sessionId"], sid.as_str());
    assert_eq!(
        c.titles[0]["update"]["title"],
        "Explain the build in detail"
    );
    assert!(c.titles[0]["update"]["updatedAt"].is_string());
}

#[test]
fn the_plan_tool_sends_plan_updates() {
    let env = Env::new();
    let plan = r#"{"plan":[{"step":"read the code","status":"completed"},{"step":"fix the bug","status":"in_progress"},{"step":"run the tests","status":"pending"}]}"#;
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks("call_1", "update_plan", &[plan])),
        Reply::from(tool_call_chunks(
            "call_2",
            "update_plan",
            &[r#"{"plan":[{"step":"x","status":"done"}]}"#],
        )),
        Reply::from(text_chunks(&["planned"])),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let id = c.prompt(&sid, "plan it");
    let (updates, _) = c.until_response(id);
    let plans: Vec<&Value> = updates
        .iter()
        .filter(|m| update_kind(m).as_deref() == Some("plan"))
        .collect();
    assert_eq!(plans.len(), 1, "only the valid plan is sent");
    assert_eq!(
        plans[0]["params"]["update"]["entries"],
        json!([
            {"content": "read the code", "priority": "medium", "status": "completed"},
            {"content": "fix the bug", "priority": "medium", "status": "in_progress"},
            {"content": "run the tests", "priority": "medium", "status": "pending"}
        ])
    );
    let results: Vec<String> = fake.requests()[1..]
        .iter()
        .map(|r| r.body["messages"].as_array().unwrap().last().unwrap()["content"].to_string())
        .collect();
    assert!(
        results[0].contains("Plan updated: 1 of 3 steps completed"),
        "{results:?}"
    );
    assert!(
        results[1].contains("status must be pending, in_progress or completed"),
        "{results:?}"
    );
}

/// A client that offers `fs` gets the file tools' reads and writes: the model reads the
/// editor's unsaved buffer, and writes and edits go to the editor, which updates its buffer.
#[test]
fn file_tools_go_through_the_client_when_it_offers_fs() {
    let env = Env::new();
    env.file("notes.txt", "on disk\n");
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks("c1", "read", &[r#"{"path":"notes.txt"}"#])),
        Reply::from(tool_call_chunks(
            "c2",
            "edit",
            &[r#"{"path":"notes.txt","old_text":"unsaved","new_text":"edited"}"#],
        )),
        Reply::from(tool_call_chunks(
            "c3",
            "write",
            &[r#"{"path":"new.txt","content":"fresh"}"#],
        )),
        Reply::from(text_chunks(&["done"])),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    let caps = json!({"fs": {"readTextFile": true, "writeTextFile": true}});
    let sid = yolo_session(&mut c, &env, caps);
    let notes = env.project.join("notes.txt").display().to_string();
    let id = c.prompt(&sid, "work on the notes");
    // read: the buffer, not the disk.
    let ask = c.until(|m| m["method"] == "fs/read_text_file");
    assert_eq!(ask["params"]["path"], notes.as_str());
    assert_eq!(ask["params"]["sessionId"], sid.as_str());
    c.answer(&ask["id"], json!({"content": "unsaved buffer\n"}));
    // edit: read the buffer again, then write the edited text back through the client.
    let ask = c.until(|m| m["method"] == "fs/read_text_file");
    c.answer(&ask["id"], json!({"content": "unsaved buffer\n"}));
    let write = c.until(|m| m["method"] == "fs/write_text_file");
    assert_eq!(write["params"]["path"], notes.as_str());
    assert_eq!(write["params"]["content"], "edited buffer\n");
    c.answer(&write["id"], json!(null));
    // write: the old text is asked for (the diff), then the new one written by the client.
    let ask = c.until(|m| m["method"] == "fs/read_text_file");
    c.answer_error(&ask["id"], -32603, "no such file");
    let write = c.until(|m| m["method"] == "fs/write_text_file");
    assert_eq!(write["params"]["content"], "fresh");
    c.answer(&write["id"], json!(null));
    let (_, r) = c.until_response(id);
    assert_eq!(r["result"]["stopReason"], "end_turn");
    let results: Vec<String> = fake.requests()[1..]
        .iter()
        .map(|r| r.body["messages"].as_array().unwrap().last().unwrap()["content"].to_string())
        .collect();
    assert!(results[0].contains("unsaved buffer"), "{results:?}");
    assert!(results[1].contains("Edited "), "{results:?}");
    assert!(results[2].contains("Wrote 5 bytes"), "{results:?}");
    // oml wrote nothing itself: the editor owns the files.
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "on disk\n");
    assert!(!env.project.join("new.txt").exists());
}

/// A copied session file names the original in its header: `session/load` finds sessions by
/// file name, so `session/list` leaves the copy out rather than offer what cannot be loaded.
#[test]
fn session_list_offers_only_what_session_load_accepts() {
    let env = Env::new();
    let dir = env.root.join("state/oml/sessions");
    std::fs::create_dir_all(&dir).unwrap();
    let here = env.project.display().to_string();
    let header =
        json!({"type": "session", "id": "s-orig", "cwd": here, "created": 0, "version": "0"});
    let text = format!("{header}\n");
    std::fs::write(dir.join("s-orig.jsonl"), &text).unwrap();
    std::fs::write(dir.join("s-copy.jsonl"), &text).unwrap();
    let mut c = Client::start(&env, None);
    c.initialize();
    let r = c.call("session/list", json!({"cwd": here}));
    let ids: Vec<&str> = r["result"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["s-orig"]);
    for id in ids {
        let r = c.call(
            "session/load",
            json!({"sessionId": id, "cwd": here, "mcpServers": []}),
        );
        assert!(r.get("error").is_none(), "{r}");
    }
}

/// What a permission question carries for each kind of call, exactly: the card's title, kind,
/// input, locations and, for an edit, the proposed diff; the "always" option names its rule.
#[test]
fn permission_requests_show_what_they_allow() {
    let env = Env::new();
    env.file("a.txt", "one\ntwo\n");
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks(
            "c1",
            "bash",
            &[r#"{"command":"npm test -- --watch"}"#],
        )),
        Reply::from(tool_call_chunks(
            "c2",
            "edit",
            &[r#"{"path":"a.txt","old_text":"two","new_text":"deux"}"#],
        )),
        Reply::from(text_chunks(&["done"])),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let id = c.prompt(&sid, "go");
    let mut asked = Vec::new();
    for _ in 0..2 {
        let ask = c.until(|m| m["method"] == "session/request_permission");
        asked.push(normalise(&[sorted(&ask["params"])], &sid, &env));
        c.answer(
            &ask["id"],
            json!({"outcome": {"outcome": "selected", "optionId": "reject_once"}}),
        );
    }
    c.until_response(id);
    insta::assert_snapshot!(asked.join("\n"));
}

/// `v` with the keys of every object sorted: Lisp tables have no order of their own.
fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted(&map[k])))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

#[test]
fn session_new_says_when_the_session_cannot_be_stored() {
    let env = Env::new();
    let sessions = env.root.join("state/oml/sessions");
    std::fs::create_dir_all(sessions.parent().unwrap()).unwrap();
    std::fs::write(&sessions, "not a folder").unwrap();
    let mut c = Client::start(&env, None);
    c.initialize();
    let r = c.call(
        "session/new",
        json!({"cwd": env.project.display().to_string(), "mcpServers": []}),
    );
    assert_eq!(r["error"]["code"], -32603, "{r}");
    assert_eq!(r["error"]["data"]["category"], "storage", "{r}");
    let details = r["error"]["data"]["details"].as_str().unwrap();
    assert!(details.contains("cannot store the session in"), "{details}");
}
