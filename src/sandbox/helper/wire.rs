//! The messages between oml and its spawn helper, and how one crosses the socket: one JSON
//! value per `SOCK_SEQPACKET` message (the kernel keeps the boundaries), with the descriptors
//! it hands over as `SCM_RIGHTS`.
//!
//! Each message is parsed once into a [`Request`] or a [`Reply`]; nothing is recognised by its
//! text. This module knows the shapes and the socket calls, not what either side does with them.

use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};
use serde::{Deserialize, Serialize};

use crate::sandbox::mounts::Plan;

/// The largest message either side sends or reads. A request that would be larger (a huge
/// environment) is not sent: oml starts that command itself.
pub(super) const MAX_MESSAGE_BYTES: usize = 64 * 1024;

/// The most descriptors one message carries: a spawn's stdout, stderr, lifeline, ruleset, and
/// the user and network namespaces it joins.
pub(super) const MAX_FDS: usize = 6;

/// What oml asks of the helper.
#[derive(Debug, Serialize, Deserialize)]
pub(in crate::sandbox) enum Request {
    /// Start `program` with `args` in `cwd`, with exactly the environment `env`, stdin from
    /// `/dev/null`, and the sandbox's child steps (`confined`, the mount plan, and a Landlock
    /// ruleset when `ruleset` says one is attached). The descriptors attached, in order: the
    /// command's stdout, its stderr, oml's lifeline (the read end the watcher watches), the
    /// ruleset, and the `namespaces` the command joins (the domain proxy's: a user namespace's
    /// and a network namespace's, or the network namespace's alone).
    Spawn {
        id: u64,
        program: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        cwd: String,
        confined: bool,
        /// With `confined`: refuse IPv4 and IPv6 sockets (no network namespace here).
        deny_inet: bool,
        mounts: Option<Plan>,
        ruleset: bool,
        #[serde(default)]
        namespaces: u8,
    },
}

/// What the helper tells oml about request `id`.
#[derive(Debug, Serialize, Deserialize)]
pub(super) enum Reply {
    /// The command runs as process `pid`, the leader of its own process group.
    Spawned { id: u64, pid: i32 },
    /// The command could not be started: the OS error number (`EINVAL` for a request the
    /// helper could not use).
    Failed { id: u64, errno: i32 },
    /// The command's first process ended; `status` is its raw wait status.
    Exited { id: u64, status: i32 },
}

/// Send `message` with `fds` attached, waiting for room in the socket's buffer when `wait`
/// (else `WouldBlock` when it is full). `Err(InvalidInput)` when it is larger than
/// [`MAX_MESSAGE_BYTES`].
pub(super) fn send<T: Serialize>(
    socket: BorrowedFd<'_>,
    message: &T,
    fds: &[BorrowedFd<'_>],
    wait: bool,
) -> io::Result<()> {
    let bytes = serde_json::to_vec(message).map_err(io::Error::other)?;
    if bytes.len() > MAX_MESSAGE_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "message too large for the spawn helper",
        ));
    }
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "too many descriptors",
        ));
    }
    let flags = match wait {
        true => SendFlags::NOSIGNAL,
        false => SendFlags::NOSIGNAL | SendFlags::DONTWAIT,
    };
    let sent = loop {
        match rustix::net::sendmsg(socket, &[IoSlice::new(&bytes)], &mut control, flags) {
            Err(rustix::io::Errno::INTR) => continue,
            other => break other?,
        }
    };
    if sent != bytes.len() {
        return Err(io::Error::other("the spawn helper's message was cut"));
    }
    Ok(())
}

/// Receive one message and the descriptors that came with it, waiting for it unless `wait` is
/// false (then `WouldBlock` when none is there). `Ok(None)` at end-of-file: the other side is
/// gone. A message that does not parse is `InvalidData`.
pub(super) fn recv<T: for<'de> Deserialize<'de>>(
    socket: impl AsFd,
    buffer: &mut [u8],
    wait: bool,
) -> io::Result<Option<(T, Vec<OwnedFd>)>> {
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let flags = if wait {
        RecvFlags::CMSG_CLOEXEC
    } else {
        RecvFlags::CMSG_CLOEXEC | RecvFlags::DONTWAIT
    };
    let got = loop {
        let mut iov = [IoSliceMut::new(buffer)];
        match rustix::net::recvmsg(&socket, &mut iov, &mut control, flags) {
            Err(rustix::io::Errno::INTR) => continue,
            other => break other?,
        }
    };
    let fds: Vec<OwnedFd> = control
        .drain()
        .flat_map(|message| match message {
            RecvAncillaryMessage::ScmRights(fds) => fds.collect(),
            _ => Vec::new(),
        })
        .collect();
    if got.bytes == 0 {
        return Ok(None);
    }
    if got.flags.contains(rustix::net::ReturnFlags::TRUNC) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a spawn helper message was cut",
        ));
    }
    let message = serde_json::from_slice(&buffer[..got.bytes])
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    Ok(Some((message, fds)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::net::{AddressFamily, SocketFlags, SocketType};

    fn pair() -> (OwnedFd, OwnedFd) {
        rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )
        .expect("a socket pair")
    }

    #[test]
    fn a_request_crosses_with_its_descriptors_and_a_huge_one_is_not_sent() {
        let (ours, theirs) = pair();
        let (read, write) = std::io::pipe().expect("a pipe");
        let (read, write) = (OwnedFd::from(read), OwnedFd::from(write));
        let request = Request::Spawn {
            id: 7,
            program: "bash".into(),
            args: vec!["-c".into(), "echo hi".into()],
            env: vec![("PATH".into(), "/usr/bin".into())],
            cwd: "/tmp".into(),
            confined: true,
            deny_inet: false,
            mounts: None,
            ruleset: false,
            namespaces: 0,
        };
        send(
            ours.as_fd(),
            &request,
            &[write.as_fd(), read.as_fd()],
            false,
        )
        .expect("sent");
        let mut buffer = vec![0u8; MAX_MESSAGE_BYTES];
        let (got, fds) = recv::<Request>(&theirs, &mut buffer, false)
            .expect("received")
            .expect("a message");
        let Request::Spawn { id, args, .. } = got;
        assert_eq!((id, args.len(), fds.len()), (7, 2, 2));
        let huge = Request::Spawn {
            id: 8,
            program: "x".repeat(MAX_MESSAGE_BYTES),
            args: Vec::new(),
            env: Vec::new(),
            cwd: "/".into(),
            confined: false,
            deny_inet: false,
            mounts: None,
            ruleset: false,
            namespaces: 0,
        };
        let refused = send(ours.as_fd(), &huge, &[], false).expect_err("too large");
        assert_eq!(refused.kind(), io::ErrorKind::InvalidInput);
        drop(ours);
        // Nothing is queued: the end of the stream, or, while a child another test is forking
        // still holds a copy of `ours` until its exec, no message yet.
        match recv::<Request>(&theirs, &mut buffer, false) {
            Ok(None) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Ok(Some(_)) => panic!("something was sent after the first request"),
            Err(e) => panic!("reading the end: {e}"),
        }
    }
}
