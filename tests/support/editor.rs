//! A scripted editor: `oml acp` (or any ACP agent) driven over its pipes, one JSON line at a
//! time. The one ACP client of the tests: it keeps every message read (for snapshots), can keep
//! `session_info_update`s out of a turn's way, and keeps the agent's stderr (for the tests that
//! check it stays quiet). `acp.rs` adds how `oml acp` is started in a test home.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use super::home::wait_within;

use serde_json::{Value, json};

/// How long a message may take to arrive.
pub const WAIT: Duration = Duration::from_secs(60);

pub struct Editor {
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    pub lines: mpsc::Receiver<String>,
    pub next_id: u64,
    /// Every message read, in order (for snapshots).
    pub log: Vec<Value>,
    /// With [`Editor::titles_apart`], the `session_info_update` updates read, which `next` keeps
    /// out of the way of the tests that follow a turn's other updates.
    pub titles: Vec<Value>,
    titles_apart: bool,
    /// What the agent wrote on stderr so far.
    pub stderr: Arc<Mutex<String>>,
    stderr_thread: Option<JoinHandle<()>>,
}

/// The `sessionUpdate` kind of a `session/update` message ("" for anything else).
pub fn update(m: &Value) -> String {
    m["params"]["update"]["sessionUpdate"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The text of every `agent_message_chunk` in `ms`.
pub fn chunks(ms: &[Value]) -> String {
    ms.iter()
        .filter(|m| update(m) == "agent_message_chunk")
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect()
}

impl Editor {
    /// Start `cmd` (e.g. `oml acp`) with piped stdio.
    pub fn spawn(mut cmd: Command) -> Editor {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the agent");
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err = child.stderr.take().expect("stderr");
        let sink = Arc::clone(&stderr);
        let stderr_thread = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let text = String::from_utf8_lossy(&buf[..n]);
                sink.lock().expect("the stderr text").push_str(&text);
            }
        });
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Editor {
            stdin: child.stdin.take(),
            child,
            lines,
            next_id: 0,
            log: Vec::new(),
            titles: Vec::new(),
            titles_apart: false,
            stderr,
            stderr_thread: Some(stderr_thread),
        }
    }

    /// From now on, `next` keeps `session_info_update`s in [`Editor::titles`].
    pub fn titles_apart(mut self) -> Editor {
        self.titles_apart = true;
        self
    }

    /// The agent's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the agent wrote on stderr so far.
    pub fn stderr_text(&self) -> String {
        self.stderr.lock().expect("the stderr text").clone()
    }

    /// Write `bytes` to the agent as they are.
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

    /// Answer the agent's request with the id `id`.
    pub fn answer(&mut self, id: &Value, result: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    pub fn answer_error(&mut self, id: &Value, code: i64, message: &str) {
        self.send(
            &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
        );
    }

    /// The next message (with [`Editor::titles_apart`], the next that is not a title).
    pub fn next(&mut self) -> Value {
        loop {
            let m = self.next_message();
            if self.titles_apart && update(&m) == "session_info_update" {
                self.titles.push(m["params"].clone());
            } else {
                return m;
            }
        }
    }

    /// The next message, whatever it is.
    pub fn next_message(&mut self) -> Value {
        let line = self.lines.recv_timeout(WAIT).unwrap_or_else(|_| {
            panic!(
                "no message from the agent in {WAIT:?}; stderr:\n{}",
                self.stderr_text()
            )
        });
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout carried a non-JSON line {line:?}: {e}"));
        self.log.push(v.clone());
        v
    }

    /// The messages before the answer to `id`, and the answer.
    pub fn until_response(&mut self, id: u64) -> (Vec<Value>, Value) {
        let mut before = Vec::new();
        loop {
            let m = self.next();
            if m.get("method").is_none() && m["id"] == json!(id) {
                return (before, m);
            }
            before.push(m);
        }
    }

    /// Read until a message satisfies `pred`; returns it (the others are dropped).
    pub fn until(&mut self, mut pred: impl FnMut(&Value) -> bool) -> Value {
        loop {
            let m = self.next();
            if pred(&m) {
                return m;
            }
        }
    }

    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params);
        self.until_response(id).1
    }

    /// `initialize` with no client capabilities; its answer (the whole message).
    pub fn initialize_message(&mut self) -> Value {
        self.call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": "test", "version": "0"}}),
        )
    }

    /// `initialize` with no client capabilities; its result.
    pub fn initialize(&mut self) -> Value {
        self.initialize_message()["result"].clone()
    }

    /// `session/new` in `cwd` with no MCP servers; see [`Editor::new_session_with`].
    pub fn new_session(&mut self, cwd: &Path) -> (String, Vec<Value>) {
        self.new_session_with(cwd, json!([]))
    }

    /// `session/new` in `cwd` with the MCP servers `servers`; the session id and the setup's
    /// updates, up to its `available_commands_update`.
    pub fn new_session_with(&mut self, cwd: &Path, servers: Value) -> (String, Vec<Value>) {
        let r = self.call(
            "session/new",
            json!({"cwd": cwd.display().to_string(), "mcpServers": servers}),
        );
        let sid = r["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session id in {r}"))
            .to_owned();
        let mut setup = Vec::new();
        loop {
            let m = self.next();
            let done = update(&m) == "available_commands_update";
            setup.push(m);
            if done {
                return (sid, setup);
            }
        }
    }

    /// Send a text prompt; its request id.
    pub fn prompt(&mut self, sid: &str, text: &str) -> u64 {
        self.request(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": text}]}),
        )
    }

    /// A whole turn: the updates until the prompt's answer, and its stop reason.
    pub fn turn(&mut self, sid: &str, text: &str) -> (Vec<Value>, String) {
        let id = self.prompt(sid, text);
        let (before, answer) = self.until_response(id);
        let reason = answer["result"]["stopReason"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        (before, reason)
    }

    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// The agent's exit code, once it exits within `within`.
    pub fn wait_exit(&mut self, within: Duration) -> Option<i32> {
        wait_within(&mut self.child, within).and_then(|status| status.code())
    }

    /// Close stdin, wait for a clean exit, and return what the agent wrote on stderr.
    pub fn finish(mut self) -> String {
        self.stdin.take();
        let status = wait_within(&mut self.child, Duration::from_secs(20));
        assert!(
            status.is_some_and(|s| s.success()),
            "the agent did not exit cleanly: {status:?}"
        );
        if let Some(thread) = self.stderr_thread.take() {
            let _ = thread.join();
        }
        self.stderr_text()
    }
}

impl Drop for Editor {
    fn drop(&mut self) {
        self.stdin.take();
        if wait_within(&mut self.child, Duration::from_secs(5)).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
