//! How `oml compare` shows its outcomes: a table for a person (agent, stop reason, time, tokens,
//! cost, what changed; then the kept worktrees), or with `--json` one JSON array of one object
//! per agent. What the agents said of themselves (their names come from the command line, their
//! errors from them) goes through [`crate::printable`] in the table.

use serde_json::{Value, json};

use super::Outcome;
use crate::acp::answers::Usage;
use crate::front::stdio::out;
use crate::printable::printable;

/// Which of the two.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    Text,
    Json,
}

/// Prints every outcome.
pub fn print(outcomes: &[Outcome], output: Output) {
    match output {
        Output::Json => out!("{}", Value::Array(outcomes.iter().map(object).collect())),
        Output::Text => table(outcomes),
    }
}

/// One agent's object: `agent`, `stop_reason` (null when it failed, with `error`),
/// `duration_ms`, `usage` (null when none was reported), `worktree`, `branch`, `diffstat`.
fn object(o: &Outcome) -> Value {
    let mut v = json!({
        "agent": o.agent,
        "stop_reason": o.stop_reason.as_ref().map(|r| r.wire().to_owned()),
        "duration_ms": o.duration_ms as u64,
        "usage": o.usage.as_ref().map(usage_object),
        "worktree": o.worktree.path.display().to_string(),
        "branch": o.worktree.branch,
        "diffstat": o.diffstat.as_deref().ok(),
    });
    if let Some(e) = &o.error {
        v["error"] = json!(e);
    }
    if let Err(e) = &o.diffstat {
        v["diffstat_error"] = json!(e.to_string());
    }
    v
}

fn usage_object(u: &Usage) -> Value {
    json!({
        "used": u.used.get(),
        "size": u.size.get(),
        "cost": u.cost.get().map(|c| json!({"amount": c.amount, "currency": c.currency})),
    })
}

fn table(outcomes: &[Outcome]) {
    let head = ["agent", "stop", "time", "tokens", "cost", "changed"].map(str::to_owned);
    let rows: Vec<[String; 6]> = outcomes.iter().map(row).collect();
    let widths: Vec<usize> = (0..head.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([head[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String; 6]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        padded.join("  ").trim_end().to_owned()
    };
    out!("{}", line(&head));
    for r in &rows {
        out!("{}", line(r));
    }
    for o in outcomes {
        if let Some(e) = &o.error {
            out!("{}: {}", printable(&o.agent), printable(e));
        }
    }
    out!("");
    out!("The worktrees are kept for you to inspect and merge (/worktrees in oml, or git):");
    for o in outcomes {
        out!(
            "  {}  {}  {}",
            printable(&o.agent),
            o.worktree.branch,
            o.worktree.path.display()
        );
    }
}

fn row(o: &Outcome) -> [String; 6] {
    let none = || "-".to_owned();
    let usage = o.usage.as_ref();
    [
        printable(&o.agent).into_owned(),
        o.stop_reason
            .as_ref()
            .map_or_else(|| "failed".to_owned(), |r| r.wire().to_owned()),
        format!("{:.1} s", o.duration_ms as f64 / 1000.0),
        usage
            .and_then(|u| u.used.get())
            .map_or_else(none, u64::to_string),
        usage.and_then(|u| u.cost.get()).map_or_else(none, |c| {
            format!("{:.4} {}", c.amount, printable(&c.currency))
        }),
        match &o.diffstat {
            Ok(stat) => changed(stat),
            Err(e) => format!("? ({})", printable(&e.to_string())),
        },
    ]
}

/// The summary line of a `--stat` ("2 files changed, 3 insertions(+)"), or "nothing".
fn changed(stat: &str) -> String {
    stat.lines()
        .last()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .unwrap_or("nothing")
        .to_owned()
}
