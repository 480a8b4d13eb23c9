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

/// Why an `fs/*` call of the agent's is not served; its text is the error the agent reads.
#[derive(Debug, thiserror::Error)]
enum FsRefused {
    #[error("the path must be absolute: {0:?}")]
    NotAbsolute(String),
    #[error(transparent)]
    Unresolvable(crate::tools::ToolError),
    #[error("{0} is outside the session's folders (its links followed)")]
    Outside(String),
    #[error("{0} is where oml or git load code from: not written")]
    CodeFolder(String),
    #[error("fs/write_text_file needs its content")]
    NoContent,
    /// The program's function failed, or answered what it may not.
    #[error("the fs handler failed: {0}")]
    HandlerFailed(crate::lisp::LispError),
    #[error("the fs handler returned {0}")]
    HandlerAnswer(&'static str),
    #[error(transparent)]
    Lua(mlua::Error),
    /// The program refused, with its reason (or "refused by the client").
    #[error("{0}")]
    Refused(String),
    #[error("{} is larger than {FS_READ_MAX_BYTES} bytes", .0.display())]
    TooLarge(PathBuf),
    #[error("{}: {source}", path.display())]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Unwritten(crate::tools::ToolError),
}

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
            // The client's handler answers with the text the agent reads.
            serve(&lisp, key.as_deref(), &call)
                .await
                .map_err(|e| e.to_string())
        })
    }))
}

/// One call: held to the session's folders, put to the program, then served.
async fn serve(
    lisp: &Lisp,
    key: Option<&mlua::RegistryKey>,
    call: &FsCall,
) -> Result<Json, FsRefused> {
    let params = FsParams::read(&call.params);
    let path = checked_path(call, &params)?;
    let decided = match key {
        Some(key) => ask(lisp, key, call, &path).await?,
        None => Decision::Do,
    };
    match (call.method.as_str(), decided) {
        (_, Decision::Refuse(why)) => Err(FsRefused::Refused(why)),
        ("fs/read_text_file", Decision::Serve(text)) => {
            Ok(served::read_answer(slice(&text, &params)))
        }
        ("fs/read_text_file", Decision::Do) => read(&path, &params),
        (_, _) => write(&path, &params),
    }
}

/// What the program decided.
enum Decision {
    Do,
    Refuse(String),
    Serve(String),
}

/// The request's absolute path, real, inside one of the session's folders.
fn checked_path(call: &FsCall, params: &FsParams) -> Result<PathBuf, FsRefused> {
    let given = params.path.get().map_or("", String::as_str);
    let path = Path::new(given);
    if !path.is_absolute() {
        return Err(FsRefused::NotAbsolute(given.to_owned()));
    }
    let real = crate::tools::path::real_path(path).map_err(FsRefused::Unresolvable)?;
    let inside = call
        .roots
        .iter()
        .any(|root| crate::tools::path::real_path(root).is_ok_and(|root| real.starts_with(&root)));
    if !inside {
        return Err(FsRefused::Outside(given.to_owned()));
    }
    if call.method == "fs/write_text_file" {
        refuse_code_folders(&real, &call.roots, given)?;
        if params.content.get().is_none() {
            return Err(FsRefused::NoContent);
        }
    }
    Ok(real)
}

/// Folders of a workspace that git or oml load code from, which no agent writes into (as the
/// sandbox keeps them read-only for commands), and oml's own folders and the user's agent
/// folders.
const CODE_FOLDERS: [&str; 2] = [".git", ".oml"];

fn refuse_code_folders(real: &Path, roots: &[PathBuf], given: &str) -> Result<(), FsRefused> {
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
        return Err(FsRefused::CodeFolder(given.to_owned()));
    }
    Ok(())
}

/// Calls the program's function with `{:method :path :session-id :line :limit :content}`.
async fn ask(
    lisp: &Lisp,
    key: &mlua::RegistryKey,
    call: &FsCall,
    path: &Path,
) -> Result<Decision, FsRefused> {
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
    .map_err(FsRefused::Lua)?;
    let answer: Value = lisp
        .run(f, arg, &call.cancel)
        .await
        .map_err(FsRefused::HandlerFailed)?;
    Ok(match answer {
        Value::Nil | Value::Boolean(true) => Decision::Do,
        Value::Boolean(false) => Decision::Refuse("refused by the client".into()),
        Value::String(s) => Decision::Refuse(s.to_string_lossy()),
        Value::Table(t) => {
            let served = from_lua(lua, Value::Table(t)).map_err(FsRefused::Lua)?;
            match FsParams::read(&served).content.0 {
                Some(text) => Decision::Serve(text),
                None => Decision::Do,
            }
        }
        other => return Err(FsRefused::HandlerAnswer(other.type_name())),
    })
}

fn read(path: &Path, params: &FsParams) -> Result<Json, FsRefused> {
    let unreadable = |source| FsRefused::Unreadable {
        path: path.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(unreadable)?;
    if meta.len() as usize > FS_READ_MAX_BYTES {
        return Err(FsRefused::TooLarge(path.to_path_buf()));
    }
    let bytes = crate::regular::read_regular(path).map_err(unreadable)?;
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

fn write(path: &Path, params: &FsParams) -> Result<Json, FsRefused> {
    let content = params.content.get().map_or("", String::as_str);
    let _lock = crate::tools::atomic::file_lock();
    crate::tools::atomic::write_atomic(path, &[content.as_bytes()], false)
        .map_err(FsRefused::Unwritten)?;
    Ok(crate::acp::rpc::empty_result())
}
