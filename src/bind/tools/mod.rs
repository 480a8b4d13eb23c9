//! The tools' Lisp face: the host functions behind the built-in tools, which the documented
//! Lisp tools in `src/agent/tools.fnl` call, the primitives user tools are made of, and the
//! `tools.*` settings those Lisp tools pass them, with the defaults of `crate::tools`. The file
//! tools are in [`files`], the commands (`bash`, `oml.run-process`) in [`bash`], what a tool
//! gives back (results as tables, truncation, a running tool's live view) in [`output`], the
//! file tools on given text in [`preview`], the search tools in [`search`]; [`descriptors`]
//! holds a command back until the process has descriptors to spare for it.
//!
//! Paths are relative to the running coroutine's session directory (the process's outside a
//! session: `crate::bind::session::cwd`). Commands run in the sandbox that `crate::bind::sandbox`
//! makes from the `sandbox.*` settings for the session's [`Scope`], which this module reads from
//! the session ([`scope`]) and passes down; the sandbox's Lisp functions look it up here too.
//! This module does not decide whether a tool may run; the agent asks first.

mod background;
mod bash;
mod descriptors;
mod files;
mod output;
mod preview;
mod search;

pub(crate) use output::{blocking, output_table};

use std::path::PathBuf;

use mlua::Lua;
use serde_json::Value as Json;

use crate::bind::sandbox::{self, Scope};
use crate::bind::session::{additional_directories, cwd, session_value};
use crate::lisp::{Lisp, LispError, SettingDecl, define};

/// Declare the `tools.*` settings and define the tools' host functions in `oml`.
pub fn install(lisp: &Lisp) -> Result<(), LispError> {
    for decl in settings() {
        lisp.declare_setting(&decl)?;
    }
    let lua = lisp.lua();
    define(lua, "oml", files::FILES)?;
    define(lua, "oml", bash::COMMANDS)?;
    define(lua, "oml", background::BACKGROUND)?;
    define(lua, "oml", output::OUTPUT)?;
    preview::install(lua)?;
    search::install(lisp)?;
    sandbox::set_scope_lookup(lisp, scope);
    Ok(())
}

/// The sandbox scope of a command run by the running coroutine in its directory.
pub(crate) fn scope(lua: &Lua) -> Scope {
    scope_in(lua, cwd(lua))
}

/// The sandbox scope of a command run by the running coroutine in `dir`: its session's other
/// workspace roots (`additional-directories`) and its own network switch (the session value
/// `network?`, when a boolean), as they are now; none of either outside a session.
pub(crate) fn scope_in(lua: &Lua, dir: PathBuf) -> Scope {
    Scope {
        dir,
        more_roots: additional_directories(lua),
        network: match session_value(lua, "network?") {
            Some(Json::Bool(own)) => Some(own),
            _ => None,
        },
        mode: match session_value(lua, "sandbox-mode") {
            Some(Json::String(own)) => crate::sandbox::Mode::from_name(&own),
            _ => None,
        },
    }
}

/// The tool settings, with the defaults of `src/tools/`.
fn settings() -> Vec<SettingDecl> {
    use crate::tools::{BASH_MAX_CHARS, BASH_TIMEOUT, READ_DEFAULT_LIMIT, READ_MAX_CHARS};
    vec![
        SettingDecl::new(
            "tools.read-max-chars",
            "integer",
            READ_MAX_CHARS,
            "Characters `read` returns at most; the head is kept and a footer says how much was cut.",
        ),
        SettingDecl::new(
            "tools.read-default-limit",
            "integer",
            READ_DEFAULT_LIMIT,
            "Lines `read` returns when the model gives no limit.",
        ),
        SettingDecl::new(
            "tools.bash-max-chars",
            "integer",
            BASH_MAX_CHARS,
            "Characters of output `bash` returns at most; the tail is kept.",
        ),
        SettingDecl::new(
            "tools.bash-timeout",
            "number",
            BASH_TIMEOUT.as_secs(),
            "Seconds a `bash` command may run when the model gives no timeout; then its process group is killed.",
        ),
    ]
}
