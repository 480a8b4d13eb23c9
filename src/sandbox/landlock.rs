//! The Landlock side of the sandbox: probing the kernel's Landlock ABI once, saying what a
//! policy gets from it ([`status_for`]), and building the ruleset in the parent ([`build`]), so
//! that the child only has to call `landlock_restrict_self` on its descriptor.
//!
//! What each Landlock ABI enforces for a confined command:
//!
//! | ABI | Linux | adds |
//! |---|---|---|
//! | 1 | 5.13 | reads, writes, creating and removing files and folders, executing |
//! | 2 | 5.19 | renaming and linking across folders (before it, always refused) |
//! | 3 | 6.2 | `truncate` (before it, truncating by path is not restricted) |
//! | 4 | 6.7 | TCP `bind` and `connect` (before it, the network is not restricted) |
//! | 5 | 6.10 | `ioctl` on devices |
//! | 6 | 6.12 | signals to processes outside the sandbox; abstract Unix sockets outside it |
//!
//! The rules: read and execute beneath every top-level folder except `/dev`; list any folder;
//! in `/dev`, read and write `null`, `zero` and `full`, read `random` and `urandom`, and (in
//! workspace-write mode) read and write `/dev/shm`; everything beneath [`Policy::writable`].
//! Nothing else in `/dev` is reachable, so neither `/dev/tty` nor a terminal's `/dev/pts/N`.
//! With the network off, TCP `bind` and `connect` are denied on every port, and abstract Unix
//! sockets made outside the sandbox cannot be reached. Signals to processes outside the sandbox
//! are always denied (ABI 6).
//!
//! This module knows nothing of the child side (`child.rs`) nor of who reads the status.

use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope,
};
use parking_lot::Mutex;

use super::{Mode, Policy, Status};

/// The filesystem rights oml asks for: all those of ABI 5. Newer rights (e.g. ABI 9's
/// `ResolveUnix`) are not handled until they are tested here.
const FS_ABI: ABI = ABI::V5;

/// The TCP rights denied when the network is off (ABI 4: bind and connect).
const NET_ABI: ABI = ABI::V4;

/// The first ABI with TCP rules.
pub const TCP_ABI: i32 = 4;

/// The first ABI with scopes (signals, abstract Unix sockets).
pub const SCOPE_ABI: i32 = 6;

/// The first ABI that restricts `truncate`.
pub const TRUNCATE_ABI: i32 = 3;

/// Devices a confined command may read and write.
const DEV_READ_WRITE: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

/// Devices a confined command may read.
const DEV_READ: &[&str] = &["/dev/random", "/dev/urandom"];

/// Shared memory, writable in workspace-write mode (Python's multiprocessing needs it).
pub(super) const DEV_SHM: &str = "/dev/shm";

/// `LANDLOCK_CREATE_RULESET_VERSION`: ask `landlock_create_ruleset` for the ABI version.
const CREATE_RULESET_VERSION: libc::c_uint = 1;

/// Why Landlock cannot be used here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NoLandlock {
    /// The kernel was built without it.
    #[error(
        "this kernel has no Landlock (it needs Linux 5.13 or later, built with \
         CONFIG_SECURITY_LANDLOCK)"
    )]
    NotBuilt,
    /// Built in, but not among the enabled security modules.
    #[error(
        "Landlock is built into this kernel but not enabled (add landlock to the kernel's \
         lsm= boot parameter)"
    )]
    NotEnabled,
    /// The call failed otherwise (the OS error number: a container's policy, say).
    #[error("Landlock cannot be used here: {}", std::io::Error::from_raw_os_error(*.0))]
    Refused(i32),
}

/// Why a command's ruleset could not be made.
#[derive(Debug, thiserror::Error)]
pub enum RulesetFailed {
    /// No Landlock here at all.
    #[error(transparent)]
    NoLandlock(#[from] NoLandlock),
    /// The landlock crate refused a step.
    #[error("cannot build the Landlock ruleset: {0}")]
    Build(#[from] landlock::RulesetError),
    /// The ruleset was made without a descriptor.
    #[error("this kernel does not support the Landlock ruleset")]
    Unsupported,
}

/// The kernel's Landlock ABI version, probed once: `Err` says why there is none.
pub fn probe() -> Result<i32, NoLandlock> {
    static ABI_VERSION: OnceLock<Result<i32, NoLandlock>> = OnceLock::new();
    *ABI_VERSION.get_or_init(probe_kernel)
}

fn probe_kernel() -> Result<i32, NoLandlock> {
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag the call only returns
    // the ABI version (or an error); it reads and writes no memory of ours.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    if v > 0 {
        return Ok(i32::try_from(v).unwrap_or(i32::MAX));
    }
    let error = std::io::Error::last_os_error();
    Err(match error.raw_os_error() {
        Some(libc::ENOSYS) => NoLandlock::NotBuilt,
        Some(libc::EOPNOTSUPP) => NoLandlock::NotEnabled,
        errno => NoLandlock::Refused(errno.unwrap_or(libc::EINVAL)),
    })
}

/// What `policy` gets from Landlock ABI `abi` (at least 1); `net_namespace` says whether the
/// command gets a network namespace of its own (`super::mounts`), which needs no TCP rules.
pub fn status_for(abi: i32, policy: &Policy, net_namespace: bool) -> Status {
    let mut missing = Vec::new();
    if abi < TRUNCATE_ABI {
        missing.push("truncating files by path is not restricted (ABI 3, Linux 6.2)");
    }
    if !policy.network && abi < TCP_ABI && !net_namespace {
        missing.push("the network is not restricted: no TCP rules before ABI 4 (Linux 6.7)");
    }
    if abi < SCOPE_ABI {
        missing.push(
            "commands may signal processes outside the sandbox, their watcher included, and \
             reach abstract Unix sockets: no scopes before ABI 6 (Linux 6.12)",
        );
    }
    if missing.is_empty() {
        Status::Full
    } else {
        Status::PartiallyEnforced(format!(
            "this kernel has Landlock ABI {abi}: {}",
            missing.join("; ")
        ))
    }
}

/// The last ruleset built, reused while the policy stays the same: a ruleset can restrict any
/// number of processes. Only a ruleset whose every path could be opened is kept, so a listed
/// folder made later is picked up.
type Cached = (Policy, Status, Arc<OwnedFd>);

/// Build the ruleset for `policy` (not [`Mode::Off`]), or take the one built last for the same
/// policy: its status and descriptor, or why Landlock cannot be used.
pub(super) fn build(policy: &Policy) -> Result<(Status, Arc<OwnedFd>), RulesetFailed> {
    static LAST: Mutex<Option<Cached>> = Mutex::new(None);
    let abi = probe()?;
    let mut last = LAST.lock();
    if let Some((_, status, fd)) = last.as_ref().filter(|(cached, ..)| cached == policy) {
        return Ok((status.clone(), fd.clone()));
    }
    let mut complete = true;
    let ruleset = rules(policy, &mut complete)?;
    let fd: Option<OwnedFd> = ruleset.into();
    let fd = fd.ok_or(RulesetFailed::Unsupported)?;
    let namespace = super::mounts::network_available().is_ok();
    let (status, fd) = (status_for(abi, policy, namespace), Arc::new(fd));
    *last = complete.then(|| (policy.clone(), status.clone(), fd.clone()));
    Ok((status, fd))
}

fn rules(policy: &Policy, complete: &mut bool) -> Result<RulesetCreated, landlock::RulesetError> {
    let all = AccessFs::from_all(FS_ABI);
    let read = AccessFs::from_read(FS_ABI);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)?
        .scope(Scope::Signal)?;
    if !policy.network {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(NET_ABI))?
            .scope(Scope::AbstractUnixSocket)?;
    }
    let mut created = ruleset.create()?;
    let mut allow = |ruleset, path: &Path, access| allow(ruleset, path, access, complete);
    created = allow(created, Path::new("/"), AccessFs::ReadDir.into())?;
    for entry in std::fs::read_dir("/").into_iter().flatten().flatten() {
        if entry.file_name() != "dev" {
            created = allow(created, &entry.path(), read)?;
        }
    }
    let device = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev;
    for dev in DEV_READ_WRITE {
        created = allow(created, Path::new(dev), device)?;
    }
    for dev in DEV_READ {
        created = allow(created, Path::new(dev), AccessFs::ReadFile.into())?;
    }
    if policy.mode == Mode::WorkspaceWrite {
        // `policy.writable` holds `/dev/shm` already (`super::plan`).
        for path in &policy.writable {
            created = allow(created, path, all)?;
        }
    }
    Ok(created)
}

/// Allow `access` beneath `path`; a path that cannot be opened (missing, not permitted) is
/// skipped, since the command could not use it either, and `complete` is cleared.
fn allow(
    ruleset: RulesetCreated,
    path: &Path,
    access: BitFlags<AccessFs>,
    complete: &mut bool,
) -> Result<RulesetCreated, landlock::RulesetError> {
    match PathFd::new(path) {
        Ok(fd) => ruleset.add_rule(PathBeneath::new(fd, access)),
        Err(e) => {
            tracing::debug!("sandbox: not allowing {}: {e}", path.display());
            *complete = false;
            Ok(ruleset)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(network: bool) -> Policy {
        Policy {
            mode: Mode::WorkspaceWrite,
            writable: Vec::new(),
            network,
            protected: Vec::new(),
            guarded: Vec::new(),
            deny_read: Vec::new(),
            domains: None,
        }
    }

    #[test]
    fn old_abis_enforce_part_of_the_policy_and_say_which_part() {
        assert_eq!(status_for(6, &policy(false), false), Status::Full);
        assert_eq!(status_for(1, &policy(true), false).name(), "partial");
        let Status::PartiallyEnforced(reason) = status_for(3, &policy(false), false) else {
            panic!("ABI 3 has no TCP rules");
        };
        assert!(reason.contains("no TCP rules"), "{reason}");
        // A network namespace needs no TCP rules: only truncation and scopes are missing.
        let Status::PartiallyEnforced(reason) = status_for(3, &policy(false), true) else {
            panic!("ABI 3 has no scopes");
        };
        assert!(!reason.contains("TCP"), "{reason}");
        let Status::PartiallyEnforced(reason) = status_for(5, &policy(true), false) else {
            panic!("ABI 5 has no scopes");
        };
        assert!(reason.contains("no scopes"), "{reason}");
        assert_eq!(status_for(6, &policy(true), false), Status::Full);
    }
}
