//! The parts of the headline benchmark about one tool turn: a full ACP turn whose `bash`
//! command (`echo hi`) runs through the default sandbox after its permission is asked and
//! allowed, less the fake model's own time for the same two replies; and the same turn in print
//! mode as a whole process.
//!
//! It knows the scripted replies and what to time, not how the figures are printed.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::client::{Agent, Home, allow_once, is_update};
use crate::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};
use crate::{Figure, Sizes, median, ms};

/// The prompt of every tool turn; the fake model answers it with the `bash` call below.
const PROMPT: &str = "run echo hi";
/// The command of every tool turn.
const COMMAND: &str = "echo hi";
/// Turns run before the measured ones, so that caches (the page cache, the compiled Landlock
/// ruleset, the HTTP client) are warm.
const WARM_UP_TURNS: usize = 2;

/// Queue one tool turn's two replies: the `bash` call, then a short answer.
pub fn push_echo_turn(fake: &FakeModel) {
    let args = json!({ "command": COMMAND }).to_string();
    fake.push(Reply::from(tool_call_chunks("call_1", "bash", &[&args])));
    fake.push(Reply::from(text_chunks(&["It ", "printed ", "hi."])));
}

/// What one ACP turn took: the whole turn, and the command from the permission's answer to its
/// card's `completed` update.
struct TurnTimes {
    turn: Duration,
    command: Duration,
}

/// Part `turn`: the ACP turn, in a new session each run, against the model's own time.
pub fn acp_turn(bin: &Path, sizes: &Sizes) -> Vec<Figure> {
    let home = Home::new();
    let fake = FakeModel::start(Vec::<Reply>::new());
    let mut agent = Agent::spawn(&home, bin, Some(&fake));
    agent.initialize();
    let (mut turns, mut commands) = (Vec::new(), Vec::new());
    for run in 0..WARM_UP_TURNS + sizes.runs {
        let sid = agent.new_session(&home.project);
        push_echo_turn(&fake);
        let t = one_acp_turn(&mut agent, &sid);
        if run >= WARM_UP_TURNS {
            turns.push(t.turn);
            commands.push(t.command);
        }
    }
    drop(agent);
    let model = model_time(&fake, sizes.runs);
    let turn = median(&turns);
    vec![
        Figure::new(
            "ACP turn, bash `echo hi` asked+allowed, minus the model",
            "ms",
            "<= 5",
        )
        .of(ms(turn.saturating_sub(model))),
        Figure::new("  the whole turn", "ms", "").of(ms(turn)),
        Figure::new("  the fake model's own time (2 replies)", "ms", "").of(ms(model)),
        Figure::new(
            "  `echo hi`: permission answer -> card completed",
            "ms",
            "<= 3",
        )
        .of(ms(median(&commands))),
    ]
}

/// One prompt in `sid`: answers the permission question at once and times the command from that
/// answer to its card's completion, and the whole turn from the prompt to its response.
fn one_acp_turn(agent: &mut Agent, sid: &str) -> TurnTimes {
    let start = Instant::now();
    let id = agent.prompt(sid, PROMPT);
    let (mut answered, mut completed) = (None, None);
    loop {
        let line = agent.line();
        if is_update(&line) {
            let done = line.contains(r#""sessionUpdate":"tool_call_update""#)
                && line.contains(r#""status":"completed""#);
            if done && answered.is_some() && completed.is_none() {
                completed = Some(Instant::now());
            }
            continue;
        }
        let v: Value = serde_json::from_str(&line).expect("a JSON line");
        if v["method"] == "session/request_permission" {
            agent.answer(&v["id"], allow_once());
            answered = Some(Instant::now());
        } else if v["id"] == json!(id) && v.get("method").is_none() {
            assert_eq!(v["result"]["stopReason"], "end_turn", "{v}");
            break;
        }
    }
    let turn = start.elapsed();
    let (Some(answered), Some(completed)) = (answered, completed) else {
        panic!("the command was not asked for, or did not complete (asked: {answered:?})");
    };
    TurnTimes {
        turn,
        command: completed.duration_since(answered),
    }
}

/// The fake model's own time for one tool turn's two replies, fetched one after the other by a
/// bare HTTP client (the same HTTP stack as oml's): the median of `runs`.
pub fn model_time(fake: &FakeModel, runs: usize) -> Duration {
    let times: Vec<Duration> = (0..runs)
        .map(|_| {
            push_echo_turn(fake);
            crate::bare::fetch(&fake.base_url(), 2).1
        })
        .collect();
    median(&times)
}

/// Part `print`: `oml -p` with the same tool turn, as a whole process, spawn to exit. Print
/// mode's default permission mode runs a confined command without asking.
pub fn print_turn(bin: &Path, sizes: &Sizes) -> Vec<Figure> {
    let home = Home::new();
    let fake = FakeModel::start(Vec::<Reply>::new());
    let mut times = Vec::new();
    for run in 0..WARM_UP_TURNS + sizes.runs {
        push_echo_turn(&fake);
        let start = Instant::now();
        let status = home
            .command(bin, &["-p", PROMPT], Some(&fake))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("run oml -p");
        let took = start.elapsed();
        assert!(status.success(), "oml -p: {status:?}");
        if run >= WARM_UP_TURNS {
            times.push(took);
        }
    }
    let last = fake.requests().pop().expect("a request").body;
    let result = last["messages"]
        .as_array()
        .and_then(|m| m.last())
        .expect("messages");
    assert_eq!(
        result["role"], "tool",
        "the command's result went back: {result}"
    );
    vec![Figure::new("`oml -p` with the same turn, whole process", "ms", "").of(ms(median(&times)))]
}
