//! A scripted editor: `oml acp` (or any ACP agent) driven over its pipes, one JSON line at a
//! time, for the tests that need only the plain protocol (tests/common/acp.rs is a fuller client with
//! snapshots). Its stderr is kept, for tests that check it stays quiet.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long a message may take to arrive.
pub const WAIT: Duration = Duration::from_secs(60);

pub struct Editor {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    next_id: u64,
    stderr: Option<JoinHandle<String>>,
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
    pub fn start(mut cmd: Command) -> Editor {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the agent");
        let mut err = child.stderr.take().expect("stderr");
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = err.read_to_string(&mut text);
            text
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
            stderr: Some(stderr),
        }
    }

    /// The agent's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn send(&mut self, v: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{v}").expect("write to the agent");
        stdin.flush().expect("flush");
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

    /// Answer the agent's request `m` with `result`.
    pub fn answer(&mut self, m: &Value, result: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": m["id"], "result": result}));
    }

    pub fn next(&mut self) -> Value {
        let line = self
            .lines
            .recv_timeout(WAIT)
            .expect("a message from the agent");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("stdout carried {line:?}: {e}"))
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

    pub fn initialize(&mut self) -> Value {
        self.call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )
    }

    /// `session/new` in `cwd` with the MCP servers `servers`; the session id and the setup's
    /// updates, up to its `available_commands_update`.
    pub fn new_session(&mut self, cwd: &Path, servers: Value) -> (String, Vec<Value>) {
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

    /// Close stdin, wait for a clean exit, and return what the agent wrote on stderr.
    pub fn finish(mut self) -> String {
        self.stdin.take();
        let status = wait_within(&mut self.child, Duration::from_secs(20));
        assert!(
            status.is_some_and(|s| s.success()),
            "the agent did not exit cleanly: {status:?}"
        );
        self.stderr
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

fn wait_within(child: &mut Child, within: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + within;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
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
