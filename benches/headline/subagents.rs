//! Part `subagents` of the headline benchmark: what a sub-agent (the `task` tool) costs. In one
//! `oml acp` session against the fake model:
//!
//! - the wall time of a turn that runs one sub-agent whose answer takes `CHILD_MS`, and of one
//!   that runs `PARALLEL` of them from one answer (`agent.max-parallel` = `PARALLEL`): what each
//!   further sub-agent adds, `(T8 - T1) / 7`, bounds what starting one costs (its session, prompt,
//!   tool list, model request and answer, all but the model's own wait);
//! - the span from the parent's model request to the sub-agent's first, beside the same span of
//!   a turn whose call is a plain `ls` (whose next request waits for the transcript to be kept);
//! - VmRSS before and after the first timed parallel turn, its growth per sub-agent.
//!
//! A binary without the `task` tool (an older baseline) gets no sub-agent figures. It knows the
//! fixtures, not the table.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::client::{Agent, Home, status_bytes};
use crate::fake_model::{FakeModel, Reply, Step, delta_chunk, text_chunks, tool_call_chunks};
use crate::{Figure, Sizes, median, mib, ms};

/// Sub-agents of the parallel turn.
const PARALLEL: usize = 8;
/// How long each sub-agent's model answer takes in the timed turns.
const CHILD_MS: u64 = 200;
/// Turns before the timed ones.
const WARM_UP: usize = 2;

/// One answer with `n` `task` calls to the built-in explore agent.
fn tasks(n: usize) -> Reply {
    let mut steps: Vec<Step> = (0..n)
        .map(|i| {
            let args = json!({"agent": "explore", "prompt": format!("look {i}")}).to_string();
            let call = json!({"index": i, "id": format!("call_{i}"), "type": "function",
                              "function": {"name": "task", "arguments": args}});
            Step::Chunk(delta_chunk(json!({"tool_calls": [call]}), None))
        })
        .collect();
    steps.push(Step::Chunk(delta_chunk(json!({}), Some("tool_calls"))));
    Reply::from(steps)
}

fn answer(after_ms: u64) -> Reply {
    let mut steps = vec![Step::Sleep(after_ms)];
    steps.extend(text_chunks(&["Found."]));
    Reply::from(steps)
}

/// Run one prompt; its wall time, and the requests it made of `fake`.
fn turn(agent: &mut Agent, sid: &str, fake: &FakeModel) -> (Duration, Vec<Instant>) {
    let before = fake.requests().len();
    let start = Instant::now();
    let id = agent.prompt(sid, "go");
    agent.until_response(id);
    let took = start.elapsed();
    let arrived = fake.requests()[before..]
        .iter()
        .map(|r| r.arrived)
        .collect();
    (took, arrived)
}

/// The span from a turn's first model request to its second.
fn first_gap(arrived: &[Instant]) -> Duration {
    match arrived {
        [a, b, ..] => b.duration_since(*a),
        _ => Duration::ZERO,
    }
}

/// Part `subagents`.
pub fn subagents(bin: &Path, sizes: &Sizes) -> Vec<Figure> {
    let home = Home::new();
    std::fs::write(
        home.root.join("config/oml/init.fnl"),
        format!("(pcall (fn [] (setq agent.max-parallel {PARALLEL})))\n"),
    )
    .expect("write init");
    let fake = FakeModel::start(Vec::<Reply>::new());
    let mut agent = Agent::spawn(&home, bin, Some(&fake));
    agent.initialize();
    let sid = agent.new_session(&home.project);
    let (mut plain, mut start, mut one, mut many) = (vec![], vec![], vec![], vec![]);
    let mut has_task = true;
    let (mut rss_before, mut rss_after) = (0.0, 0.0);
    for run in 0..WARM_UP + sizes.runs {
        let timed = run >= WARM_UP;
        let ls = json!({"path": "."}).to_string();
        fake.push(Reply::from(tool_call_chunks("call_ls", "ls", &[&ls])));
        fake.push(Reply::from(text_chunks(&["Listed."])));
        let (_, arrived) = turn(&mut agent, &sid, &fake);
        if timed {
            plain.push(first_gap(&arrived));
        }
        fake.push(tasks(1));
        fake.push(answer(0));
        fake.push(Reply::from(text_chunks(&["Done."])));
        let (_, arrived) = turn(&mut agent, &sid, &fake);
        // Without the tool the turn has two requests, and the third reply is left over.
        if arrived.len() < 3 {
            has_task = false;
            break;
        }
        if timed {
            start.push(first_gap(&arrived));
        }
        fake.push(tasks(1));
        fake.push(answer(CHILD_MS));
        fake.push(Reply::from(text_chunks(&["Done."])));
        let (took, _) = turn(&mut agent, &sid, &fake);
        if timed {
            one.push(took);
        }
        if run == WARM_UP {
            rss_before = status_bytes(agent.pid(), "VmRSS");
        }
        fake.push(tasks(PARALLEL));
        for _ in 0..PARALLEL {
            fake.push(answer(CHILD_MS));
        }
        fake.push(Reply::from(text_chunks(&["Done."])));
        let (took, _) = turn(&mut agent, &sid, &fake);
        if timed {
            many.push(took);
        }
        if run == WARM_UP {
            rss_after = status_bytes(agent.pid(), "VmRSS");
        }
    }
    let plain = median(&plain);
    let nan = |v: f64| if has_task { v } else { f64::NAN };
    let (one, many) = (median(&one), median(&many));
    vec![
        Figure::new("each further parallel sub-agent: (8 - 1) / 7", "ms", "<= 2").of(nan((ms(
            many,
        ) - ms(
            one,
        ))
            / (PARALLEL - 1) as f64)),
        Figure::new("turn with 1 sub-agent (its model: 200 ms)", "ms", "").of(nan(ms(one))),
        Figure::new("turn with 8 parallel sub-agents", "ms", "").of(nan(ms(many))),
        Figure::new("  8 parallel / 1", "x", "").of(nan(ms(many) / ms(one))),
        Figure::new("parent's request -> sub-agent's first request", "ms", "")
            .of(nan(ms(median(&start)))),
        Figure::new("  request -> next request, a plain `ls` call", "ms", "").of(ms(plain)),
        Figure::new(
            "VmRSS growth per sub-agent, first 8-agent turn",
            "MiB",
            "<= 1",
        )
        .of(nan(mib((rss_after - rss_before) / PARALLEL as f64))),
        Figure::new("  VmRSS before it", "MiB", "").of(mib(rss_before)),
        Figure::new("  VmRSS after it", "MiB", "").of(nan(mib(rss_after))),
    ]
}
