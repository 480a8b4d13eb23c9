//! The mount side of the sandbox: a private mount namespace in which the whole file system is
//! read-only except the writable paths, and oml's own folders read-only even beneath those.
//!
//! Landlock confines what a command writes *into* files, but not their metadata: `chmod`,
//! `chown`, `utimes` and extended attributes are not Landlock rights. A read-only mount refuses
//! all of them (`EROFS`), so the command gets a view of the file system where everything outside
//! [`super::Policy::writable`] is mounted read-only. And Landlock's rules are an allow-list that
//! cannot carve a folder out of an allowed one, while a mount can: oml's configuration, state,
//! cache and runtime folders and the user's agent folders ([`super::Policy::protected`]), where
//! code and trust are loaded from, are bound read-only on top even when a writable path (`~`,
//! `~/.cache`) holds them.
//!
//! How, in the child between fork and exec (async-signal-safe system calls only, on a [`Plan`]
//! made before the fork): `unshare(CLONE_NEWUSER | CLONE_NEWNS)` (a user namespace, so no
//! privilege is needed; the user and group map to themselves; root, which may make a mount
//! namespace without one, makes only that), mounts made private, each
//! writable path (and each folder between it and a protected path) and then each protected path
//! bound onto itself, `mount_setattr` making every mount read-only, then each writable bind (not
//! what is mounted beneath it) writable again and the protected ones read-only again, then a
//! writable path that lies beneath a protected one (oml's worktree of a session, the one
//! exception `super::prepare` keeps) writable again, and the working directory entered anew (it
//! was entered before the binds existed).
//! Landlock, applied after this, forbids the command any further mount operation, so it cannot
//! undo the view. Devices and FIFOs stay writable on a read-only mount (`/dev/null` works).
//!
//! Where user namespaces are not allowed (a sysctl, a container's seccomp filter) or the kernel
//! has no `mount_setattr` (before Linux 5.12), [`available`] says why once, and the sandbox runs
//! without this layer: metadata outside the workspace is then not restricted, and a writable
//! path holding one of oml's folders is not made writable at all (`super::prepare` says so in
//! the status).
//!
//! With the network off, the same `unshare` also makes a network namespace
//! (`CLONE_NEWNET`): the command sees no interface but a loopback that is down, so no
//! protocol (UDP, TCP, ICMP) reaches anything, and the host's abstract Unix sockets, which
//! belong to the host's network namespace, are out of reach too. [`network_available`] probes
//! it apart, since a container may allow the first two namespaces and not this one.
//!
//! This module knows nothing of Landlock or of which paths matter; it gets them in the plan.

use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Everything the child needs, made before the fork (and sent as it is to the spawn helper).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct Plan {
    /// The user and group maps of a new user namespace; `None` for root, which makes the mount
    /// namespace without one (a user namespace would leave root's files of other users
    /// unwritable, and root may write only its own id's map from inside it).
    maps: Option<(CString, CString)>,
    writable: Vec<CString>,
    protected: Vec<CString>,
    /// The writable paths beneath a protected one (`super::prepare` keeps only oml's worktrees
    /// there): made writable again after the protected ones were made read-only.
    reopened: Vec<CString>,
    /// Folders covered with an empty read-only tmpfs, and files (sockets) with `/dev/null`:
    /// the Unix sockets of servers that run what they are sent ([`super::hidden_sockets`]).
    hidden_dirs: Vec<CString>,
    hidden_files: Vec<CString>,
    /// Whether the command gets a network namespace of its own (with the network off): no
    /// interface but a loopback that is down, so no route anywhere, for any protocol, and none
    /// of the host's abstract Unix sockets.
    isolate_network: bool,
}

impl Plan {
    /// A plan that keeps `writable` writable and `protected` read-only beneath them (paths that
    /// do not exist are left out: there is nothing to bind). Every folder between a writable
    /// path and a protected one beneath it is bound too, writable: a mount point cannot be
    /// renamed or removed, so no command can move a protected folder's parent aside and put a
    /// folder of its own in its place.
    pub(super) fn new(
        writable: &[PathBuf],
        protected: &[PathBuf],
        hidden: &[PathBuf],
        isolate_network: bool,
    ) -> Plan {
        // SAFETY: geteuid and getegid take no arguments.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let maps = (uid != 0).then(|| {
            let map = |id| CString::new(format!("{id} {id} 1\n")).unwrap_or_default();
            (map(uid), map(gid))
        });
        let c = |paths: &[PathBuf]| -> Vec<CString> {
            paths
                .iter()
                .filter(|p| p.exists())
                .filter_map(|p| CString::new(p.as_os_str().as_bytes()).ok())
                .collect()
        };
        let mut rw: Vec<PathBuf> = writable.to_vec();
        for p in protected {
            for w in writable.iter().filter(|w| within(p, w)) {
                let between = p.ancestors().skip(1).take_while(|a| *a != w.as_path());
                rw.extend(between.map(Path::to_path_buf));
            }
        }
        // Parents before children, each once.
        rw.sort_by_key(|p| (p.components().count(), p.clone()));
        rw.dedup();
        // A hidden path that holds a writable one would hide the workspace: it is left alone.
        let hidden: Vec<PathBuf> = hidden
            .iter()
            .filter(|h| !writable.iter().any(|w| within(w, h)))
            .cloned()
            .collect();
        let (dirs, files): (Vec<PathBuf>, Vec<PathBuf>) =
            hidden.into_iter().partition(|h| h.is_dir());
        Plan {
            maps,
            writable: c(&rw),
            protected: c(protected),
            reopened: c(&writable
                .iter()
                .filter(|w| protected.iter().any(|p| within(w, p)))
                .cloned()
                .collect::<Vec<_>>()),
            hidden_dirs: c(&dirs),
            hidden_files: c(&files),
            isolate_network,
        }
    }
}

impl Plan {
    /// Whether the command gets a network namespace (the network is off).
    pub(super) fn isolates_network(&self) -> bool {
        self.isolate_network
    }
}

/// Why a probe's child could not make its namespaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProbeFailed {
    /// The child could not be made (the OS error number).
    #[error("cannot probe: {}", io::Error::from_raw_os_error(*.0))]
    Fork(i32),
    /// It ended without saying how its set-up went.
    #[error("the probe did not finish")]
    Unfinished,
    /// A step of the set-up failed (the OS error number).
    #[error("{}", io::Error::from_raw_os_error(*.0))]
    Step(i32),
}

/// Why commands get no namespace of the kind this probe asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NoNamespace {
    /// No private mount namespace (nor, then, a network namespace).
    #[error(
        "no private mount namespace for commands ({0}; user namespaces may be disabled, or \
         the kernel is older than Linux 5.12)"
    )]
    Mount(ProbeFailed),
    /// A mount namespace, but no network namespace (a container's policy).
    #[error("no network namespace for commands ({0})")]
    Network(ProbeFailed),
}

/// The two probes' answers, made together: one child that makes a mount and a network
/// namespace answers both when it succeeds (as it does on most machines), so that a process's
/// first command pays one probe, not two; only when it fails is the mount namespace probed
/// alone.
fn probed() -> (Result<(), NoNamespace>, Result<(), NoNamespace>) {
    type Both = (Result<(), NoNamespace>, Result<(), NoNamespace>);
    static PROBED: OnceLock<Both> = OnceLock::new();
    *PROBED.get_or_init(|| {
        let Err(network) = probe(&Plan::new(&[], &[], &[], true)) else {
            return (Ok(()), Ok(()));
        };
        match probe(&Plan::new(&[], &[], &[], false)) {
            Ok(()) => (Ok(()), Err(NoNamespace::Network(network))),
            Err(mount) => (
                Err(NoNamespace::Mount(mount)),
                Err(NoNamespace::Mount(mount)),
            ),
        }
    })
}

/// Whether this process can give commands a private mount namespace: `Err` says why not. Probed
/// once, in a short-lived child that makes an empty plan's namespace ([`probed`]).
pub fn available() -> Result<(), NoNamespace> {
    probed().0
}

/// Whether commands can also get a network namespace of their own (a container's seccomp
/// policy may allow user and mount namespaces but not this one): `Err` says why not. Probed
/// once, with [`available`].
pub fn network_available() -> Result<(), NoNamespace> {
    probed().1
}

/// The read-only view for this process (a forked child about to exec); async-signal-safe.
/// `shared` holds the descriptors of the namespaces made once for commands with the network off
/// (`super::shared_ns`): they are joined instead of made anew.
pub(super) fn enter(plan: &Plan, shared: Option<(Option<RawFd>, RawFd)>) -> io::Result<()> {
    // oml is not dumpable, and a process that is not dumpable cannot write its own
    // /proc/self/{setgroups,uid_map,gid_map} (they belong to root). The command is dumpable
    // again after its exec anyway; the watcher, forked before, stays as oml is.
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) };
    let net = if plan.isolate_network {
        libc::CLONE_NEWNET
    } else {
        0
    };
    let shared =
        shared.filter(|(user, _)| plan.isolate_network && user.is_some() == plan.maps.is_some());
    match (&plan.maps, shared) {
        (_, Some((user, net))) => {
            super::shared_ns::join(user, net)?;
            check(unshare(libc::CLONE_NEWNS))?;
        }
        (Some((uid_map, gid_map)), None) => {
            check(unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS | net))?;
            // An unprivileged user may map its own group only once setgroups is denied.
            write_proc(c"/proc/self/setgroups", c"deny")?;
            write_proc(c"/proc/self/uid_map", uid_map)?;
            write_proc(c"/proc/self/gid_map", gid_map)?;
        }
        (None, None) => check(unshare(libc::CLONE_NEWNS | net))?,
    }
    mount(None, c"/", libc::MS_REC | libc::MS_PRIVATE)?;
    for path in plan.writable.iter().chain(&plan.protected) {
        mount(Some(path), path, libc::MS_BIND | libc::MS_REC)?;
    }
    set_attr(c"/", libc::MOUNT_ATTR_RDONLY, 0, true)?;
    // Only each writable bind itself is made writable again: a mount beneath it that was
    // read-only stays so (and so does any other mount beneath it).
    for path in &plan.writable {
        set_attr(path, 0, libc::MOUNT_ATTR_RDONLY, false)?;
    }
    for path in &plan.protected {
        set_attr(path, libc::MOUNT_ATTR_RDONLY, 0, true)?;
    }
    for path in &plan.reopened {
        set_attr(path, 0, libc::MOUNT_ATTR_RDONLY, false)?;
    }
    hide(plan)?;
    reenter_cwd()
}

// --- private helpers

/// Cover the plan's hidden folders with an empty read-only tmpfs and its hidden files with
/// `/dev/null`, read-only.
fn hide(plan: &Plan) -> io::Result<()> {
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC | libc::MS_RDONLY;
    for dir in &plan.hidden_dirs {
        // SAFETY: mount with NUL-terminated strings and no data.
        check(unsafe {
            libc::mount(
                c"tmpfs".as_ptr(),
                dir.as_ptr(),
                c"tmpfs".as_ptr(),
                flags,
                std::ptr::null(),
            )
        })?;
    }
    let null = CString::from(c"/dev/null");
    for file in &plan.hidden_files {
        mount(Some(&null), file, libc::MS_BIND)?;
        set_attr(file, libc::MOUNT_ATTR_RDONLY, 0, false)?;
    }
    Ok(())
}

/// The size of the buffer the working directory is read into (`PATH_MAX`).
const CWD_MAX: usize = 4096;

fn probe(plan: &Plan) -> Result<(), ProbeFailed> {
    let flags = libc::SIGCHLD as libc::c_long;
    // SAFETY: clone with only SIGCHLD and a null stack is fork without glibc's atfork
    // handlers; the child only makes system calls (`enter`, `_exit`) and never returns.
    let pid = unsafe { libc::syscall(libc::SYS_clone, flags, 0, 0, 0, 0) };
    if pid < 0 {
        let errno = io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL);
        return Err(ProbeFailed::Fork(errno));
    }
    if pid == 0 {
        let code = match enter(plan, None) {
            Ok(()) => 0,
            Err(e) => e.raw_os_error().unwrap_or(libc::EINVAL),
        };
        // SAFETY: _exit ends the child at once, running nothing of the parent's.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waitpid on the child just made, into a local integer.
    let waited = unsafe { libc::waitpid(pid as libc::pid_t, &mut status, 0) };
    if waited < 0 || !libc::WIFEXITED(status) {
        return Err(ProbeFailed::Unfinished);
    }
    match libc::WEXITSTATUS(status) {
        0 => Ok(()),
        errno => Err(ProbeFailed::Step(errno)),
    }
}

fn unshare(flags: libc::c_int) -> libc::c_int {
    // SAFETY: unshare with flags only; the caller is a single-threaded child.
    unsafe { libc::unshare(flags) }
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Write `text` into the `/proc` file `path`.
pub(super) fn write_proc(path: &std::ffi::CStr, text: &std::ffi::CStr) -> io::Result<()> {
    // SAFETY: open, write and close on a NUL-terminated path and a buffer of known length.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let bytes = text.to_bytes();
        let written = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        let error = io::Error::last_os_error();
        libc::close(fd);
        if written < 0 {
            return Err(error);
        }
    }
    Ok(())
}

fn mount(
    source: Option<&CString>,
    target: &std::ffi::CStr,
    flags: libc::c_ulong,
) -> io::Result<()> {
    let source = source.map_or(std::ptr::null(), |s| s.as_ptr());
    // SAFETY: mount with NUL-terminated paths (or a null source) and no data.
    check(unsafe {
        libc::mount(
            source,
            target.as_ptr(),
            std::ptr::null(),
            flags,
            std::ptr::null(),
        )
    })
}

/// `mount_setattr` on the mount at `path` (and beneath it when `recursive`).
fn set_attr(path: &std::ffi::CStr, set: u64, clear: u64, recursive: bool) -> io::Result<()> {
    let mut attr = libc::mount_attr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    let flags = if recursive { libc::AT_RECURSIVE } else { 0 };
    // SAFETY: mount_setattr reads `attr`, a mount_attr on this stack, of the size given.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            flags as libc::c_uint,
            &raw mut attr,
            std::mem::size_of::<libc::mount_attr>(),
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Enter the working directory again by its path, so that it is the one of the new binds.
fn reenter_cwd() -> io::Result<()> {
    let mut buf = [0u8; CWD_MAX];
    // SAFETY: getcwd writes at most `CWD_MAX` bytes, NUL-terminated, into `buf`; chdir reads it.
    unsafe {
        if libc::getcwd(buf.as_mut_ptr().cast(), CWD_MAX).is_null() {
            // A working directory that cannot be named stays as it is.
            return Ok(());
        }
        check(libc::chdir(buf.as_ptr().cast()))
    }
}

/// Whether `inner` is `outer` or lies beneath it (both real paths).
pub(super) fn within(inner: &Path, outer: &Path) -> bool {
    inner.starts_with(outer)
}
