//! What the command sandbox adds to starting a command (run with `cargo bench --bench sandbox`):
//! `bash -c true` spawned and waited for, in one run,
//!
//! - `plain`: as `bash` ran before the sandbox (own process group, stdin from `/dev/null`);
//! - `unconfined`: `sandbox.mode :off` (`setsid`, PDEATHSIG, the watcher);
//! - `workspace_write`: the default sandbox, the Landlock ruleset built for each command as the
//!   tools do (`sandbox::prepare`), network off;
//! - `prepare_again`, `prepare_new`: `sandbox::prepare` alone, for a policy it has just seen
//!   (the ruleset is reused) and for a new one (the ruleset is built).
//!
//! Measured 2026-12-01 on the shared 2-core build machine (release, Linux 6.18, Landlock ABI 7,
//! load average about 2.5 from other builds), fastest / median of 200: `plain` 1.57 / 1.90 ms,
//! `unconfined` 1.82 / 2.75 ms, `workspace_write` 1.98 / 3.05 ms; `prepare_new` 0.15 / 0.20 ms,
//! `prepare_again` 0.2 µs. So the sandbox adds 0.4 ms to a command on an idle core and about
//! 1.2 ms at the median here: the watcher is one more process to fork and schedule, and the
//! spawn returns only once it has closed its copy of the exec-status pipe.

#![allow(clippy::print_stdout, clippy::print_stderr)] // bench output

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use oml::sandbox::{self, Mode, Policy, Prepared};

fn main() {
    divan::main();
}

fn bash_true() -> Command {
    let mut cmd = Command::new("bash");
    cmd.args(["-c", "true"]).stdin(Stdio::null());
    cmd
}

fn run(mut cmd: Command) {
    let status = cmd.status().expect("run bash");
    assert!(status.success());
}

fn policy() -> Policy {
    Policy {
        mode: Mode::WorkspaceWrite,
        writable: vec![
            std::env::temp_dir(),
            PathBuf::from(env!("CARGO_MANIFEST_DIR")),
        ],
        network: false,
        protected: Vec::new(),
        guarded: Vec::new(),
        deny_read: Vec::new(),
        domains: None,
    }
}

#[divan::bench(sample_count = 200)]
fn plain() {
    let mut cmd = bash_true();
    cmd.process_group(0);
    run(cmd);
}

#[divan::bench(sample_count = 200)]
fn unconfined() {
    let mut cmd = bash_true();
    Prepared::unconfined().confine(&mut cmd).expect("confine");
    run(cmd);
}

#[divan::bench(sample_count = 200)]
fn workspace_write() {
    let mut cmd = bash_true();
    sandbox::prepare(&policy())
        .confine(&mut cmd)
        .expect("Landlock is available");
    run(cmd);
}

/// `sandbox::prepare` for a policy seen just before (the ruleset is reused).
#[divan::bench(sample_count = 200)]
fn prepare_again() -> Prepared {
    sandbox::prepare(&policy())
}

/// `sandbox::prepare` building the ruleset: two policies in turn, so that none is reused.
#[divan::bench(sample_count = 200)]
fn prepare_new(bencher: divan::Bencher) {
    let mut network = false;
    bencher.bench_local(|| {
        network = !network;
        sandbox::prepare(&Policy {
            network,
            ..policy()
        })
    });
}
