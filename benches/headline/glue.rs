//! The glue layer's figures: a prompt by `oml ask` to a warm session owner against the agent's
//! own turn, and `oml proxy`'s cost per turn and per message against the same agent talked to
//! directly. The agent is the scripted `oml-fake-agent` (its `ok` mode answers a prompt with
//! three chunks; `flood N` with N), so what is measured is oml's part alone.
//!
//! A binary without `oml ask` (a baseline from before it) gets no figures here.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::client::{Agent, Home};
use crate::{Figure, Sizes, median, ms};

const FAKE: &str = env!("CARGO_BIN_EXE_oml-fake-agent");
/// The updates of the per-message figure's one turn (a quick run: a hundredth).
const FLOOD: usize = 20_000;

pub fn glue(bin: &Path, sizes: &Sizes) -> Vec<Figure> {
    let figures = [
        Figure::new("oml ask, warm owner: the process, spawn to exit", "ms", ""),
        Figure::new("the agent's own turn, asked directly", "ms", ""),
        Figure::new("oml ask over the agent's own turn", "ms", "<= 5"),
        Figure::new("oml proxy: a turn, over the agent's own", "ms", ""),
        Figure::new("oml proxy: per proxied message", "us", "<= 100"),
    ];
    let has_ask = std::process::Command::new(bin)
        .args(["ask", "--help"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_ask {
        return figures.into();
    }
    let home = Home::new();
    let turns = sizes.runs.max(3);
    let direct = turns_of(
        Agent::over(home.command(Path::new(FAKE), &["ok"], None)),
        &home,
        turns,
        "hi",
    );
    let asked = warm_asks(bin, &home, turns);
    let proxied = turns_of(
        Agent::over(home.command(bin, &["proxy", "--", FAKE, "ok"], None)),
        &home,
        turns,
        "hi",
    );
    let flood = if sizes.runs <= 1 { FLOOD / 100 } else { FLOOD };
    let flood_arg = flood.to_string();
    let flood_direct = turns_of(
        Agent::over(home.command(Path::new(FAKE), &["flood", &flood_arg], None)),
        &home,
        3,
        "go",
    );
    let flood_proxied = turns_of(
        Agent::over(home.command(bin, &["proxy", "--", FAKE, "flood", &flood_arg], None)),
        &home,
        3,
        "go",
    );
    let per_message = flood_proxied.saturating_sub(flood_direct).as_secs_f64() * 1e6 / flood as f64;
    let [a, b, c, d, e] = figures;
    vec![
        a.of(ms(asked)),
        b.of(ms(direct)),
        c.of(ms(asked) - ms(direct)),
        d.of(ms(proxied) - ms(direct)),
        e.of(per_message),
    ]
}

/// The median time of `n` prompt turns (`text`) in one session of `agent`, answer to answer.
fn turns_of(mut agent: Agent, home: &Home, n: usize, text: &str) -> Duration {
    agent.initialize();
    let sid = agent.new_session(&home.project);
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        let id = agent.prompt(&sid, text);
        agent.until_response(id);
        times.push(start.elapsed());
    }
    median(&times)
}

/// The median wall time of `n` `oml ask` processes to an owner started before them.
fn warm_asks(bin: &Path, home: &Home, n: usize) -> Duration {
    let agent = format!("{FAKE} ok");
    let ask = |words: &[&str]| {
        let out = home
            .command(bin, &["ask", "--agent", &agent, "--ttl", "120"], None)
            .args(words)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run oml ask");
        assert!(out.status.success(), "oml ask {words:?}: {out:?}");
    };
    ask(&["hi"]);
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        ask(&["--quiet", "hi"]);
        times.push(start.elapsed());
    }
    ask(&["sessions", "close"]);
    median(&times)
}
