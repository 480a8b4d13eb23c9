//! `oml acp` end to end: a scripted ACP client in this file drives the real binary over pipes,
//! against the fake model server, with fresh XDG and HOME directories per test.

mod common;
mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::Env;
use serde_json::{Value, json};
use support::fake_model::{
    FakeModel, Reply, Step, delta_chunk, reasoning_chunks, text_chunks, tool_call_chunks,
    usage_chunk,
};

const WAIT: Duration = Duration::from_secs(20);

/// The scripted ACP client: writes lines to the agent's stdin, reads its stdout line by line.
struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    next_id: u64,
    /// Every message read, in order (for snapshots).
    log: Vec<Value>,
    /// The `session_info_update` updates read, which `next` keeps out of the way of the tests
    /// that follow a turn's other updates.
    titles: Vec<Value>,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Client {
    /// `oml acp` in `env`, pointed at `fake` when given.
    fn start(env: &Env, fake: Option<&FakeModel>) -> Client {
        Client::start_with(env, fake, &[])
    }

    /// `oml acp` in `env` with the extra environment variables `vars`.
    fn start_with(env: &Env, fake: Option<&FakeModel>, vars: &[(&str, &str)]) -> Client {
        let mut cmd = env.command(fake, &["acp"]);
        cmd.envs(vars.iter().copied());
        Client::spawn(cmd)
    }

    fn spawn(mut cmd: Command) -> Client {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn oml acp");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                match line {
                    Ok(l) => {
                        if tx.send(l).is_err() {
                            break;
                        }
                    }
                    Err(_) => break,
                }
            }
        });
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let mut err_pipe = child.stderr.take().expect("stderr");
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err_pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Client {
            stdin: child.stdin.take(),
            child,
            lines: rx,
            next_id: 0,
            log: Vec::new(),
            titles: Vec::new(),
            stderr,
        }
    }

    fn raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).expect("write to the agent");
        stdin.flush().expect("flush");
    }

    fn send(&mut self, v: &Value) {
        let mut line = serde_json::to_vec(v).expect("json");
        line.push(b'\n');
        self.raw(&line);
    }

    fn request(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    fn answer(&mut self, id: &Value, result: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    fn answer_error(&mut self, id: &Value, code: i64, message: &str) {
        self.send(
            &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
        );
    }

    fn next(&mut self) -> Value {
        loop {
            let m = self.next_message();
            if m["params"]["update"]["sessionUpdate"] == "session_info_update" {
                self.titles.push(m["params"].clone());
            } else {
                return m;
            }
        }
    }

    fn next_message(&mut self) -> Value {
        let line = self.lines.recv_timeout(WAIT).unwrap_or_else(|_| {
            panic!(
                "no message from the agent in {WAIT:?}; stderr:\n{}",
                self.stderr.lock().unwrap()
            )
        });
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout carried a non-JSON line {line:?}: {e}"));
        self.log.push(v.clone());
        v
    }

    /// Read until the response to `id`; returns the messages before it and the response.
    fn until_response(&mut self, id: u64) -> (Vec<Value>, Value) {
        let mut before = Vec::new();
        loop {
            let m = self.next();
            if m.get("id") == Some(&json!(id)) && m.get("method").is_none() {
                return (before, m);
            }
            before.push(m);
        }
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params);
        self.until_response(id).1
    }

    /// Read until a message satisfies `pred`; returns it (the others are dropped).
    fn until(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        loop {
            let m = self.next();
            if pred(&m) {
                return m;
            }
        }
    }

    fn initialize(&mut self) -> Value {
        let r = self.call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": "test", "version": "0"}}),
        );
        r["result"].clone()
    }

    /// session/new in `cwd`; waits for the first available_commands_update.
    fn new_session(&mut self, cwd: &Path) -> (String, Vec<Value>) {
        let (_, r) = {
            let id = self.request(
                "session/new",
                json!({"cwd": cwd.display().to_string(), "mcpServers": []}),
            );
            self.until_response(id)
        };
        let sid = r["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session id in {r}"))
            .to_owned();
        let mut setup = Vec::new();
        loop {
            let m = self.next();
            let kind = update_kind(&m);
            setup.push(m);
            if kind.as_deref() == Some("available_commands_update") {
                break;
            }
        }
        (sid, setup)
    }

    fn prompt(&mut self, sid: &str, text: &str) -> u64 {
        self.request(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": text}]}),
        )
    }

    fn close_stdin(&mut self) {
        self.stdin.take();
    }

    fn wait_exit(&mut self, within: Duration) -> Option<i32> {
        common::wait_within(&mut self.child, within).and_then(|status| status.code())
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.stdin.take();
        if self.wait_exit(Duration::from_secs(3)).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn update_kind(m: &Value) -> Option<String> {
    (m["method"] == "session/update").then(|| {
        m["params"]["update"]["sessionUpdate"]
            .as_str()
            .unwrap_or("?")
            .to_owned()
    })
}

fn kinds(ms: &[Value]) -> Vec<String> {
    ms.iter().filter_map(update_kind).collect()
}

fn texts(ms: &[Value]) -> String {
    ms.iter()
        .filter(|m| update_kind(m).as_deref() == Some("agent_message_chunk"))
        .map(|m| {
            m["params"]["update"]["content"]["text"]
                .as_str()
                .unwrap_or("")
        })
        .collect()
}

fn roles(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["role"].as_str().unwrap_or("?").to_owned())
        .collect()
}

/// A model reply that says `text` and then calls `tool` with `args`.
fn text_then_tool(text: &str, id: &str, tool: &str, args: &str) -> Vec<Step> {
    let mut steps = vec![Step::Chunk(delta_chunk(json!({"content": text}), None))];
    steps.extend(tool_call_chunks(id, tool, &[args]));
    steps
}

// --- the original's end-to-end list

#[test]
fn a_session_with_a_tool_call() {
    let env = Env::new();
    let notes = env.file("notes.txt", "hello from notes\n");
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
    let (updates, response) = c.until_response(id);
    assert_eq!(
        kinds(&updates),
        [
            "agent_message_chunk",
            "tool_call",
            "tool_call_update",
            "agent_message_chunk",
            "agent_message_chunk"
        ]
    );
    for u in &updates {
        assert_eq!(u["params"]["sessionId"], sid.as_str(), "{u}");
    }
    let card = &updates[1]["params"]["update"];
    assert_eq!(card["toolCallId"], "call_1");
    assert_eq!(card["kind"], "read");
    assert_eq!(card["title"], "Read notes.txt");
    assert_eq!(card["status"], "in_progress");
    assert_eq!(card["rawInput"], json!({"path": "notes.txt"}));
    assert_eq!(
        card["locations"],
        json!([{"path": notes.display().to_string()}])
    );
    let end = &updates[2]["params"]["update"];
    assert_eq!(end["status"], "completed");
    assert!(
        end["content"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("hello from notes"),
        "{end}"
    );
    assert_eq!(response["result"]["stopReason"], "end_turn");

    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        roles(&requests[1].body),
        ["system", "user", "assistant", "tool"]
    );

    // The wire output of the whole turn, ids and paths normalised.
    insta::assert_snapshot!(normalise(&c.log[start..], &sid, &env));

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

    // reject_once: the card comes first, then the question; the file is not written.
    let id = c.prompt(&sid, "write a");
    let card = c.until(|m| m.get("method").is_some());
    assert_eq!(update_kind(&card).as_deref(), Some("tool_call"));
    let ask = c.next();
    assert_eq!(ask["method"], "session/request_permission");
    assert_eq!(ask["params"]["sessionId"], sid.as_str());
    // The question shows what it allows: the card's title and kind, its input and location,
    // the card pending, and the proposed file as a diff, computed before anything is written.
    let tool_call = &ask["params"]["toolCall"];
    assert_eq!(tool_call["toolCallId"], "call_1");
    assert_eq!(tool_call["title"], "Write a.txt");
    assert_eq!(tool_call["kind"], "edit");
    assert_eq!(tool_call["status"], "pending");
    // The input as the tool gets it: the path resolved, links followed, as it was checked.
    let a_txt = env.project.join("a.txt").display().to_string();
    assert_eq!(tool_call["rawInput"]["path"], a_txt.as_str());
    assert_eq!(tool_call["locations"][0]["path"], a_txt.as_str());
    assert_eq!(
        tool_call["content"],
        json!([{"type": "diff", "path": a_txt, "oldText": null, "newText": "x"}])
    );
    let options = ask["params"]["options"].as_array().unwrap();
    let ids: Vec<&str> = options
        .iter()
        .map(|o| o["optionId"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["allow_once", "allow_always", "reject_once", "reject_always"]
    );
    for o in options {
        assert_eq!(o["optionId"], o["kind"]);
        assert!(o["name"].is_string());
    }
    let root = env.project.display().to_string();
    assert_eq!(
        options[1]["name"],
        format!("Always allow write inside {root}")
    );
    c.answer(
        &ask["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "reject_once"}}),
    );
    let (updates, r) = c.until_response(id);
    assert_eq!(r["result"]["stopReason"], "end_turn");
    let end = updates
        .iter()
        .find(|m| update_kind(m).as_deref() == Some("tool_call_update"))
        .unwrap();
    assert_eq!(end["params"]["update"]["status"], "failed");
    assert!(!env.project.join("a.txt").exists());
    assert_eq!(
        fake.requests()[1].body["messages"][3]["content"],
        "Blocked: the user rejected it"
    );

    // allow_always: asked once, remembered for the session; the write carries a diff.
    let id = c.prompt(&sid, "write b");
    let ask = c.until(|m| m["method"] == "session/request_permission");
    c.answer(
        &ask["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "allow_always"}}),
    );
    let (updates, _) = c.until_response(id);
    assert!(env.project.join("b.txt").exists());
    let statuses: Vec<&Value> = updates
        .iter()
        .filter(|m| update_kind(m).as_deref() == Some("tool_call_update"))
        .map(|m| &m["params"]["update"]["status"])
        .collect();
    assert_eq!(statuses, ["in_progress", "completed"]);
    let end = updates
        .iter()
        .rfind(|m| update_kind(m).as_deref() == Some("tool_call_update"))
        .unwrap();
    let diff = &end["params"]["update"]["content"][1];
    assert_eq!(diff["type"], "diff");
    // One copy of the change: the text keeps only its first line.
    let text = end["params"]["update"]["content"][0]["content"]["text"]
        .as_str()
        .unwrap();
    assert!(
        text.starts_with("Wrote ") && !text.contains('\n'),
        "{text:?}"
    );
    assert_eq!(diff["newText"], "x");
    let id = c.prompt(&sid, "write c");
    let (updates, _) = c.until_response(id);
    assert!(
        updates
            .iter()
            .all(|m| m["method"] != "session/request_permission")
    );
    assert!(env.project.join("c.txt").exists());
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
    let (_, r) = c.until_response(id);
    assert_eq!(r["result"]["stopReason"], "cancelled");
    // The client's late answer is harmless.
    c.answer(&ask["id"], json!({"outcome": {"outcome": "cancelled"}}));
    let r = c.call("initialize", json!({"protocolVersion": 1}));
    assert_eq!(r["result"]["protocolVersion"], 1);
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
        common::poll_until(WAIT, || started.exists()),
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
        [
            "agent_thought_chunk",
            "agent_thought_chunk",
            "agent_message_chunk"
        ]
    );
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
    let second = c.prompt(&a, "again");
    let (_, r) = c.until_response(second);
    assert_eq!(r["error"]["code"], -32602);
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already running")
    );
    // Another session runs while the first still waits for its model.
    let other = c.prompt(&b, "other session");
    let (updates, r) = c.until_response(other);
    assert_eq!(r["result"]["stopReason"], "end_turn");
    assert_eq!(texts(&updates), "fast");
    c.notify("session/cancel", json!({"sessionId": a}));
    let (_, r) = c.until_response(first);
    assert_eq!(r["result"]["stopReason"], "cancelled");
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

// --- interoperability

/// The official Python SDK drives `oml acp`: initialize, session/new, a prompt with a tool call
/// and a permission request, a cancel, and (as an editor offering fs and a terminal) a read, a
/// write and a command that go through the client. It needs `python3 -m venv` and `pip install
/// agent-client-protocol` (network, once per run); without them [`common::skip`] rules.
#[test]
fn the_official_python_sdk_drives_oml_acp() {
    let env = Env::new();
    let python = match common::python_sdk_venv(&env.root) {
        Ok(p) => p,
        Err(why) => return common::skip(&why, common::INSTALL_PYTHON_SDK),
    };
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks(
            "call_py",
            "write",
            &[r#"{"path":"py.txt","content":"from python"}"#],
        )),
        Reply::from(text_chunks(&["done"])),
        partial_then_hang("slow"),
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
    // What the model read of the editor's fs and terminal.
    let results: Vec<String> = fake.requests()[4..]
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
/// write asks for permission, allowed by the Lisp handler, then a prompt cancelled from another
/// coroutine while the model hangs.
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
            "cancelled"
        ]
    );
    assert_eq!(
        std::fs::read_to_string(env.project.join("own.txt")).unwrap(),
        "from oml"
    );
}

// --- persistent sessions

fn load_session(c: &mut Client, method: &str, sid: &str, cwd: &Path) -> (Vec<Value>, Value) {
    let id = c.request(
        method,
        json!({"sessionId": sid, "cwd": cwd.display().to_string(), "mcpServers": []}),
    );
    c.until_response(id)
}

/// A model reply that sends `text` and then hangs until the fake is dropped: a turn that runs
/// until something stops it.
fn partial_then_hang(text: &str) -> Reply {
    Reply::from(vec![
        Step::Chunk(delta_chunk(json!({"content": text}), None)),
        Step::Hang,
    ])
}

fn normalise(ms: &[Value], sid: &str, env: &Env) -> String {
    ms.iter()
        .map(|m| {
            let mut m = m.clone();
            if m["params"]["update"].get("updatedAt").is_some() {
                m["params"]["update"]["updatedAt"] = json!("TIME");
            }
            m.to_string()
                .replace(sid, "SESSION")
                .replace(&env.root.display().to_string(), "ROOT")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

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
            json!({"list": {}, "resume": {}, "close": {}, "delete": {}})
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

// --- the editor's terminal, images and attachments

/// Initialize offering `caps`, open a session in yolo mode (nothing asks).
fn yolo_session(c: &mut Client, env: &Env, caps: Value) -> String {
    c.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": caps}),
    );
    let (sid, _) = c.new_session(&env.project);
    c.call(
        "session/set_mode",
        json!({"sessionId": sid, "modeId": "yolo"}),
    );
    sid
}

/// A client that offers a terminal runs `bash` itself: oml asks for the command wrapped in its
/// sandbox launcher, with no environment of its own, shows the terminal in the card, waits,
/// reads the output and releases the terminal; the secrets of the editor's environment never
/// reach the command.
#[test]
fn bash_runs_in_the_clients_terminal_when_it_offers_one() {
    let env = Env::new();
    let command = "echo hi; echo \"key=$OPENAI_API_KEY token=$MY_TOKEN\"; exit 3";
    let args = json!({ "command": command }).to_string();
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks("c1", "bash", &[&args])),
        Reply::from(text_chunks(&["done"])),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    let sid = yolo_session(&mut c, &env, json!({"terminal": true}));
    let id = c.prompt(&sid, "run it");
    let create = c.until(|m| m["method"] == "terminal/create");
    let p = &create["params"];
    assert_eq!(p["sessionId"], sid.as_str());
    assert_eq!(p["command"], env!("CARGO_BIN_EXE_oml"));
    assert_eq!(p["cwd"], env.project.display().to_string().as_str());
    // The only variable passed is the sandbox's flags; the command line is short, and it is
    // what the editor's terminal title shows.
    let vars = p["env"].as_array().expect("env");
    assert_eq!(vars.len(), 1, "{create}");
    assert_eq!(vars[0]["name"], "OML_SANDBOX");
    let flags: Vec<String> = serde_json::from_str(vars[0]["value"].as_str().unwrap()).unwrap();
    assert_eq!(flags[..2], ["--mode", "workspace-write"]);
    let secrets = flags.iter().filter(|f| *f == "OPENAI_API_KEY").count();
    assert_eq!(secrets, 1, "the key's name is passed once: {flags:?}");
    assert!(p["outputByteLimit"].as_u64().unwrap() > 0);
    let argv: Vec<String> = serde_json::from_value(p["args"].clone()).unwrap();
    assert_eq!(argv, ["sandbox-exec", "--", "bash", "-c", command]);
    // The editor runs what it was asked, in an environment that has secrets of its own.
    let ran = Command::new(p["command"].as_str().unwrap())
        .args(&argv)
        .env("OML_SANDBOX", vars[0]["value"].as_str().unwrap())
        .current_dir(&env.project)
        .env("OPENAI_API_KEY", "sk-editor")
        .env("MY_TOKEN", "tok")
        .output()
        .expect("run the launcher");
    let output = String::from_utf8_lossy(&ran.stdout).into_owned();
    assert_eq!(output, "hi\nkey= token=\n", "secrets removed: {ran:?}");
    c.answer(&create["id"], json!({"terminalId": "term-1"}));
    let card = c.until(|m| update_kind(m).as_deref() == Some("tool_call_update"));
    assert_eq!(
        card["params"]["update"]["content"],
        json!([{"type": "terminal", "terminalId": "term-1"}]),
        "{card}"
    );
    let wait = c.until(|m| m["method"] == "terminal/wait_for_exit");
    assert_eq!(wait["params"]["terminalId"], "term-1");
    c.answer(&wait["id"], json!({"exitCode": ran.status.code()}));
    let out = c.until(|m| m["method"] == "terminal/output");
    c.answer(&out["id"], json!({"output": output, "truncated": false}));
    let release = c.until(|m| m["method"] == "terminal/release");
    c.answer(&release["id"], json!({}));
    let (updates, r) = c.until_response(id);
    assert_eq!(r["result"]["stopReason"], "end_turn");
    let end = updates
        .iter()
        .find(|m| m["params"]["update"]["status"] == "failed")
        .expect("the failed card");
    assert_eq!(
        end["params"]["update"]["content"],
        json!([{"type": "terminal", "terminalId": "term-1"},
               {"type": "content", "content": {"type": "text", "text": "[exit code 3]"}}])
    );
    let result = fake.requests()[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["content"]
        .clone();
    assert_eq!(result, "hi\nkey= token=\n[exit code 3]");
}

/// A prompt whose `sleep 30` runs in the client's terminal, up to its `terminal/create`: the
/// client, the session, the prompt's id and the create request.
fn sleep_in_the_clients_terminal(env: &Env, fake: &FakeModel) -> (Client, String, u64, Value) {
    let mut c = Client::start(env, Some(fake));
    let sid = yolo_session(&mut c, env, json!({"terminal": true}));
    let id = c.prompt(&sid, "wait");
    let create = c.until(|m| m["method"] == "terminal/create");
    (c, sid, id, create)
}

/// A cancel while the editor runs the command kills it (terminal/kill), then the output is read
/// and the terminal released before the prompt answers `cancelled`.
#[test]
fn cancel_kills_the_command_in_the_clients_terminal() {
    let env = Env::new();
    let fake = FakeModel::start([Reply::from(tool_call_chunks(
        "c1",
        "bash",
        &[r#"{"command":"sleep 30"}"#],
    ))]);
    let (mut c, sid, id, create) = sleep_in_the_clients_terminal(&env, &fake);
    c.answer(&create["id"], json!({"terminalId": "t9"}));
    let wait = c.until(|m| m["method"] == "terminal/wait_for_exit");
    c.notify("session/cancel", json!({"sessionId": sid}));
    let kill = c.until(|m| m["method"] == "terminal/kill");
    assert_eq!(kill["params"]["terminalId"], "t9");
    c.answer(&kill["id"], json!({}));
    c.answer(&wait["id"], json!({"exitCode": null, "signal": "SIGKILL"}));
    let out = c.until(|m| m["method"] == "terminal/output");
    c.answer(&out["id"], json!({"output": "", "truncated": false}));
    let release = c.until(|m| m["method"] == "terminal/release");
    c.answer(&release["id"], json!({}));
    let (_, r) = c.until_response(id);
    assert_eq!(r["result"]["stopReason"], "cancelled", "{r}");
}

/// A cancel while the editor is still making the terminal: the terminal it makes anyway is
/// killed and released when its id arrives, so the command is not left running in it.
#[test]
fn a_terminal_made_after_a_cancel_is_killed_and_released() {
    let env = Env::new();
    let fake = FakeModel::start([Reply::from(tool_call_chunks(
        "c1",
        "bash",
        &[r#"{"command":"sleep 30"}"#],
    ))]);
    let (mut c, sid, id, create) = sleep_in_the_clients_terminal(&env, &fake);
    c.notify("session/cancel", json!({"sessionId": sid}));
    // The prompt ends as cancelled without waiting for the editor's slow answer...
    let (_, r) = c.until_response(id);
    assert_eq!(r["result"]["stopReason"], "cancelled", "{r}");
    // ...and the terminal that answer names is cleaned up.
    c.answer(&create["id"], json!({"terminalId": "late-1"}));
    let kill = c.until(|m| m["method"] == "terminal/kill");
    assert_eq!(kill["params"]["terminalId"], "late-1");
    assert_eq!(kill["params"]["sessionId"], sid.as_str());
    c.answer(&kill["id"], json!({}));
    let release = c.until(|m| m["method"] == "terminal/release");
    assert_eq!(release["params"]["terminalId"], "late-1");
    c.answer(&release["id"], json!({}));
}

/// Without the terminal capability, or with `acp.use-client-terminal?` false, commands run
/// locally as before (the output streams into the card).
#[test]
fn the_clients_terminal_can_be_turned_off() {
    let env = Env::new();
    env.init("(setq acp.use-client-terminal? false)");
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks(
            "c1",
            "bash",
            &[r#"{"command":"echo local"}"#],
        )),
        Reply::from(text_chunks(&["ok"])),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    let sid = yolo_session(&mut c, &env, json!({"terminal": true}));
    let id = c.prompt(&sid, "run");
    let (updates, r) = c.until_response(id);
    assert_eq!(r["result"]["stopReason"], "end_turn");
    assert!(
        updates
            .iter()
            .all(|m| m.get("method") != Some(&json!("terminal/create")))
    );
    let result = fake.requests()[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["content"]
        .clone();
    assert_eq!(result, "local");
}

/// The smallest PNG header: what `oml.image-mime` recognises.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

/// An image block reaches the model as an `image_url` part with a data URL; every attachment is
/// labelled with its name and fenced; a binary resource is refused with a note; the stored
/// session (whose user message is a list of parts) replays the image.
#[test]
fn images_and_attachments_reach_the_model_labelled() {
    let env = Env::new();
    let fake = FakeModel::start([Reply::from(text_chunks(&["seen"]))]);
    let mut c = Client::start(&env, Some(&fake));
    let init = c.initialize();
    let caps = &init["agentCapabilities"]["promptCapabilities"];
    assert_eq!(
        (caps["image"].clone(), caps["embeddedContext"].clone()),
        (json!(true), json!(true))
    );
    let (sid, _) = c.new_session(&env.project);
    let prompt = json!([
        {"type": "text", "text": "what is this?"},
        {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo=", "uri": "file:///tmp/pic.png"},
        {"type": "resource", "resource": {"uri": "file:///src/main.rs", "text": "fn main() {}"}},
        {"type": "resource_link", "uri": "file:///src/lib.rs", "name": "lib.rs"},
        {"type": "resource", "resource": {"uri": "file:///a.pdf", "blob": "JVBERi0=", "mimeType": "application/pdf"}},
    ]);
    let id = c.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": prompt}),
    );
    let (_, r) = c.until_response(id);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    let body = &fake.requests()[0].body;
    let user = body["messages"].as_array().unwrap().last().unwrap();
    let parts = user["content"].as_array().expect("a list of parts");
    let text = parts[0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("what is this?\n(the image pic.png is attached)\n"),
        "{text}"
    );
    assert!(
        text.contains("<file name=\"main.rs\" path=\"/src/main.rs\">\nfn main() {}\n</file>"),
        "{text}"
    );
    assert!(
        text.contains(
            "<resource_link name=\"lib.rs\" uri=\"file:///src/lib.rs\" path=\"/src/lib.rs\"/>"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "(the binary resource a.pdf (application/pdf) was attached; it is not included"
        ),
        "{text}"
    );
    assert!(!text.contains("JVBERi0"));
    assert_eq!(
        parts[1],
        json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}})
    );
    // Stored and replayed: the text, then the image.
    drop(c);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (updates, _) = load_session(&mut c, "session/load", &sid, &env.project);
    let user: Vec<&Value> = updates
        .iter()
        .filter(|m| update_kind(m).as_deref() == Some("user_message_chunk"))
        .map(|m| &m["params"]["update"]["content"])
        .collect();
    assert_eq!(user.len(), 2, "{updates:?}");
    assert_eq!(
        user[1],
        &json!({"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="})
    );
}

/// `read` of an image file gives the model the image (after the tool results, as a user
/// message), and a note when `llm.images?` is false.
#[test]
fn read_of_an_image_gives_the_model_the_image() {
    let env = Env::new();
    std::fs::write(env.project.join("dot.png"), PNG).unwrap();
    let read = |id| Reply::from(tool_call_chunks(id, "read", &[r#"{"path":"dot.png"}"#]));
    let fake = FakeModel::start([
        read("c1"),
        Reply::from(text_chunks(&["a dot"])),
        read("c2"),
        Reply::from(text_chunks(&["no image"])),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let id = c.prompt(&sid, "look at dot.png");
    let (_, r) = c.until_response(id);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    let messages = fake.requests()[1].body["messages"]
        .as_array()
        .unwrap()
        .clone();
    let n = messages.len();
    assert_eq!(messages[n - 2]["role"], "tool");
    assert!(
        messages[n - 2]["content"]
            .as_str()
            .unwrap()
            .starts_with("Read the image dot.png (image/png, 16 bytes)")
    );
    assert_eq!(messages[n - 1]["role"], "user");
    assert_eq!(
        messages[n - 1]["content"][1]["image_url"]["url"],
        "data:image/png;base64,iVBORw0KGgoAAAANSUhEUg=="
    );
    let id = c.prompt(&sid, "/eval (setq llm.images? false)");
    c.until_response(id);
    let id = c.prompt(&sid, "again");
    let (_, r) = c.until_response(id);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    let messages = fake.requests()[3].body["messages"]
        .as_array()
        .unwrap()
        .clone();
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "tool");
    assert!(
        last["content"]
            .as_str()
            .unwrap()
            .contains("the model does not take images (llm.images? is false)"),
        "{last}"
    );
}

// --- the model picker and the cost of a session

/// The picker offers the current model, `acp.models` and the endpoint's own list (GET
/// …/models), asked once and then cached.
#[test]
fn the_model_picker_lists_the_endpoints_models() {
    let env = Env::new();
    env.init(r#"(setq acp.models ["mine/x"])"#);
    let fake = FakeModel::start(Vec::<Reply>::new());
    fake.serve_models(&["zeta/one", "fake/model", "alpha/two"]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let choices = |c: &mut Client| {
        let r = c.call(
            "session/new",
            json!({"cwd": env.project.display().to_string(), "mcpServers": []}),
        );
        let model = r["result"]["configOptions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["id"] == "model")
            .cloned()
            .unwrap();
        assert_eq!(model["currentValue"], "fake/model");
        model["options"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["value"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let expected = ["fake/model", "mine/x", "alpha/two", "zeta/one"];
    assert_eq!(choices(&mut c), expected);
    assert_eq!(choices(&mut c), expected);
    assert_eq!(fake.model_list_requests(), 1, "the list is cached");
}

/// With `llm.prices`, the usage_update carries the session's cost so far.
#[test]
fn prices_give_the_usage_update_a_cost() {
    let env = Env::new();
    env.init(r#"(setq llm.prices {"fake/model" {:input 1 :output 2}} llm.price-currency "EUR")"#);
    let turn = || {
        let mut steps = text_chunks(&["hi"]);
        steps.insert(steps.len() - 1, usage_chunk(1200, 34));
        Reply::from(steps)
    };
    let fake = FakeModel::start([turn(), turn()]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let mut costs = Vec::new();
    for _ in 0..2 {
        let id = c.prompt(&sid, "hello");
        let (updates, _) = c.until_response(id);
        let usage = updates.last().unwrap()["params"]["update"].clone();
        assert_eq!(usage["sessionUpdate"], "usage_update");
        assert_eq!(usage["cost"]["currency"], "EUR");
        costs.push(usage["cost"]["amount"].as_f64().unwrap());
    }
    let call = (1200.0 + 34.0 * 2.0) / 1e6;
    assert!((costs[0] - call).abs() < 1e-12, "{costs:?}");
    assert!((costs[1] - 2.0 * call).abs() < 1e-12, "{costs:?}");
}

/// `config_option_update` goes only to a client that understands config options: one that
/// offered `session.configOptions`, or has set an option. Toad, which does neither, answers it
/// with an error.
#[test]
fn config_option_updates_go_only_to_clients_that_use_them() {
    let env = Env::new();
    let mut c = Client::start(&env, None);
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let set_mode = |c: &mut Client, mode: &str| {
        let id = c.request(
            "session/set_mode",
            json!({"sessionId": sid, "modeId": mode}),
        );
        kinds(&c.until_response(id).0)
    };
    assert_eq!(set_mode(&mut c, "yolo"), ["current_mode_update"]);
    c.call(
        "session/set_config_option",
        json!({"sessionId": sid, "configId": "mode", "value": "ask"}),
    );
    assert_eq!(
        set_mode(&mut c, "yolo"),
        ["current_mode_update", "config_option_update"]
    );
}
