//! The scripted ACP client of the `oml acp` tests (tests/acp*.rs): writes lines to the agent's
//! stdin, reads its stdout line by line, keeps every message for snapshots, and the helpers that
//! read updates and requests.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use std::path::Path;

use super::Env;
use crate::support::fake_model::{FakeModel, Reply, Step, delta_chunk, tool_call_chunks};

pub const WAIT: Duration = Duration::from_secs(20);

/// The scripted ACP client: writes lines to the agent's stdin, reads its stdout line by line.
pub struct Client {
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    pub lines: mpsc::Receiver<String>,
    pub next_id: u64,
    /// Every message read, in order (for snapshots).
    pub log: Vec<Value>,
    /// The `session_info_update` updates read, which `next` keeps out of the way of the tests
    /// that follow a turn's other updates.
    pub titles: Vec<Value>,
    pub stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Client {
    /// `oml acp` in `env`, pointed at `fake` when given.
    pub fn start(env: &Env, fake: Option<&FakeModel>) -> Client {
        Client::start_with(env, fake, &[])
    }

    /// `oml acp` in `env` with the extra environment variables `vars`.
    pub fn start_with(env: &Env, fake: Option<&FakeModel>, vars: &[(&str, &str)]) -> Client {
        let mut cmd = env.command(fake, &["acp"]);
        cmd.envs(vars.iter().copied());
        Client::spawn(cmd)
    }

    pub fn spawn(mut cmd: Command) -> Client {
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

    pub fn raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).expect("write to the agent");
        stdin.flush().expect("flush");
    }

    pub fn send(&mut self, v: &Value) {
        let mut line = serde_json::to_vec(v).expect("json");
        line.push(b'\n');
        self.raw(&line);
    }

    pub fn request(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    pub fn answer(&mut self, id: &Value, result: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    pub fn answer_error(&mut self, id: &Value, code: i64, message: &str) {
        self.send(
            &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
        );
    }

    pub fn next(&mut self) -> Value {
        loop {
            let m = self.next_message();
            if m["params"]["update"]["sessionUpdate"] == "session_info_update" {
                self.titles.push(m["params"].clone());
            } else {
                return m;
            }
        }
    }

    pub fn next_message(&mut self) -> Value {
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
    pub fn until_response(&mut self, id: u64) -> (Vec<Value>, Value) {
        let mut before = Vec::new();
        loop {
            let m = self.next();
            if m.get("id") == Some(&json!(id)) && m.get("method").is_none() {
                return (before, m);
            }
            before.push(m);
        }
    }

    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params);
        self.until_response(id).1
    }

    /// Read until a message satisfies `pred`; returns it (the others are dropped).
    pub fn until(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        loop {
            let m = self.next();
            if pred(&m) {
                return m;
            }
        }
    }

    pub fn initialize(&mut self) -> Value {
        let r = self.call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": "test", "version": "0"}}),
        );
        r["result"].clone()
    }

    /// session/new in `cwd`; waits for the first available_commands_update.
    pub fn new_session(&mut self, cwd: &Path) -> (String, Vec<Value>) {
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

    pub fn prompt(&mut self, sid: &str, text: &str) -> u64 {
        self.request(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": text}]}),
        )
    }

    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    pub fn wait_exit(&mut self, within: Duration) -> Option<i32> {
        super::wait_within(&mut self.child, within).and_then(|status| status.code())
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

pub fn update_kind(m: &Value) -> Option<String> {
    (m["method"] == "session/update").then(|| {
        m["params"]["update"]["sessionUpdate"]
            .as_str()
            .unwrap_or("?")
            .to_owned()
    })
}

/// `ms` with each run of text (or thought) chunks of one session as one chunk, their text
/// joined: how many updates carry a stream's deltas depends on timing (oml merges the deltas
/// queued together), what they say does not.
pub fn merged(ms: &[Value]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for m in ms {
        let kind = update_kind(m);
        let joinable = matches!(
            kind.as_deref(),
            Some("agent_message_chunk" | "agent_thought_chunk")
        );
        if let Some(last) = out.last_mut()
            && joinable
            && update_kind(last) == kind
            && last["params"]["sessionId"] == m["params"]["sessionId"]
        {
            let text = |v: &Value| {
                v["params"]["update"]["content"]["text"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned()
            };
            let joined = text(last) + &text(m);
            last["params"]["update"]["content"]["text"] = json!(joined);
            continue;
        }
        out.push(m.clone());
    }
    out
}

/// The kinds of the updates in `ms`, runs of chunks counted once (see [`merged`]).
pub fn kinds(ms: &[Value]) -> Vec<String> {
    merged(ms).iter().filter_map(update_kind).collect()
}

pub fn texts(ms: &[Value]) -> String {
    ms.iter()
        .filter(|m| update_kind(m).as_deref() == Some("agent_message_chunk"))
        .map(|m| {
            m["params"]["update"]["content"]["text"]
                .as_str()
                .unwrap_or("")
        })
        .collect()
}

/// A model reply that says `text` and then calls `tool` with `args`.
pub fn text_then_tool(text: &str, id: &str, tool: &str, args: &str) -> Vec<Step> {
    let mut steps = vec![Step::Chunk(delta_chunk(json!({"content": text}), None))];
    steps.extend(tool_call_chunks(id, tool, &[args]));
    steps
}

/// A model reply that sends `text` and then hangs until the fake is dropped: a turn that runs
/// until something stops it.
pub fn partial_then_hang(text: &str) -> Reply {
    Reply::from(vec![
        Step::Chunk(delta_chunk(json!({"content": text}), None)),
        Step::Hang,
    ])
}

pub fn normalise(ms: &[Value], sid: &str, env: &Env) -> String {
    merged(ms)
        .iter()
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

pub fn load_session(c: &mut Client, method: &str, sid: &str, cwd: &Path) -> (Vec<Value>, Value) {
    let id = c.request(
        method,
        json!({"sessionId": sid, "cwd": cwd.display().to_string(), "mcpServers": []}),
    );
    c.until_response(id)
}

/// Initialize offering `caps`, open a session in yolo mode (nothing asks).
pub fn yolo_session(c: &mut Client, env: &Env, caps: Value) -> String {
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
