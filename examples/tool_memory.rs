//! Peak memory of the file tools on large files, from `/proc/self/status` (`VmHWM`).
//!
//! `cargo run --release --example tool_memory`. It creates a 50 MB and a 10 MB file in a
//! temporary directory, then reports how much each step raised the process's peak resident
//! memory: a `read` window in the middle of the 50 MB file (should be a few hundred KB, not
//! 50 MB), an `edit` of the 10 MB file (the old and the new text, about 2 x 10 MB), and, last
//! because the peak only grows, a naive whole-file read for comparison. Reports go to stderr.

#![allow(clippy::print_stdout, clippy::print_stderr)] // test and tool output

use std::time::Instant;

use oml::tools::{self, Edit, ReadLimits};

#[path = "../benches/support/fixtures.rs"]
mod fixtures;
use fixtures::numbered_file;

fn status_kb(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Run `step`, report its time and how far it raised the peak resident memory.
fn measure<T>(what: &str, step: impl FnOnce() -> T) -> T {
    let before = status_kb("VmHWM:");
    let started = Instant::now();
    let result = step();
    let elapsed = started.elapsed();
    let after = status_kb("VmHWM:");
    eprintln!(
        "{what}: {:.1} ms, peak RSS {before} kB -> {after} kB (+{} kB)",
        elapsed.as_secs_f64() * 1000.0,
        after.saturating_sub(before)
    );
    result
}

fn main() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let big = dir.path().join("50mb.txt");
    let lines = numbered_file(&big, 50 * 1024 * 1024);
    let medium = dir.path().join("10mb.txt");
    let medium_lines = numbered_file(&medium, 10 * 1024 * 1024);
    eprintln!("fixtures: 50 MB ({lines} lines), 10 MB ({medium_lines} lines)");

    let middle = i64::try_from(lines / 2).unwrap_or(i64::MAX);
    let out = measure("read 2000-line window in the middle of 50 MB", || {
        tools::read(&big, Some(middle), None, &ReadLimits::default())
    });
    eprintln!("  -> {} characters returned", out.content.chars().count());

    let target = format!("line {:>9}: the quick", medium_lines / 2);
    let edits = [Edit {
        old_text: target.clone(),
        new_text: target.replace("quick", "QUICK"),
    }];
    let out = measure("edit one line in the middle of 10 MB", || {
        tools::edit(&medium, &edits)
    });
    assert!(!out.is_error, "{}", out.content);

    measure("for comparison: read_to_string of the 50 MB file", || {
        std::fs::read_to_string(&big).map(|text| text.lines().count())
    })
    .ok();
}
