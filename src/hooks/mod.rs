//! Running the hooks users write for other agents: a `command` hook is a shell command given
//! the event as JSON on its stdin (`command`), an `http` hook an endpoint the event is POSTed to
//! (`http`); either answers with an exit status or HTTP status and, optionally, Claude Code's
//! JSON output, parsed once into [`output::HookOutput`].
//!
//! A hook runs as the user, unconfined (as in Claude Code and Codex), but with oml's scrubbed
//! environment: the secrets of the secret rules (`sandbox.keep-env`, `sandbox.drop-env`) removed unless the hook keeps one by name. This
//! module knows nothing of events, matchers, sessions or what a decision does to the loop: the
//! agent's Lisp (`src/agent/hooks.fnl`) decides that.

pub mod command;
pub mod http;
pub mod output;

use std::time::Duration;

/// How long a hook may run when its settings name no `timeout` (Claude Code's default).
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(60);

/// The most of a hook's stdout or stderr (or an HTTP hook's body) kept; the rest is cut.
pub const MAX_HOOK_OUTPUT_BYTES: usize = 256 * 1024;

/// How one hook ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// It exited with this status (128 + the signal when one killed it); an HTTP hook's
    /// status code.
    Exited(i32),
    /// It ran past its timeout and was killed (its process group).
    TimedOut,
    /// The prompt was cancelled and it was killed.
    Cancelled,
    /// It could not be started or reached: why.
    Failed(String),
}

/// What a hook said: how it ended and its output, cut to [`MAX_HOOK_OUTPUT_BYTES`].
#[derive(Debug)]
pub struct HookRun {
    pub end: End,
    pub stdout: String,
    pub stderr: String,
    pub duration: Duration,
}

/// Text of `bytes` kept to [`MAX_HOOK_OUTPUT_BYTES`], invalid UTF-8 replaced.
fn text_of(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(MAX_HOOK_OUTPUT_BYTES)];
    String::from_utf8_lossy(cut).into_owned()
}
