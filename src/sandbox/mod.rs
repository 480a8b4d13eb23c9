//! The command sandbox: how a command oml runs for the model (`bash`, `oml.run-process`) is
//! confined, and what it may not see.
//!
//! A [`Policy`] says what a command may do: under [`Mode::WorkspaceWrite`] it reads and executes
//! everywhere but writes only beneath [`Policy::writable`] (the workspace, the temp dir, paths
//! the user listed); under [`Mode::ReadOnly`] it writes nowhere; [`Policy::network`] off gives
//! it a network namespace of its own (no route anywhere, for any protocol; [`mounts`]) where
//! one can be made, and denies TCP `bind` and `connect` through Landlock as a second layer. [`prepare`] turns a policy into a [`Prepared`] sandbox **before** the
//! fork (building a Landlock ruleset allocates and opens files), with a typed [`Status`] that
//! says what this kernel enforces; [`Prepared::confine`] then sets up a `std::process::Command`
//! so that the child, between fork and exec, does only async-signal-safe system calls:
//!
//! 1. `setsid()`: a new session and process group, no controlling terminal (so `/dev/tty`
//!    cannot be opened and a command reading it fails at once instead of waiting for a key);
//! 2. `prctl(PR_SET_PDEATHSIG, SIGKILL)`, then a check that oml did not die before that;
//! 3. `prctl(PR_SET_NO_NEW_PRIVS)` (set-uid programs gain nothing), then
//!    `landlock_restrict_self` on the ruleset made in the parent;
//! 4. a *watcher* ([`child`]): a forked process that stays in the command's session and kills
//!    the command's process group with SIGKILL the moment oml's end of a pipe closes, which the
//!    kernel does however oml ends (`kill -9` included). `PR_SET_PDEATHSIG` reaches only the
//!    direct child; the watcher is what stops `sleep 300 &` from outliving oml.
//!
//! Even [`Mode::Off`] does 1, 2 and 4 (no orphans, no terminal); it skips 3. Landlock is
//! best-effort by kernel version (see [`landlock`] for which ABI gives what); where it cannot
//! be set up at all, [`Prepared::confine`] refuses with [`SandboxError::Unavailable`] rather
//! than run the command unconfined, and the first such refusal is logged as a warning.
//!
//! [`env`] removes secrets (API keys, tokens, passwords) from a command's environment.
//!
//! This module does not know about Lisp, settings, tools or permissions: the caller builds the
//! policy (from `sandbox.*` settings) and decides what to do when the sandbox is unavailable.
//! Linux only, like the rest of oml.
//!
//! Compare with Codex: `codex-rs/linux-sandbox` (Landlock for files, seccomp for the network,
//! applied in a helper process before exec) and `codex-rs/core/src/spawn.rs` (PDEATHSIG).

mod child;
mod deny;
pub mod domains;
pub mod env;
pub mod helper;
mod hidden;
pub mod landlock;
mod launch;
pub mod mounts;
mod network;
pub mod peer;
mod proxy;
mod seccomp;
mod shared_ns;

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Once};

pub use env::{SECRET_PATTERNS, Secrets, secret_names};
use hidden::hidden_sockets;
pub use hidden::{NotHidden, hidden_from_commands};
pub use launch::{Launch, LaunchError, Launched};
use network::network_limit;
pub use network::{NetworkLayer, network_layer};
pub use proxy::ProxyNet;

/// The environment variable in which `oml acp` hands an editor's terminal the sandbox's flags
/// for `oml sandbox-exec` (a JSON array of strings), so that the terminal's command line stays
/// `oml sandbox-exec -- bash -c <command>`. The launcher refuses to run without a sandbox and
/// removes the variable from the command's environment.
pub const LAUNCHER_POLICY_ENV: &str = "OML_SANDBOX";

/// What a confined command may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Read and execute everywhere, write nowhere (but `/dev/null` and the like).
    ReadOnly,
    /// Read and execute everywhere, write only beneath [`Policy::writable`].
    WorkspaceWrite,
    /// No Landlock and no `no_new_privs`; still a new session, PDEATHSIG and the watcher.
    Off,
}

impl Mode {
    /// The setting's spelling: `read-only`, `workspace-write`, `off`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::ReadOnly => "read-only",
            Mode::WorkspaceWrite => "workspace-write",
            Mode::Off => "off",
        }
    }

    /// The mode spelled `name` ([`Mode::name`]).
    pub fn from_name(name: &str) -> Option<Mode> {
        [Mode::ReadOnly, Mode::WorkspaceWrite, Mode::Off]
            .into_iter()
            .find(|m| m.name() == name)
    }
}

/// The sandbox a command runs in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    pub mode: Mode,
    /// Where [`Mode::WorkspaceWrite`] lets the command write (each path and everything beneath
    /// it): the workspace root(s), the system temp dir, paths the user listed. A path that does
    /// not exist is skipped. Ignored by the other modes.
    pub writable: Vec<PathBuf>,
    /// Whether the command may use the network. Off gives it a network namespace of its own
    /// (nothing reaches out, whatever the protocol) where user namespaces allow, and denies TCP
    /// `bind` and `connect` through Landlock (ABI 4, Linux 6.7) as a second layer
    /// ([`network_layer`] says which holds).
    pub network: bool,
    /// Folders no confined command may write, whatever [`Policy::writable`] says: oml's own
    /// configuration, state, cache and runtime folders, where it loads code and trust from, and
    /// the user's agent folders (`~/.agents`, `~/.claude`, `~/.codex`), where skills (whose
    /// `skill.fnl` oml runs), commands and hooks are.
    /// Bound read-only beneath a writable path ([`mounts`]); where that cannot be done, a
    /// writable path that holds one of them is not made writable.
    pub protected: Vec<PathBuf>,
    /// Paths in the workspace that code is loaded from (the project's `.oml/`, git's hooks and
    /// config): read-only beneath the writable paths where the mount layer can be had; without
    /// it they stay writable and the status says so.
    pub guarded: Vec<PathBuf>,
    /// Paths no command may read or list (secrets: `~/.ssh`, cloud credentials, transcripts):
    /// covered in the command's mount view by an empty read-only folder or file ([`deny`]). A
    /// workspace inside one makes the sandbox unavailable, with the reason; without the mount
    /// layer they stay readable and the status says so.
    pub deny_read: Vec<PathBuf>,
    /// With [`Policy::network`] on, the hosts the command may reach, through the domain proxy
    /// only ([`proxy`]); `None` leaves the network open. Where the proxy's namespace cannot be
    /// had, the command gets no network at all rather than all of it.
    pub domains: Option<domains::Domains>,
}

impl Policy {
    /// Whether the command may reach any host directly: the network on and not held to
    /// domains (or the sandbox off).
    pub fn open(&self) -> bool {
        self.network && (self.domains.is_none() || self.mode == Mode::Off)
    }

    /// The domains the network is held to, when it is on and held.
    fn held(&self) -> Option<&domains::Domains> {
        match (self.network, self.mode) {
            (true, Mode::ReadOnly | Mode::WorkspaceWrite) => self.domains.as_ref(),
            _ => None,
        }
    }
}

/// What the sandbox enforces on this kernel for a policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// Everything the policy asks for.
    Full,
    /// The files are confined, but part of the policy is not enforced here (the reason says
    /// which, e.g. no TCP rules before Landlock ABI 4).
    PartiallyEnforced(String),
    /// Nothing can be enforced here (the reason says why); commands are refused.
    Unavailable(String),
    /// The policy's mode is [`Mode::Off`]: nothing is confined, by choice.
    Off,
}

impl Status {
    /// A short word for the status: `full`, `partial`, `unavailable`, `off`.
    pub fn name(&self) -> &'static str {
        match self {
            Status::Full => "full",
            Status::PartiallyEnforced(_) => "partial",
            Status::Unavailable(_) => "unavailable",
            Status::Off => "off",
        }
    }

    /// Why the status is not [`Status::Full`]; `None` when it is.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Status::Full => None,
            Status::PartiallyEnforced(r) | Status::Unavailable(r) => Some(r),
            Status::Off => Some("the sandbox is off"),
        }
    }
}

/// Why a command cannot be confined.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// Landlock cannot be set up here; running the command would leave it unconfined.
    #[error("the sandbox cannot be set up here ({0})")]
    Unavailable(String),
}

/// A sandbox made for one command (its Landlock ruleset is open), ready for
/// [`Prepared::confine`].
#[derive(Debug)]
pub struct Prepared {
    mode: Mode,
    status: Status,
    ruleset: Option<Arc<OwnedFd>>,
    mounts: Option<Arc<mounts::Plan>>,
    /// Refuse IPv4 and IPv6 sockets in the system-call filter: the network is off and no
    /// network namespace can be made here.
    deny_inet: bool,
    /// The domain proxy the command's network is held to, whose namespace it joins.
    proxy: Option<Arc<proxy::ProxyNet>>,
    remove_env: Vec<OsString>,
    /// Variables set for the command (the proxy's address).
    set_env: Vec<(OsString, OsString)>,
    /// The command's whole environment, in place of oml's less the secrets
    /// ([`Prepared::only_env`]); [`Prepared::set_env`]'s still added.
    only_env: Option<Vec<(OsString, OsString)>>,
}

/// Build the sandbox `policy` asks for. Never fails: what cannot be had is in the [`Status`]
/// (an unavailable sandbox is refused later, by [`Prepared::confine`]). The first time for a
/// policy costs one `open` and one system call per rule (about 0.15 ms); the same policy again
/// reuses that ruleset. The kernel's Landlock version is probed only once.
pub fn prepare(policy: &Policy) -> Prepared {
    let (policy, mounts, mut limits) = plan(policy);
    let isolates = mounts
        .as_deref()
        .is_some_and(mounts::Plan::isolates_network);
    let proxy = match policy.held().filter(|_| isolates) {
        Some(domains) => match proxy::for_domains(domains) {
            Ok(net) => Some(net),
            Err(e) => {
                limits.push(format!(
                    "the domain proxy cannot be started ({e}): commands get no network"
                ));
                None
            }
        },
        None => None,
    };
    let conflict = match policy.mode {
        Mode::Off => None,
        Mode::ReadOnly | Mode::WorkspaceWrite => deny::conflict(&policy),
    };
    let (status, ruleset) = match (policy.mode, conflict) {
        (Mode::Off, _) => (Status::Off, None),
        (_, Some(reason)) => (Status::Unavailable(reason), None),
        (Mode::ReadOnly | Mode::WorkspaceWrite, None) => match landlock::build(&policy) {
            Ok((status, fd)) => (with_limits(status, &limits), Some(fd)),
            Err(reason) => {
                let reason = reason.to_string();
                warn_once(&reason);
                (Status::Unavailable(reason), None)
            }
        },
    };
    let (set_env, remove_env) = proxy.as_ref().map(|p| p.env()).unwrap_or_default();
    Prepared {
        mode: policy.mode,
        status,
        ruleset,
        deny_inet: !policy.open() && mounts::network_available().is_err(),
        mounts,
        remove_env,
        set_env,
        only_env: None,
        proxy,
    }
}

/// The policy as it will be enforced here, the mount plan that enforces its read-only parts,
/// and what of it cannot be enforced (for the status). Paths are made real first (links
/// followed), so a writable link cannot smuggle in a protected folder.
fn plan(policy: &Policy) -> (Policy, Option<Arc<mounts::Plan>>, Vec<String>) {
    let mut policy = policy.clone();
    if policy.mode == Mode::Off {
        return (policy, None, Vec::new());
    }
    let real = |p: &PathBuf| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
    let protected: Vec<PathBuf> = policy.protected.iter().map(real).collect();
    let guarded: Vec<PathBuf> = policy.guarded.iter().map(real).collect();
    let mut limits = Vec::new();
    policy.writable = policy.writable.iter().map(real).collect();
    // Made real once here; what follows (the plan, the conflict check) reads them as they are.
    policy.deny_read = deny::existing(&policy);
    let worktrees = real(&crate::paths::Paths::from_env().worktrees_dir());
    drop_inside(&mut policy.writable, &protected, &worktrees, &mut limits);
    if policy.mode == Mode::WorkspaceWrite {
        policy.writable.push(PathBuf::from(landlock::DEV_SHM));
    }
    let held = |paths: &[PathBuf]| -> Vec<PathBuf> {
        let writable = &policy.writable;
        let under = |p: &&PathBuf| writable.iter().any(|w| mounts::within(p, w));
        paths.iter().filter(under).cloned().collect()
    };
    let (held_protected, held_guarded) = (held(&protected), held(&guarded));
    match mounts::available() {
        Ok(()) => {
            let writable = match policy.mode {
                Mode::WorkspaceWrite => policy.writable.clone(),
                _ => Vec::new(),
            };
            let read_only: Vec<PathBuf> = held_protected.into_iter().chain(held_guarded).collect();
            let isolate = !policy.open() && network_limit(&policy, &mut limits);
            let mut hidden = hidden_sockets(policy.open());
            hidden.extend(policy.deny_read.iter().cloned());
            let plan = mounts::Plan::new(&writable, &read_only, &hidden, isolate);
            (policy, Some(Arc::new(plan)), limits)
        }
        Err(why) => {
            limits.push(format!(
                "chmod, chown, utimes and extended attributes outside the writable paths are \
                 not restricted: {why}"
            ));
            if !policy.open() {
                network_limit(&policy, &mut limits);
            }
            if !policy.deny_read.is_empty() {
                limits.push(deny::unenforced(&policy.deny_read, &why.to_string()));
            }
            if policy.mode == Mode::WorkspaceWrite {
                drop_holders(&mut policy.writable, &held_protected, &mut limits);
                for g in &held_guarded {
                    limits.push(format!("{} is writable by commands here", g.display()));
                }
            }
            (policy, None, limits)
        }
    }
}

/// Drop the writable paths that lie inside one of the `protected` folders, saying so; but for
/// those in oml's `worktrees` folder (a session's own worktree), where no code or trust is.
fn drop_inside(
    writable: &mut Vec<PathBuf>,
    protected: &[PathBuf],
    worktrees: &Path,
    limits: &mut Vec<String>,
) {
    let inside = |w: &PathBuf, p: &PathBuf| mounts::within(w, p) && !mounts::within(w, worktrees);
    writable.retain(|w| match protected.iter().find(|p| inside(w, p)) {
        Some(p) => {
            let (w, p) = (w.display(), p.display());
            limits.push(format!(
                "{w} is in {p}, where code is loaded from: not writable"
            ));
            false
        }
        None => true,
    });
}

/// Without the mount layer, drop the writable paths that hold one of the `held` protected
/// folders (it could not be carved out), saying so.
fn drop_holders(writable: &mut Vec<PathBuf>, held: &[PathBuf], limits: &mut Vec<String>) {
    writable.retain(|w| match held.iter().find(|p| mounts::within(p, w)) {
        Some(p) => {
            let (w, p) = (w.display(), p.display());
            limits.push(format!(
                "{w} holds {p}, where code is loaded from, and it cannot be carved out here: not writable"
            ));
            false
        }
        None => true,
    });
}

/// `status` with what the mount layer could not enforce added to its reason.
fn with_limits(status: Status, limits: &[String]) -> Status {
    if limits.is_empty() {
        return status;
    }
    let more = limits.join("; ");
    match status {
        Status::Full => Status::PartiallyEnforced(more),
        Status::PartiallyEnforced(reason) => Status::PartiallyEnforced(format!("{reason}; {more}")),
        other => other,
    }
}

/// The policy as this machine enforces it: paths made real, writable paths that the sandbox
/// will not make writable here left out (see [`Status`] for why).
pub fn effective(policy: &Policy) -> Policy {
    plan(policy).0
}

/// The [`Status`] [`prepare`] would give `policy`, from the kernel's Landlock version alone
/// (nothing is opened).
pub fn status(policy: &Policy) -> Status {
    match policy.mode {
        Mode::Off => Status::Off,
        Mode::ReadOnly | Mode::WorkspaceWrite => match landlock::probe() {
            Ok(abi) => {
                let (policy, _, limits) = plan(policy);
                match deny::conflict(&policy) {
                    Some(reason) => Status::Unavailable(reason),
                    None => {
                        let namespace = mounts::network_available().is_ok();
                        with_limits(landlock::status_for(abi, &policy, namespace), &limits)
                    }
                }
            }
            Err(reason) => Status::Unavailable(reason.to_string()),
        },
    }
}

impl Prepared {
    /// No confinement, but a new session, PDEATHSIG and the watcher ([`Mode::Off`]).
    pub fn unconfined() -> Prepared {
        prepare(&Policy {
            mode: Mode::Off,
            writable: Vec::new(),
            network: true,
            protected: Vec::new(),
            guarded: Vec::new(),
            deny_read: Vec::new(),
            domains: None,
        })
    }

    /// What this sandbox enforces.
    pub fn status(&self) -> &Status {
        &self.status
    }

    /// Also remove the environment variables that [`secret_names`] picks with `secrets` from
    /// the current environment.
    pub fn scrub_env(mut self, secrets: &Secrets) -> Prepared {
        let names = secret_names(std::env::vars_os().map(|(k, _)| k), secrets);
        self.remove_env.extend(names);
        self
    }

    /// Give the command exactly the environment `vars` (oml's own git runs this way: a few
    /// named variables, nothing else), wherever it is started.
    pub fn only_env(mut self, vars: Vec<(OsString, OsString)>) -> Prepared {
        self.only_env = Some(vars);
        self
    }

    /// The domain proxy the command's network is held to, if it is: what it refused while
    /// the command ran is for the tool result ([`proxy::ProxyNet::refused_since`]).
    pub fn proxy(&self) -> Option<Arc<proxy::ProxyNet>> {
        self.proxy.clone()
    }

    /// Set up `cmd` to run in this sandbox: stdin from `/dev/null` (the caller may give another
    /// stdin after this), the secrets removed from its environment, and the steps of the module
    /// doc between fork and exec. Do not also give `cmd` a process group: `setsid` makes one.
    ///
    /// Refuses when the sandbox is [`Status::Unavailable`], so that nothing runs unconfined
    /// unless the policy said [`Mode::Off`].
    pub fn confine(self, cmd: &mut std::process::Command) -> Result<(), SandboxError> {
        if let Status::Unavailable(reason) = self.status {
            return Err(SandboxError::Unavailable(reason));
        }
        cmd.stdin(std::process::Stdio::null());
        if let Some(vars) = &self.only_env {
            cmd.env_clear().envs(vars.iter().map(|(k, v)| (k, v)));
        }
        for name in &self.remove_env {
            cmd.env_remove(name);
        }
        for (name, value) in &self.set_env {
            cmd.env(name, value);
        }
        let confined = (self.mode != Mode::Off).then_some(self.deny_inet);
        let joined = self.proxy.map(|p| p.shared());
        child::install(cmd, self.ruleset, self.mounts, confined, joined, None)
            .map_err(|e| SandboxError::Unavailable(format!("no system-call filter: {e}")))?;
        Ok(())
    }
}

/// Log the first time a sandbox cannot be set up (later ones are only in the tool results).
fn warn_once(reason: &str) {
    static WARNED: Once = Once::new();
    WARNED.call_once(|| {
        tracing::warn!(
            "the command sandbox cannot be set up here ({reason}); commands will be refused \
             until the sandbox is turned off"
        );
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_round_trip_through_their_names() {
        for mode in [Mode::ReadOnly, Mode::WorkspaceWrite, Mode::Off] {
            assert_eq!(Mode::from_name(mode.name()), Some(mode));
        }
        assert_eq!(Mode::from_name("yolo"), None);
    }

    #[test]
    fn an_unavailable_sandbox_refuses_to_confine() {
        let prepared = Prepared {
            mode: Mode::WorkspaceWrite,
            status: Status::Unavailable("no Landlock".into()),
            ruleset: None,
            mounts: None,
            deny_inet: false,
            proxy: None,
            remove_env: Vec::new(),
            set_env: Vec::new(),
            only_env: None,
        };
        let mut cmd = std::process::Command::new("true");
        let err = prepared.confine(&mut cmd).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the sandbox cannot be set up here (no Landlock)"
        );
    }
}
