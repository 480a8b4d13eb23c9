//! `oml sandbox-exec`: run one program in oml's command sandbox and exit with its status.
//!
//! When `oml acp` runs a command in an editor's terminal (`terminal/create`), the editor starts
//! the process, not oml; so oml asks it to start this launcher, which applies the very sandbox a
//! local command gets (`crate::sandbox`: a session of its own with no terminal, Landlock and
//! `no_new_privs` unless the mode is off, the secrets removed from the environment the editor
//! gave) and waits. The launcher is the command's lifeline: when the editor kills it
//! (`terminal/kill`, `terminal/release`), `PR_SET_PDEATHSIG` and the sandbox's watcher kill the
//! command's whole process group.
//!
//! It boots no Lisp and no async runtime, and reads no setting: the sandbox comes spelt out in
//! its arguments. A sandbox that cannot be set up here is refused (exit status
//! [`SANDBOX_REFUSED`]) with the reason on stderr, which is what the editor's terminal shows.

use std::os::unix::process::ExitStatusExt;

use super::SandboxExecArgs;
use crate::front::stdio::err;
use crate::sandbox::{self, Mode, Policy, Secrets};

/// The exit status when the program cannot run: the sandbox cannot be set up, or the program
/// cannot be started (the shells' "found but not executable").
pub const SANDBOX_REFUSED: i32 = 126;

/// Run `args.argv` in the sandbox `args` describes; its exit status (128 + the signal that
/// killed it).
pub fn sandbox_exec(args: &SandboxExecArgs) -> i32 {
    let Some(mode) = Mode::from_name(&args.mode) else {
        err!("oml sandbox-exec: unknown mode {}", args.mode);
        return SANDBOX_REFUSED;
    };
    let policy = Policy {
        mode,
        writable: args.writable.clone(),
        network: args.network,
        protected: args.protect.clone(),
        guarded: args.guard.clone(),
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
    cmd.args(rest);
    if let Err(e) = sandbox::prepare(&policy)
        .scrub_env(&secrets)
        .confine(&mut cmd)
    {
        err!("oml: {e}; set sandbox.mode to :off to run unconfined");
        return SANDBOX_REFUSED;
    }
    match cmd.status() {
        Ok(status) => status
            .code()
            .or_else(|| status.signal().map(|s| 128 + s))
            .unwrap_or(1),
        Err(e) => {
            err!("oml: cannot run {program}: {e}");
            SANDBOX_REFUSED
        }
    }
}
