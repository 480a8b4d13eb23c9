//! The Lisp surface of the layers below: each file installs one namespace table's functions and
//! settings, with the Fennel that completes it beside it (`client.rs` and `client.fnl`, `llm.rs`
//! and `llm.fnl`). The subsystems below know nothing of Lisp; the agent loop and the front ends
//! above reach them through these names. The front ends' own namespaces (`acp`, `chat`) are
//! theirs, in `crate::front`.
//!
//! Where each namespace comes from:
//!
//! | namespace | installed by |
//! |---|---|
//! | `oml`, `json` | the host (`crate::lisp`: `host.rs`, `convert.rs`, the prelude's `core.fnl`); `oml.reload` here ([`session::install_reload`]), `oml.compile-string` by [`session::install`], the tool host functions by [`tools::install`] |
//! | `llm` | [`llm::install`] (settings, `llm.chat`); `llm.context-window` by `agent.fnl` |
//! | `catalog` | [`catalog::install`] |
//! | `client` | [`client::install`] (with `client.fnl`) |
//! | `flow` | [`flow::install`] (`flow.fnl`) |
//! | `session` | [`session::install`], called by `Agent::install` (which owns the session registry) |
//! | `tools.*` settings | [`tools::install`], called by `Agent::install` |
//! | `agent`, `tools`, `commands` | `Agent::install` (`src/agent/agent.fnl`, `tools.fnl`) |
//! | `acp` | `crate::front::acp::surface::install` (with `acp.fnl`), only in `oml acp` |
//! | `mcp` | [`mcp::install`] (with `mcp.fnl`), called by `Agent::install` |
//! | `chat` | `crate::front::chat::surface::install` (with `chat.fnl`), only in the terminal chat |
//! | `sandbox` settings, `oml.sandbox-status` | [`sandbox::install`] |
//! | `hook` | [`hooks::install`] (the host functions), called by `Agent::install`; the events in `src/agent/hooks.fnl` |
//! | `init`, `repl` | settings only: `crate::lisp::init` and `core.fnl` |
//!
//! [`install`] installs every namespace that does not depend on the agent, in order; the CLI
//! calls it, then `Agent::install`, then (for `oml acp` and the chat) the front end's own.

pub mod catalog;
pub mod client;
pub mod flow;
pub mod hooks;
pub mod llm;
pub mod mcp;
pub mod project;
pub mod reused;
pub mod sandbox;
pub mod session;
pub mod tools;

use crate::lisp::{Lisp, LispError};
use crate::paths::Paths;

/// A Lua runtime error with `msg`: what a host function of `bind/` raises for a problem that has
/// no error type of its own (a bad argument, an unknown session).
pub(crate) fn rt(msg: impl Into<String>) -> mlua::Error {
    mlua::Error::RuntimeError(msg.into())
}

/// Install the `llm`, `catalog`, `client`, `flow` and `sandbox` namespaces and `oml.reload` (which loads
/// the init files of `paths`), before the init files run so that they can `setq`, redefine and
/// advise everything. Each step says which namespace failed.
pub fn install(lisp: &Lisp, paths: &Paths) -> Result<(), InstallError> {
    llm::install(lisp).map_err(|e| InstallError::new("llm", e))?;
    session::install_reload(lisp, paths.clone()).map_err(|e| InstallError::new("oml.reload", e))?;
    catalog::install(lisp).map_err(|e| InstallError::new("catalog", e.into()))?;
    client::install(lisp).map_err(|e| InstallError::new("client", e.into()))?;
    flow::install(lisp).map_err(|e| InstallError::new("flow", e.into()))?;
    sandbox::install(lisp).map_err(|e| InstallError::new("sandbox", e))?;
    Ok(())
}

/// A namespace that could not be installed.
#[derive(Debug, thiserror::Error)]
#[error("cannot install the {namespace} functions: {source}")]
pub struct InstallError {
    pub namespace: &'static str,
    pub source: LispError,
}

impl InstallError {
    fn new(namespace: &'static str, source: LispError) -> Self {
        InstallError { namespace, source }
    }
}
