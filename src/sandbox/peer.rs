//! Who is on the other end of a local control socket, and whether it may drive oml: the rule
//! every socket oml listens on applies to each connection it accepts (the live REPL today).
//!
//! A confined command must never reach a control channel: one form sent to the REPL runs
//! unconfined. The socket's mode (0600) keeps other users out but not the user's own confined
//! commands, and Landlock (before its Unix-socket rights) does not restrict `connect` to a
//! socket file. So the listener asks the kernel who connected:
//!
//! 1. the peer's user must be ours (`SO_PEERCRED`);
//! 2. the peer must not be confined: every command oml confines runs with `no_new_privs` (it is
//!    set before `landlock_restrict_self`, which needs it, and no process can clear it; every
//!    child inherits it), so a peer whose `/proc/<pid>/status` says `NoNewPrivs: 1` is refused;
//! 3. the peer is pinned with `SO_PEERPIDFD` (Linux 6.5): its pid is read from the pidfd, its
//!    status read, and the pidfd checked again afterwards, so a peer that exits and whose pid is
//!    reused by an unconfined process between the two reads is refused rather than mistaken.
//!    Before 6.5 the pid from `SO_PEERCRED` is used, with that (narrow) window.
//!
//! Limits, said in `docs/src/safety.md`: a legitimate client that itself runs with
//! `no_new_privs` (under another sandbox, a systemd unit with `NoNewPrivileges=`) is refused
//! too; a process outside every sandbox that a confined command talks into connecting (by a file
//! it writes for someone to run) is not this check's concern.
//!
//! This module knows nothing of what the socket carries.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Why a connection was refused.
#[derive(Debug, thiserror::Error)]
pub enum PeerRefused {
    /// The kernel could not say who connected.
    #[error("cannot identify the peer: {0}")]
    Unknown(#[source] io::Error),
    /// Another user connected.
    #[error("the peer runs as user {0}, not as this process's user")]
    OtherUser(u32),
    /// The peer runs with `no_new_privs`, as every command oml confines does.
    #[error("the peer (pid {0}) runs with no_new_privs, as a confined command does")]
    Confined(i32),
    /// The peer ended before it could be checked.
    #[error("the peer ended before it could be checked")]
    Gone,
}

/// Whether the process connected on `socket` (a connected Unix stream socket) may use it: our
/// user, and not confined (see the module doc).
pub fn check(socket: &impl AsRawFd) -> Result<(), PeerRefused> {
    let fd = socket.as_raw_fd();
    let cred = peer_cred(fd).map_err(PeerRefused::Unknown)?;
    // SAFETY: geteuid takes no arguments.
    let ours = unsafe { libc::geteuid() };
    if cred.uid != ours {
        return Err(PeerRefused::OtherUser(cred.uid));
    }
    match peer_pidfd(fd) {
        Some(pidfd) => {
            let pid = pidfd_pid(&pidfd).ok_or(PeerRefused::Gone)?;
            let confined = no_new_privs(pid)?;
            if !alive(&pidfd) {
                return Err(PeerRefused::Gone);
            }
            refuse_if(confined, pid)
        }
        None => refuse_if(no_new_privs(cred.pid)?, cred.pid),
    }
}

// --- private helpers

fn refuse_if(confined: bool, pid: i32) -> Result<(), PeerRefused> {
    if confined {
        Err(PeerRefused::Confined(pid))
    } else {
        Ok(())
    }
}

fn peer_cred(fd: RawFd) -> io::Result<libc::ucred> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `cred`, a ucred on this stack.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(cred)
}

/// A pidfd of the peer (`SO_PEERPIDFD`), or `None` where the kernel has none (before 6.5).
fn peer_pidfd(fd: RawFd) -> Option<OwnedFd> {
    let mut pidfd: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `pidfd`, an int on this stack.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERPIDFD,
            (&raw mut pidfd).cast(),
            &mut len,
        )
    };
    // SAFETY: on success the kernel gave us a new descriptor that nothing else owns.
    (rc == 0 && pidfd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(pidfd) })
}

/// The pid a pidfd refers to, from its fdinfo; `None` when the process has ended (`Pid: -1`).
fn pidfd_pid(pidfd: &OwnedFd) -> Option<i32> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", pidfd.as_raw_fd())).ok()?;
    let pid: i32 = field(&info, "Pid:")?.parse().ok()?;
    (pid > 0).then_some(pid)
}

/// Whether the process behind `pidfd` still runs (signal 0 through the pidfd).
fn alive(pidfd: &OwnedFd) -> bool {
    // SAFETY: pidfd_send_signal with signal 0 and no siginfo only checks the process.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            0,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    rc == 0
}

/// Whether process `pid` runs with `no_new_privs`; a process that is gone is [`PeerRefused::Gone`].
fn no_new_privs(pid: i32) -> Result<bool, PeerRefused> {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).map_err(|_| PeerRefused::Gone)?;
    let value = field(&status, "NoNewPrivs:").ok_or(PeerRefused::Gone)?;
    Ok(value != "0")
}

/// The value after `name` on its line of a `/proc` key-value file.
fn field<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|line| line.strip_prefix(name))
        .map(str::trim)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    #[test]
    fn this_process_may_connect_to_itself() {
        let (a, _b) = UnixStream::pair().expect("a socket pair");
        check(&a).expect("an unconfined peer of our own user");
    }

    #[test]
    fn status_fields_are_read_by_name() {
        let text = "Name:\toml\nNoNewPrivs:\t1\nSeccomp:\t0\n";
        assert_eq!(field(text, "NoNewPrivs:"), Some("1"));
        assert_eq!(field(text, "Pid:"), None);
    }
}
