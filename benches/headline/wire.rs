//! The part `wire` of the headline benchmark: the same ACP turn (a `bash` call asked and
//! allowed, then an answer) and the same streamed reply, over ACP v1 on stdio, the v2 draft on
//! stdio, and v1 over Streamable HTTP (`oml acp --listen`), in one run. A v2 turn ends at its
//! `idle` state update; an HTTP turn is POSTs and SSE streams over loopback TCP. A build that
//! speaks neither (a baseline from before them) gets no figure for them.
//!
//! It knows the three wires and what to time, not how figures are printed.

use std::collections::HashSet;
use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::client::{Agent, Home, LINE_WAIT, allow_once, is_update};
use crate::fake_model::{FakeModel, Reply, text_chunks};
use crate::turn::{model_time, push_echo_turn};
use crate::{Figure, Sizes, median, ms};

/// Turns run before the measured ones.
const WARM_UP: usize = 2;

/// Lines to and from an agent, whatever carries them.
pub trait Wire {
    fn send(&mut self, message: &Value);
    fn line(&mut self) -> String;
    fn next_id(&mut self) -> u64;
}

impl Wire for Agent {
    fn send(&mut self, message: &Value) {
        Agent::send(self, message);
    }
    fn line(&mut self) -> String {
        Agent::line(self)
    }
    fn next_id(&mut self) -> u64 {
        Agent::next_id(self)
    }
}

fn request(w: &mut dyn Wire, method: &str, params: Value) -> u64 {
    let id = w.next_id();
    w.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
    id
}

/// Read to the answer of `id`, allowing what is asked; the answer.
fn answer_of(w: &mut dyn Wire, id: u64) -> Value {
    loop {
        let line = w.line();
        if is_update(&line) {
            continue;
        }
        let v: Value = serde_json::from_str(&line).expect("a JSON line");
        if v["method"] == "session/request_permission" {
            w.send(&json!({"jsonrpc": "2.0", "id": v["id"], "result": allow_once()}));
        } else if v["id"] == json!(id) && v.get("method").is_none() {
            return v;
        }
    }
}

/// `initialize` asking for `version`, then `session/new`: the session, or `None` when the
/// agent answers another version.
fn open(w: &mut dyn Wire, version: u64, cwd: &Path) -> Option<String> {
    let params = match version {
        2 => {
            json!({"protocolVersion": 2, "info": {"name": "bench", "version": "1"}, "capabilities": {}})
        }
        _ => json!({"protocolVersion": 1, "clientCapabilities": {}}),
    };
    let id = request(w, "initialize", params);
    let answer = answer_of(w, id);
    if answer["result"]["protocolVersion"] != json!(version) {
        return None;
    }
    let id = request(w, "session/new", json!({"cwd": cwd, "mcpServers": []}));
    answer_of(w, id)["result"]["sessionId"]
        .as_str()
        .map(str::to_owned)
}

/// One prompt to its end (v1: its answer; v2: the `idle` state update), allowing what is
/// asked; the time and the characters of agent text it streamed.
fn turn(w: &mut dyn Wire, sid: &str, text: &str) -> (Duration, usize) {
    let start = Instant::now();
    let id = request(
        w,
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": text}]}),
    );
    let mut chars = 0;
    loop {
        let line = w.line();
        let v: Value = serde_json::from_str(&line).expect("a JSON line");
        let u = &v["params"]["update"];
        match (v["method"].as_str(), u["sessionUpdate"].as_str()) {
            (Some("session/update"), Some("agent_message_chunk")) => {
                chars += u["content"]["text"]
                    .as_str()
                    .map_or(0, |t| t.chars().count());
            }
            (Some("session/update"), Some("state_update"))
                if u["state"] == "idle" && u["stopReason"].is_string() =>
            {
                break;
            }
            (Some("session/request_permission"), _) => {
                w.send(&json!({"jsonrpc": "2.0", "id": v["id"], "result": allow_once()}));
            }
            (None, _) if v["id"] == json!(id) && v["result"].get("stopReason").is_some() => break,
            _ => {}
        }
    }
    (start.elapsed(), chars)
}

/// Part `wire`.
pub fn wire(bin: &Path, sizes: &Sizes) -> Vec<Figure> {
    let home = Home::new();
    std::fs::write(
        home.root.join("config/oml/init.fnl"),
        "(setq acp.protocol-versions [1 2])\n",
    )
    .expect("write the init file");
    let fake = FakeModel::start(Vec::<Reply>::new());
    let model = model_time(&fake, sizes.runs);
    let stdio = |version| {
        let agent: Box<dyn Wire> = Box::new(Agent::spawn(&home, bin, Some(&fake)));
        measure(agent, version, &home, &fake, sizes)
    };
    let (v1_turn, v1_rate) = stdio(1).unwrap_or((f64::NAN, f64::NAN));
    let (v2_turn, v2_rate) = stdio(2).unwrap_or((f64::NAN, f64::NAN));
    let (http_turn, http_rate) = Http::start(&home, bin, &fake)
        .and_then(|h| measure(Box::new(h), 1, &home, &fake, sizes))
        .unwrap_or((f64::NAN, f64::NAN));
    let less = |t: f64| t - ms(model);
    vec![
        Figure::new("wire: ACP turn over stdio, v1, minus the model", "ms", "").of(less(v1_turn)),
        Figure::new("  the same turn, v2 draft", "ms", "").of(less(v2_turn)),
        Figure::new("  the same turn, v1 over HTTP (`--listen`)", "ms", "").of(less(http_turn)),
        Figure::new("wire: stream over stdio v1, deltas delivered/s", "/s", "").of(v1_rate),
        Figure::new("  the same stream, v2 draft", "/s", "").of(v2_rate),
        Figure::new("  the same stream, v1 over HTTP", "/s", "").of(http_rate),
    ]
}

/// The median tool turn (ms) and the median streamed reply's rate (deltas/s) over `w`; `None`
/// when the agent does not speak `version` there.
fn measure(
    mut w: Box<dyn Wire>,
    version: u64,
    home: &Home,
    fake: &FakeModel,
    sizes: &Sizes,
) -> Option<(f64, f64)> {
    let sid = open(w.as_mut(), version, &home.project)?;
    let mut times = Vec::new();
    for run in 0..WARM_UP + sizes.runs {
        push_echo_turn(fake);
        let (t, _) = turn(w.as_mut(), &sid, "run echo hi");
        if run >= WARM_UP {
            times.push(t);
        }
    }
    let mut rates: Vec<f64> = (0..sizes.stream_runs)
        .map(|_| {
            fake.push(Reply::from(text_chunks(&vec!["x"; sizes.deltas])));
            let (took, chars) = turn(w.as_mut(), &sid, "stream");
            chars as f64 / took.as_secs_f64()
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    Some((ms(median(&times)), rates[rates.len() / 2]))
}

/// `oml acp --listen` and an HTTP client of it: POSTs for lines out, the SSE streams' events
/// for lines in.
struct Http {
    listener: Child,
    rt: tokio::runtime::Runtime,
    client: reqwest::Client,
    url: String,
    token: String,
    connection: Option<String>,
    sessions: HashSet<String>,
    tx: mpsc::Sender<String>,
    rx: mpsc::Receiver<String>,
    next: u64,
}

impl Http {
    /// The listener, or `None` when this build has none.
    fn start(home: &Home, bin: &Path, fake: &FakeModel) -> Option<Http> {
        let mut listener = home
            .command(bin, &["acp", "--listen", "127.0.0.1:0"], Some(fake))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let mut out = std::io::BufReader::new(listener.stdout.take()?);
        let mut read = || {
            let mut l = String::new();
            out.read_line(&mut l).ok()?;
            Some(l.split_whitespace().nth(1)?.to_owned())
        };
        let (Some(url), Some(token)) = (read(), read()) else {
            let _ = listener.kill();
            let _ = listener.wait();
            return None;
        };
        let (tx, rx) = mpsc::channel();
        Some(Http {
            listener,
            rt: tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .ok()?,
            client: reqwest::Client::new(),
            url,
            token,
            connection: None,
            sessions: HashSet::new(),
            tx,
            rx,
            next: 0,
        })
    }

    fn post(&self, body: String, session: Option<&str>) -> reqwest::Response {
        let mut r = self
            .client
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("Content-Type", "application/json")
            .body(body);
        if let Some(c) = &self.connection {
            r = r.header("Acp-Connection-Id", c);
        }
        if let Some(s) = session {
            r = r.header("Acp-Session-Id", s);
        }
        self.rt.block_on(r.send()).expect("POST")
    }

    /// Open an SSE stream (the connection's, or a session's) read into the lines.
    fn stream(&self, session: Option<&str>) {
        let mut r = self
            .client
            .get(&self.url)
            .bearer_auth(&self.token)
            .header("Accept", "text/event-stream")
            .header(
                "Acp-Connection-Id",
                self.connection.clone().unwrap_or_default(),
            );
        if let Some(s) = session {
            r = r.header("Acp-Session-Id", s);
        }
        let mut response = self.rt.block_on(r.send()).expect("GET");
        let tx = self.tx.clone();
        self.rt.spawn(async move {
            let mut buf = Vec::new();
            while let Ok(Some(chunk)) = response.chunk().await {
                buf.extend_from_slice(&chunk);
                while let Some(at) = buf.windows(2).position(|w| w == b"\n\n") {
                    let event: Vec<u8> = buf.drain(..at + 2).collect();
                    let text = String::from_utf8_lossy(&event);
                    if let Some(data) = text.strip_prefix("data: ") {
                        let _ = tx.send(data.trim_end().to_owned());
                    }
                }
            }
        });
    }
}

impl Wire for Http {
    fn send(&mut self, message: &Value) {
        if self.connection.is_none() {
            let r = self.post(message.to_string(), None);
            self.connection = r
                .headers()
                .get("acp-connection-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let body = self.rt.block_on(r.text()).expect("the answer");
            self.stream(None);
            let _ = self.tx.send(body);
            return;
        }
        let session = message
            .pointer("/params/sessionId")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if let Some(s) = &session
            && self.sessions.insert(s.clone())
        {
            self.stream(Some(s));
        }
        let status = self.post(message.to_string(), session.as_deref()).status();
        assert!(status.is_success(), "POST answered {status}");
    }

    fn line(&mut self) -> String {
        self.rx
            .recv_timeout(LINE_WAIT)
            .expect("a line from the agent in time")
    }

    fn next_id(&mut self) -> u64 {
        self.next += 1;
        self.next
    }
}

impl Drop for Http {
    fn drop(&mut self) {
        let _ = self.listener.kill();
        let _ = self.listener.wait();
    }
}
