//! `oml-fake-agent`: a scripted ACP agent over real pipes, for the client's tests and
//! benchmarks. The first argument picks the behaviour (see `usage`); a second argument is a
//! number where a mode needs one (`flood N`). `FAKE_AGENT_PID_FILE` makes it write its pid,
//! `FAKE_AGENT_GRANDCHILD_FILE` the pid of the child it starts in `spawns-grandchild`,
//! `FAKE_AGENT_CANCEL_FILE` a line when `session/cancel` arrives in `wait-cancel`,
//! `FAKE_AGENT_NEW_SESSION_FILE` the params of the last `session/new`.
//!
//! In every mode, `_fake/echo` answers its params. In every mode, a prompt `whoami` answers with the session, the turn, the pid and
//! the sessions loaded; `sleep:MS TEXT` waits MS ms (a `session/cancel` ends it early, answered
//! `cancelled`); `stop:REASON` ends the turn with that stop reason.
//!
//! `over-limit` sends an update longer than a client's 64 MiB line limit, then ends its turn
//! `end_turn`.
//!
//! The modes a delegated agent plays: `delegate` (text, a tool call, a permission request with a
//! diff, a final answer naming the turn), `wait-cancel`, `exit-mid-turn`, `hang-in-turn`, and
//! `auth-env` (an environment-variable login, required before `session/new`).
//!
//! Plain std and serde_json, one thread: it reads one line at a time and answers in order, so
//! every update it writes precedes the answer that follows it on the pipe.

#![allow(clippy::print_stdout, clippy::print_stderr)] // test and tool output

use std::io::{BufRead, BufWriter, Write};

use serde_json::{Value, json};

struct Agent {
    mode: String,
    n: usize,
    input: std::io::BufReader<std::io::Stdin>,
    out: BufWriter<std::io::Stdout>,
    next_id: i64,
    authenticated: bool,
    turns: usize,
    /// The session ids `session/load` was asked for, in order.
    loaded: Vec<String>,
    /// A `session/cancel` came during `sleep:`.
    cancelled: bool,
    /// The `cwd` of the last `session/new`.
    cwd: String,
}

impl Agent {
    fn send(&mut self, v: Value) {
        serde_json::to_writer(&mut self.out, &v).unwrap();
        self.out.write_all(b"\n").unwrap();
        self.out.flush().unwrap();
    }

    fn raw(&mut self, line: &str) {
        self.out.write_all(line.as_bytes()).unwrap();
        self.out.write_all(b"\n").unwrap();
        self.out.flush().unwrap();
    }

    /// The next message, or `None` at EOF.
    fn recv(&mut self) -> Option<Value> {
        loop {
            let mut line = String::new();
            if self.input.read_line(&mut line).ok()? == 0 {
                return None;
            }
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                return Some(v);
            }
        }
    }

    fn answer(&mut self, id: &Value, result: Value) {
        if self.mode == "garbage-stdout" {
            self.raw("Starting agent... (this is not JSON)");
            self.raw(r#"{"level":"info","msg":"a JSON log record","id":1}"#);
            self.raw("42");
        }
        self.send(json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    fn error(&mut self, id: &Value, code: i64, message: &str, data: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message, "data": data}}));
    }

    fn update(&mut self, session: &str, update: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": "session/update",
                         "params": {"sessionId": session, "update": update}}));
    }

    /// `terminal/create` with `params`, then its exit and output, then release: one line.
    fn run_in_terminal(&mut self, sid: &str, params: Value) -> String {
        let created = match self.ask(None, "terminal/create", params) {
            Some(a) if a.get("error").is_some() => {
                return format!("refused {}", a["error"]["message"]);
            }
            Some(a) => a["result"]["terminalId"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            None => return "no answer".to_owned(),
        };
        let term = json!({"sessionId": sid, "terminalId": created});
        let exit = self.ask(None, "terminal/wait_for_exit", term.clone());
        let output = self.ask(None, "terminal/output", term.clone());
        self.ask(None, "terminal/release", term);
        let code = exit
            .map(|e| e["result"]["exitCode"].clone())
            .unwrap_or_default();
        let text = output
            .map(|o| {
                o["result"]["output"]
                    .as_str()
                    .unwrap_or_default()
                    .trim()
                    .to_owned()
            })
            .unwrap_or_default();
        format!("exit {code} output {text:?}")
    }

    fn chunk(&mut self, session: &str, text: &str) {
        self.update(
            session,
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}),
        );
    }

    /// Sends a request with `id` (or the next number) and waits for its answer.
    fn ask(&mut self, id: Option<Value>, method: &str, params: Value) -> Option<Value> {
        let id = id.unwrap_or_else(|| {
            self.next_id += 1;
            json!(self.next_id)
        });
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let m = self.recv()?;
            if m.get("method").is_none() && m.get("id") == Some(&id) {
                return Some(m);
            }
        }
    }

    /// `session/request_permission` for `tool_call` with `options`: the client's `outcome`
    /// (null when it gave none).
    fn request_permission(&mut self, sid: &str, tool_call: Value, options: Value) -> Value {
        let params = json!({"sessionId": sid, "toolCall": tool_call, "options": options});
        self.ask(None, "session/request_permission", params)
            .map(|a| a["result"]["outcome"].clone())
            .unwrap_or(Value::Null)
    }

    fn capabilities(&self) -> Value {
        let mut session = json!({});
        match self.mode.as_str() {
            "ok" => session = json!({"list": {}, "resume": {}, "close": {}}),
            "close-ok" => session = json!({"close": {}}),
            _ => {}
        }
        let auth = if self.mode == "auth-env" {
            json!({"logout": {}})
        } else {
            json!({})
        };
        json!({
            "auth": auth,
            "loadSession": self.mode == "ok",
            "promptCapabilities": {"image": true, "audio": false, "embeddedContext": true},
            "mcpCapabilities": {"http": false, "sse": true},
            "sessionCapabilities": session,
        })
    }

    fn run(&mut self) {
        match self.mode.as_str() {
            "malformed" => {
                for i in 0..20 {
                    self.raw(&format!("garbage line {i}"));
                }
            }
            "hang" => loop {
                std::thread::park();
            },
            "spawns-grandchild" => {
                let child = std::process::Command::new("sleep")
                    .arg("1000")
                    .spawn()
                    .unwrap();
                if let Ok(path) = std::env::var("FAKE_AGENT_GRANDCHILD_FILE") {
                    std::fs::write(path, child.id().to_string()).unwrap();
                }
                std::mem::forget(child);
            }
            _ => {}
        }
        let mut sessions = 0;
        while let Some(m) = self.recv() {
            let Some(method) = m.get("method").and_then(Value::as_str).map(str::to_owned) else {
                continue;
            };
            let id = m.get("id").cloned();
            let params = m.get("params").cloned().unwrap_or(Value::Null);
            let Some(id) = id else { continue };
            match method.as_str() {
                "initialize" => match self.mode.as_str() {
                    "malformed" => {}
                    "early-exit" => {
                        eprintln!("fake agent: cannot find my configuration, giving up");
                        std::process::exit(3);
                    }
                    "bad-version" => self.answer(&id, json!({"protocolVersion": 2, "agentCapabilities": {}})),
                    _ => {
                        let caps = self.capabilities();
                        let mut result = json!({"protocolVersion": 1, "agentCapabilities": caps,
                            "agentInfo": {"name": "fake-agent", "title": "Fake Agent", "version": "0.1"},
                            "authMethods": []});
                        if self.mode == "session-error" {
                            result["authMethods"] = json!([{"id": "login", "name": "Log in with a browser"}]);
                        }
                        if self.mode == "auth-env" {
                            result["authMethods"] = json!([
                                {"id": "browser", "name": "Log in with a browser"},
                                {"id": "key", "name": "Use FAKE_AGENT_KEY", "type": "env_var",
                                 "vars": [{"name": "FAKE_AGENT_KEY"}]}]);
                        }
                        self.answer(&id, result);
                    }
                },
                "session/new" => {
                    if !params.get("mcpServers").is_some_and(Value::is_array) {
                        self.error(&id, -32602, "Invalid params: mcpServers is required", json!(null));
                        continue;
                    }
                    if self.mode == "session-error" || (self.mode == "auth-env" && !self.authenticated) {
                        self.error(&id, -32000, "Authentication required", json!({"hint": "log in"}));
                        continue;
                    }
                    sessions += 1;
                    let sid = format!("sess-{sessions}");
                    self.cwd = params["cwd"].as_str().unwrap_or_default().to_owned();
                    if let Ok(path) = std::env::var("FAKE_AGENT_NEW_SESSION_FILE") {
                        std::fs::write(path, params.to_string()).unwrap();
                    }
                    if self.mode == "updates-before-session-response" {
                        self.update(&sid, json!({"sessionUpdate": "available_commands_update",
                            "availableCommands": [{"name": "web", "description": "Search"}]}));
                    }
                    self.answer(&id, json!({"sessionId": sid,
                        "modes": {"currentModeId": "ask", "availableModes": [{"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code"}]}}));
                }
                "session/load" => {
                    let sid = params["sessionId"].as_str().unwrap_or("").to_owned();
                    self.loaded.push(sid.clone());
                    self.update(&sid, json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "earlier"}}));
                    self.answer(&id, Value::Null);
                }
                "session/list" => self.answer(&id, json!({"sessions": [{"sessionId": "sess-1", "cwd": "/"}]})),
                "session/resume" | "session/set_mode" | "session/set_model" => self.answer(&id, json!({})),
                "session/set_config_option" => self.answer(&id, json!({"configOptions": [{"id": params["configId"], "currentValue": params["value"]}]})),
                "session/close" => self.answer(&id, json!({})),
                "logout" => {
                    self.authenticated = false;
                    self.answer(&id, json!({}));
                }
                // An extension method: answers its params as they came.
                "_fake/echo" => self.answer(&id, params.clone()),
                "authenticate" => match params["methodId"].as_str() {
                    Some("key") if std::env::var("FAKE_AGENT_KEY").is_ok_and(|k| k == "sesame") => {
                        self.authenticated = true;
                        self.answer(&id, json!({}));
                    }
                    Some("key") => self.error(&id, -32000, "FAKE_AGENT_KEY is not the key", json!(null)),
                    other => self.error(&id, -32602, &format!("no auth method {other:?}"), json!(null)),
                },
                "session/prompt" => {
                    let sid = params["sessionId"].as_str().unwrap_or("").to_owned();
                    self.prompt(&id, &sid, &params);
                }
                _ => self.error(&id, -32601, &format!("Method not found: {method}"), json!(null)),
            }
        }
        // EOF on stdin.
        if self.mode == "ignores-stdin-eof" {
            // SAFETY: ignoring SIGTERM so that only SIGKILL ends this process.
            unsafe { libc::signal(libc::SIGTERM, libc::SIG_IGN) };
            loop {
                std::thread::park();
            }
        }
    }

    fn prompt(&mut self, id: &Value, sid: &str, params: &Value) {
        // Every text block, joined; the words `whoami`, `sleep:` and `stop:` are read from the
        // last one (context a proxy put first does not hide them).
        let texts: Vec<&str> = params["prompt"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|b| b["text"].as_str())
            .collect();
        let text = texts.join(" | ");
        let last = texts.last().copied().unwrap_or("").to_owned();
        match self.mode.as_str() {
            _ if last == "whoami" => {
                self.turns += 1;
                let said = format!(
                    "session {sid}, turn {} of pid {}, loaded {:?}",
                    self.turns,
                    std::process::id(),
                    self.loaded
                );
                self.chunk(sid, &said);
                self.answer(id, json!({"stopReason": "end_turn"}));
            }
            _ if last.starts_with("sleep:") => {
                // `sleep:MS rest`: waits MS ms (a cancel ends it early), then says the rest.
                let ms: u64 = last[6..]
                    .split(' ')
                    .next()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                self.chunk(sid, "sleeping");
                self.sleep_or_cancel(ms);
                let rest = last.split_once(' ').map_or("", |(_, r)| r).to_owned();
                self.chunk(sid, &format!(" done: {rest}"));
                self.answer(
                    id,
                    json!({"stopReason": if self.cancelled { "cancelled" } else { "end_turn" }}),
                );
                self.cancelled = false;
            }
            _ if last.starts_with("stop:") => {
                self.chunk(sid, "stopping");
                self.answer(id, json!({"stopReason": &last[5..]}));
            }
            "prompt-stop" => {
                self.chunk(sid, "partial");
                self.answer(id, json!({"stopReason": "max_tokens"}));
            }
            "prompt-error" => {
                self.chunk(sid, "trying");
                self.error(
                    id,
                    -32603,
                    "Internal error: the model is unavailable",
                    json!({"retryAfter": 3}),
                );
            }
            "prompt-permission" => {
                let options = json!([
                    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
                ]);
                let tool_call = json!({"toolCallId": "call-1", "title": "Write notes.txt", "kind": "edit",
                    "status": "pending", "rawInput": {"path": "/tmp/notes.txt"}});
                self.update(sid, json!({"sessionUpdate": "tool_call", "toolCallId": "call-1", "title": "Write notes.txt", "kind": "edit", "status": "pending"}));
                let outcome = self.request_permission(sid, tool_call, options);
                let decision = match outcome["outcome"].as_str() {
                    Some("selected") => {
                        format!("selected {}", outcome["optionId"].as_str().unwrap_or("?"))
                    }
                    Some(other) => other.to_owned(),
                    None => "no answer".to_owned(),
                };
                self.chunk(sid, &decision);
                let stop = if decision == "cancelled" {
                    "cancelled"
                } else {
                    "end_turn"
                };
                self.answer(id, json!({"stopReason": stop}));
            }
            "fs-probe" => {
                // Reads and writes through the client, in and out of the session's folder; says
                // how each was answered.
                let cwd = self.cwd.clone();
                let probes = [
                    (
                        "fs/read_text_file",
                        json!({"path": format!("{cwd}/notes.txt")}),
                    ),
                    (
                        "fs/read_text_file",
                        json!({"path": format!("{cwd}/notes.txt"), "line": 2, "limit": 1}),
                    ),
                    (
                        "fs/read_text_file",
                        json!({"path": format!("{cwd}/buffer.txt")}),
                    ),
                    ("fs/read_text_file", json!({"path": "/etc/hostname"})),
                    (
                        "fs/read_text_file",
                        json!({"path": format!("{cwd}/out/secret.txt")}),
                    ),
                    (
                        "fs/write_text_file",
                        json!({"path": format!("{cwd}/written.txt"), "content": "from the agent"}),
                    ),
                    (
                        "fs/write_text_file",
                        json!({"path": format!("{cwd}/out/planted.txt"), "content": "x"}),
                    ),
                    (
                        "fs/write_text_file",
                        json!({"path": format!("{cwd}/refused.txt"), "content": "x"}),
                    ),
                    (
                        "fs/write_text_file",
                        json!({"path": format!("{cwd}/.git/hooks/pre-commit"), "content": "x"}),
                    ),
                    (
                        "fs/write_text_file",
                        json!({"path": format!("{cwd}/nothing.txt")}),
                    ),
                ];
                for (method, mut p) in probes {
                    p["sessionId"] = json!(sid);
                    let said = match self.ask(None, method, p) {
                        Some(a) if a.get("error").is_some() => {
                            format!("error {}", a["error"]["message"])
                        }
                        Some(a) => format!("ok {}", a["result"]),
                        None => "no answer".to_owned(),
                    };
                    self.chunk(sid, &format!("{said}\n"));
                }
                self.answer(id, json!({"stopReason": "end_turn"}));
            }
            "terminal-probe" => {
                // Runs commands in the client's terminal: one in the session's folder, one
                // whose folder is outside it, one writing outside it, one the client refuses;
                // says how each went. `$OUTSIDE` names the folder outside.
                let (cwd, outside) = (
                    self.cwd.clone(),
                    std::env::var("OUTSIDE").unwrap_or_default(),
                );
                let probes = [
                    json!({"command": "sh", "args": ["-c", "echo hi; echo from-agent > in.txt"]}),
                    json!({"command": "sh", "args": ["-c", "echo there"], "cwd": outside}),
                    json!({"command": "sh", "args": ["-c", format!("echo pwned > {outside}/planted")]}),
                    json!({"command": "rm", "args": ["-rf", cwd]}),
                    json!({"command": "printenv", "args": ["GREETING"],
                           "env": [{"name": "GREETING", "value": "hello"}], "cwd": cwd}),
                ];
                for mut p in probes {
                    p["sessionId"] = json!(sid);
                    let said = self.run_in_terminal(sid, p);
                    self.chunk(sid, &format!("{said}\n"));
                }
                self.answer(id, json!({"stopReason": "end_turn"}));
            }
            "cancel-own-request" => {
                // Asks, gives the question up at once, and says how it was answered.
                let options = json!([{"optionId": "allow", "name": "Allow", "kind": "allow_once"}]);
                self.send(json!({"jsonrpc": "2.0", "id": "perm-c", "method": "session/request_permission",
                    "params": {"sessionId": sid, "toolCall": {"toolCallId": "c"}, "options": options}}));
                self.send(json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": "perm-c"}}));
                let answer = loop {
                    let Some(m) = self.recv() else { return };
                    if m.get("id") == Some(&json!("perm-c")) {
                        break m;
                    }
                };
                let said = match answer.get("error") {
                    Some(e) => format!("answered error {}", e["code"]),
                    None => format!("answered {}", answer["result"]),
                };
                self.chunk(sid, &said);
                self.answer(id, json!({"stopReason": "end_turn"}));
            }
            "prompt-permission-sessionless" => {
                // A request naming no session: the client must refuse it, not ask under "".
                let params = json!({"toolCall": {"toolCallId": "c"}, "options":
                    [{"optionId": "allow", "name": "Allow", "kind": "allow_once"}]});
                let said = match self.ask(None, "session/request_permission", params) {
                    Some(a) if a.get("error").is_some() => {
                        format!("refused {}", a["error"]["code"])
                    }
                    Some(a) => format!("answered {}", a["result"]),
                    None => "no answer".to_owned(),
                };
                self.chunk(sid, &said);
                self.answer(id, json!({"stopReason": "end_turn"}));
            }
            "prompt-cancel" => {
                self.chunk(sid, "working");
                // The permission request stays pending until the client cancels the turn.
                let options = json!([{"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                                     {"optionId": "reject", "name": "Reject", "kind": "reject_once"}]);
                self.send(json!({"jsonrpc": "2.0", "id": "perm-x", "method": "session/request_permission",
                    "params": {"sessionId": sid, "toolCall": {"toolCallId": "c"}, "options": options}}));
                let mut permission = None;
                let mut cancelled = false;
                while permission.is_none() || !cancelled {
                    let Some(m) = self.recv() else { return };
                    if m.get("method").and_then(Value::as_str) == Some("session/cancel") {
                        cancelled = true;
                    } else if m.get("id") == Some(&json!("perm-x")) {
                        permission = m["result"]["outcome"]["outcome"]
                            .as_str()
                            .map(str::to_owned);
                    }
                }
                self.chunk(
                    sid,
                    &format!("permission {}", permission.unwrap_or_default()),
                );
                self.answer(id, json!({"stopReason": "cancelled"}));
            }
            "delegate" => self.delegated_turn(id, sid, &text),
            "wait-cancel" => {
                self.chunk(sid, "working on it");
                while let Some(m) = self.recv() {
                    if m.get("method").and_then(Value::as_str) == Some("session/cancel") {
                        if let Ok(path) = std::env::var("FAKE_AGENT_CANCEL_FILE") {
                            std::fs::write(path, "cancelled\n").unwrap();
                        }
                        break;
                    }
                }
                self.chunk(sid, "stopped");
                self.answer(id, json!({"stopReason": "cancelled"}));
            }
            "exit-mid-turn" => {
                self.chunk(sid, "starting");
                eprintln!("fake agent: lost my model, exiting");
                std::process::exit(7);
            }
            "hang-in-turn" => {
                self.chunk(sid, "thinking");
                loop {
                    std::thread::park();
                }
            }
            "late-updates" => {
                self.chunk(sid, "in time");
                self.answer(id, json!({"stopReason": "end_turn"}));
                self.chunk(sid, "late");
            }
            "huge-line" => {
                let big = "x".repeat(5 * 1024 * 1024);
                self.chunk(sid, &big);
                self.answer(id, json!({"stopReason": "end_turn"}));
            }
            "over-limit" => {
                // One update past the 64 MiB a client reads, then the turn ends as if all
                // was well.
                let big = "x".repeat(64 * 1024 * 1024 + 1024);
                self.chunk(sid, &big);
                self.chunk(sid, "after the big one");
                self.answer(id, json!({"stopReason": "end_turn"}));
            }
            "ids" => {
                let options = json!([{"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                                     {"optionId": "reject", "name": "Reject", "kind": "reject_once"}]);
                let p =
                    json!({"sessionId": sid, "toolCall": {"toolCallId": "c"}, "options": options});
                for rid in [json!(0), json!("req-a")] {
                    let a = self.ask(Some(rid.clone()), "session/request_permission", p.clone());
                    let ok = a.as_ref().and_then(|a| a.get("id")) == Some(&rid);
                    self.chunk(sid, &format!("id {rid} echoed {ok}"));
                }
                self.answer(id, json!({"stopReason": "end_turn"}));
            }
            "unknown-request" => {
                let a = self.ask(
                    None,
                    "fs/read_text_file",
                    json!({"sessionId": sid, "path": "/etc/hostname"}),
                );
                let code = a.map(|a| a["error"]["code"].clone()).unwrap_or(Value::Null);
                self.chunk(sid, &format!("fs/read_text_file answered {code}"));
                self.answer(id, json!({"stopReason": "end_turn"}));
            }
            "flood" => {
                for i in 0..self.n {
                    serde_json::to_writer(&mut self.out, &json!({"jsonrpc": "2.0", "method": "session/update",
                        "params": {"sessionId": sid, "update": {"sessionUpdate": "agent_message_chunk",
                        "content": {"type": "text", "text": format!("chunk {i} ")}}}})).unwrap();
                    self.out.write_all(b"\n").unwrap();
                }
                self.answer(id, json!({"stopReason": "end_turn"}));
            }
            _ => {
                // prompt-ok and every other mode: two chunks, then end_turn; echo the prompt.
                if !text.is_empty() && self.mode != "prompt-ok" {
                    self.chunk(sid, &format!("you said: {text}"));
                }
                self.chunk(sid, "Hello, ");
                self.chunk(sid, "world!");
                self.answer(id, json!({"stopReason": "end_turn"}));
            }
        }
    }
}

impl Agent {
    /// Sleeps `ms` milliseconds unless `session/cancel` comes first (other lines meanwhile
    /// are dropped).
    fn sleep_or_cancel(&mut self, ms: u64) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(ms);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return;
            }
            if self.input.buffer().is_empty() {
                let mut fd = libc::pollfd {
                    fd: 0,
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: poll on one live pollfd.
                let ready = unsafe { libc::poll(&mut fd, 1, left.as_millis() as i32) };
                if ready <= 0 {
                    continue;
                }
            }
            let Some(m) = self.recv() else { return };
            if m.get("method").and_then(Value::as_str) == Some("session/cancel") {
                self.cancelled = true;
                return;
            }
        }
    }

    /// What a delegated agent does: says something, runs a tool, asks to edit a file (with the
    /// diff), and answers with the decision and which turn of which session this was.
    fn delegated_turn(&mut self, id: &Value, sid: &str, text: &str) {
        self.turns += 1;
        self.chunk(sid, "Let me look. ");
        self.update(
            sid,
            json!({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Read notes.txt",
            "kind": "read", "status": "in_progress"}),
        );
        self.update(
            sid,
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed"}),
        );
        let tool_call = json!({"toolCallId": "t2", "title": "Edit notes.txt", "kind": "edit", "status": "pending",
            "rawInput": {"file_path": "notes.txt"},
            "content": [{"type": "diff", "path": "notes.txt", "oldText": "old\n", "newText": "new\n"}]});
        self.update(
            sid,
            json!({"sessionUpdate": "tool_call", "toolCallId": "t2", "title": "Edit notes.txt",
            "kind": "edit", "status": "pending"}),
        );
        let options = json!([
            {"optionId": "ok", "name": "Allow", "kind": "allow_once"},
            {"optionId": "ok-always", "name": "Always", "kind": "allow_always"},
            {"optionId": "no", "name": "Reject", "kind": "reject_once"},
        ]);
        let outcome = self.request_permission(sid, tool_call, options);
        let decision = match outcome["outcome"].as_str() {
            Some("selected") => outcome["optionId"].as_str().unwrap_or("?").to_owned(),
            Some(other) => other.to_owned(),
            None => "no answer".to_owned(),
        };
        let status = if decision.starts_with("ok") {
            "completed"
        } else {
            "failed"
        };
        self.update(
            sid,
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "t2", "status": status}),
        );
        self.chunk(sid, &format!("Permission: {decision}. "));
        let turn = self.turns;
        self.chunk(sid, &format!("Turn {turn} in {sid}: {text}"));
        self.answer(id, json!({"stopReason": "end_turn"}));
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "ok".to_owned());
    let n = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    if let Ok(path) = std::env::var("FAKE_AGENT_PID_FILE") {
        std::fs::write(path, std::process::id().to_string()).unwrap();
    }
    let mut agent = Agent {
        mode,
        n,
        input: std::io::BufReader::new(std::io::stdin()),
        out: BufWriter::with_capacity(1 << 16, std::io::stdout()),
        next_id: 0,
        authenticated: false,
        turns: 0,
        loaded: Vec::new(),
        cancelled: false,
        cwd: String::new(),
    };
    agent.run();
}
