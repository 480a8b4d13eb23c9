//! The agent subprocess: spawning it in its own process group, draining its stderr into a
//! bounded tail, reaping it, and the bounded shutdown ladder (EOF, grace, SIGTERM to the group,
//! grace, SIGKILL to the group, reap).
//!
//! The group matters because most agents are launched through wrappers (`npx`, `uvx`, `sh -c`):
//! killing only the direct child would orphan the real agent. Signals therefore always go to the
//! whole group, also after the leader has exited, so a grandchild never survives `close`.

use std::collections::{HashSet, VecDeque};
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rustix::process::{Pid, Signal};
use tokio::io::AsyncReadExt;
use tokio::process::{ChildStdin, ChildStdout, Command};
use tokio::sync::watch;

/// How long `close` waits for the agent to exit by itself after its stdin is closed.
pub const CLOSE_GRACE: Duration = Duration::from_secs(2);
/// How long `close` waits after SIGTERM before SIGKILL.
pub const TERM_GRACE: Duration = Duration::from_secs(2);
/// How long `close` waits for the kernel to report the exit after SIGKILL (only a process stuck
/// in uninterruptible sleep takes this long).
pub const KILL_WAIT: Duration = Duration::from_secs(5);
/// How much of the agent's stderr is kept (the tail), for error reports.
pub const STDERR_TAIL_BYTES: usize = 16 * 1024;
/// How long an error report waits for the exit status of an agent whose stdout has closed.
pub const EXIT_REPORT_WAIT: Duration = Duration::from_secs(2);
/// How long an error report then waits for the last of the agent's stderr to be read (a
/// grandchild may hold the pipe open).
pub const STDERR_DRAIN_WAIT: Duration = Duration::from_millis(500);

/// What to run.
#[derive(Clone, Debug, Default)]
pub struct Spawn {
    pub command: String,
    pub args: Vec<String>,
    /// Added to (or replacing entries of) the inherited environment.
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
}

/// A running (or exited) agent process. Cloning shares it.
#[derive(Clone)]
pub struct AgentProcess {
    inner: Arc<ProcessInner>,
}

struct ProcessInner {
    pid: i32,
    exit: watch::Receiver<Option<ExitStatus>>,
    stderr: Arc<Mutex<VecDeque<u8>>>,
    /// Becomes true once stderr has been read to its end.
    stderr_closed: watch::Receiver<bool>,
}

impl AgentProcess {
    /// Starts the command in a new process group with piped stdio; stderr is drained at once
    /// and for the process's life. The child is reaped by a task of its own, and killed if that
    /// task is dropped (runtime shutdown) before it exits.
    pub fn spawn(spec: &Spawn) -> std::io::Result<(AgentProcess, ChildStdin, ChildStdout)> {
        let mut command = Command::new(&spec.command);
        command
            .args(&spec.args)
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        if let Some(cwd) = &spec.cwd {
            command.current_dir(cwd);
        }
        let mut child = command.spawn()?;
        let pid = child.id().map_or(0, |p| p as i32);
        if pid > 0 {
            live_groups().get_or_insert_with(HashSet::new).insert(pid);
        }
        let stdin = child.stdin.take().expect("stdin is piped");
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut stderr = child.stderr.take().expect("stderr is piped");
        let tail = Arc::new(Mutex::new(VecDeque::with_capacity(1024)));
        let sink = Arc::clone(&tail);
        let name = spec.command.clone();
        let (closed_tx, closed_rx) = watch::channel(false);
        tokio::spawn(async move {
            let _closed = DropSignal(closed_tx);
            let mut buf = vec![0u8; 8192];
            loop {
                match stderr.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        tracing::debug!(agent = %name, "stderr: {}", String::from_utf8_lossy(&buf[..n]).trim_end());
                        let mut tail = sink.lock();
                        tail.extend(&buf[..n]);
                        let excess = tail.len().saturating_sub(STDERR_TAIL_BYTES);
                        tail.drain(..excess);
                    }
                }
            }
        });
        let (exit_tx, exit_rx) = watch::channel(None);
        tokio::spawn(async move {
            let status = child.wait().await;
            match status {
                Ok(status) => {
                    let _ = exit_tx.send(Some(status));
                }
                Err(e) => tracing::warn!("waiting for the agent process failed: {e}"),
            }
        });
        let process = AgentProcess {
            inner: Arc::new(ProcessInner {
                pid,
                exit: exit_rx,
                stderr: tail,
                stderr_closed: closed_rx,
            }),
        };
        Ok((process, stdin, stdout))
    }

    /// The process id, which is also its process group id.
    pub fn pid(&self) -> i32 {
        self.inner.pid
    }

    /// The exit status, once the process has exited and been reaped.
    pub fn exit_status(&self) -> Option<ExitStatus> {
        *self.inner.exit.borrow()
    }

    /// Waits for the exit, at most `limit`; returns the status when it came.
    pub async fn wait_exit(&self, limit: Duration) -> Option<ExitStatus> {
        let mut exit = self.inner.exit.clone();
        let waited = tokio::time::timeout(limit, exit.wait_for(Option::is_some)).await;
        match waited {
            Ok(Ok(status)) => *status,
            _ => self.exit_status(),
        }
    }

    /// Waits until stderr has been read to its end, at most `limit`.
    pub async fn wait_stderr(&self, limit: Duration) {
        let mut closed = self.inner.stderr_closed.clone();
        let _ = tokio::time::timeout(limit, closed.wait_for(|c| *c)).await;
    }

    /// The last [`STDERR_TAIL_BYTES`] of stderr, decoded lossily.
    pub fn stderr_tail(&self) -> String {
        let tail = self.inner.stderr.lock();
        let (a, b) = tail.as_slices();
        let mut bytes = Vec::with_capacity(tail.len());
        bytes.extend_from_slice(a);
        bytes.extend_from_slice(b);
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Sends `signal` to the whole process group; a group that is already gone is fine.
    pub fn signal_group(&self, signal: Signal) {
        if self.inner.pid <= 0 {
            return;
        }
        // A stale or empty group gives ESRCH.
        if let Err(error) = kill_group(self.inner.pid, signal) {
            tracing::trace!("killpg({}, {signal:?}): {error}", self.inner.pid);
        }
    }

    /// The shutdown ladder, after the caller has closed the agent's stdin: wait [`CLOSE_GRACE`]
    /// for the agent to exit; SIGTERM the group; if the leader is still there, wait
    /// [`TERM_GRACE`]; SIGKILL the group; wait for the reap (at most [`KILL_WAIT`]). Returns
    /// whether the agent exited by itself within the grace period. Bounded by the sum of the
    /// three waits.
    pub async fn shutdown(&self) -> bool {
        let graceful = self.wait_exit(CLOSE_GRACE).await.is_some();
        // Even after a graceful exit, children the agent left in its group are ended.
        self.signal_group(Signal::TERM);
        if !graceful {
            self.wait_exit(TERM_GRACE).await;
        }
        self.signal_group(Signal::KILL);
        if self.wait_exit(KILL_WAIT).await.is_none() {
            tracing::warn!(pid = self.inner.pid, "the agent did not die after SIGKILL");
        }
        if let Some(groups) = live_groups().as_mut() {
            groups.remove(&self.inner.pid);
        }
        graceful
    }
}

/// Sends `true` when dropped: the stderr drain has ended, however it ended.
struct DropSignal(watch::Sender<bool>);

impl Drop for DropSignal {
    fn drop(&mut self) {
        let _ = self.0.send(true);
    }
}

/// Process groups of agents started by this process and not yet shut down. A program that ends
/// without `client.close` would otherwise leave a launcher's children running: `kill_on_drop`
/// reaches only the direct child.
static LIVE_GROUPS: Mutex<Option<HashSet<i32>>> = Mutex::new(None);

fn live_groups() -> parking_lot::MutexGuard<'static, Option<HashSet<i32>>> {
    LIVE_GROUPS.lock()
}

/// SIGKILL every agent process group this process started and has not shut down. Called once by
/// the CLI when oml is about to exit; harmless when there are none.
pub fn kill_remaining_groups() {
    let groups = live_groups().take().unwrap_or_default();
    for pgid in groups {
        // A group that is already gone gives ESRCH.
        let _ = kill_group(pgid, Signal::KILL);
    }
}

/// `killpg(pgid, signal)`; a pgid that is not a process id is an error.
fn kill_group(pgid: i32, signal: Signal) -> std::io::Result<()> {
    let pid = Pid::from_raw(pgid).ok_or_else(|| std::io::Error::other("no process group"))?;
    Ok(rustix::process::kill_process_group(pid, signal)?)
}

/// An exit status in words: `exit status 3` or `signal 9`.
pub fn describe_status(status: &ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("signal {signal}"),
        _ => status.to_string(),
    }
}
