//! The namespaces commands join rather than make: one user namespace (our user and group mapped
//! to themselves) and one network namespace in it (a loopback that is down, nothing else), made
//! once per forking process (oml, or its spawn helper) and held open by descriptor. Making a user
//! and a network namespace for every command cost about a millisecond each time (the kernel's
//! network namespace set-up); joining with `setns` costs a few microseconds.
//!
//! Commands with the network off share the one network namespace: it reaches nothing, so what
//! they share is each other's abstract Unix sockets while they run at the same time, nothing of
//! the host's. Every command still gets a mount namespace of its own (`super::mounts`).
//!
//! How: a short-lived child (a raw `clone`, no atfork handlers) makes the namespaces and maps
//! its ids, says so on a pipe and waits; the parent opens the child's `/proc/PID/ns/user` and
//! `…/net`, then lets it go. For root, which makes mount namespaces without a user namespace,
//! only the network namespace is made.
//!
//! It knows nothing of plans or policies.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::OnceLock;

/// The namespaces' descriptors.
pub(super) struct Shared {
    /// `None` for root (no user namespace needed).
    user: Option<OwnedFd>,
    net: OwnedFd,
}

impl Shared {
    /// The raw descriptors, for the child between fork and exec.
    pub(super) fn fds(&self) -> (Option<RawFd>, RawFd) {
        (
            self.user.as_ref().map(AsRawFd::as_raw_fd),
            self.net.as_raw_fd(),
        )
    }
}

/// This process's shared namespaces, made on the first call (which must come before any fork
/// that uses them); `None` when they cannot be made here (then each command makes its own).
pub(super) fn get() -> Option<&'static Shared> {
    static SHARED: OnceLock<Option<Shared>> = OnceLock::new();
    SHARED
        .get_or_init(|| match make() {
            Ok(shared) => Some(shared),
            Err(e) => {
                tracing::debug!("no shared namespaces for commands ({e}); each makes its own");
                None
            }
        })
        .as_ref()
}

/// Join `user` (when given) and then `net`; async-signal-safe. After it the caller holds every
/// capability in the user namespace, as after `unshare(CLONE_NEWUSER)`.
pub(super) fn join(user: Option<RawFd>, net: RawFd) -> io::Result<()> {
    if let Some(user) = user {
        // SAFETY: setns on a descriptor the parent opened; the caller is single-threaded.
        check(unsafe { libc::setns(user, libc::CLONE_NEWUSER) })?;
    }
    // SAFETY: as above.
    check(unsafe { libc::setns(net, libc::CLONE_NEWNET) })
}

fn make() -> io::Result<Shared> {
    // SAFETY: geteuid and getegid take no arguments.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let maps = (uid != 0).then(|| {
        let map = |id| CString::new(format!("{id} {id} 1\n")).unwrap_or_default();
        (map(uid), map(gid))
    });
    let (ready_read, ready_write) = io::pipe()?;
    let (go_read, go_write) = io::pipe()?;
    let flags = libc::SIGCHLD as libc::c_long;
    // SAFETY: clone with only SIGCHLD and a null stack is fork without glibc's atfork handlers;
    // the child only makes system calls on values made before it and ends with _exit.
    let pid = unsafe { libc::syscall(libc::SYS_clone, flags, 0, 0, 0, 0) };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        let code = match in_child(maps.as_ref()) {
            Ok(()) => 0,
            Err(e) => e.raw_os_error().unwrap_or(libc::EINVAL),
        };
        let byte = [u8::try_from(code).unwrap_or(u8::MAX)];
        let mut one = [0u8; 1];
        // SAFETY: close, write and read on pipe descriptors inherited from the parent, then
        // _exit. The parent's ends are closed here first, or the wait below would never see
        // the end of its pipe.
        unsafe {
            libc::close(go_write.as_raw_fd());
            libc::close(ready_read.as_raw_fd());
            libc::write(ready_write.as_raw_fd(), byte.as_ptr().cast(), 1);
            libc::read(go_read.as_raw_fd(), one.as_mut_ptr().cast(), 1);
            libc::_exit(0);
        }
    }
    drop((ready_write, go_read));
    let pid = libc::pid_t::try_from(pid).unwrap_or(-1);
    let opened = opened(pid, &ready_read, maps.is_some());
    drop(go_write);
    let mut status = 0;
    // SAFETY: waitpid on the child just made, into a local integer.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    opened
}

/// The child's part: the namespaces made and the ids mapped.
fn in_child(maps: Option<&(CString, CString)>) -> io::Result<()> {
    // oml is not dumpable; a process that is not cannot write its own id maps, nor could the
    // parent open its namespaces.
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) };
    match maps {
        Some((uid_map, gid_map)) => {
            // SAFETY: unshare with flags only; this child is single-threaded.
            check(unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) })?;
            super::mounts::write_proc(c"/proc/self/setgroups", c"deny")?;
            super::mounts::write_proc(c"/proc/self/uid_map", uid_map)?;
            super::mounts::write_proc(c"/proc/self/gid_map", gid_map)
        }
        // SAFETY: as above.
        None => check(unsafe { libc::unshare(libc::CLONE_NEWNET) }),
    }
}

/// Once the child says it is ready, its namespaces, opened.
fn opened(pid: libc::pid_t, ready: &io::PipeReader, user: bool) -> io::Result<Shared> {
    let mut byte = [0u8; 1];
    // SAFETY: read into a local buffer from the pipe's read end.
    let n = unsafe { libc::read(ready.as_raw_fd(), byte.as_mut_ptr().cast(), 1) };
    if n != 1 {
        return Err(io::Error::other("the namespace child ended early"));
    }
    if byte[0] != 0 {
        return Err(io::Error::from_raw_os_error(i32::from(byte[0])));
    }
    let open = |name: &str| -> io::Result<OwnedFd> {
        let path = CString::new(format!("/proc/{pid}/ns/{name}")).map_err(io::Error::other)?;
        // SAFETY: open on a NUL-terminated path; the descriptor is owned at once.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened and is owned by nothing else.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    };
    Ok(Shared {
        user: if user { Some(open("user")?) } else { None },
        net: open("net")?,
    })
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}
