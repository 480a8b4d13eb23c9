//! The spawn helper, oml's side: a small process (`oml __spawn-helper`, [`serve`]) that forks
//! the commands oml runs, so that oml itself does not fork.
//!
//! Why: a fork copies the forking process's page tables and marks its memory copy-on-write
//! until the child's `exec`. For oml (several threads, the Lisp heap, a conversation's buffers)
//! that was about half a millisecond per command plus faults and TLB shoot-downs on every page
//! oml wrote meanwhile; the helper is one thread and a few megabytes, and forks in a fraction of
//! that. The command's set-up between fork and exec is the same code either way
//! (`super::child`).
//!
//! How: oml starts the helper when the first command's card appears ([`warm`], beside the
//! permission question) or, at the latest, when it runs it, with one end of a
//! `SOCK_SEQPACKET` socket pair as the helper's standard input, an empty environment, and no
//! other descriptor. [`spawn`] sends a [`wire::Request`] with the command's output pipe, oml's
//! lifeline and the Landlock ruleset attached, and waits for `Spawned`; the returned [`Child`]
//! resolves when `Exited` arrives. One thread of oml's reads the replies and hands each to the
//! request that waits for it. Only oml holds its end of the socket (close-on-exec, never given
//! to a command), so nothing else can ask the helper for anything.
//!
//! When the helper cannot be had (it did not start, the request is too large or not UTF-8),
//! [`spawn`] says [`SpawnError::NotRunning`] or [`SpawnError::Unsent`] and the caller forks as
//! before; after [`MAX_STARTS`] helpers have ended, oml stops starting new ones. A helper that
//! ends, or does not answer within [`SPAWN_REPLY_TIMEOUT`] (and is then killed), after it was
//! sent a command gives [`SpawnError::Lost`]: the command may have started, so it is not
//! started again. A request given up while the helper forks (a cancel, a timeout) kills what
//! the helper started. The files: `wire.rs` the messages, `serve.rs` the helper's side,
//! `replies.rs` oml's reader of the answers, `child.rs` a started command as oml holds it.
//!
//! It knows the requests, not what the commands are for.

mod child;
mod replies;
mod serve;
mod wire;

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use rustix::net::{AddressFamily, SocketFlags, SocketType};
use tokio::sync::oneshot;

pub use child::Child;
use replies::{Pending, PendingMap, Spawned, Start};
pub use serve::serve;
pub(in crate::sandbox) use wire::Request;

/// The first argument that makes `oml` the spawn helper (`main.rs` checks for it before
/// anything else); not a command for people.
pub const ARG: &str = "__spawn-helper";

/// Whether this process may start helpers: only the `oml` binary can serve as one, so `main.rs`
/// turns it on ([`enable`]); a program that uses the library forks its commands itself.
static ENABLED: AtomicBool = AtomicBool::new(false);

/// Let this process run its commands through a spawn helper (`main.rs`, for the `oml` binary).
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// How many helpers one oml starts before it stops trying and forks commands itself.
const MAX_STARTS: u32 = 3;

/// How long oml waits for the helper to say that a command started (or could not). A helper
/// that has not answered by then is taken for stuck, and killed.
const SPAWN_REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// Why [`spawn`] did not start the command.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// No helper runs (none may be started here, or too many ended): the caller starts the
    /// command itself.
    #[error("the spawn helper is not running")]
    NotRunning,
    /// The request could not be sent (too large, the socket's buffer full): the command did
    /// not start, and the caller starts it itself.
    #[error("the spawn helper could not be sent the command: {0}")]
    Unsent(io::Error),
    /// The helper ended, or stopped answering, after it was sent the command, which may have
    /// started (and been killed with the helper): not started again.
    #[error("the spawn helper ended before it said whether the command started")]
    Lost,
    /// The helper tried and the command did not start (the program is missing, a sandbox step
    /// failed).
    #[error(transparent)]
    Failed(io::Error),
}

/// Start a helper in the background unless one runs (or may not be started), so that the first
/// command finds it ready.
pub fn warm() {
    if !ENABLED.load(Ordering::Relaxed) {
        return;
    }
    let needed = {
        let state = STATE.lock();
        let running = state
            .helper
            .as_ref()
            .is_some_and(|h| h.alive.load(Ordering::Acquire));
        !running && state.starts < MAX_STARTS
    };
    if needed {
        let _ = std::thread::Builder::new()
            .name("oml-helper-start".into())
            .spawn(|| drop(current()));
    }
}

/// Start the command of `request` (whose `id` is set here) through the helper, with `fds`
/// attached as [`wire::Request::Spawn`] describes.
pub(super) async fn spawn(
    mut request: Request,
    fds: &[BorrowedFd<'_>],
) -> Result<Child, SpawnError> {
    let helper = current().ok_or(SpawnError::NotRunning)?;
    let id = helper.next.fetch_add(1, Ordering::Relaxed);
    let Request::Spawn { id: slot, .. } = &mut request;
    *slot = id;
    let (spawned, on_spawned) = oneshot::channel();
    let (exited, exit) = oneshot::channel();
    let waiting = Pending {
        spawned: Some(spawned),
        exited,
    };
    helper.pending.lock().insert(id, waiting);
    if let Err(e) = wire::send(helper.socket.as_fd(), &request, fds, false) {
        helper.pending.lock().remove(&id);
        return Err(SpawnError::Unsent(e));
    }
    let mut answer = Answer {
        receiver: on_spawned,
        taken: false,
    };
    let got = tokio::time::timeout(SPAWN_REPLY_TIMEOUT, &mut answer.receiver).await;
    answer.taken = true;
    match got {
        Ok(Ok(Ok(Spawned { pid, pidfd }))) => Ok(Child::new(pid, pidfd, exit)),
        Ok(Ok(Err(Start::Failed(e)))) => Err(SpawnError::Failed(e)),
        Ok(Ok(Err(Start::Gone)) | Err(_)) => Err(SpawnError::Lost),
        Err(_) => {
            helper.retire();
            Err(SpawnError::Lost)
        }
    }
}

// --- private helpers

/// The answer to a spawn request while it is awaited. Dropped before it was taken (the turn
/// was cancelled, or timed out, while the helper forked), it kills the command the helper
/// started meanwhile, or makes the reader kill it when `Spawned` comes later.
struct Answer {
    receiver: oneshot::Receiver<Result<Spawned, Start>>,
    /// Whether the awaiting ended (with the answer, or with the helper given up).
    taken: bool,
}

impl Drop for Answer {
    fn drop(&mut self) {
        if !self.taken {
            self.receiver.close();
            if let Ok(Ok(started)) = self.receiver.try_recv() {
                started.kill();
            }
        }
    }
}

/// A running helper.
struct Helper {
    socket: OwnedFd,
    /// The helper's process id, to kill a helper that stopped answering.
    pid: i32,
    pending: Mutex<PendingMap>,
    next: AtomicU64,
    alive: AtomicBool,
}

impl Helper {
    /// Stop using this helper and kill it: its reader then fails every request still waiting,
    /// and the next command starts a new helper.
    fn retire(&self) {
        self.alive.store(false, Ordering::Release);
        // SAFETY: kill with integers; the helper is this process's child and not yet reaped
        // (its reader reaps it, after this kill ends it).
        unsafe { libc::kill(self.pid, libc::SIGKILL) };
    }
}

/// The helper in use, and how many were started.
struct State {
    helper: Option<Arc<Helper>>,
    starts: u32,
}

static STATE: Mutex<State> = Mutex::new(State {
    helper: None,
    starts: 0,
});

/// The running helper, started if there is none (and fewer than [`MAX_STARTS`] were).
fn current() -> Option<Arc<Helper>> {
    if !ENABLED.load(Ordering::Relaxed) {
        return None;
    }
    let mut state = STATE.lock();
    if let Some(helper) = state
        .helper
        .as_ref()
        .filter(|h| h.alive.load(Ordering::Acquire))
    {
        return Some(helper.clone());
    }
    state.helper = None;
    if state.starts >= MAX_STARTS {
        return None;
    }
    state.starts += 1;
    match start() {
        Ok(helper) => {
            state.helper = Some(helper.clone());
            Some(helper)
        }
        Err(e) => {
            tracing::debug!("the spawn helper did not start: {e}");
            state.starts = MAX_STARTS;
            None
        }
    }
}

/// Start a helper and the thread that reads its replies.
fn start() -> io::Result<Arc<Helper>> {
    let (ours, theirs) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?;
    // The same binary as this process, whatever has replaced the file since.
    let process = std::process::Command::new("/proc/self/exe")
        .arg(ARG)
        .env_clear()
        .stdin(Stdio::from(theirs))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let helper = Arc::new(Helper {
        socket: ours,
        pid: i32::try_from(process.id()).unwrap_or(i32::MAX),
        pending: Mutex::new(PendingMap::new()),
        next: AtomicU64::new(1),
        alive: AtomicBool::new(true),
    });
    let reader = helper.clone();
    std::thread::Builder::new()
        .name("oml-spawn-helper".into())
        .spawn(move || replies::read_replies(&reader, process))?;
    Ok(helper)
}
