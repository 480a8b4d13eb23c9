//! The agent's host functions: the `session.*` primitives and the Rust implementations of the
//! built-in tools (`oml.tool-read`, `oml.tool-write`, `oml.tool-edit`, `oml.tool-bash`, which the
//! documented Lisp tools in `agent.fnl` call), and two small primitives for user tools:
//! `oml.list-dir` and `oml.run-process`.
//!
//! Every `session.*` function finds its session from the running coroutine (see
//! [`Sessions::bind_thread`]) unless it is given an explicit session id as its last argument.
//! Data crosses as a copy (JSON ⇄ Lua).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use mlua::{Lua, Table, Value};
use serde_json::Value as Json;

use crate::bind::llm::DeltaSink;
use crate::lisp::{Lisp, LispError, compile_in, from_lua, to_lua};
use crate::llm::StreamEvent;
use crate::session::{AgentEvent, Entry, Sessions};
use crate::tools::{self, ReadLimits, ToolOutput};

/// The `session.put!` keys whose changes are recorded in the session's file (and restored when
/// it is loaded).
const RECORDED_KEYS: &[&str] = &["model", "permission-mode"];

pub fn install(lisp: &Lisp, sessions: Arc<Sessions>) -> Result<(), LispError> {
    let lua = lisp.lua();
    let session: Table = lua.globals().get("session")?;
    let oml: Table = lua.globals().get("oml")?;

    let s = sessions.clone();
    session.set(
        "current",
        lua.create_function(move |lua, ()| Ok(s.of_thread(thread_key(lua))))?,
    )?;
    let s = sessions.clone();
    session.set("list", lua.create_function(move |_, ()| Ok(s.ids()))?)?;
    let s = sessions.clone();
    session.set(
        "bind!",
        lua.create_function(move |lua, id: Option<String>| {
            if let Some(id) = &id {
                s.with(id, |_| ())
                    .ok_or_else(|| rt(format!("no session {id}")))?;
            }
            Ok(s.bind_thread(thread_key(lua), id))
        })?,
    )?;
    let s = sessions.clone();
    session.set(
        "cwd",
        lua.create_function(move |lua, id: Option<String>| {
            Ok(session_cwd(lua, &s, id)?.display().to_string())
        })?,
    )?;
    let s = sessions.clone();
    session.set(
        "resolve-path",
        lua.create_function(move |lua, (path, id): (String, Option<String>)| {
            let cwd = session_cwd(lua, &s, id)?;
            tools::resolve_path(&cwd, &path)
                .map(|p| p.display().to_string())
                .map_err(|e| rt(e.to_string()))
        })?,
    )?;
    let s = sessions.clone();
    session.set(
        "transcript",
        lua.create_function(move |lua, id: Option<String>| {
            let id = session_id(lua, &s, id)?;
            let t = s.with(&id, |s| s.transcript.clone()).unwrap_or_default();
            to_lua(lua, &Json::Array(t))
        })?,
    )?;
    let s = sessions.clone();
    session.set(
        "append-message!",
        lua.create_function(move |lua, (msgs, id): (Value, Option<String>)| {
            let id = session_id(lua, &s, id)?;
            let msgs = messages(lua, msgs)?;
            s.with(&id, |s| {
                for m in &msgs {
                    s.record(&Entry::Message { message: m.clone() });
                }
                s.transcript.extend(msgs)
            });
            Ok(())
        })?,
    )?;
    let s = sessions.clone();
    session.set(
        "set-transcript!",
        lua.create_function(move |lua, (msgs, id): (Value, Option<String>)| {
            let id = session_id(lua, &s, id)?;
            let msgs = match msgs {
                Value::Nil => Vec::new(),
                other => messages(lua, other)?,
            };
            s.with(&id, |s| {
                // History is never rewritten: the file records that the transcript was replaced.
                s.record(&Entry::Transcript {
                    messages: msgs.clone(),
                });
                s.transcript = msgs
            });
            Ok(())
        })?,
    )?;
    let s = sessions.clone();
    session.set(
        "emit!",
        lua.create_function(move |lua, (event, id): (Value, Option<String>)| {
            let json = from_lua(lua, event)?;
            let event: AgentEvent = serde_json::from_value(json)
                .map_err(|e| rt(format!("session.emit!: not an agent event: {e}")))?;
            // Outside a session an event has nowhere to go, which is not an error.
            if let Some(id) = id.or_else(|| s.of_thread(thread_key(lua))) {
                s.emit(&id, event);
            }
            Ok(())
        })?,
    )?;
    session.set(
        "delta-forwarder",
        lua.create_function(|_, id: String| Ok(DeltaForwarder { session: id }))?,
    )?;
    // The default `session.emit!`, kept where the delta shortcut can compare it with what the
    // name holds now.
    lua.set_named_registry_value(DEFAULT_EMIT, session.get::<Value>("emit!")?)?;
    let s = sessions.clone();
    crate::bind::llm::set_delta_shortcut(
        lisp,
        Arc::new(move |lua, on_event| {
            let Value::UserData(u) = on_event else {
                return None;
            };
            let id = u.borrow::<DeltaForwarder>().ok()?.session.clone();
            let s = s.clone();
            // Held for the call: the `session` table and the default `session.emit!`, so that
            // each check is one table read.
            let default: mlua::Function = lua.named_registry_value(DEFAULT_EMIT).ok()?;
            let namespace: Table = lua.globals().raw_get("session").ok()?;
            Some(DeltaSink {
                open: Box::new(move |_| {
                    matches!(namespace.raw_get::<Value>("emit!"),
                             Ok(Value::Function(f)) if f.to_pointer() == default.to_pointer())
                }),
                deliver: Box::new(move |event| match event {
                    StreamEvent::TextDelta(text) => s.emit(&id, AgentEvent::TextDelta { text }),
                    StreamEvent::ThoughtDelta(text) => {
                        s.emit(&id, AgentEvent::ThoughtDelta { text })
                    }
                    StreamEvent::ToolCall(_)
                    | StreamEvent::Done { .. }
                    | StreamEvent::Retry { .. } => {}
                }),
            })
        }),
    );
    let s = sessions.clone();
    session.set(
        "cancelled?",
        lua.create_function(move |lua, id: Option<String>| {
            let id = id.or_else(|| s.of_thread(thread_key(lua)));
            Ok(id
                .and_then(|id| s.with(&id, |s| s.cancel.is_cancelled()))
                .unwrap_or(false))
        })?,
    )?;
    let s = sessions.clone();
    session.set(
        "cancel!",
        lua.create_function(move |lua, id: Option<String>| {
            let id = session_id(lua, &s, id)?;
            s.with(&id, |s| s.cancel.cancel());
            Ok(())
        })?,
    )?;
    let s = sessions.clone();
    session.set(
        "get",
        lua.create_function(move |lua, (key, id): (String, Option<String>)| {
            let Some(id) = id.or_else(|| s.of_thread(thread_key(lua))) else {
                return Ok(Value::Nil);
            };
            match s.with(&id, |s| s.data.get(&key).cloned()).flatten() {
                Some(v) => to_lua(lua, &v),
                None => Ok(Value::Nil),
            }
        })?,
    )?;
    let s = sessions.clone();
    session.set(
        "put!",
        lua.create_function(
            move |lua, (key, value, id): (String, Value, Option<String>)| {
                let id = session_id(lua, &s, id)?;
                let value = from_lua(lua, value)?;
                s.with(&id, |s| {
                    if RECORDED_KEYS.contains(&key.as_str()) && s.data.get(&key) != Some(&value) {
                        s.record(&Entry::Data {
                            key: key.clone(),
                            value: value.clone(),
                        });
                    }
                    if value.is_null() {
                        s.data.remove(&key);
                    } else {
                        s.data.insert(key, value);
                    }
                });
                Ok(())
            },
        )?,
    )?;

    let s = sessions.clone();
    session.set(
        "record!",
        lua.create_function(
            move |lua, (kind, data, id): (String, Value, Option<String>)| {
                let id = session_id(lua, &s, id)?;
                let data = from_lua(lua, data)?;
                s.with(&id, |s| s.record(&Entry::Custom { kind, data }));
                Ok(())
            },
        )?,
    )?;

    oml.set(
        "compile-string",
        lua.create_function(|lua, (src, name): (String, Option<String>)| {
            compile_in(lua, &src, name.as_deref().unwrap_or("eval")).map_err(|e| rt(e.to_string()))
        })?,
    )?;

    let s = sessions.clone();
    oml.set(
        "tool-read",
        crate::lisp::create_async_function(
            lua,
            move |lua,
                  (path, offset, limit, max_chars, default_limit): (
                String,
                Option<i64>,
                Option<i64>,
                usize,
                usize,
            )| {
                let cwd = current_cwd(&lua, &s);
                async move {
                    let out = match tools::resolve_path(&cwd, &path) {
                        Err(e) => ToolOutput::from(e),
                        Ok(abs) => {
                            let limits = ReadLimits {
                                max_chars,
                                default_limit,
                            };
                            blocking(move || tools::read(&abs, offset, limit, &limits)).await
                        }
                    };
                    output_table(&lua, out)
                }
            },
        )?,
    )?;
    let s = sessions.clone();
    oml.set(
        "tool-write",
        crate::lisp::create_async_function(lua, move |lua, (path, content): (String, Value)| {
            let cwd = current_cwd(&lua, &s);
            async move {
                let out = match (tools::resolve_path(&cwd, &path), content) {
                    (Err(e), _) => ToolOutput::from(e),
                    (Ok(abs), Value::String(c)) => {
                        let content = c.to_string_lossy();
                        blocking(move || tools::write(&abs, &content)).await
                    }
                    (Ok(_), _) => ToolOutput::from(tools::ToolError::ContentRequired),
                };
                output_table(&lua, out)
            }
        })?,
    )?;
    let s = sessions.clone();
    oml.set(
        "tool-edit",
        crate::lisp::create_async_function(lua, move |lua, (path, args): (String, Value)| {
            let cwd = current_cwd(&lua, &s);
            let args = from_lua(&lua, args);
            async move {
                let args = args?;
                let out = match tools::resolve_path(&cwd, &path) {
                    Err(e) => ToolOutput::from(e),
                    Ok(abs) => match tools::parse_edit_args(&args) {
                        Err(e) => ToolOutput::from(e),
                        Ok(edits) => blocking(move || tools::edit(&abs, &edits)).await,
                    },
                };
                output_table(&lua, out)
            }
        })?,
    )?;
    let s = sessions.clone();
    // (oml.list-dir path) → a sorted list of {:name :dir?}, or nil and "Not a directory: <path>".
    // PATH is relative to the session directory; symlinks to directories count as directories.
    oml.set(
        "list-dir",
        lua.create_function(move |lua, path: Option<String>| {
            let cwd = current_cwd(lua, &s);
            let path = path.filter(|p| !p.trim().is_empty());
            let dir = match &path {
                None => cwd,
                Some(p) => tools::resolve_path(&cwd, p).map_err(|e| rt(e.to_string()))?,
            };
            let shown = path.unwrap_or_else(|| ".".to_owned());
            let not_dir = || {
                (
                    Value::Nil,
                    Value::String(
                        lua.create_string(format!("Not a directory: {shown}"))
                            .unwrap(),
                    ),
                )
            };
            let Ok(read) = std::fs::read_dir(&dir) else {
                return Ok(not_dir());
            };
            let mut entries: Vec<(String, bool)> = read
                .filter_map(Result::ok)
                .map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let is_dir = std::fs::metadata(e.path())
                        .map(|m| m.is_dir())
                        .unwrap_or(false);
                    (name, is_dir)
                })
                .collect();
            entries.sort();
            let out = lua.create_table()?;
            for (i, (name, is_dir)) in entries.into_iter().enumerate() {
                let e = lua.create_table()?;
                e.set("name", name)?;
                e.set("dir?", is_dir)?;
                out.set(i + 1, e)?;
            }
            Ok((Value::Table(out), Value::Nil))
        })?,
    )?;
    let s = sessions.clone();
    // (oml.run-process [program arg ...]) → {:exit :stdout :stderr}, run in the session directory
    // without a shell; throws when the program cannot start; "Cancelled" when the prompt is.
    oml.set(
        "run-process",
        crate::lisp::create_async_function(lua, move |lua, argv: Vec<String>| {
            let cwd = current_cwd(&lua, &s);
            let cancel = s
                .of_thread(thread_key(&lua))
                .and_then(|id| s.with(&id, |s| s.cancel.clone()))
                .unwrap_or_default();
            async move {
                let (program, args) = argv
                    .split_first()
                    .ok_or_else(|| rt("run-process: the argument list is empty"))?;
                let child = tokio::process::Command::new(program)
                    .args(args)
                    .current_dir(&cwd)
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .kill_on_drop(true)
                    .spawn()
                    .map_err(|e| rt(format!("cannot run {program}: {e}")))?;
                let out = tokio::select! {
                    out = child.wait_with_output() => out.map_err(|e| rt(format!("{program}: {e}")))?,
                    () = cancel.cancelled() => return Err(rt("Cancelled")),
                };
                let t = lua.create_table()?;
                t.set("exit", out.status.code())?;
                t.set("stdout", lua.create_string(&out.stdout)?)?;
                t.set("stderr", lua.create_string(&out.stderr)?)?;
                Ok(t)
            }
        })?,
    )?;
    let s = sessions;
    oml.set(
        "tool-bash",
        crate::lisp::create_async_function(
            lua,
            move |lua, (command, timeout, max_chars): (String, f64, usize)| {
                let cwd = current_cwd(&lua, &s);
                let cancel = s
                    .of_thread(thread_key(&lua))
                    .and_then(|id| s.with(&id, |s| s.cancel.clone()))
                    .unwrap_or_default();
                async move {
                    let timeout = Duration::from_secs_f64(timeout.clamp(0.0, 1e9));
                    let out = tools::bash(&command, &cwd, timeout, max_chars, &cancel).await;
                    output_table(&lua, out)
                }
            },
        )?,
    )?;
    Ok(())
}

// --- private helpers

fn rt(msg: impl Into<String>) -> mlua::Error {
    mlua::Error::RuntimeError(msg.into())
}

fn thread_key(lua: &Lua) -> usize {
    lua.current_thread().to_pointer() as usize
}

/// The explicit session id (which must exist), else the running coroutine's session.
fn session_id(lua: &Lua, sessions: &Sessions, explicit: Option<String>) -> mlua::Result<String> {
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
fn session_cwd(lua: &Lua, sessions: &Sessions, explicit: Option<String>) -> mlua::Result<PathBuf> {
    let id = match explicit {
        Some(id) => Some(session_id(lua, sessions, Some(id))?),
        None => sessions.of_thread(thread_key(lua)),
    };
    Ok(id
        .and_then(|id| sessions.with(&id, |s| s.cwd.clone()))
        .unwrap_or_else(process_cwd))
}

fn current_cwd(lua: &Lua, sessions: &Sessions) -> PathBuf {
    sessions
        .of_thread(thread_key(lua))
        .and_then(|id| sessions.with(&id, |s| s.cwd.clone()))
        .unwrap_or_else(process_cwd)
}

fn process_cwd() -> PathBuf {
    std::env::current_dir().unwrap_or_else(|_| Path::new("/").to_path_buf())
}

/// One message (a table with `:role`) or a list of them, as JSON.
fn messages(lua: &Lua, value: Value) -> mlua::Result<Vec<Json>> {
    let json = from_lua(lua, value)?;
    let list = match json {
        Json::Array(items) => items,
        one => vec![one],
    };
    for m in &list {
        if !m.get("role").is_some_and(Json::is_string) {
            return Err(rt("A message is a table with :role"));
        }
    }
    Ok(list)
}

async fn blocking(f: impl FnOnce() -> ToolOutput + Send + 'static) -> ToolOutput {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| ToolOutput::error(format!("the tool failed: {e}")))
}

fn output_table(lua: &Lua, out: ToolOutput) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("content", out.content)?;
    t.set("error?", out.is_error)?;
    if let Some(diff) = out.diff {
        let d = lua.create_table()?;
        d.set("path", diff.path.display().to_string())?;
        if let Some(old) = diff.old_text {
            d.set("old-text", old)?;
        }
        d.set("new-text", diff.new_text)?;
        t.set("diff", d)?;
    }
    Ok(t)
}

/// `oml.reload`: what `/reload` calls. It needs the init paths, which only the CLI knows, so the
/// CLI installs it after the agent.
pub fn install_reload(lisp: &Lisp, paths: crate::paths::Paths) -> Result<(), LispError> {
    let lua = lisp.lua();
    let oml: Table = lua.globals().get("oml")?;
    // A weak handle: the function lives inside the state it would otherwise keep alive.
    let weak = lua.weak();
    let paths = Arc::new(paths);
    oml.set(
        "reload",
        crate::lisp::create_async_function(lua, move |_, dir: String| {
            let weak = weak.clone();
            let paths = paths.clone();
            async move {
                let Some(lua) = weak.try_upgrade() else {
                    return Ok(String::new());
                };
                let lisp = Lisp::from_lua(&lua).ok_or_else(|| rt("the Lisp host is gone"))?;
                let report =
                    crate::lisp::init::load_all(&lisp, &paths, Some(Path::new(&dir)), true).await;
                let mut out = if report.loaded.is_empty() {
                    "Reloaded nothing (no init files)".to_owned()
                } else {
                    let files: Vec<String> = report
                        .loaded
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect();
                    format!("Reloaded {}", files.join(" and "))
                };
                for line in report.messages() {
                    out.push_str("\n- ");
                    out.push_str(&line);
                }
                Ok(out)
            }
        })?,
    )?;
    Ok(())
}

/// Where the default `session.emit!` is kept in the Lua registry.
const DEFAULT_EMIT: &str = "oml.default-session-emit";

/// `(session.delta-forwarder id)`: a callable that emits the text and thought deltas it is
/// called with to session ID through `session.emit!` (looked up by name at each call), and
/// ignores every other event. `agent.call-model` gives one to `llm.chat` as `:on-event`; while
/// `session.emit!` is the default, unadvised, `llm.chat` delivers the deltas to the session
/// directly instead of calling it (see `crate::bind::llm`), which is what the call would
/// have done.
struct DeltaForwarder {
    session: String,
}

impl mlua::UserData for DeltaForwarder {
    fn add_methods<M: mlua::UserDataMethods<Self>>(methods: &mut M) {
        methods.add_meta_method(mlua::MetaMethod::Call, |lua, this, event: Value| {
            let Value::Table(event) = event else {
                return Ok(());
            };
            let kind: Value = event.raw_get("type")?;
            let is_delta = matches!(&kind, Value::String(k)
                if matches!(k.as_bytes().as_ref(), b"text-delta" | b"thought-delta"));
            if !is_delta {
                return Ok(());
            }
            let emit = Lisp::from_lua(lua)
                .and_then(|lisp| lisp.function("session.emit!").ok().flatten())
                .ok_or_else(|| rt("session.emit! is not a function"))?;
            let forwarded = lua.create_table_with_capacity(0, 2)?;
            forwarded.raw_set("type", kind)?;
            forwarded.raw_set("text", event.raw_get::<Value>("text")?)?;
            emit.call::<()>((forwarded, this.session.as_str()))
        });
        methods.add_meta_method(mlua::MetaMethod::ToString, |_, this, ()| {
            Ok(format!("#<delta-forwarder {}>", this.session))
        });
    }
}
