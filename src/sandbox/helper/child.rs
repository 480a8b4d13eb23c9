//! A command the spawn helper started, as oml holds it: its first process's id, the pidfd the
//! helper handed over with it, and how it ended once the helper says so.
//!
//! It knows the one answer it waits for, not the helper's socket or requests.

use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use rustix::process::Signal;
use tokio::sync::oneshot;

/// A command the helper started: its first process's id, and how it ended once it has.
#[derive(Debug)]
pub struct Child {
    pid: i32,
    /// The first process, as the helper's pidfd for it: signals through it reach that process
    /// or nothing, never a process that took its number after it was reaped.
    pidfd: Option<OwnedFd>,
    /// Until the helper's answer about the end has been taken (or the helper is gone).
    exit: Option<oneshot::Receiver<io::Result<i32>>>,
    status: Option<ExitStatus>,
}

impl Child {
    pub(super) fn new(
        pid: i32,
        pidfd: Option<OwnedFd>,
        exit: oneshot::Receiver<io::Result<i32>>,
    ) -> Child {
        Child {
            pid,
            pidfd,
            exit: Some(exit),
            status: None,
        }
    }

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
    /// Like `kill_on_drop`: a command whose waiter is gone before it ended is killed (its first
    /// process; its group is the caller's to kill). When the helper ended first, the command's
    /// `PR_SET_PDEATHSIG` has killed it.
    fn drop(&mut self) {
        if self.exit.is_some()
            && matches!(self.try_wait(), Ok(None))
            && let Some(pidfd) = &self.pidfd
        {
            let _ = rustix::process::pidfd_send_signal(pidfd, Signal::KILL);
        }
    }
}

/// The error of a command whose helper ended under it.
pub(super) fn gone() -> io::Error {
    io::Error::other("the spawn helper ended")
}
