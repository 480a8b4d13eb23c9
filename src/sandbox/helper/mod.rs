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
//! How: oml starts the helper the first time it runs a command, with one end of a
//! `SOCK_SEQPACKET` socket pair as the helper's standard input, an empty environment, and no
//! other descriptor. [`spawn`] sends a [`wire::Request`] with the command's output pipe, oml's
//! lifeline and the Landlock ruleset attached, and waits for `Spawned`; the returned [`Child`]
//! resolves when `Exited` arrives. One thread of oml's reads the replies and hands each to the
//! request that waits for it. Only oml holds its end of the socket (close-on-exec, never given
//! to a command), so nothing else can ask the helper for anything.
//!
//! When the helper cannot be had (it did not start, it ended, the request is too large or not
//! UTF-8), [`spawn`] says [`SpawnError::Unavailable`] and the caller forks as before; after
//! [`MAX_STARTS`] helpers have ended, oml stops starting new ones.
//!
//! It knows the requests, not what the commands are for.

mod serve;
mod wire;

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;
use rustix::net::{AddressFamily, SocketFlags, SocketType};
use tokio::sync::oneshot;

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

/// Why [`spawn`] did not start the command.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The helper cannot take this request; the caller starts the command itself.
    #[error("the spawn helper is unavailable: {0}")]
    Unavailable(String),
    /// The helper tried and the command did not start (the program is missing, a sandbox step
    /// failed).
    #[error(transparent)]
    Failed(io::Error),
}

/// A command the helper started: its first process's id, and how it ended once it has.
#[derive(Debug)]
pub struct Child {
    pid: i32,
    /// Until the helper's answer about the end has been taken (or the helper is gone).
    exit: Option<oneshot::Receiver<io::Result<i32>>>,
    status: Option<ExitStatus>,
}

impl Child {
    /// The first process's id, which is also the command's process group.
    pub fn id(&self) -> u32 {
        self.pid.unsigned_abs()
    }

    /// Wait until the command's first process has ended (cancel-safe).
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        let Some(exit) = self.exit.as_mut() else {
            return Err(gone());
        };
        let got = exit.await.map_err(|_| gone());
        self.settle(got.and_then(|raw| raw))
    }

    /// How the command's first process ended, if it has.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if let Some(status) = self.status {
            return Ok(Some(status));
        }
        let Some(exit) = self.exit.as_mut() else {
            return Err(gone());
        };
        match exit.try_recv() {
            Ok(raw) => self.settle(raw).map(Some),
            Err(oneshot::error::TryRecvError::Empty) => Ok(None),
            Err(oneshot::error::TryRecvError::Closed) => self.settle(Err(gone())).map(Some),
        }
    }

    /// Keep what the helper answered about the end; the receiver is done with either way.
    fn settle(&mut self, raw: io::Result<i32>) -> io::Result<ExitStatus> {
        self.exit = None;
        let status = ExitStatus::from_raw(raw?);
        self.status = Some(status);
        Ok(status)
    }
}

impl Drop for Child {
    /// Like `kill_on_drop`: a command whose waiter is gone before it ended is killed. (When the
    /// helper ended first, the command's `PR_SET_PDEATHSIG` has killed it.)
    fn drop(&mut self) {
        if self.exit.is_some() && matches!(self.try_wait(), Ok(None)) {
            // SAFETY: kill with integers; the pid is pinned until the helper reaps it, and the
            // command's watcher keeps its number in use as a session id after that.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
        }
    }
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
    let helper = current().ok_or_else(|| SpawnError::Unavailable("not running".into()))?;
    let id = helper.next.fetch_add(1, Ordering::Relaxed);
    let Request::Spawn { id: slot, .. } = &mut request;
    *slot = id;
    let (spawned, on_spawned) = oneshot::channel();
    let (exited, exit) = oneshot::channel();
    helper.pending.lock().insert(
        id,
        Pending {
            spawned: Some(spawned),
            exited,
        },
    );
    if let Err(e) = wire::send(helper.socket.as_fd(), &request, fds, false) {
        helper.pending.lock().remove(&id);
        return Err(SpawnError::Unavailable(e.to_string()));
    }
    match on_spawned.await {
        Ok(Ok(pid)) => Ok(Child {
            pid,
            exit: Some(exit),
            status: None,
        }),
        Ok(Err(Start::Failed(e))) => Err(SpawnError::Failed(e)),
        Ok(Err(Start::Gone)) | Err(_) => Err(SpawnError::Unavailable("it ended".into())),
    }
}

// --- private helpers

/// Why a request got no pid.
enum Start {
    Failed(io::Error),
    Gone,
}

/// What a request waits for.
struct Pending {
    /// Taken when `Spawned` or `Failed` arrives.
    spawned: Option<oneshot::Sender<Result<i32, Start>>>,
    exited: oneshot::Sender<io::Result<i32>>,
}

/// A running helper.
struct Helper {
    socket: OwnedFd,
    pending: Mutex<HashMap<u64, Pending>>,
    next: AtomicU64,
    alive: AtomicBool,
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
        pending: Mutex::new(HashMap::new()),
        next: AtomicU64::new(1),
        alive: AtomicBool::new(true),
    });
    let reader = helper.clone();
    std::thread::Builder::new()
        .name("oml-spawn-helper".into())
        .spawn(move || read_replies(&reader, process))?;
    Ok(helper)
}

/// The reply reader's life: hand each reply to its request until the helper ends, then fail
/// what still waits and reap the helper.
fn read_replies(helper: &Helper, mut process: std::process::Child) {
    let mut buffer = vec![0u8; wire::MAX_MESSAGE_BYTES];
    loop {
        match wire::recv::<wire::Reply>(&helper.socket, &mut buffer, true) {
            Ok(Some((reply, _))) => deliver(helper, reply),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {}
            Ok(None) | Err(_) => break,
        }
    }
    helper.alive.store(false, Ordering::Release);
    for (_, pending) in helper.pending.lock().drain() {
        if let Some(spawned) = pending.spawned {
            let _ = spawned.send(Err(Start::Gone));
        }
        let _ = pending.exited.send(Err(gone()));
    }
    let _ = process.kill();
    let _ = process.wait();
}

/// Hand `reply` to the request it answers.
fn deliver(helper: &Helper, reply: wire::Reply) {
    let mut pending = helper.pending.lock();
    match reply {
        wire::Reply::Spawned { id, pid } => {
            let taken = pending.get_mut(&id).and_then(|p| p.spawned.take());
            // Nobody waits any more (the turn was cancelled meanwhile): the command goes.
            if taken.is_none_or(|s| s.send(Ok(pid)).is_err()) {
                // SAFETY: kill with integers; `pid` leads the group the helper just made.
                unsafe { libc::kill(-pid, libc::SIGKILL) };
            }
        }
        wire::Reply::Failed { id, errno } => {
            if let Some(spawned) = pending.remove(&id).and_then(|p| p.spawned) {
                let _ = spawned.send(Err(Start::Failed(io::Error::from_raw_os_error(errno))));
            }
        }
        wire::Reply::Exited { id, status } => {
            if let Some(p) = pending.remove(&id) {
                let _ = p.exited.send(Ok(status));
            }
        }
    }
}

/// The error of a command whose helper ended under it.
fn gone() -> io::Error {
    io::Error::other("the spawn helper ended")
}
