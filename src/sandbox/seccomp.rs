//! The system-call filter of a confined command (seccomp), built with `seccompiler` from rules
//! (no hand-written BPF) once per variant, before any fork, and installed in the child with one
//! system call after Landlock.
//!
//! Refused with `EPERM`, because no build needs them and an attack wants them: `io_uring_*`
//! (its operations pass by other filters), `bpf`, `userfaultfd` (a race widener),
//! `perf_event_open`, the kernel keyring (`keyctl`, `add_key`, `request_key`), `kexec_*`,
//! `process_vm_readv`/`writev`, and new namespaces: `unshare` and `clone` with a `CLONE_NEW*`
//! flag, and `setns` (oml has made the command's namespaces before the filter, and a command
//! that makes more gets a user namespace in which it holds every capability). `clone3`, whose
//! flags live in memory a filter cannot read, answers `ENOSYS`, so that libc falls back to
//! `clone`. With the network off where no network namespace could be made, `socket` of
//! `AF_INET` and `AF_INET6` is refused too (`deny_inet`), the fallback for UDP.
//!
//! `ptrace` of a process outside the command's own tree is Landlock's to refuse (its domain
//! scoping), so debuggers keep working on the command's children.
//!
//! This module knows nothing of the policy; its caller says which variant.

use std::collections::BTreeMap;
use std::io;
use std::sync::OnceLock;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// The system calls refused whatever their arguments.
const REFUSED: &[libc::c_long] = &[
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_bpf,
    libc::SYS_userfaultfd,
    libc::SYS_perf_event_open,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_setns,
];

/// `CLONE_NEWTIME`, which the libc crate does not name on every target.
const CLONE_NEWTIME: libc::c_int = 0x80;

/// The `CLONE_NEW*` flags: any of them in `unshare` or `clone` makes a namespace.
const NEW_NAMESPACE_FLAGS: &[libc::c_int] = &[
    libc::CLONE_NEWNS,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWCGROUP,
    CLONE_NEWTIME,
];

/// The two programs of a variant: the `EPERM` rules, and `clone3` answered `ENOSYS`.
pub(super) struct Programs {
    refuse: BpfProgram,
    no_clone3: BpfProgram,
}

/// Why the system-call filter cannot be built here (seccompiler's error, shared: the answer is
/// kept for the process).
#[derive(Clone, Debug, thiserror::Error)]
#[error("the system-call filter cannot be built here: {0}")]
pub struct NoFilter(std::sync::Arc<seccompiler::Error>);

impl<E: Into<seccompiler::Error>> From<E> for NoFilter {
    fn from(e: E) -> NoFilter {
        NoFilter(std::sync::Arc::new(e.into()))
    }
}

/// The programs for a command, `deny_inet` when it may open no IPv4 or IPv6 socket; built on
/// the first call (which must come before the fork). `Err` says why none could be built (an
/// architecture seccompiler does not know).
pub(super) fn programs(deny_inet: bool) -> Result<&'static Programs, NoFilter> {
    static PLAIN: OnceLock<Result<Programs, NoFilter>> = OnceLock::new();
    static NO_INET: OnceLock<Result<Programs, NoFilter>> = OnceLock::new();
    let cell = if deny_inet { &NO_INET } else { &PLAIN };
    cell.get_or_init(|| build(deny_inet))
        .as_ref()
        .map_err(Clone::clone)
}

/// Install `programs` in this process (a forked child about to exec, with `no_new_privs` set);
/// async-signal-safe: two system calls on memory made before the fork.
pub(super) fn install(programs: &Programs) -> io::Result<()> {
    for program in [&programs.no_clone3, &programs.refuse] {
        let fprog = libc::sock_fprog {
            len: u16::try_from(program.len()).unwrap_or(u16::MAX),
            // seccompiler's `sock_filter` is the kernel's struct, `repr(C)`.
            filter: program.as_ptr().cast::<libc::sock_filter>().cast_mut(),
        };
        // SAFETY: seccomp(2) reads the program through `fprog`, which points into `program`,
        // alive for the whole call; it writes nothing of ours.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                0,
                &raw const fprog,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

fn build(deny_inet: bool) -> Result<Programs, NoFilter> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        REFUSED.iter().map(|call| (*call, Vec::new())).collect();
    rules.insert(libc::SYS_unshare, flag_rules(SeccompCmpArgLen::Dword)?);
    rules.insert(libc::SYS_clone, flag_rules(SeccompCmpArgLen::Qword)?);
    if deny_inet {
        let domain = |family: libc::c_int| {
            let family = u64::try_from(family).unwrap_or_default();
            SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, family)
                .and_then(|c| SeccompRule::new(vec![c]))
        };
        let inet = vec![domain(libc::AF_INET), domain(libc::AF_INET6)];
        let inet = inet.into_iter().collect::<Result<_, _>>();
        rules.insert(libc::SYS_socket, inet?);
    }
    let refuse = program(rules, libc::EPERM, arch)?;
    let clone3 = BTreeMap::from([(libc::SYS_clone3, Vec::new())]);
    let no_clone3 = program(clone3, libc::ENOSYS, arch)?;
    Ok(Programs { refuse, no_clone3 })
}

/// One rule per `CLONE_NEW*` flag: the call matches when its first argument has that bit.
fn flag_rules(len: SeccompCmpArgLen) -> Result<Vec<SeccompRule>, NoFilter> {
    NEW_NAMESPACE_FLAGS
        .iter()
        .map(|flag| {
            let bit = u64::try_from(*flag).unwrap_or_default();
            let has = SeccompCondition::new(0, len.clone(), SeccompCmpOp::MaskedEq(bit), bit)?;
            Ok(SeccompRule::new(vec![has])?)
        })
        .collect()
}

/// `rules` as a program that answers `errno` when one matches and allows everything else.
fn program(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    errno: libc::c_int,
    arch: TargetArch,
) -> Result<BpfProgram, NoFilter> {
    let errno = u32::try_from(errno).unwrap_or_default();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno),
        arch,
    )?;
    Ok(BpfProgram::try_from(filter)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_variants_build() {
        let plain = programs(false).expect("builds");
        let no_inet = programs(true).expect("builds");
        assert!(no_inet.refuse.len() > plain.refuse.len());
        assert!(!plain.no_clone3.is_empty());
    }
}
