//! What a large file costs in memory: a 20 MB `write` through print mode, against the real binary
//! and the fake model, measured as the process's peak resident size (`wait4`'s `ru_maxrss`)
//! above a trivial prompt's in the same test.
//!
//! The content passes through the model's answer, the Lisp loop, the session file and the next
//! request; each holds it at some point, and the bound says that they do not hold it all at
//! once (ARCHITECTURE.md, "Large values").

mod support;

use std::os::unix::process::ExitStatusExt as _;
use std::process::{ExitStatus, Stdio};

use serde_json::json;
use support::fake_model::{FakeModel, Reply, pieces, text_chunks, tool_call_chunks};
use support::home::Env;

/// The size of the file the model writes.
const CONTENT_BYTES: usize = 20 << 20;
/// The most the peak resident size may grow by, as a multiple of the content.
const MAX_GROWTH_FACTOR: usize = 4;
/// How long one run may take before it is killed.
const RUN_DEADLINE: std::time::Duration = std::time::Duration::from_secs(120);

/// Run `oml ARGS…` against `fake` to its end: its status and peak resident size in bytes.
#[expect(
    clippy::zombie_processes,
    reason = "wait4 reaps the child, for its rusage"
)]
fn peak_of(env: &Env, fake: &FakeModel, args: &[&str]) -> (ExitStatus, usize) {
    let child = env
        .command(Some(fake), args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn oml");
    let pid = i32::try_from(child.id()).expect("a pid");
    // A run that hangs is killed at the deadline (and then fails the test): the child is not
    // reaped before wait4 returns, so its pid is still its own when the watchdog fires.
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if finished.recv_timeout(RUN_DEADLINE).is_err() {
            // SAFETY: kill with a pid of our own unreaped child and a valid signal.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    });
    let mut status = 0;
    // SAFETY: rusage is plain data that wait4 fills in; an all-zero value is a valid one.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child, with pointers to two live locals.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "wait4: {}", std::io::Error::last_os_error());
    let _ = done.send(());
    watchdog.join().expect("the watchdog ends");
    // ru_maxrss is in kilobytes on Linux.
    let peak = usize::try_from(usage.ru_maxrss).expect("a size") * 1024;
    (ExitStatus::from_raw(status), peak)
}

#[test]
fn a_20_mb_write_keeps_the_peak_resident_size_within_a_small_multiple_of_the_file() {
    let env = Env::new();
    let trivial = FakeModel::start([Reply::Stream(text_chunks(&["ok"]))]);
    let (status, baseline) = peak_of(&env, &trivial, &["-p", "hello"]);
    assert!(status.success(), "the trivial prompt: {status:?}");

    let content = "y".repeat(CONTENT_BYTES);
    let arguments = json!({"path": "big.txt", "content": content}).to_string();
    // The arguments arrive in 64 KiB fragments, as a provider streams them.
    let fragments = pieces(&arguments, 64 << 10);
    let fake = FakeModel::start([
        Reply::Stream(tool_call_chunks("call_w", "write", &fragments)),
        Reply::Stream(text_chunks(&["written"])),
    ]);
    let (status, peak) = peak_of(&env, &fake, &["-p", "write the big file"]);
    assert!(status.success(), "the write: {status:?}");

    let written = std::fs::metadata(env.project.join("big.txt")).expect("big.txt is written");
    assert_eq!(written.len() as usize, CONTENT_BYTES);
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "the result went back to the model");
    let sent = requests[1].body["messages"].to_string();
    assert!(
        sent.len() > CONTENT_BYTES,
        "the second request carries the call"
    );

    let growth = peak.saturating_sub(baseline);
    let mb = |n: usize| n as f64 / f64::from(1 << 20);
    assert!(
        growth < MAX_GROWTH_FACTOR * CONTENT_BYTES,
        "peak {:.1} MB against {:.1} MB for a trivial prompt: {:.1} MB more for a {:.0} MB file \
         (the bound is {MAX_GROWTH_FACTOR}x)",
        mb(peak),
        mb(baseline),
        mb(growth),
        mb(CONTENT_BYTES),
    );
}
