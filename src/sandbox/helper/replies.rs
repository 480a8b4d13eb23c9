//! oml's reader of the spawn helper's replies: one thread that hands each reply to the request
//! waiting for it, and fails every waiting request when the helper ends.
//!
//! It knows the replies and the pending requests, not how requests are made or sent.

use std::collections::HashMap;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::oneshot;

use super::Helper;
use super::child::gone;
use super::wire::{self, Reply};

/// How long the reader waits before reading again after the kernel ran short of memory for a
/// message (`ENOBUFS`, `ENOMEM`): the helper and its commands are fine, the reply will come.
const SHORT_OF_MEMORY_RETRY: Duration = Duration::from_millis(10);

/// What a request waits for.
pub(super) struct Pending {
    /// Taken when `Spawned` or `Failed` arrives.
    pub spawned: Option<oneshot::Sender<Result<Spawned, Start>>>,
    pub exited: oneshot::Sender<io::Result<i32>>,
}

/// A command that started: its first process and the pidfd the helper sent for it.
#[derive(Debug)]
pub(super) struct Spawned {
    pub pid: i32,
    pub pidfd: Option<OwnedFd>,
}

impl Spawned {
    /// Kill the command's whole group: nobody waits for it any more.
    pub fn kill(&self) {
        // SAFETY: kill with integers. `pid` (above 1, checked in `deliver`) leads the group the
        // helper just made; its watcher keeps the number in use while the group lives.
        unsafe { libc::kill(-self.pid, libc::SIGKILL) };
    }
}

/// Why a request got no pid.
pub(super) enum Start {
    Failed(io::Error),
    Gone,
}

/// The requests waiting for an answer, by id.
pub(super) type PendingMap = HashMap<u64, Pending>;

/// The reply reader's life: hand each reply to its request until the helper ends, then fail
/// what still waits and reap the helper.
pub(super) fn read_replies(helper: &Helper, mut process: std::process::Child) {
    let mut buffer = vec![0u8; wire::MAX_MESSAGE_BYTES];
    loop {
        match wire::recv::<Reply>(&helper.socket, &mut buffer, true) {
            Ok(Some((reply, fds))) => deliver(helper, reply, fds),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOBUFS | libc::ENOMEM)) => {
                std::thread::sleep(SHORT_OF_MEMORY_RETRY);
            }
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

/// Hand `reply` (and the descriptors that came with it) to the request it answers.
fn deliver(helper: &Helper, reply: Reply, fds: Vec<OwnedFd>) {
    let mut pending = helper.pending.lock();
    match reply {
        // A pid no command can have (0 or 1 would signal oml's own group, or every process):
        // the command is unknown, and said to have failed.
        Reply::Spawned { id, pid } if pid <= 1 => {
            if let Some(spawned) = pending.remove(&id).and_then(|p| p.spawned) {
                let error = io::Error::from_raw_os_error(libc::EINVAL);
                let _ = spawned.send(Err(Start::Failed(error)));
            }
        }
        Reply::Spawned { id, pid } => {
            let started = Spawned {
                pid,
                pidfd: fds.into_iter().next(),
            };
            match pending.get_mut(&id).and_then(|p| p.spawned.take()) {
                Some(waiting) => {
                    // Nobody waits any more (the turn was cancelled meanwhile): it goes.
                    if let Err(Ok(started)) = waiting.send(Ok(started)) {
                        started.kill();
                    }
                }
                None => started.kill(),
            }
        }
        Reply::Failed { id, errno } => {
            if let Some(spawned) = pending.remove(&id).and_then(|p| p.spawned) {
                let error = io::Error::from_raw_os_error(errno);
                let _ = spawned.send(Err(Start::Failed(error)));
            }
        }
        Reply::Exited { id, status } => {
            if let Some(p) = pending.remove(&id) {
                let _ = p.exited.send(Ok(status));
            }
        }
    }
}
