//! The part of the headline benchmark about one confined command alone: what running `true`
//! through the default sandbox costs (`oml.tool-bash`, the `bash` tool's own host function:
//! the sandbox prepared from the settings, the spawn helper's fork, the namespaces joined, the
//! mount view, Landlock, the system-call filter, the output read), against `bash -c true`
//! started directly. It is timed inside one `oml eval` process, as the difference between
//! `COMMANDS` commands and none, so start-up is not counted.
//!
//! It knows how to time it, not how the table is printed.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::client::Home;
use crate::{Figure, Sizes, median, ms};

/// Commands per timed process.
const COMMANDS: usize = 200;

/// Part `confine`.
pub fn confine(bin: &Path, sizes: &Sizes) -> Vec<Figure> {
    let home = Home::new();
    let commands = if sizes.runs > 1 { COMMANDS } else { 2 };
    let runs = sizes.runs.clamp(1, 5);
    let per = |n: usize| -> Duration {
        let times: Vec<Duration> = (0..runs).map(|_| eval_time(&home, bin, n)).collect();
        median(&times)
    };
    let (with, without) = (per(commands), per(0));
    let confined = with.saturating_sub(without) / commands as u32;
    let direct = bash_true(commands);
    vec![
        Figure::new("confined `true` (oml.tool-bash), per command", "ms", "").of(ms(confined)),
        Figure::new("  `bash -c true` started directly", "ms", "").of(ms(direct)),
        Figure::new("  what the sandbox adds", "ms", "<= 2.5").of(ms(confined) - ms(direct)),
    ]
}

/// How long one `oml eval` that runs `true` `n` times through the sandbox takes, in the
/// project of `home` (a git work tree).
fn eval_time(home: &Home, bin: &Path, n: usize) -> Duration {
    let form = format!("(for [i 1 {n}] (oml.tool-bash \"true\" 10 100))");
    let mut cmd = home.command(bin, &["eval", &form], None);
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    let start = Instant::now();
    let status = cmd.status().expect("run oml eval");
    assert!(status.success(), "oml eval failed: {status}");
    start.elapsed()
}

/// The median time of `bash -c true` started and waited for, over `n` runs.
fn bash_true(n: usize) -> Duration {
    let times: Vec<Duration> = (0..n)
        .map(|_| {
            let start = Instant::now();
            let status = std::process::Command::new("bash")
                .args(["-c", "true"])
                .stdin(Stdio::null())
                .status()
                .expect("run bash");
            assert!(status.success());
            start.elapsed()
        })
        .collect();
    median(&times)
}
