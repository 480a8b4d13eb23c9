//! Whole-process benchmark of `oml acp` (run with `cargo bench --bench acp`): the real binary
//! driven over pipes against the fake model server. It prints four figures:
//!
//! - spawn → `initialize` answer (median and p90 over `RUNS` runs);
//! - resident memory (VmRSS) after `session/new`;
//! - `session/update` throughput: one model reply of `DELTAS` one-character deltas, counted from
//!   the prompt to its response (every delta goes SSE decode → fold → loop event →
//!   `acp.render-event` → the ordered writer → stdout), next to a baseline from the same run: the
//!   fake model serving the same stream to a bare HTTP client that only counts events, which
//!   bounds what the whole-process figure can reach;
//! - the overhead of a full turn (a tool call, then an answer: two model calls) over the fake
//!   model's own time (each reply sleeps `MODEL_SLEEP_MS` before streaming);
//! - the live output of a command printing `LIVE_BYTES` (10 MB): how many `tool_call_update`s
//!   its card gets a second while it runs (the throttle allows ten).
//!
//! `OML_BENCH_BIN=/path/to/oml` measures that binary instead of this build's (a baseline built
//! from another commit, in the same run).

#![allow(clippy::print_stdout, clippy::print_stderr)] // test and tool output

#[path = "../tests/support/fake_model.rs"]
#[allow(dead_code)]
mod fake_model;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use fake_model::{FakeModel, Reply, Step, delta_chunk, text_chunks, tool_call_chunks};
use serde_json::{Value, json};

const RUNS: usize = 50;
const DELTAS: usize = 50_000;
const MODEL_SLEEP_MS: u64 = 50;
const TURNS: usize = 20;
const LIVE_BYTES: usize = 10_000_000;

struct Agent {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    next: u64,
}

impl Agent {
    fn spawn(root: &std::path::Path, fake: Option<&FakeModel>) -> Agent {
        // `OML_BENCH_WRAP='valgrind --tool=callgrind'` runs each agent under that command, to
        // profile it.
        let wrap = std::env::var("OML_BENCH_WRAP").unwrap_or_default();
        let mut words: Vec<String> = wrap.split_whitespace().map(str::to_owned).collect();
        words.push(
            std::env::var("OML_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_oml").to_owned()),
        );
        let mut cmd = Command::new(&words[0]);
        cmd.args(&words[1..])
            .arg("acp")
            .current_dir(root)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", root)
            .env("XDG_CONFIG_HOME", root.join("config"))
            .env("XDG_STATE_HOME", root.join("state"))
            .env("XDG_CACHE_HOME", root.join("cache"))
            .env("XDG_RUNTIME_DIR", root.join("runtime"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if let Some(fake) = fake {
            cmd.env("OPENAI_BASE_URL", fake.base_url())
                .env("OPENAI_MODEL", "fake/model")
                .env("OPENAI_API_KEY", "k");
        }
        let mut child = cmd.spawn().expect("spawn oml acp");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Agent {
            stdin: child.stdin.take(),
            child,
            lines: rx,
            next: 0,
        }
    }

    fn request(&mut self, method: &str, params: Value) -> u64 {
        self.next += 1;
        let line = json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params});
        let stdin = self
            .stdin
            .as_mut()
            .expect("stdin is open until the agent is dropped");
        writeln!(stdin, "{line}").expect("write");
        stdin.flush().expect("flush");
        self.next
    }

    /// Read up to the response to `id`; returns the number of `agent_message_chunk` updates
    /// before it.
    fn until(&mut self, id: u64) -> (usize, Value) {
        let mut n = 0;
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(60))
                .expect("an answer");
            // Updates are only counted, as a client that shows them would not parse them twice;
            // the bench's own reading should cost little next to what it measures.
            if line.contains(r#""method":"session/update""#) {
                if line.contains(r#""sessionUpdate":"agent_message_chunk""#) {
                    n += 1;
                }
                continue;
            }
            let v: Value = serde_json::from_str(&line).expect("json");
            if v["id"] == json!(id) && v.get("method").is_none() {
                return (n, v);
            }
        }
    }

    fn new_session(&mut self, cwd: &std::path::Path) -> String {
        let id = self.request("initialize", json!({"protocolVersion": 1}));
        self.until(id);
        let id = self.request(
            "session/new",
            json!({"cwd": cwd.display().to_string(), "mcpServers": []}),
        );
        let (_, r) = self.until(id);
        r["result"]["sessionId"].as_str().expect("id").to_owned()
    }

    fn prompt(&mut self, sid: &str, text: &str) -> (usize, Value) {
        let id = self.request(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": text}]}),
        );
        self.until(id)
    }
}

impl Drop for Agent {
    /// Closes stdin, which ends `oml acp` cleanly (so a profiler around it writes its data),
    /// and kills it only if it has not exited after a while.
    fn drop(&mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` runs this too, so keep that short.
    let quick = !std::env::args().any(|a| a == "--bench");
    // `cargo bench --bench acp -- NAME…` runs only the named parts (spawn, memory, throughput,
    // turn), e.g. to profile one of them alone.
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let wanted = |part: &str| only.is_empty() || only.iter().any(|o| o == part);
    let dir = tempfile::tempdir().expect("tempdir");
    let root = std::fs::canonicalize(dir.path()).expect("canonical");
    for d in ["config/oml", "state", "cache", "runtime"] {
        std::fs::create_dir_all(root.join(d)).expect("mkdir");
    }
    // `OML_BENCH_INIT='(…)'`: the user init file of every agent spawned, to measure what a
    // customisation costs next to a run without it.
    if let Ok(init) = std::env::var("OML_BENCH_INIT") {
        std::fs::write(root.join("config/oml/init.fnl"), init).expect("write the init file");
    }

    if wanted("spawn") {
        spawn_to_initialize(&root, quick);
    }
    if wanted("memory") {
        memory_after_session_new(&root);
    }
    if wanted("throughput") {
        update_throughput(&root, quick);
    }
    if wanted("turn") {
        turn_overhead(&root, quick);
    }
    if wanted("live") {
        live_output(&root, quick);
    }
}

/// Part 5: the live output of a command printing `LIVE_BYTES` in 100-byte lines: the card's
/// updates a second between the first and the last while it runs.
fn live_output(root: &std::path::Path, quick: bool) {
    let bytes = if quick { 100_000 } else { LIVE_BYTES };
    let command = format!("head -c {bytes} /dev/zero | tr '\\0' a | fold -w 99");
    let args = json!({ "command": command }).to_string();
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks("c1", "bash", &[&args])),
        Reply::from(text_chunks(&["done"])),
    ]);
    let mut a = Agent::spawn(root, Some(&fake));
    let sid = a.new_session(root);
    let id = a.request(
        "session/set_mode",
        json!({"sessionId": sid, "modeId": "yolo"}),
    );
    a.until(id);
    let id = a.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "run"}]}),
    );
    let mut live = Vec::new();
    loop {
        let line = a
            .lines
            .recv_timeout(Duration::from_secs(60))
            .expect("an answer");
        if line.contains(r#""sessionUpdate":"tool_call_update""#) && !line.contains(r#""status""#) {
            live.push(Instant::now());
        }
        if line.contains(&format!(r#""id":{id},"#)) && !line.contains(r#""method""#) {
            break;
        }
    }
    let span = match (live.first(), live.last()) {
        (Some(first), Some(last)) => last.duration_since(*first),
        _ => Duration::ZERO,
    };
    println!(
        "live output of a command printing {bytes} bytes: {} card updates over {:.0} ms = {:.1} updates/s",
        live.len(),
        span.as_secs_f64() * 1e3,
        live.len().saturating_sub(1) as f64 / span.as_secs_f64().max(1e-9)
    );
}

/// Part 1: spawn → `initialize` answer.
fn spawn_to_initialize(root: &std::path::Path, quick: bool) {
    let runs = if quick { 2 } else { RUNS };
    let mut times = Vec::new();
    for _ in 0..runs {
        let start = Instant::now();
        let mut a = Agent::spawn(root, None);
        let id = a.request("initialize", json!({"protocolVersion": 1}));
        a.until(id);
        times.push(start.elapsed());
    }
    times.sort();
    println!(
        "spawn -> initialize answer: median {:.1} ms, p90 {:.1} ms ({runs} runs)",
        percentile(&times, 0.5).as_secs_f64() * 1e3,
        percentile(&times, 0.9).as_secs_f64() * 1e3
    );
}

/// Part 2: resident memory after `session/new`.
fn memory_after_session_new(root: &std::path::Path) {
    let mut a = Agent::spawn(root, None);
    a.new_session(root);
    std::thread::sleep(Duration::from_millis(100));
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", a.child.id())).unwrap_or_default();
    let rss = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .unwrap_or("VmRSS: ?");
    println!(
        "resident memory after session/new: {}",
        rss.trim_start_matches("VmRSS:").trim()
    );
}

/// Part 3: update throughput, with a baseline from the same run: how fast the fake model itself
/// serves the same stream to a bare HTTP client that only counts its `data:` lines.
fn update_throughput(root: &std::path::Path, quick: bool) {
    let deltas = if quick { 200 } else { DELTAS };
    let pieces: Vec<&str> = vec!["x"; deltas];
    let fake = FakeModel::start([Reply::from(text_chunks(&pieces))]);
    let (events, served) = bare_stream(&fake.base_url());
    println!(
        "baseline, the fake model alone: {events} SSE events in {:.0} ms = {:.0} events/s",
        served.as_secs_f64() * 1e3,
        events as f64 / served.as_secs_f64()
    );
    let fake = FakeModel::start([Reply::from(text_chunks(&pieces))]);
    let mut a = Agent::spawn(root, Some(&fake));
    let sid = a.new_session(root);
    let cpu_before = cpu_time(a.child.id());
    let start = Instant::now();
    let (n, r) = a.prompt(&sid, "stream");
    let took = start.elapsed();
    let cpu = cpu_time(a.child.id()).saturating_sub(cpu_before);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    println!(
        "session/update throughput: {n} updates in {:.0} ms = {:.0} updates/s; oml's CPU time {:.0} ms = {:.2} us/update",
        took.as_secs_f64() * 1e3,
        n as f64 / took.as_secs_f64(),
        cpu.as_secs_f64() * 1e3,
        cpu.as_secs_f64() * 1e6 / n.max(1) as f64
    );
}

/// Part 4: turn overhead over the model's own time.
fn turn_overhead(root: &std::path::Path, quick: bool) {
    let turns = if quick { 1 } else { TURNS };
    let fake = FakeModel::start(Vec::<Reply>::new());
    let mut a = Agent::spawn(root, Some(&fake));
    let sid = a.new_session(root);
    std::fs::write(root.join("n.txt"), "hello\n").expect("write");
    let mut overheads = Vec::new();
    let cpu_before = cpu_time(a.child.id());
    for _ in 0..turns {
        let mut first = vec![Step::Sleep(MODEL_SLEEP_MS)];
        first.extend(tool_call_chunks("c1", "read", &[r#"{"path":"n.txt"}"#]));
        let mut second = vec![Step::Sleep(MODEL_SLEEP_MS)];
        second.extend(text_chunks(&["it ", "says ", "hello"]));
        second.push(Step::Chunk(delta_chunk(json!({}), None)));
        fake.push(Reply::from(first));
        fake.push(Reply::from(second));
        let start = Instant::now();
        let (_, r) = a.prompt(&sid, "read n.txt");
        let took = start.elapsed();
        assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
        overheads.push(took.saturating_sub(Duration::from_millis(2 * MODEL_SLEEP_MS)));
    }
    let cpu = cpu_time(a.child.id()).saturating_sub(cpu_before);
    overheads.sort();
    println!(
        "full turn (tool call + answer, 2 model calls) overhead over the model's {} ms: median {:.1} ms, p90 {:.1} ms ({turns} turns); oml's CPU time {:.1} ms a turn",
        2 * MODEL_SLEEP_MS,
        percentile(&overheads, 0.5).as_secs_f64() * 1e3,
        percentile(&overheads, 0.9).as_secs_f64() * 1e3,
        cpu.as_secs_f64() * 1e3 / turns as f64
    );
}

/// The user plus system CPU time the process `pid` has used so far (all its threads), from
/// `/proc/PID/stat`; zero where that cannot be read.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i)?.parse::<u64>().ok())
        .sum();
    Duration::from_secs_f64(ticks as f64 / USER_HZ)
}

/// The ticks per second in which `/proc` counts CPU time: fixed at 100 by Linux's ABI, whatever
/// the kernel's own tick rate. So one reading is good to 10 ms.
const USER_HZ: f64 = 100.0;

/// Reads one streamed reply of the fake model with a bare reqwest client, counting `data:` lines;
/// returns the count and the time from the request to the end of the body.
fn bare_stream(base_url: &str) -> (usize, Duration) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let client = reqwest::Client::new();
        let start = Instant::now();
        let mut resp = client
            .post(format!("{base_url}/chat/completions"))
            .body(r#"{"model":"m","messages":[],"stream":true}"#)
            .header("content-type", "application/json")
            .send()
            .await
            .expect("the fake answers");
        let mut count = 0;
        let mut tail = Vec::new();
        while let Some(chunk) = resp.chunk().await.expect("body") {
            tail.extend_from_slice(&chunk);
            let mut start_of_line = 0;
            for (i, b) in tail.iter().enumerate() {
                if *b == b'\n' {
                    if tail[start_of_line..i].starts_with(b"data:") {
                        count += 1;
                    }
                    start_of_line = i + 1;
                }
            }
            tail.drain(..start_of_line);
        }
        (count, start.elapsed())
    })
}
