//! `client.connect`'s `:fs`: oml's client serves the agent's `fs/read_text_file` and
//! `fs/write_text_file`, so that a sub-agent sees what the program wants it to see (an unsaved
//! buffer, a generated file) and its writes land where the program allows.
//!
//! Every call is held to the session's folders (the `cwd` and additional directories the
//! client opened it with), compared as real paths: a path outside, or one whose links lead out,
//! is refused before the program is asked, and a write never follows a link. The program's
//! function (when `:fs` is one) then decides: nil or true does it, false or a string refuses
//! (the string is the reason), and for a read a table `{:content "…"}` is served as the file's
//! text.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mlua::{Function, Value};
use serde_json::Value as Json;

use crate::acp::served::{self, FsParams, SessionHead};
use crate::acp_client::{FsCall, FsHandler};
use crate::lisp::{Lisp, from_lua, to_lua};

/// The largest file a read serves.
pub const FS_READ_MAX_BYTES: usize = 10 * 1024 * 1024;

/// The handler for `:fs` (`true`, or a function).
pub(super) fn fs_handler(lisp: &Lisp, decide: Option<Function>) -> mlua::Result<FsHandler> {
    let key = match decide {
        Some(f) => Some(Arc::new(lisp.lua().create_registry_value(f)?)),
        None => None,
    };
    let lisp = lisp.clone();
    Ok(Arc::new(move |call: FsCall| {
        let (lisp, key) = (lisp.clone(), key.clone());
        Box::pin(async move {
            let params = FsParams::read(&call.params);
            let path = checked_path(&call, &params)?;
            let decided = match &key {
                Some(key) => ask(&lisp, key, &call, &path).await?,
                None => Decision::Do,
            };
            match (call.method.as_str(), decided) {
                (_, Decision::Refuse(why)) => Err(why),
                ("fs/read_text_file", Decision::Serve(text)) => {
                    Ok(served::read_answer(slice(&text, &params)))
                }
                ("fs/read_text_file", Decision::Do) => read(&path, &params),
                (_, _) => write(&path, &params),
            }
        })
    }))
}

/// What the program decided.
enum Decision {
    Do,
    Refuse(String),
    Serve(String),
}

/// The request's absolute path, real, inside one of the session's folders.
fn checked_path(call: &FsCall, params: &FsParams) -> Result<PathBuf, String> {
    let given = params.path.get().map_or("", String::as_str);
    let path = Path::new(given);
    if !path.is_absolute() {
        return Err(format!("the path must be absolute: {given:?}"));
    }
    let real = crate::tools::path::real_path(path).map_err(|e| e.to_string())?;
    let inside = call
        .roots
        .iter()
        .any(|root| crate::tools::path::real_path(root).is_ok_and(|root| real.starts_with(&root)));
    if !inside {
        return Err(format!(
            "{given} is outside the session's folders (its links followed)"
        ));
    }
    if call.method == "fs/write_text_file" {
        refuse_code_folders(&real, &call.roots, given)?;
        if params.content.get().is_none() {
            return Err("fs/write_text_file needs its content".into());
        }
    }
    Ok(real)
}

/// Folders of a workspace that git or oml load code from, which no agent writes into (as the
/// sandbox keeps them read-only for commands), and oml's own folders and the user's agent
/// folders.
const CODE_FOLDERS: [&str; 2] = [".git", ".oml"];

fn refuse_code_folders(real: &Path, roots: &[PathBuf], given: &str) -> Result<(), String> {
    let own = crate::paths::Paths::from_env();
    let agents = crate::paths::agent_dirs();
    let in_own = own
        .own_dirs()
        .into_iter()
        .chain(agents.iter().map(PathBuf::as_path))
        .any(|d| crate::tools::path::real_path(d).is_ok_and(|d| real.starts_with(d)));
    let in_code = roots.iter().any(|root| {
        crate::tools::path::real_path(root).is_ok_and(|root| {
            CODE_FOLDERS
                .iter()
                .any(|name| real.starts_with(root.join(name)))
        })
    });
    if in_own || in_code {
        return Err(format!(
            "{given} is where oml or git load code from: not written"
        ));
    }
    Ok(())
}

/// Calls the program's function with `{:method :path :session-id :line :limit :content}`.
async fn ask(
    lisp: &Lisp,
    key: &mlua::RegistryKey,
    call: &FsCall,
    path: &Path,
) -> Result<Decision, String> {
    let lua = lisp.lua();
    let (f, arg) = (|| -> mlua::Result<(Function, Value)> {
        let f: Function = lua.registry_value(key)?;
        // The params as sent, and what oml made of them.
        let mut shown = match &call.params {
            Json::Object(params) => params.clone(),
            _ => serde_json::Map::new(),
        };
        let session = SessionHead::session_id(&call.params).map(Json::String);
        shown.insert("method".into(), call.method.clone().into());
        shown.insert("path".into(), path.to_string_lossy().into_owned().into());
        shown.insert("session-id".into(), session.unwrap_or(Json::Null));
        Ok((f, to_lua(lua, &Json::Object(shown))?))
    })()
    .map_err(|e| e.to_string())?;
    let answer: Value = lisp
        .run(f, arg, &call.cancel)
        .await
        .map_err(|e| format!("the fs handler failed: {e}"))?;
    Ok(match answer {
        Value::Nil | Value::Boolean(true) => Decision::Do,
        Value::Boolean(false) => Decision::Refuse("refused by the client".into()),
        Value::String(s) => Decision::Refuse(s.to_string_lossy()),
        Value::Table(t) => {
            let served = from_lua(lua, Value::Table(t)).map_err(|e| e.to_string())?;
            match FsParams::read(&served).content.0 {
                Some(text) => Decision::Serve(text),
                None => Decision::Do,
            }
        }
        other => return Err(format!("the fs handler returned {}", other.type_name())),
    })
}

fn read(path: &Path, params: &FsParams) -> Result<Json, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if meta.len() as usize > FS_READ_MAX_BYTES {
        return Err(format!(
            "{} is larger than {FS_READ_MAX_BYTES} bytes",
            path.display()
        ));
    }
    let bytes =
        crate::regular::read_regular(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let text = String::from_utf8_lossy(&bytes);
    Ok(served::read_answer(slice(&text, params)))
}

/// `line` (1-based) and `limit` lines of `text`, as ACP's read asks.
fn slice(text: &str, params: &FsParams) -> String {
    let line = params.line.get().copied().unwrap_or(1).max(1) as usize;
    let limit = params.limit.get().map(|n| *n as usize);
    if line == 1 && limit.is_none() {
        return text.to_owned();
    }
    let lines = text.split_inclusive('\n').skip(line - 1);
    match limit {
        Some(n) => lines.take(n).collect(),
        None => lines.collect(),
    }
}

fn write(path: &Path, params: &FsParams) -> Result<Json, String> {
    let content = params.content.get().map_or("", String::as_str);
    let _lock = crate::tools::atomic::file_lock();
    crate::tools::atomic::write_atomic(path, &[content.as_bytes()], false)
        .map_err(|e| e.to_string())?;
    Ok(crate::acp::rpc::empty_result())
}
