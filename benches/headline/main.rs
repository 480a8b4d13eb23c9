//! The headline benchmark (`scripts/bench.sh`, or `cargo bench --bench headline`): the figures
//! of the path a user walks, measured on real processes, printed as one table. Each figure is
//! taken for this build's `oml` and, when `OML_BENCH_BIN=/path/to/oml` names a baseline binary,
//! for that one too, part by part in the same run, with the ratio current/baseline.
//!
//! The parts (`cargo bench --bench headline -- PART…` runs only those named):
//!
//! - `turn`: a full ACP turn in a new session whose `bash` call (`echo hi`) runs through the
//!   default sandbox after its permission is asked and allowed (`allow_once`), less the fake
//!   model's own time for the same two replies; and the command alone, from the answer to the
//!   card's `completed` update;
//! - `print`: the same turn in print mode (`oml -p`), spawn to exit;
//! - `confine`: a confined `true` through the `bash` tool's own host function, per command in
//!   one process, against `bash -c true` started directly (`confine.rs`);
//! - `start`: spawn to the `initialize` answer, and VmRSS after `session/new`;
//! - `stream`: one reply of `DELTAS` one-character deltas, delivered as `session/update`s: the
//!   deltas a second, against the fake model's own rate to a bare client, oml's CPU time per
//!   delta (utime + stime), and how many updates carried them (queued deltas are merged);
//! - `write`: a 20 MB `write` call, allowed: peak resident size (VmHWM) over the content's size;
//! - `sessions`: `SESSIONS` sessions in one process, each prompted into a `bash` turn at once:
//!   wall time and resident size;
//! - `protocols`: the `stream` reply through each wire protocol (`llm.api`), against the fake's
//!   own rate, with the time to the first token over the fake's (`protocols.rs`);
//! - `checkpoint`: what keeping files for `/rewind` costs a turn that writes a 100 KB file and
//!   one whose command changes a tracked file, and the store after 100 such turns
//!   (`checkpoint.rs`);
//! - `skills`: `session/new` to its `available_commands_update` with 200 skills and 100
//!   markdown commands in the project, against none (`skills.rs`);
//! - `glue`: a prompt by `oml ask` to a warm owner over the scripted agent's own turn, and
//!   `oml proxy`'s cost per turn and per message over the same agent asked directly
//!   (`glue.rs`);
//! - `wire`: the `turn` part's turn and the `stream` part's reply over ACP v1 on stdio, the v2
//!   draft on stdio and v1 over Streamable HTTP (`oml acp --listen`), in one run (`wire.rs`);
//! - `subagents`: a sub-agent's start over a plain tool call, a turn of one sub-agent against
//!   one of 8 in parallel, and the memory each takes (`subagents.rs`);
//! - `hooks`: a tool call with no hooks, with a Lisp pre- and post-hook, and with a command
//!   hook (`hooks.rs`).
//!
//! Every agent runs with a throw-away HOME and XDG folders, in a git-initialised project,
//! against the fake model of the tests over real TCP. Times are medians over `RUNS` runs
//! (`--runs N`; the stream over `STREAM_RUNS`). `OML_BENCH_CURRENT=/path` measures that binary
//! as the current one. Without `--bench` (`cargo test --benches`) every part runs once, small.
//!
//! It knows the table and the command line, not what each part measures.

#![allow(clippy::print_stdout, clippy::print_stderr)] // bench output

#[path = "../../tests/support/fake_model.rs"]
#[allow(dead_code)]
mod fake_model;

mod bare;
mod checkpoint;
mod client;
mod confine;
mod glue;
mod hooks;
mod load;
mod protocols;
mod skills;
mod subagents;
mod turn;
mod wire;

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Runs per timed figure, unless `--runs N`.
const RUNS: usize = 20;
/// Streamed replies per binary in the `stream` part (each is `DELTAS` deltas long).
const STREAM_RUNS: usize = 3;
/// The deltas of the `stream` part's one reply.
const DELTAS: usize = 50_000;
/// The content of the `write` part's call.
const WRITE_BYTES: usize = 20 << 20;
/// The sessions of the `sessions` part.
const SESSIONS: usize = 200;
/// The sizes of a quick run (`cargo test --benches`): enough to see every part work.
const QUICK: Sizes = Sizes {
    runs: 1,
    stream_runs: 1,
    deltas: 200,
    write_bytes: 1 << 20,
    sessions: 4,
};
const BYTES_PER_MIB: f64 = (1 << 20) as f64;

/// How much each part does.
pub struct Sizes {
    pub runs: usize,
    pub stream_runs: usize,
    pub deltas: usize,
    pub write_bytes: usize,
    pub sessions: usize,
}

/// One figure of the table for one binary.
pub struct Figure {
    pub name: &'static str,
    pub unit: &'static str,
    /// The target its issue sets, as text (`<= 5`), or empty.
    pub target: &'static str,
    pub value: f64,
}

impl Figure {
    pub fn new(name: &'static str, unit: &'static str, target: &'static str) -> Figure {
        Figure {
            name,
            unit,
            target,
            value: f64::NAN,
        }
    }

    pub fn of(self, value: f64) -> Figure {
        Figure { value, ..self }
    }
}

/// The median of `times` (the upper one of an even count); zero for none.
pub fn median(times: &[Duration]) -> Duration {
    let mut t = times.to_vec();
    t.sort();
    t.get(t.len() / 2).copied().unwrap_or_default()
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

pub fn mib(bytes: f64) -> f64 {
    bytes / BYTES_PER_MIB
}

type Part = fn(&Path, &Sizes) -> Vec<Figure>;

/// The parts in the order of the table.
const PARTS: &[(&str, Part)] = &[
    ("turn", turn::acp_turn),
    ("print", turn::print_turn),
    ("confine", confine::confine),
    ("start", load::start_up),
    ("stream", load::stream),
    ("write", load::big_write),
    ("sessions", load::sessions),
    ("protocols", protocols::protocols),
    ("checkpoint", checkpoint::checkpoint),
    ("skills", skills::skills),
    ("glue", glue::glue),
    ("wire", wire::wire),
    ("subagents", subagents::subagents),
    ("hooks", hooks::hooks),
];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = !args.iter().any(|a| a == "--bench");
    let mut sizes = if quick {
        QUICK
    } else {
        Sizes {
            runs: RUNS,
            stream_runs: STREAM_RUNS,
            deltas: DELTAS,
            write_bytes: WRITE_BYTES,
            sessions: SESSIONS,
        }
    };
    if let Some(n) = args.iter().position(|a| a == "--runs") {
        sizes.runs = args
            .get(n + 1)
            .and_then(|v| v.parse().ok())
            .expect("--runs N");
    }
    let only: Vec<&String> = args
        .iter()
        .filter(|a| !a.starts_with("--") && a.parse::<usize>().is_err())
        .collect();
    let current = std::env::var_os("OML_BENCH_CURRENT")
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_oml")), PathBuf::from);
    let baseline = std::env::var_os("OML_BENCH_BIN").map(PathBuf::from);
    let load_before = load_average();
    let mut rows = Vec::new();
    for (name, part) in PARTS {
        if !only.is_empty() && !only.iter().any(|o| o == name) {
            continue;
        }
        eprintln!("headline: {name}…");
        let now = part(&current, &sizes);
        let base = baseline.as_deref().map(|b| part(b, &sizes));
        rows.push((now, base));
    }
    print_table(&current, baseline.as_deref(), &rows, &sizes);
    println!(
        "load average (1 min) before {load_before}, after {}; rerun if a build ran meanwhile",
        load_average()
    );
}

/// The table: a row per figure, the current and baseline values and their ratio, the target.
fn print_table(
    current: &Path,
    baseline: Option<&Path>,
    rows: &[(Vec<Figure>, Option<Vec<Figure>>)],
    sizes: &Sizes,
) {
    println!("current:  {}", current.display());
    if let Some(b) = baseline {
        println!("baseline: {}", b.display());
    }
    println!(
        "medians of {} runs (stream: {}); ratio = current / baseline",
        sizes.runs, sizes.stream_runs
    );
    println!();
    println!(
        "| {:<58} | {:>4} | {:>10} | {:>10} | {:>6} | {:>7} |",
        "figure", "unit", "current", "baseline", "ratio", "target"
    );
    println!(
        "|{:-<60}|{:-<6}|{:-<12}|{:-<12}|{:-<8}|{:-<9}|",
        "", "", "", "", "", ""
    );
    for (now, base) in rows {
        for (i, f) in now.iter().enumerate() {
            let b = base.as_ref().map(|b| b[i].value);
            let ratio = b.map_or(String::new(), |b| format!("{:.2}", f.value / b));
            let b = b.map_or(String::new(), show);
            println!(
                "| {:<58} | {:>4} | {:>10} | {:>10} | {:>6} | {:>7} |",
                f.name,
                f.unit,
                show(f.value),
                b,
                ratio,
                f.target
            );
        }
    }
}

/// A value with as many decimals as its size calls for.
fn show(v: f64) -> String {
    match v.abs() {
        a if a >= 1000.0 => format!("{v:.0}"),
        a if a >= 10.0 => format!("{v:.1}"),
        _ => format!("{v:.2}"),
    }
}

/// The first field of `/proc/loadavg`.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .next()
        .unwrap_or("?")
        .to_owned()
}
