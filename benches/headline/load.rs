//! The parts of the headline benchmark about a process and its load: spawn to the `initialize`
//! answer and the resident size after `session/new`; the `session/update` stream against the
//! fake model's own rate; a 20 MiB `write`; and many sessions each running a tool turn at once.
//!
//! It knows the scripted replies and what to read from `/proc`, not how figures are printed.

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::client::{Agent, Home, allow_once, cpu_time, is_update, status_bytes};
use crate::fake_model::{FakeModel, Reply, pieces, text_chunks, tool_call_chunks};
use crate::{Figure, Sizes, median, mib, ms};

/// How long after `session/new` answers the resident size is read: what the new session starts
/// in the background (its commands' list, the project's summary) has run by then.
const SETTLE: Duration = Duration::from_millis(100);
/// The `write` part's arguments come in fragments of this size, as providers stream a long
/// tool call's arguments.
const WRITE_FRAGMENT_BYTES: usize = 64 << 10;

/// Part `start`: spawn to the `initialize` answer, and VmRSS after `session/new`.
pub fn start_up(bin: &Path, sizes: &Sizes) -> Vec<Figure> {
    let home = Home::new();
    let fake = FakeModel::start(Vec::<Reply>::new());
    let (mut starts, mut rss, mut anon, mut file) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..sizes.runs {
        let start = Instant::now();
        let mut agent = Agent::spawn(&home, bin, Some(&fake));
        agent.initialize();
        starts.push(start.elapsed());
        agent.new_session(&home.project);
        std::thread::sleep(SETTLE);
        rss.push(status_bytes(agent.pid(), "VmRSS"));
        anon.push(status_bytes(agent.pid(), "RssAnon"));
        file.push(status_bytes(agent.pid(), "RssFile"));
    }
    vec![
        Figure::new("spawn -> `initialize` answer", "ms", "<= 5").of(ms(median(&starts))),
        Figure::new("VmRSS after `session/new`", "MiB", "<= 8").of(mib(median_f(&rss))),
        Figure::new("  of it anonymous (RssAnon): oml's own memory", "MiB", "")
            .of(mib(median_f(&anon))),
        Figure::new("  of it file pages (RssFile): the binary, libc", "MiB", "")
            .of(mib(median_f(&file))),
    ]
}

/// What one streamed answer gave: the model's deltas delivered a second, the fake model's own
/// events a second for the same reply, oml's CPU time per delta, and the updates that carried
/// them (oml merges the deltas queued together into one update).
struct Stream {
    rate: f64,
    model_rate: f64,
    cpu_per_delta: Duration,
    updates: usize,
}

/// Part `stream`: one reply of `sizes.deltas` one-character deltas; the characters of the
/// `agent_message_chunk` updates (one a delta) counted from the prompt to its response, against
/// a bare client's rate for the same reply in the same run.
pub fn stream(bin: &Path, sizes: &Sizes) -> Vec<Figure> {
    let home = Home::new();
    let runs: Vec<Stream> = (0..sizes.stream_runs)
        .map(|_| one_stream(&home, bin, sizes.deltas))
        .collect();
    let pick = |f: fn(&Stream) -> f64| median_f(&runs.iter().map(f).collect::<Vec<_>>());
    vec![
        Figure::new("fake model alone: SSE events/s", "/s", "").of(pick(|s| s.model_rate)),
        Figure::new("deltas -> `session/update`: deltas delivered/s", "/s", "")
            .of(pick(|s| s.rate)),
        Figure::new("  against the model's rate", "x", ">= 0.8")
            .of(pick(|s| s.rate / s.model_rate)),
        Figure::new("  oml's CPU time per delta", "us", "<= 2")
            .of(pick(|s| s.cpu_per_delta.as_secs_f64() * 1e6)),
        Figure::new("  updates that carried them", "", "").of(pick(|s| s.updates as f64)),
    ]
}

fn one_stream(home: &Home, bin: &Path, deltas: usize) -> Stream {
    let reply = Reply::from(text_chunks(&vec!["x"; deltas]));
    let fake = FakeModel::start([reply.clone(), reply]);
    let (events, served) = crate::bare::fetch(&fake.base_url(), 1);
    let mut agent = Agent::spawn(home, bin, Some(&fake));
    agent.initialize();
    let sid = agent.new_session(&home.project);
    let cpu_before = cpu_time(agent.pid());
    let start = Instant::now();
    let id = agent.prompt(&sid, "stream");
    let (mut n, mut updates) = (0usize, 0usize);
    loop {
        let line = agent.line();
        if is_update(&line) {
            if line.contains(r#""sessionUpdate":"agent_message_chunk""#) {
                let v: Value = serde_json::from_str(&line).expect("a JSON line");
                let text = v["params"]["update"]["content"]["text"]
                    .as_str()
                    .unwrap_or("");
                n += text.chars().count();
                updates += 1;
            }
            continue;
        }
        let v: Value = serde_json::from_str(&line).expect("a JSON line");
        if v["id"] == json!(id) && v.get("method").is_none() {
            assert_eq!(v["result"]["stopReason"], "end_turn", "{v}");
            break;
        }
    }
    let took = start.elapsed();
    let cpu = cpu_time(agent.pid()).saturating_sub(cpu_before);
    Stream {
        rate: n as f64 / took.as_secs_f64(),
        model_rate: events as f64 / served.as_secs_f64(),
        cpu_per_delta: cpu / u32::try_from(n.max(1)).expect("a count"),
        updates,
    }
}

/// Part `write`: a `write` of `sizes.write_bytes` asked and allowed in a new process; its peak
/// resident size (VmHWM) over the content's size, and its growth over VmRSS before the prompt.
pub fn big_write(bin: &Path, sizes: &Sizes) -> Vec<Figure> {
    let home = Home::new();
    let content = "y".repeat(sizes.write_bytes);
    let args = json!({"path": "big.txt", "content": content}).to_string();
    drop(content);
    let fragments = pieces(&args, WRITE_FRAGMENT_BYTES);
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks("call_w", "write", &fragments)),
        Reply::from(text_chunks(&["written"])),
    ]);
    drop(args);
    let mut agent = Agent::spawn(&home, bin, Some(&fake));
    agent.initialize();
    let sid = agent.new_session(&home.project);
    std::thread::sleep(SETTLE);
    let before = status_bytes(agent.pid(), "VmRSS");
    let id = agent.prompt(&sid, "write the big file");
    let r = agent.until_response(id);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    let peak = status_bytes(agent.pid(), "VmHWM");
    let written = std::fs::metadata(home.project.join("big.txt")).expect("big.txt is written");
    assert_eq!(written.len() as usize, sizes.write_bytes);
    let size = sizes.write_bytes as f64;
    vec![
        Figure::new(
            leak(format!(
                "{:.0} MiB `write` (ACP, allowed): VmHWM",
                mib(size)
            )),
            "MiB",
            "",
        )
        .of(mib(peak)),
        Figure::new("  VmHWM / size", "x", "<= 3").of(peak / size),
        Figure::new("  (VmHWM - VmRSS before) / size", "x", "").of((peak - before) / size),
    ]
}

/// Part `sessions`: `sizes.sessions` sessions in one process, each prompted at once into a tool
/// turn; wall time from the first prompt to the last answer, and the resident sizes after.
/// Every command must succeed.
pub fn sessions(bin: &Path, sizes: &Sizes) -> Vec<Figure> {
    let home = Home::new();
    let fake = FakeModel::start(Vec::<Reply>::new());
    let mut agent = Agent::spawn(&home, bin, Some(&fake));
    agent.initialize();
    let sids: Vec<String> = (0..sizes.sessions)
        .map(|_| agent.new_session(&home.project))
        .collect();
    let start = Instant::now();
    concurrent_tool_turns(&mut agent, &fake, &sids);
    let wall = start.elapsed();
    std::thread::sleep(SETTLE);
    let n = sizes.sessions;
    vec![
        Figure::new(
            leak(format!("{n} sessions, a tool turn each at once: wall")),
            "ms",
            "",
        )
        .of(ms(wall)),
        Figure::new("  VmRSS after", "MiB", "").of(mib(status_bytes(agent.pid(), "VmRSS"))),
        Figure::new("  VmHWM", "MiB", "").of(mib(status_bytes(agent.pid(), "VmHWM"))),
    ]
}

/// Prompt every session in `sids` into a `bash` turn at once and see every turn end with
/// `end_turn`. The model's first replies are all tool calls; the answers are queued only once
/// every session has asked its permission question, so each session gets exactly one tool call
/// and one answer, and all the commands start together when the questions are answered.
pub fn concurrent_tool_turns(agent: &mut Agent, fake: &FakeModel, sids: &[String]) {
    let args = json!({ "command": "echo hi" }).to_string();
    for _ in sids {
        fake.push(Reply::from(tool_call_chunks("call_1", "bash", &[&args])));
    }
    let mut prompts: HashSet<u64> = sids.iter().map(|sid| agent.prompt(sid, "run")).collect();
    let (mut questions, mut failed) = (Vec::new(), 0);
    while questions.len() < sids.len() {
        let v = next_message(agent, &mut failed);
        if v["method"] == "session/request_permission" {
            questions.push(v["id"].clone());
        } else {
            panic!("a turn ended before its question: {v}");
        }
    }
    for _ in sids {
        push_answer(fake);
    }
    for q in &questions {
        agent.answer(q, allow_once());
    }
    while !prompts.is_empty() {
        let v = next_message(agent, &mut failed);
        let id = v["id"].as_u64().expect("a response");
        assert!(prompts.remove(&id), "an unexpected message: {v}");
        assert_eq!(v["result"]["stopReason"], "end_turn", "{v}");
    }
    assert_eq!(failed, 0, "tool calls failed");
}

fn push_answer(fake: &FakeModel) {
    fake.push(Reply::from(text_chunks(&["done"])));
}

/// The next message that is not a `session/update`, parsed; counts the failed tool calls'
/// updates on the way in `failed`.
fn next_message(agent: &mut Agent, failed: &mut usize) -> Value {
    loop {
        let line = agent.line();
        if !is_update(&line) {
            return serde_json::from_str(&line).expect("a JSON line");
        }
        *failed += usize::from(line.contains(r#""status":"failed""#));
    }
}

/// A figure's name made at run time, kept for the rest of the run.
fn leak(name: String) -> &'static str {
    Box::leak(name.into_boxed_str())
}

fn median_f(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}
