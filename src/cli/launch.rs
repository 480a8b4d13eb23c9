//! `oml sandbox-exec`: run one program in oml's command sandbox and exit with its status.
//!
//! When `oml acp` runs a command in an editor's terminal (`terminal/create`), the editor starts
//! the process, not oml; so oml asks it to start this launcher, which applies the very sandbox a
//! local command gets (`crate::sandbox`: a session of its own with no terminal, Landlock and
//! `no_new_privs` unless the mode is off, the secrets removed from the environment the editor
//! gave) and waits. The launcher is the command's lifeline: when the editor kills it
//! (`terminal/kill`, `terminal/release`), `PR_SET_PDEATHSIG` and the sandbox's watcher kill the
//! command's whole process group. And the launcher dies with its own parent: when the process
//! that started it (the shell of an editor's terminal, which the editor kills) ends, the
//! launcher ends the command and exits, instead of being orphaned while the command runs on.
//!
//! It boots no Lisp and no async runtime, and reads no setting: the sandbox comes spelt out in
//! its arguments, or, as `oml acp` passes it, in the same flags as a JSON array in the
//! environment variable [`POLICY_ENV`](crate::sandbox::LAUNCHER_POLICY_ENV) (so that the editor's terminal title reads
//! `oml sandbox-exec -- bash -c <command>`, not a screen of flags). Without either, nothing runs:
//! an editor that drops the environment it was given gets a refusal, never an unconfined
//! command. The variable is removed from the command's environment. A sandbox that cannot be set
//! up here is refused (exit status [`SANDBOX_REFUSED`]) with the reason on stderr, which is what
//! the editor's terminal shows.

use std::os::unix::process::ExitStatusExt;

use super::SandboxExecArgs;
use crate::front::stdio::err;
use crate::sandbox::{self, Mode, Policy, Secrets};

/// The exit status when the program cannot run: the sandbox cannot be set up, or the program
/// cannot be started (the shells' "found but not executable").
pub const SANDBOX_REFUSED: i32 = 126;

use crate::sandbox::LAUNCHER_POLICY_ENV as POLICY_ENV;

/// Why the launcher was given no sandbox it can use.
#[derive(Debug, thiserror::Error)]
enum NoPolicy {
    #[error("no sandbox given (no --mode, and {POLICY_ENV} is not set)")]
    Unset,
    #[error("{POLICY_ENV} is not a JSON array of strings: {0}")]
    NotJson(serde_json::Error),
    #[error("{POLICY_ENV}: {0}")]
    Flags(clap::error::ErrorKind),
    #[error("{0}")]
    Parsed(clap::Error),
    #[error("{POLICY_ENV} names no --mode")]
    NoMode,
}

/// The flags `args` gives, or, without `--mode`, the flags [`POLICY_ENV`] holds with `args`'s
/// program; the reason when there are none.
fn spelt_out(args: &SandboxExecArgs) -> Result<SandboxExecArgs, NoPolicy> {
    use clap::{FromArgMatches, Parser};
    if args.mode.is_some() {
        return Ok(args.clone());
    }
    let flags = std::env::var(POLICY_ENV).map_err(|_| NoPolicy::Unset)?;
    let flags: Vec<String> = serde_json::from_str(&flags).map_err(NoPolicy::NotJson)?;
    #[derive(Parser)]
    #[command(name = "oml sandbox-exec")]
    struct Launcher {
        #[command(flatten)]
        args: SandboxExecArgs,
    }
    let line = std::iter::once("sandbox-exec".to_owned())
        .chain(flags)
        .chain(std::iter::once("--".to_owned()))
        .chain(args.argv.iter().cloned());
    let matches = <Launcher as clap::CommandFactory>::command()
        .try_get_matches_from(line)
        .map_err(|e| NoPolicy::Flags(e.kind()))?;
    let parsed = Launcher::from_arg_matches(&matches).map_err(NoPolicy::Parsed)?;
    match parsed.args.mode {
        Some(_) => Ok(parsed.args),
        None => Err(NoPolicy::NoMode),
    }
}

/// Run `args.argv` in the sandbox `args` (or [`POLICY_ENV`]) describes; its exit status (128 +
/// the signal that killed it).
pub fn sandbox_exec(args: &SandboxExecArgs) -> i32 {
    let args = match spelt_out(args) {
        Ok(args) => args,
        Err(why) => {
            err!("oml sandbox-exec: {why}; not running the command");
            return SANDBOX_REFUSED;
        }
    };
    let name = args.mode.as_deref().unwrap_or_default();
    let Some(mode) = Mode::from_name(name) else {
        err!("oml sandbox-exec: unknown mode {name}");
        return SANDBOX_REFUSED;
    };
    let policy = Policy {
        mode,
        writable: args.writable.clone(),
        network: args.network,
        protected: args.protect.clone(),
        guarded: args.guard.clone(),
        deny_read: args.deny_read.clone(),
        // The launcher's process has no domain proxy: `--network` is given only when the
        // network is open to every host (see `bind::sandbox::launcher`).
        domains: None,
    };
    let secrets = Secrets {
        also: args.secret.clone(),
        keep: args.keep_env.clone(),
        drop: args.drop_env.clone(),
    };
    let Some((program, rest)) = args.argv.split_first() else {
        err!("oml sandbox-exec: no program to run");
        return SANDBOX_REFUSED;
    };
    let mut cmd = std::process::Command::new(program);
    cmd.args(rest).env_remove(POLICY_ENV);
    if let Err(e) = sandbox::prepare(&policy)
        .scrub_env(&secrets)
        .confine(&mut cmd)
    {
        err!("oml: {e}; set sandbox.mode to :off to run unconfined");
        return SANDBOX_REFUSED;
    }
    run_while_the_parent_lives(&mut cmd, program)
}

/// Start `cmd` (the confined `program`) unless the launcher's parent has already ended, end it
/// when the parent ends first, and wait for it; its exit status (128 + the signal that killed
/// it), or [`SANDBOX_REFUSED`] when it could not run.
fn run_while_the_parent_lives(cmd: &mut std::process::Command, program: &str) -> i32 {
    // The parent is pinned with a pidfd before the command starts, so that its end cannot be
    // missed however soon it comes.
    let parent = ParentWatch::open();
    if parent.gone() {
        err!("oml: the process that started the launcher has ended; not running {program}");
        return SANDBOX_REFUSED;
    }
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            err!("oml: cannot run {program}: {e}");
            return SANDBOX_REFUSED;
        }
    };
    if !parent.outlived_by(&child) {
        // The process that started the launcher (the editor's terminal shell) is gone: end
        // the command, which the watcher's lifeline also does once this process exits.
        let pgid = libc::pid_t::try_from(child.id()).unwrap_or(0);
        // SAFETY: killpg with the command's own group (its sandbox made it with setsid).
        unsafe { libc::killpg(pgid, libc::SIGKILL) };
    }
    match child.wait() {
        Ok(status) => status
            .code()
            .or_else(|| status.signal().map(|s| 128 + s))
            .unwrap_or(1),
        Err(e) => {
            err!("oml: cannot wait for {program}: {e}");
            SANDBOX_REFUSED
        }
    }
}

/// The launcher's parent, watched through a pidfd (none before Linux 5.3: then it is not
/// watched).
struct ParentWatch {
    fd: libc::c_int,
}

impl ParentWatch {
    fn open() -> ParentWatch {
        // SAFETY: getppid takes no arguments; pidfd_open takes a pid and no flags (-1 on failure).
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getppid(), 0) as libc::c_int };
        ParentWatch { fd }
    }

    /// Whether the parent had already ended: the launcher was reparented before its pidfd was
    /// opened, or the process the pidfd pins has exited.
    fn gone(&self) -> bool {
        // SAFETY: getppid takes no arguments.
        let orphaned = unsafe { libc::getppid() } == 1;
        orphaned || (self.fd >= 0 && readable(self.fd, 0))
    }

    /// Wait until `child` exits (`true`) or the parent does (`false`), whichever comes first.
    fn outlived_by(&self, child: &std::process::Child) -> bool {
        let pid = libc::pid_t::try_from(child.id()).unwrap_or(0);
        // SAFETY: pidfd_open with a pid and no flags; -1 when it fails.
        let child_fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) as libc::c_int };
        if child_fd < 0 || self.fd < 0 {
            return true;
        }
        let mut fds = [child_fd, self.fd].map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        });
        let survived = loop {
            // SAFETY: two valid pollfd structures on this stack.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
            if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            break n < 0 || fds[0].revents != 0 || fds[1].revents == 0;
        };
        // SAFETY: closing the pidfd opened above.
        unsafe { libc::close(child_fd) };
        survived
    }
}

impl Drop for ParentWatch {
    fn drop(&mut self) {
        if self.fd >= 0 {
            // SAFETY: closing the pidfd this watch opened.
            unsafe { libc::close(self.fd) };
        }
    }
}

/// Whether `fd` polls readable within `timeout_ms`.
fn readable(fd: libc::c_int, timeout_ms: libc::c_int) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd on this stack.
    unsafe { libc::poll(&mut pfd, 1, timeout_ms) > 0 }
}
