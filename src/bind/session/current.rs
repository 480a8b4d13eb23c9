//! The running coroutine's session as Rust reads it: the registry in the Lua state's app data,
//! the session bound to the running coroutine (or one named by id), its directory, its cancel
//! token and its `session.put!` values. The Lisp faces that work in a session (`session.*`, the
//! tools' in `crate::bind::tools`, MCP's, the client's) find it here; outside a session, each
//! answers for the process (its directory, a fresh token, no values).
//!
//! It reads; it changes no session.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mlua::Lua;
use serde_json::Value as Json;

use super::rt;
use crate::session::Sessions;

/// The registry the agent put in the state's app data.
pub(crate) fn sessions(lua: &Lua) -> mlua::Result<Arc<Sessions>> {
    lua.app_data_ref::<Arc<Sessions>>()
        .map(|s| Arc::clone(&s))
        .ok_or_else(|| rt("the agent is not installed"))
}

/// The key the registry knows the running coroutine by (see [`Sessions::bind_thread`]).
pub(crate) fn thread_key(lua: &Lua) -> usize {
    lua.current_thread().to_pointer() as usize
}

/// The explicit session id (which must exist), else the running coroutine's session.
pub(crate) fn session_id(
    lua: &Lua,
    sessions: &Sessions,
    explicit: Option<String>,
) -> mlua::Result<String> {
    match explicit {
        Some(id) => {
            sessions
                .with(&id, |_| ())
                .ok_or_else(|| rt(format!("no session {id}")))?;
            Ok(id)
        }
        None => sessions.of_thread(thread_key(lua)).ok_or_else(|| {
            rt("no current session (pass a session id, or use session.with)".to_owned())
        }),
    }
}

/// The session's directory; the process's directory when there is no session.
pub(super) fn session_cwd(
    lua: &Lua,
    sessions: &Sessions,
    explicit: Option<String>,
) -> mlua::Result<PathBuf> {
    let id = match explicit {
        Some(id) => Some(session_id(lua, sessions, Some(id))?),
        None => sessions.of_thread(thread_key(lua)),
    };
    Ok(id
        .and_then(|id| sessions.with(&id, |s| s.cwd.clone()))
        .unwrap_or_else(process_cwd))
}

/// The running session's value for `key` (see `session.put!`); `None` outside a session.
pub(crate) fn session_value(lua: &Lua, key: &str) -> Option<Json> {
    let sessions = sessions(lua).ok()?;
    let id = sessions.of_thread(thread_key(lua))?;
    sessions.with(&id, |s| s.data.get(key).cloned()).flatten()
}

/// The running session's additional workspace roots (the client's `additionalDirectories`,
/// kept in its data under `additional-directories`); none outside a session.
pub(crate) fn additional_directories(lua: &Lua) -> Vec<PathBuf> {
    session_value(lua, "additional-directories")
        .and_then(|v| serde_json::from_value::<Vec<PathBuf>>(v).ok())
        .unwrap_or_default()
}

/// The directory of the running coroutine's session in `sessions`, else the process's.
pub(crate) fn current_cwd(lua: &Lua, sessions: &Sessions) -> PathBuf {
    sessions
        .of_thread(thread_key(lua))
        .and_then(|id| sessions.with(&id, |s| s.cwd.clone()))
        .unwrap_or_else(process_cwd)
}

fn process_cwd() -> PathBuf {
    std::env::current_dir().unwrap_or_else(|_| Path::new("/").to_path_buf())
}

/// The running coroutine's directory: its session's, else the process's (also without the
/// agent's registry).
pub(crate) fn cwd(lua: &Lua) -> PathBuf {
    match sessions(lua) {
        Ok(s) => current_cwd(lua, &s),
        Err(_) => process_cwd(),
    }
}

/// The cancel token of the running coroutine's session (a fresh one outside a session).
pub(crate) fn session_cancel(lua: &Lua) -> crate::cancel::CancelToken {
    let Ok(s) = sessions(lua) else {
        return Default::default();
    };
    s.of_thread(thread_key(lua))
        .and_then(|id| s.with(&id, |s| s.cancel.clone()))
        .unwrap_or_default()
}
