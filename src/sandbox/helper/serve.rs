//! The spawn helper's own side: the process `oml` starts as `oml __spawn-helper`, which forks
//! and confines the commands oml asks for and reports how they end.
//!
//! It is small and has one thread, so a fork of it copies a few page tables, where a fork of
//! oml (threads, the Lisp heap, the model's buffers) copied many, and left oml paying
//! copy-on-write faults until the command's `exec`. Its standard input is its end of the
//! socket pair; it inherits nothing else (oml starts it with an empty environment and
//! `/dev/null` for output) and, like oml, is not dumpable, so a command cannot read its `/proc`
//! entries or attach to it. It makes a session of its own, so a terminal's signals (the chat's
//! Ctrl-C) do not reach it.
//!
//! The loop: wait (`poll`) for a request or for a command's pidfd; start each requested command
//! with the sandbox's child steps (`super::super::child`) and answer `Spawned` or `Failed`;
//! answer `Exited` for each command that ended. At end-of-file on the socket (oml ended, however
//! it ended) it returns, and the commands still running follow through the two ways they
//! already had: their first process's `PR_SET_PDEATHSIG` (this process was its parent) and
//! their watcher's lifeline (oml's own pipe).
//!
//! It knows the requests and the child steps, not tools, policies or settings.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use rustix::event::{PollFd, PollFlags, Timespec};

use super::wire::{self, Reply, Request};
use crate::sandbox::child;
use crate::sandbox::shared_ns::Shared;

/// How often the helper looks for ended commands when the kernel gave it no pidfd to wait on
/// (before Linux 5.3).
const REAP_INTERVAL_MS: i64 = 10;

/// The descriptor the helper reads its requests from (its standard input).
const SOCKET_FD: i32 = 0;

/// A command the helper started and has not yet seen end.
struct Running {
    id: u64,
    child: Child,
    /// Readable once the command's first process has ended; `None` without pidfds.
    pidfd: Option<OwnedFd>,
}

/// Serve oml until its end of the socket closes. Returns the process's exit code.
pub fn serve() -> i32 {
    // SAFETY: fd 0 is the socket oml gave as standard input; it is owned here from now on.
    let socket = unsafe { OwnedFd::from_raw_fd(SOCKET_FD) };
    close_others(SOCKET_FD);
    // A session of its own, without a terminal: the chat's Ctrl-C (SIGINT to the terminal's
    // foreground group, oml's) and a closing terminal's SIGHUP do not reach it. It ends when
    // oml's end of the socket closes, as it always does.
    // SAFETY: setsid takes no arguments; this process is not a group leader (oml did not make
    // it one), so it succeeds.
    unsafe { libc::setsid() };
    let mut running: Vec<Running> = Vec::new();
    let mut buffer = vec![0u8; wire::MAX_MESSAGE_BYTES];
    loop {
        if wait(socket.as_fd(), &running).is_err() {
            return 1;
        }
        match wire::recv::<Request>(&socket, &mut buffer, false) {
            Ok(Some((request, fds))) => {
                if let Some(started) = start(socket.as_fd(), request, fds) {
                    running.push(started);
                }
            }
            Ok(None) => return 0,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {}
            Err(_) => return 1,
        }
        reap(socket.as_fd(), &mut running);
    }
}

/// Wait until the socket or a running command's pidfd is readable (or, without pidfds, until
/// the next look).
fn wait(socket: BorrowedFd<'_>, running: &[Running]) -> io::Result<()> {
    let mut fds = vec![PollFd::new(&socket, PollFlags::IN)];
    fds.extend(
        running
            .iter()
            .filter_map(|r| r.pidfd.as_ref())
            .map(|fd| PollFd::new(fd, PollFlags::IN)),
    );
    let blind = running.iter().any(|r| r.pidfd.is_none());
    let timeout = blind.then_some(Timespec {
        tv_sec: 0,
        tv_nsec: REAP_INTERVAL_MS * 1_000_000,
    });
    match rustix::event::poll(&mut fds, timeout.as_ref()) {
        Ok(_) | Err(rustix::io::Errno::INTR) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Start the command `request` asks for and answer; the running command, if it started.
fn start(socket: BorrowedFd<'_>, request: Request, fds: Vec<OwnedFd>) -> Option<Running> {
    let Request::Spawn { id, .. } = &request;
    let id = *id;
    let answer = match spawn(request, fds) {
        Ok(child) => {
            let pid = child.id() as i32;
            let pidfd = rustix::process::Pid::from_raw(pid).and_then(|p| {
                rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok()
            });
            // The pidfd goes with the answer, so that oml signals this process and no other.
            let fds: Vec<BorrowedFd<'_>> = pidfd.iter().map(AsFd::as_fd).collect();
            let _ = wire::send(socket, &Reply::Spawned { id, pid }, &fds, true);
            return Some(Running { id, child, pidfd });
        }
        Err(e) => Reply::Failed {
            id,
            errno: e.raw_os_error().unwrap_or(libc::EINVAL),
        },
    };
    let _ = wire::send(socket, &answer, &[], true);
    None
}

/// Fork and confine the command of `request`, with the descriptors that came with it.
fn spawn(request: Request, fds: Vec<OwnedFd>) -> io::Result<Child> {
    let Request::Spawn {
        program,
        args,
        env,
        cwd,
        confined,
        deny_inet,
        mounts,
        ruleset,
        namespaces,
        ..
    } = request;
    let mut fds = fds.into_iter();
    let invalid = || io::Error::from_raw_os_error(libc::EINVAL);
    let (stdout, stderr, lifeline) = (
        fds.next().ok_or_else(invalid)?,
        fds.next().ok_or_else(invalid)?,
        fds.next().ok_or_else(invalid)?,
    );
    let ruleset = match ruleset {
        true => Some(Arc::new(fds.next().ok_or_else(invalid)?)),
        false => None,
    };
    let joined = match namespaces {
        0 => None,
        1 => Some(Shared::from_fds(None, fds.next().ok_or_else(invalid)?)),
        2 => {
            let user = fds.next().ok_or_else(invalid)?;
            Some(Shared::from_fds(
                Some(user),
                fds.next().ok_or_else(invalid)?,
            ))
        }
        _ => return Err(invalid()),
    };
    let mut cmd = Command::new(OsStr::new(&program));
    cmd.args(&args)
        .env_clear()
        .envs(env)
        .current_dir(&cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr));
    child::install(
        &mut cmd,
        ruleset,
        mounts.map(Arc::new),
        confined.then_some(deny_inet),
        joined.map(Arc::new),
        Some(lifeline.as_raw_fd()),
    )?;
    // The lifeline stays open until the fork has happened: the watcher takes its copy there.
    let child = cmd.spawn();
    drop(lifeline);
    child
}

/// Answer `Exited` for every command that has ended, and forget it.
fn reap(socket: BorrowedFd<'_>, running: &mut Vec<Running>) {
    running.retain_mut(|r| {
        let status = match r.child.try_wait() {
            Ok(Some(status)) => status.into_raw(),
            Ok(None) => return true,
            // Not ours to wait for any more: say so as a kill, which is what oml would report.
            Err(_) => libc::SIGKILL,
        };
        let _ = wire::send(socket, &Reply::Exited { id: r.id, status }, &[], true);
        false
    });
}

/// Close every descriptor but `keep` and the standard ones (oml gave `/dev/null` for those):
/// whatever oml inherited without close-on-exec (from an editor, a shell) stays out of here.
fn close_others(keep: i32) {
    let first = keep.max(2) + 1;
    // SAFETY: close_range with integer bounds; these descriptors are this process's own, and
    // none of them is owned by anything yet (this runs first thing).
    let closed = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first as libc::c_uint,
            libc::c_uint::MAX,
            0,
        )
    };
    if closed < 0 {
        for fd in first..child::CLOSE_FALLBACK_MAX_FD {
            // SAFETY: closing a descriptor of this process that nothing owns; a closed one gives
            // EBADF.
            unsafe { libc::close(fd) };
        }
    }
}
