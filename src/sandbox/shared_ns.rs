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
//! The domain proxy (`super::proxy`) has namespaces of its own made the same way
//! ([`make_proxied`]): there the child also brings the loopback up and binds a TCP listener on
//! it, which it hands to the parent (`SCM_RIGHTS`) before it goes. The listener stays in that
//! namespace, so oml accepts, from outside, the connections of commands inside it.
//!
//! It knows nothing of plans or policies.

use std::ffi::CString;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::OnceLock;

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};

/// The backlog of the proxy's listener inside its namespace.
const PROXY_BACKLOG: libc::c_int = 512;

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

    /// Namespaces opened elsewhere and handed over (the spawn helper's, from oml).
    pub(super) fn from_fds(user: Option<OwnedFd>, net: OwnedFd) -> Shared {
        Shared { user, net }
    }

    /// The descriptors, borrowed: the user namespace's first when there is one.
    pub(super) fn borrowed(&self) -> Vec<BorrowedFd<'_>> {
        self.user
            .iter()
            .chain([&self.net])
            .map(AsFd::as_fd)
            .collect()
    }
}

/// This process's shared namespaces, made on the first call (which must come before any fork
/// that uses them); `None` when they cannot be made here (then each command makes its own).
pub(super) fn get() -> Option<&'static Shared> {
    static SHARED: OnceLock<Option<Shared>> = OnceLock::new();
    SHARED
        .get_or_init(|| match make(None) {
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

/// A new pair of namespaces for the domain proxy: their loopback up, and a TCP listener bound
/// on `127.0.0.1` there (its port chosen by the kernel), returned with them.
pub(super) fn make_proxied() -> io::Result<(Shared, std::net::TcpListener)> {
    let (ours, theirs) = UnixStream::pair()?;
    let shared = make(Some(theirs.as_raw_fd()))?;
    drop(theirs);
    let listener = received_fd(&ours)?;
    Ok((shared, std::net::TcpListener::from(listener)))
}

/// The namespaces made; with `listener_to`, the child also sends a listener on their loopback
/// to that socket.
fn make(listener_to: Option<RawFd>) -> io::Result<Shared> {
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
        let made = in_child(maps.as_ref());
        let made = made.and_then(|()| listener_to.map_or(Ok(()), send_listener));
        let code = match made {
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

/// In the child, inside the namespaces: the loopback brought up, a listener bound on
/// `127.0.0.1:0`, and its descriptor sent on `to`. Async-signal-safe: system calls on stack
/// values only.
fn send_listener(to: RawFd) -> io::Result<()> {
    // SAFETY: socket, ioctl, bind, listen and close on descriptors and stack values of this
    // (single-threaded) child; ifreq and sockaddr_in are plain C structs, valid when zeroed.
    let listener = unsafe {
        let probe = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        check(probe)?;
        let mut request: libc::ifreq = std::mem::zeroed();
        for (to, from) in request.ifr_name.iter_mut().zip(b"lo") {
            *to = *from as libc::c_char;
        }
        request.ifr_ifru.ifru_flags = (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        let up = libc::ioctl(probe, libc::SIOCSIFFLAGS, &request);
        libc::close(probe);
        check(up)?;
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        check(fd)?;
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        check(libc::bind(fd, (&raw const addr).cast(), len))?;
        check(libc::listen(fd, PROXY_BACKLOG))?;
        fd
    };
    // SAFETY: `listener` and `to` are open descriptors of this child.
    let (listener, to) = unsafe { (BorrowedFd::borrow_raw(listener), BorrowedFd::borrow_raw(to)) };
    let fds = [listener];
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let byte = [1u8];
    rustix::net::sendmsg(
        to,
        &[io::IoSlice::new(&byte)],
        &mut control,
        SendFlags::NOSIGNAL,
    )?;
    Ok(())
}

/// The one descriptor the child sent on `socket`.
fn received_fd(socket: &UnixStream) -> io::Result<OwnedFd> {
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut byte = [0u8; 1];
    let flags = RecvFlags::CMSG_CLOEXEC | RecvFlags::DONTWAIT;
    let mut iov = [io::IoSliceMut::new(&mut byte)];
    rustix::net::recvmsg(socket.as_fd(), &mut iov, &mut control, flags)?;
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(mut fds) = message
            && let Some(fd) = fds.next()
        {
            return Ok(fd);
        }
    }
    Err(io::Error::other("the namespace child sent no listener"))
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}
