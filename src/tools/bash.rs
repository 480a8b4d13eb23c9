//! The `bash` tool: run one command with `bash -c` and return its merged output and outcome.
//!
//! How it runs: in the given working directory, in the sandbox the caller prepared
//! (`crate::sandbox`: a **new session**, so its own process group and no controlling terminal,
//! the whole tree killed at once on timeout and when oml ends; Landlock unless the sandbox is
//! off; secrets removed from the environment), with stdin from `/dev/null` (our stdin may be the
//! ACP stream) and
//! stdout and stderr both writing into **one pipe**, so the output interleaves exactly as the
//! command wrote it and never reaches our own stdout (the protocol stream). The pipe is read
//! while the command runs, so a chatty command never blocks, and only the tail that will be
//! returned is kept in memory ([`TailBuffer`]).
//!
//! How it ends (the original's results): exit 0 gives the right-trimmed output, or `(no output)`;
//! a non-zero exit gives the error `<output>\n[exit code N]` (a signal-killed command reports
//! 128 + the signal, as the JVM did); reaching `timeout` gives `<output>\n[command timed out
//! after Xs]`; a cancel gives `<output>\n[cancelled]`. Error text has its leading whitespace
//! trimmed. On timeout or cancel the process group gets SIGTERM and, [`BASH_KILL_GRACE`] later,
//! SIGKILL, so children and grandchildren die even if they ignore SIGTERM. If the future is
//! dropped mid-run, the group is killed too.
//!
//! After the command exits, background processes it started may still hold the pipe open; the
//! output is then collected for at most [`BASH_DRAIN_AFTER_EXIT`] and returned. Such processes
//! are left running (they were asked for), but lose their output pipe.
//!
//! While it runs, each chunk read from the pipe can also go to an optional [`Progress`] callback
//! (the chat's live output tail); what the callback does is not this module's concern.
//!
//! It deliberately does not know about permissions, sandbox policies or PTYs; a process that
//! calls `setsid` escapes the group kill. A sandbox that cannot be set up is an error result.
//!
//! Compare with pi: `packages/coding-agent/src/core/tools/bash.ts` (tail of 2000 lines / 50 KB,
//! process-tree kill on abort).
//! Compare with oml.clj: `oml.tools/bash`.

use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::time::Duration;

use rustix::process::{Pid, Signal};
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::time::Instant;

use super::truncate::TailBuffer;
use super::{ToolError, ToolOutput};
use crate::cancel::CancelToken;
use crate::sandbox::{Launch, LaunchError, Launched, Prepared};

/// After SIGTERM on timeout or cancel, how long the process group gets to exit before SIGKILL.
pub const BASH_KILL_GRACE: Duration = Duration::from_millis(200);

/// After the command exits (or is killed), how long to keep reading output from processes that
/// still hold the pipe open before returning what has arrived.
pub const BASH_DRAIN_AFTER_EXIT: Duration = Duration::from_millis(500);

/// Called with each chunk of output as the command writes it (raw bytes, possibly split inside
/// a UTF-8 sequence).
pub type Progress<'a> = &'a (dyn Fn(&[u8]) + Send + Sync);

/// Run `command` with `bash -c` in `cwd`, for at most `timeout`, returning at most the last
/// `max_chars` characters of its output; stop early, killing the process group, when `cancel`
/// fires.
///
/// Never panics; every failure (a blank command, a missing directory, a failed spawn, a non-zero
/// exit, a timeout, a cancel) is an error [`ToolOutput`].
///
/// The command is not confined ([`Prepared::unconfined`]: a new session, killed when oml ends);
/// [`bash_with_progress`] takes a sandbox.
pub async fn bash(
    command: &str,
    cwd: &Path,
    timeout: Duration,
    max_chars: usize,
    cancel: &CancelToken,
) -> ToolOutput {
    let sandbox = Prepared::unconfined();
    bash_with_progress(command, cwd, timeout, max_chars, cancel, None, sandbox).await
}

/// [`bash`] in `sandbox`, also giving each chunk of output to `progress` while the command runs.
/// A sandbox that is unavailable here is an error result; the command does not run.
pub async fn bash_with_progress(
    command: &str,
    cwd: &Path,
    timeout: Duration,
    max_chars: usize,
    cancel: &CancelToken,
    progress: Option<Progress<'_>>,
    sandbox: Prepared,
) -> ToolOutput {
    if command.trim().is_empty() {
        return ToolError::CommandRequired.into();
    }
    if !cwd.is_dir() {
        return ToolError::NoWorkingDirectory(cwd.to_path_buf()).into();
    }
    // What the domain proxy refuses while the command runs is said after its output.
    let proxy = sandbox.proxy().map(|proxy| (proxy.mark(), proxy));
    let mut out = match run(sandbox, command, cwd, timeout, max_chars, cancel, progress).await {
        Ok((end, output)) => finish(end, output, timeout),
        Err(LaunchError::Sandbox(e)) => ToolError::Sandbox(e).into(),
        Err(LaunchError::Io(error)) => ToolError::io("run bash in", cwd, error).into(),
        Err(LaunchError::Helper(error)) => {
            ToolError::io("run bash in", cwd, io::Error::other(error)).into()
        }
    };
    if let Some((mark, proxy)) = proxy {
        for line in proxy.refused_since(mark) {
            if !out.content.is_empty() && !out.content.ends_with('\n') {
                out.content.push('\n');
            }
            out.content.push_str(&line);
        }
    }
    out
}

// --- private helpers

/// Size of each read from the pipe.
const CHUNK_BYTES: usize = 64 * 1024;

/// How often the group is checked for survivors between SIGTERM and SIGKILL.
const KILL_POLL: Duration = Duration::from_millis(10);

/// How the command ended.
#[derive(Debug)]
enum End {
    Exited(ExitStatus),
    TimedOut,
    Cancelled,
}

/// How a command ended, wherever it ran (here, or in an ACP client's terminal).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CommandEnd {
    /// It exited with this code (128 + the signal when a signal killed it).
    Code(i32),
    /// A signal, named as the client reported it, ended it without an exit code.
    Signal(String),
    /// It ran past its timeout and was killed.
    TimedOut,
    /// The prompt was cancelled and it was killed.
    Cancelled,
}

/// The tool result for a command that ended as `end` after printing `output` (the original's
/// result texts; see the module doc).
pub fn outcome(end: CommandEnd, output: String, timeout: Duration) -> ToolOutput {
    let suffix = match &end {
        CommandEnd::Code(0) => {
            let text = if output.trim().is_empty() {
                "(no output)".to_owned()
            } else {
                output
            };
            return ToolOutput::ok(text).with_end(end);
        }
        CommandEnd::Code(code) => format!("[exit code {code}]"),
        CommandEnd::Signal(signal) => format!("[killed by {signal}]"),
        CommandEnd::TimedOut => format!("[command timed out after {}s]", timeout.as_secs_f64()),
        CommandEnd::Cancelled => "[cancelled]".to_owned(),
    };
    ToolOutput::error(format!("{output}\n{suffix}").trim_start()).with_end(end)
}

/// The original's result texts.
fn finish(end: End, output: String, timeout: Duration) -> ToolOutput {
    let end = match end {
        End::Exited(status) => CommandEnd::Code(exit_code(status)),
        End::TimedOut => CommandEnd::TimedOut,
        End::Cancelled => CommandEnd::Cancelled,
    };
    outcome(end, output, timeout)
}

/// The exit code, or 128 + the signal for a command killed by one (what the JVM reported).
fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .or_else(|| status.signal().map(|signal| 128 + signal))
        .unwrap_or(-1)
}

/// Run `command` with `bash -c` in `sandbox` (its `setsid` makes the process group).
async fn run(
    sandbox: Prepared,
    command: &str,
    cwd: &Path,
    timeout: Duration,
    max_chars: usize,
    cancel: &CancelToken,
    progress: Option<Progress<'_>>,
) -> Result<(End, String), LaunchError> {
    let (reader, writer) = io::pipe()?;
    let launch = Launch {
        program: "bash".into(),
        args: vec!["-c".into(), command.into()],
        cwd: cwd.to_path_buf(),
        stdout: OwnedFd::from(writer.try_clone()?),
        stderr: OwnedFd::from(writer),
    };
    // `launch` gives our copies of the pipe's write end away: once the command has started we
    // hold none, so the pipe reaches end-of-file as soon as the command's own processes have
    // closed theirs, instead of waiting out the drain.
    // Starting it counts against the timeout and yields to a cancel too (a helper that does not
    // answer holds up nothing; one that starts the command after all kills it, see
    // `sandbox::helper`).
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let mut child = tokio::select! {
        biased;
        () = cancel.cancelled() => return Ok((End::Cancelled, String::new())),
        () = &mut deadline => return Ok((End::TimedOut, String::new())),
        started = sandbox.launch(launch) => started?,
    };
    let group = GroupKiller::new(&child);
    let mut pipe = pipe::Receiver::from_owned_fd(OwnedFd::from(reader))?;
    let mut output = Output::new(max_chars, progress);

    let end = loop {
        tokio::select! {
            biased;
            () = cancel.cancelled() => break End::Cancelled,
            () = &mut deadline => break End::TimedOut,
            status = child.wait() => break End::Exited(status?),
            () = output.read(&mut pipe), if !output.eof => {}
        }
    };

    match end {
        End::Exited(_) => group.disarm(),
        End::TimedOut | End::Cancelled => group.kill(&mut child, &mut output, &mut pipe).await,
    }
    let drain = tokio::time::sleep(BASH_DRAIN_AFTER_EXIT);
    tokio::pin!(drain);
    while !output.eof {
        tokio::select! {
            () = &mut drain => break,
            () = output.read(&mut pipe) => {}
        }
    }
    Ok((end, output.tail.finish()))
}

/// The pipe's reading side state: the bounded tail, whether the pipe has closed, and who hears
/// of each chunk.
struct Output<'a> {
    tail: TailBuffer,
    chunk: Vec<u8>,
    eof: bool,
    progress: Option<Progress<'a>>,
}

impl<'a> Output<'a> {
    fn new(max_chars: usize, progress: Option<Progress<'a>>) -> Self {
        Self {
            tail: TailBuffer::new(max_chars),
            chunk: vec![0; CHUNK_BYTES],
            eof: false,
            progress,
        }
    }

    /// Read one chunk (cancel-safe: nothing is lost if the future is dropped while waiting).
    async fn read(&mut self, pipe: &mut pipe::Receiver) {
        match pipe.read(&mut self.chunk).await {
            Ok(0) => self.eof = true,
            Ok(n) => {
                self.tail.push_bytes(&self.chunk[..n]);
                if let Some(progress) = self.progress {
                    progress(&self.chunk[..n]);
                }
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            // A broken pipe cannot yield more output; treat it as closed.
            Err(_) => self.eof = true,
        }
    }
}

/// Kills the command's process group: on timeout or cancel, or when the future is dropped before
/// the command exits.
struct GroupKiller {
    /// The group id (the leader's pid); `None` once disarmed or when the pid was unknown.
    pgid: Option<libc::pid_t>,
}

impl GroupKiller {
    fn new(child: &Launched) -> Self {
        let pgid = child.id().and_then(|pid| libc::pid_t::try_from(pid).ok());
        Self { pgid }
    }

    /// The command exited by itself: leave what it left running alone.
    fn disarm(mut self) {
        self.pgid = None;
    }

    /// SIGTERM the group, keep reading output, and SIGKILL whatever is left after the grace.
    async fn kill(
        mut self,
        child: &mut Launched,
        output: &mut Output<'_>,
        pipe: &mut pipe::Receiver,
    ) {
        // `pgid` stays set until SIGKILL is sent, so dropping this future midway still kills.
        let Some(pgid) = self.pgid else {
            return;
        };
        signal_group(pgid, Signal::TERM);
        let grace = tokio::time::sleep(BASH_KILL_GRACE);
        tokio::pin!(grace);
        let mut poll = tokio::time::interval_at(Instant::now() + KILL_POLL, KILL_POLL);
        let mut leader_reaped = false;
        loop {
            tokio::select! {
                () = &mut grace => break,
                _ = poll.tick() => {
                    leader_reaped = leader_reaped || matches!(child.try_wait(), Ok(Some(_)));
                    if leader_reaped && !group_exists(pgid) {
                        self.pgid = None;
                        return;
                    }
                }
                () = output.read(pipe), if !output.eof => {}
            }
        }
        signal_group(pgid, Signal::KILL);
        self.pgid = None;
        // The leader cannot outlive SIGKILL; reap it so no zombie is left behind.
        let _ = tokio::time::timeout(BASH_KILL_GRACE, child.wait()).await;
    }
}

impl Drop for GroupKiller {
    fn drop(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            signal_group(pgid, Signal::KILL);
        }
    }
}

/// Send `signal` to every process in group `pgid`; a group that is already gone is fine.
fn signal_group(pgid: libc::pid_t, signal: Signal) {
    // `pgid` is the group made for the command (its leader's pid), positive by construction.
    if let Some(pid) = Pid::from_raw(pgid) {
        let _ = rustix::process::kill_process_group(pid, signal);
    }
}

/// Whether any process (zombies included) is still in group `pgid`.
fn group_exists(pgid: libc::pid_t) -> bool {
    // Signal 0 only checks for existence and permission.
    Pid::from_raw(pgid).is_some_and(|pid| {
        !matches!(
            rustix::process::test_kill_process_group(pid),
            Err(rustix::io::Errno::SRCH)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_print_like_the_original() {
        let cases = [
            (Duration::from_millis(500), "[command timed out after 0.5s]"),
            (Duration::from_secs(120), "[command timed out after 120s]"),
            (
                Duration::from_secs_f64(1.25),
                "[command timed out after 1.25s]",
            ),
        ];
        for (timeout, expected) in cases {
            let out = finish(End::TimedOut, String::new(), timeout);
            assert_eq!(
                out,
                ToolOutput::error(expected).with_end(CommandEnd::TimedOut)
            );
        }
    }

    #[test]
    fn results_follow_the_original_shapes() {
        let exited = |code: i32| End::Exited(ExitStatus::from_raw(code << 8));
        let cases = [
            (
                exited(0),
                "  out",
                ToolOutput::ok("  out").with_end(CommandEnd::Code(0)),
            ),
            (
                exited(0),
                "",
                ToolOutput::ok("(no output)").with_end(CommandEnd::Code(0)),
            ),
            (
                exited(3),
                "",
                ToolOutput::error("[exit code 3]").with_end(CommandEnd::Code(3)),
            ),
            (
                exited(1),
                "  oops",
                ToolOutput::error("oops\n[exit code 1]").with_end(CommandEnd::Code(1)),
            ),
            (
                End::Exited(ExitStatus::from_raw(9)),
                "",
                ToolOutput::error("[exit code 137]").with_end(CommandEnd::Code(137)),
            ),
            (
                End::Cancelled,
                "partial",
                ToolOutput::error("partial\n[cancelled]").with_end(CommandEnd::Cancelled),
            ),
        ];
        for (end, output, expected) in cases {
            assert_eq!(
                finish(end, output.to_owned(), Duration::from_secs(1)),
                expected
            );
        }
    }
}
