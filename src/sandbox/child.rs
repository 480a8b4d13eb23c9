//! What a sandboxed command's process does between fork and exec, and the watcher it leaves
//! behind. Everything here after the fork is async-signal-safe: plain system calls on values
//! prepared before the fork, no allocation, no locks.
//!
//! The steps (see the module doc of `sandbox`): `setsid`, `PR_SET_PDEATHSIG` with the check
//! that oml still is the parent, the watcher forked, and when confined `PR_SET_NO_NEW_PRIVS`,
//! `landlock_restrict_self` and the system-call filter (`super::seccomp`, built before the fork). The watcher is forked before the confinement so that it is
//! outside the command's Landlock domain: with Landlock's signal scope (ABI 6) the command
//! cannot kill it, and it holds none of the command's descriptors.
//!
//! **The watcher** is a process forked with a raw `clone(SIGCHLD)` (glibc's `fork` runs atfork
//! handlers that may take locks held by threads that do not exist in this child). It closes
//! every descriptor but the read end of oml's *lifeline* pipe, whose write end only oml holds,
//! moves to a process group of its own (staying in the command's session, which keeps the
//! session's id, and so the command's group id, from being reused while it lives) and waits:
//! when the lifeline reports end-of-file, oml has ended, however it ended, and the watcher sends
//! SIGKILL to the command's process group; once the command's first process has exited and its
//! group is empty, the watcher exits. A process of the command that makes a session or group of
//! its own (`setsid`, `setpgid`) escapes it.
//!
//! `PR_SET_PDEATHSIG` fires when the *thread* that spawned the command ends, not the process.
//! Callers spawn from a thread that awaits the command, so that is not earlier than intended.
//!
//! When a mount plan is given (`super::mounts`), the private read-only view is made after the
//! watcher is forked and before `no_new_privs` and Landlock.
//!
//! This module knows nothing of policies or Landlock's rules; it gets a ruleset descriptor and a
//! mount plan.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::sync::{Arc, OnceLock};

use super::mounts::Plan;

/// How often the watcher checks whether the command's group is empty once its first process has
/// exited (while background processes of the command still run).
const WATCH_INTERVAL_MS: libc::c_int = 1000;

/// The exit status of a command whose oml ended before it could start.
const PARENT_GONE_EXIT: libc::c_int = 128 + libc::SIGKILL;

/// Descriptors the watcher closes one by one when the kernel has no `close_range` (Linux 5.9).
pub(super) const CLOSE_FALLBACK_MAX_FD: libc::c_int = 65_536;

/// The capabilities a confined command of root's keeps (linux/capability.h numbers, which the
/// libc crate does not name): what file work as root needs — CAP_CHOWN, CAP_DAC_OVERRIDE,
/// CAP_DAC_READ_SEARCH, CAP_FOWNER, CAP_FSETID (0–4), CAP_KILL (5, which Landlock's signal scope
/// confines), CAP_SETGID, CAP_SETUID (6, 7) and CAP_NET_BIND_SERVICE (10). Every other one is
/// dropped from the bounding set, so the command cannot open raw or packet sockets past the
/// network rules, load modules, reboot, or read oml's `/proc` entries (CAP_SYS_ADMIN,
/// CAP_SYS_PTRACE, CAP_PERFMON). Other users' commands have no capabilities to lose.
const KEPT_CAPS: [libc::c_ulong; 9] = [0, 1, 2, 3, 4, 5, 6, 7, 10];

/// `CLOSE_RANGE_CLOEXEC` (linux/close_range.h): mark the range close-on-exec, do not close it.
const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;

/// Past the last capability the kernel knows, `PR_CAPBSET_DROP` fails with EINVAL.
const CAP_PROBE_MAX: libc::c_ulong = 63;

/// The size of the stack the watcher runs on. It makes system calls only, a few frames deep;
/// the memory is reserved, not touched, until it is used.
const WATCHER_STACK_BYTES: usize = 256 * 1024;

/// The last signal number whose handler the watcher resets to the default.
const LAST_STANDARD_SIGNAL: libc::c_int = 31;

/// Make `cmd` run the steps above in its child; `ruleset` (a Landlock ruleset descriptor) and
/// the system-call filter ([`super::seccomp`]) are applied when `confined` is `Some` (holding
/// whether IPv4 and IPv6 sockets are refused too), and the ruleset kept open until `cmd` is
/// dropped. `joined`, when given, is the network namespace (and its user namespace) the
/// command joins instead of the one for commands with the network off: the domain proxy's. `Err` when the filter cannot be built here. The watcher watches
/// `lifeline` (the read end of oml's lifeline pipe, which the spawn helper is handed), or this
/// process's own lifeline when `None`.
pub(super) fn install(
    cmd: &mut std::process::Command,
    ruleset: Option<Arc<OwnedFd>>,
    mounts: Option<Arc<Plan>>,
    confined: Option<bool>,
    joined: Option<Arc<super::shared_ns::Shared>>,
    lifeline: Option<RawFd>,
) -> io::Result<()> {
    // Made before the fork: nothing may be allocated after it.
    let isolates = mounts
        .as_deref()
        .is_some_and(|plan| confined.is_some() && plan.isolates_network());
    let shared = match (&joined, isolates) {
        (_, false) => None,
        (Some(joined), true) => Some(joined.fds()),
        (None, true) => super::shared_ns::get().map(super::shared_ns::Shared::fds),
    };
    let filter = match confined {
        Some(deny_inet) => Some(super::seccomp::programs(deny_inet).map_err(io::Error::other)?),
        None => None,
    };
    let parent = libc::pid_t::try_from(std::process::id()).unwrap_or(libc::pid_t::MAX);
    let lifeline = lifeline.or_else(own_lifeline);
    let ruleset_fd = ruleset.as_ref().map_or(-1, |fd| fd.as_raw_fd());
    // The watcher's stack, reserved here because nothing may be allocated after the fork.
    let stack = StackRegion::map(WATCHER_STACK_BYTES);
    let watcher = lifeline.zip(stack.as_ref()).map(|(fd, stack)| Watcher {
        lifeline: fd,
        stack_top: stack.top(),
    });
    let steps = move || {
        let _open = (&ruleset, &stack, &joined);
        in_child(
            parent,
            ruleset_fd,
            mounts.as_deref(),
            shared,
            filter,
            watcher,
        )
    };
    // SAFETY: the closure runs in the forked child before exec and only makes system calls
    // (setsid, prctl, getppid, clone, unshare, mount, landlock_restrict_self, _exit) on values
    // prepared before the fork; it allocates nothing and takes no lock, so it is
    // async-signal-safe.
    unsafe {
        cmd.pre_exec(steps);
    }
    Ok(())
}

/// The read end of this process's lifeline pipe (a descriptor above 2, so the child's stdio
/// set-up does not replace it); `None` if the pipe could not be made.
pub(super) fn own_lifeline() -> Option<RawFd> {
    static LIFELINE: OnceLock<Option<(OwnedFd, OwnedFd)>> = OnceLock::new();
    LIFELINE
        .get_or_init(|| {
            let (read, write) = io::pipe().ok()?;
            // `try_clone` duplicates to the lowest descriptor from 3 up, close-on-exec.
            let read = OwnedFd::from(read).try_clone().ok()?;
            Some((read, OwnedFd::from(write)))
        })
        .as_ref()
        .map(|(read, _)| read.as_raw_fd())
}

/// The child's steps; async-signal-safe.
fn in_child(
    parent: libc::pid_t,
    ruleset: RawFd,
    mounts: Option<&Plan>,
    shared: Option<(Option<RawFd>, RawFd)>,
    filter: Option<&super::seccomp::Programs>,
    watcher: Option<Watcher>,
) -> io::Result<()> {
    let confined = filter.is_some();
    // oml ignores SIGXFSZ (a full file is an error it handles); the command gets the default
    // action back, as it would from a shell.
    // SAFETY: signal(2) with SIG_DFL installs no handler of ours.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_DFL) };
    // SAFETY: setsid takes no arguments and touches no memory.
    if unsafe { libc::setsid() } < 0 {
        return Err(io::Error::last_os_error());
    }
    let kill = libc::SIGKILL as libc::c_ulong;
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, kill, 0, 0, 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: getppid takes no arguments. If oml died before PDEATHSIG was set, the child was
    // reparented and will never get the signal: end now, as the signal would have.
    if unsafe { libc::getppid() } != parent {
        // SAFETY: _exit ends the process without running any handler.
        unsafe { libc::_exit(PARENT_GONE_EXIT) };
    }
    // The watcher is forked before any confinement: it stays outside the command's Landlock
    // domain, where signals from the command cannot reach it (Landlock's signal scope, ABI 6).
    if let Some(watcher) = watcher {
        spawn_watcher(watcher)?;
    }
    if let Some(plan) = mounts.filter(|_| confined) {
        super::mounts::enter(plan, shared)?;
    }
    if confined {
        drop_capabilities()?;
        // SAFETY: prctl with integer arguments only.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } < 0 {
            return Err(io::Error::last_os_error());
        }
        if ruleset >= 0 {
            // SAFETY: landlock_restrict_self takes a descriptor and flags; `ruleset` is the open
            // ruleset descriptor the parent made (kept open by the closure that holds it).
            let restricted = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0) };
            if restricted < 0 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    if let Some(filter) = filter {
        super::seccomp::install(filter)?;
    }
    // Descriptors oml inherited without close-on-exec (from an editor, a shell) do not reach the
    // command: everything above stdio closes at exec. Before Linux 5.11 this flag is unknown and
    // the call fails, leaving them as they were.
    // SAFETY: close_range with integer bounds and a flag; it only marks descriptors.
    unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            CLOSE_RANGE_CLOEXEC,
        )
    };
    Ok(())
}

/// Drop every capability but [`KEPT_CAPS`] from the bounding set, and the ambient ones. For
/// root a failed drop refuses the command; for other users (EPERM: no CAP_SETPCAP, and no
/// capability either) there is nothing to drop.
fn drop_capabilities() -> io::Result<()> {
    // SAFETY: geteuid takes no arguments.
    let root = unsafe { libc::geteuid() } == 0;
    for cap in (0..=CAP_PROBE_MAX).filter(|c| !KEPT_CAPS.contains(c)) {
        // SAFETY: prctl with integer arguments only.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } < 0 {
            let error = io::Error::last_os_error();
            match error.raw_os_error() {
                Some(libc::EINVAL) => break,
                _ if root => return Err(error),
                _ => break,
            }
        }
    }
    // SAFETY: prctl with integer arguments only; it fails harmlessly on kernels before 4.3.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    };
    Ok(())
}

/// What the watcher needs: the lifeline to watch, and the top of the stack it runs on.
#[derive(Clone, Copy)]
struct Watcher {
    lifeline: RawFd,
    stack_top: *mut u8,
}

/// Memory mapped for the watcher's stack and unmapped when dropped. A mapping of its own, not
/// the allocator's: a region that size from the allocator may be heap oml has used and keeps
/// after it is freed (200 commands at once left oml 7 MiB larger), while pages of a fresh
/// mapping are only ever touched in the forked child, whose copy they are.
struct StackRegion {
    start: *mut libc::c_void,
    len: usize,
}

// SAFETY: the region is only read or written in the forked child; the parent only unmaps it.
unsafe impl Send for StackRegion {}
// SAFETY: as above; a shared reference gives no access to the memory.
unsafe impl Sync for StackRegion {}

impl StackRegion {
    /// `len` bytes of fresh anonymous memory, or `None` when it cannot be mapped.
    fn map(len: usize) -> Option<StackRegion> {
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing; the
        // result is checked before use.
        let start = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_STACK,
                -1,
                0,
            )
        };
        (start != libc::MAP_FAILED).then_some(StackRegion { start, len })
    }

    /// One past the region's last byte: where a stack that grows down starts.
    fn top(&self) -> *mut u8 {
        self.start.cast::<u8>().wrapping_add(self.len)
    }
}

impl Drop for StackRegion {
    fn drop(&mut self) {
        // SAFETY: the region was mapped by `map` with this length and is unmapped once.
        unsafe { libc::munmap(self.start, self.len) };
    }
}

// SAFETY: the stack pointer is only used in the forked child, whose memory it points into.
unsafe impl Send for Watcher {}
// SAFETY: as above; the parent never dereferences it.
unsafe impl Sync for Watcher {}

/// Start the watcher of this process's group (this process leads it after `setsid`).
///
/// It is a process of its own (`clone` without `CLONE_THREAD`) that shares this child's memory
/// (`CLONE_VM`) on a stack of its own: forking a copy of oml's address space a second time cost
/// a page-table copy per megabyte oml has touched, on every command. Until this child execs,
/// the two run side by side in one address space, so the watcher writes nothing but its own
/// region (and, on a failed system call, errno, which this child's steps read only after calls
/// of their own); after the exec, the memory is the watcher's alone. glibc's `clone` wrapper
/// runs no atfork handler.
fn spawn_watcher(watcher: Watcher) -> io::Result<()> {
    // SAFETY: getpid takes no arguments.
    let leader = unsafe { libc::getpid() };
    // The arguments go at the top of the watcher's own region, where nothing else writes, and
    // the stack grows down from below them, 16-byte aligned as x86_64 and aarch64 require.
    let at = ((watcher.stack_top as usize) - std::mem::size_of::<WatchArgs>()) & !15;
    let args = at as *mut WatchArgs;
    // SAFETY: `at` lies inside the reserved region of WATCHER_STACK_BYTES, aligned for WatchArgs.
    unsafe {
        args.write(WatchArgs {
            lifeline: watcher.lifeline,
            leader,
        })
    };
    // SAFETY: the region below `at` is reserved memory that lives as long as this address space
    // (until this process execs, then as the watcher's); `watch_entry` makes system calls only
    // and never returns.
    let pid = unsafe {
        libc::clone(
            watch_entry,
            args.cast(),
            libc::CLONE_VM | libc::SIGCHLD,
            args.cast(),
        )
    };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The arguments of [`watch_entry`].
struct WatchArgs {
    lifeline: RawFd,
    leader: libc::pid_t,
}

/// The watcher's entry point.
extern "C" fn watch_entry(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` points at the WatchArgs `spawn_watcher` wrote in the watcher's own region.
    let WatchArgs { lifeline, leader } = unsafe { std::ptr::read(arg.cast::<WatchArgs>()) };
    watch(lifeline, leader)
}

/// The watcher's life: kill group `leader` when the lifeline closes, exit once it is empty.
fn watch(lifeline: RawFd, leader: libc::pid_t) -> ! {
    close_all_but(lifeline);
    reset_signals();
    // SAFETY: setpgid and pidfd_open take integers; a failed pidfd_open (before Linux 5.3)
    // leaves -1, which poll ignores, and the group is then checked every interval.
    let pidfd = unsafe {
        libc::setpgid(0, 0);
        libc::syscall(libc::SYS_pidfd_open, leader, 0) as libc::c_int
    };
    let mut fds = [
        libc::pollfd {
            fd: lifeline,
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: pidfd,
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    loop {
        // Without a pidfd (the leader may be gone already), look at the group before waiting.
        if fds[1].fd < 0 && group_is_empty(leader) {
            exit(0);
        }
        let timeout = if fds[1].fd >= 0 {
            -1
        } else {
            WATCH_INTERVAL_MS
        };
        // SAFETY: two valid pollfd structures on this stack.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout) };
        if n < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            exit(1);
        }
        if fds[0].revents != 0 {
            // SAFETY: kill with integers; the group is this command's (its id is held by the
            // session this watcher stays in).
            unsafe { libc::kill(-leader, libc::SIGKILL) };
            exit(0);
        }
        if fds[1].fd >= 0 && fds[1].revents != 0 {
            // SAFETY: closing the pidfd this function opened.
            unsafe { libc::close(fds[1].fd) };
            fds[1].fd = -1;
        }
    }
}

/// Whether no process is left in group `pgid`.
fn group_is_empty(pgid: libc::pid_t) -> bool {
    // SAFETY: signal 0 only checks whether the group exists.
    let result = unsafe { libc::kill(-pgid, 0) };
    result < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

/// Close every descriptor but `keep` (the watcher must not hold the command's output pipe, nor
/// anything of oml's).
fn close_all_but(keep: RawFd) {
    let (keep_u, max) = (keep as libc::c_uint, libc::c_uint::MAX);
    // SAFETY: close_range with integer bounds; these descriptors are this process's copies.
    let ranges = unsafe {
        let below = if keep > 0 {
            libc::syscall(libc::SYS_close_range, 0, keep_u - 1, 0)
        } else {
            0
        };
        (
            below,
            libc::syscall(libc::SYS_close_range, keep_u + 1, max, 0),
        )
    };
    if ranges.0 < 0 || ranges.1 < 0 {
        for fd in (0..CLOSE_FALLBACK_MAX_FD).filter(|&fd| fd != keep) {
            // SAFETY: closing a descriptor of this process; a closed one gives EBADF.
            unsafe { libc::close(fd) };
        }
    }
}

/// Give every standard signal its default action: oml's handlers (tokio's, Ctrl-C's) were
/// copied into the watcher and have nothing to do there.
fn reset_signals() {
    for signal in 1..=LAST_STANDARD_SIGNAL {
        if signal != libc::SIGKILL && signal != libc::SIGSTOP {
            // SAFETY: signal(2) with SIG_DFL installs no handler of ours.
            unsafe { libc::signal(signal, libc::SIG_DFL) };
        }
    }
}

fn exit(code: libc::c_int) -> ! {
    // SAFETY: _exit ends the process at once, running nothing of ours.
    unsafe { libc::_exit(code) }
}
