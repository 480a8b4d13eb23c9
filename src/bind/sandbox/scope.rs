//! What the sandbox policy takes from the session a command runs for, as a value: its
//! directory, its other workspace roots and its own network switch ([`Scope`]). The layer that
//! knows sessions (`crate::bind::tools`) builds it and passes it down, and lends the sandbox's
//! Lisp functions a [`ScopeLookup`] for the running coroutine; outside it (no lookup set) a
//! command's scope is the process's.
//!
//! It knows nothing of sessions: not where these values are kept, nor how a session is found.

use std::path::{Path, PathBuf};

use mlua::Lua;

use crate::lisp::Lisp;

/// What a command's sandbox depends on besides the `sandbox.*` settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scope {
    /// The directory the command runs in; its project root is the workspace.
    pub dir: PathBuf,
    /// More workspace roots (an ACP client's `additionalDirectories`): writable, with their own
    /// `.oml/` and `.git` guarded.
    pub more_roots: Vec<PathBuf>,
    /// The session's own network switch; `None` leaves it to `sandbox.network?`.
    pub network: Option<bool>,
    /// The session's own sandbox mode (a sub-agent's, as its definition was granted): it only
    /// narrows `sandbox.mode`, never widens it. `None` leaves it to the setting.
    pub mode: Option<crate::sandbox::Mode>,
}

impl Scope {
    /// The scope of a command run by no session: in the process's directory (`/` when it is
    /// gone), with no other roots and the network as `sandbox.network?` says.
    pub fn of_process() -> Scope {
        let dir = std::env::current_dir().unwrap_or_else(|_| Path::new("/").to_path_buf());
        Scope {
            dir,
            ..Scope::default()
        }
    }

    /// The same scope for a command run in `dir` instead.
    pub fn in_dir(self, dir: PathBuf) -> Scope {
        Scope { dir, ..self }
    }
}

/// Finds the scope of the running coroutine (called with the state, so `lua.current_thread()`
/// is the caller).
pub type ScopeLookup = fn(&Lua) -> Scope;

struct ScopeSource(ScopeLookup);

/// Make the sandbox's Lisp functions take the running coroutine's scope from `lookup`
/// (replacing any earlier one).
pub fn set_scope_lookup(lisp: &Lisp, lookup: ScopeLookup) {
    lisp.lua().set_app_data(ScopeSource(lookup));
}

/// The running coroutine's scope: the lookup's, else [`Scope::of_process`].
pub(super) fn current(lua: &Lua) -> Scope {
    let lookup = lua.app_data_ref::<ScopeSource>().map(|source| source.0);
    match lookup {
        Some(lookup) => lookup(lua),
        None => Scope::of_process(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn far(_: &Lua) -> Scope {
        Scope {
            dir: PathBuf::from("/far"),
            more_roots: vec![PathBuf::from("/more")],
            network: Some(true),
            mode: None,
        }
    }

    #[test]
    fn the_scope_is_the_lookups_else_the_process() {
        let lua = Lua::new();
        assert_eq!(current(&lua), Scope::of_process());
        lua.set_app_data(ScopeSource(far));
        assert_eq!(current(&lua), far(&lua));
    }

    #[test]
    fn a_scope_moved_to_another_directory_keeps_its_roots_and_network() {
        let lua = Lua::new();
        let moved = far(&lua).in_dir(PathBuf::from("/elsewhere"));
        assert_eq!(moved.dir, Path::new("/elsewhere"));
        assert_eq!(
            (moved.more_roots, moved.network),
            (far(&lua).more_roots, Some(true))
        );
    }
}
