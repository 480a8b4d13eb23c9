//! The agent's session primitives: the `session.*` functions, `oml.compile-string` and
//! `oml.reload`, and the running coroutine's session as Rust reads it ([`current`]: its
//! directory, cancel token and values) for the Lisp faces that work in a session (the tools'
//! in `crate::bind::tools`, MCP's, the client's). Checkpoints, rewinds and forks are in
//! [`rewind`], the checkpoints of commands in [`changes`], `oml.reload` in [`reload`], the
//! inbox (`session.post!`) in [`inbox`]. What is
//! recorded has the known secrets taken out ([`secrets`]).
//!
//! Every `session.*` function finds its session from the running coroutine (see
//! [`Sessions::bind_thread`]) unless it is given an explicit session id as its last argument.
//! The registry is the one in the Lua state's app data (the agent puts it there). Data crosses as
//! a copy (JSON ⇄ Lua). This module knows nothing of the agent loop or of the frontends that
//! receive the events.

mod changes;
mod current;
mod inbox;
mod reload;
mod restore;
mod rewind;
mod secrets;

pub(crate) use changes::settle as settle_checkpoints;
pub use reload::install_reload;

use current::session_cwd;
pub(crate) use current::{
    additional_directories, current_cwd, cwd, session_cancel, session_id, session_value, sessions,
    thread_key,
};

use super::rt;
use std::sync::Arc;

use mlua::{Lua, Table, Value};
use serde_json::Value as Json;

use crate::bind::llm::DeltaSink;
use crate::lisp::{DefaultWatch, HostFn, Lisp, LispError, compile_in, define, from_lua, to_lua};
use crate::llm::StreamEvent;
use crate::session::{AgentEvent, Entry, Redactions, Sessions};

/// The `session.put!` keys whose changes are recorded in the session's file (and restored when
/// it is loaded).
/// The plan and the token totals are among them, so that a loaded session replays its plan and
/// `/usage` counts the whole session, not only this process's calls.
const RECORDED_KEYS: &[&str] = &[
    "api",
    "model",
    "permission-mode",
    "permission-rules",
    "plan",
    "protocol",
    "usage",
];

/// Install `session.*`, `oml.compile-string`, the checkpoint functions, and the delta shortcut of `session.delta-forwarder`, for the registry `sessions` (which must be in
/// the state's app data already).
pub fn install(lisp: &Lisp, sessions: Arc<Sessions>) -> Result<(), LispError> {
    let lua = lisp.lua();
    let session = define(lua, "session", SESSION)?;
    define(lua, "oml", OML)?;
    rewind::install(lisp)?;
    changes::install(lisp)?;
    inbox::install(lisp.lua())?;
    // The default `session.emit!`, kept where the delta shortcut can compare it with what the
    // name holds now.
    lua.set_named_registry_value(DEFAULT_EMIT, session.get::<Value>("emit!")?)?;
    crate::bind::llm::set_delta_shortcut(lisp, delta_shortcut(sessions));
    Ok(())
}

/// Recognises a [`DeltaForwarder`] given to `llm.chat` as `:on-event`, and delivers its deltas
/// to the session directly while `session.emit!` is the default.
fn delta_shortcut(s: Arc<Sessions>) -> crate::bind::llm::DeltaShortcut {
    Arc::new(move |lua, on_event| {
        let Value::UserData(u) = on_event else {
            return None;
        };
        let id = u.borrow::<DeltaForwarder>().ok()?.session.clone();
        let s = s.clone();
        // Held for the call: the `session` table and the default `session.emit!`, read on the
        // first delta and then every `RECHECK_EVERY` (see `DefaultWatch`).
        let default: mlua::Function = lua.named_registry_value(DEFAULT_EMIT).ok()?;
        let namespace: Table = lua.globals().raw_get("session").ok()?;
        let watch = DefaultWatch::new(namespace, "emit!", default);
        Some(DeltaSink {
            open: Box::new(move |_| watch.holds_default()),
            deliver: Box::new(move |event| match event {
                StreamEvent::TextDelta(text) => s.emit(&id, AgentEvent::TextDelta { text }),
                StreamEvent::ThoughtDelta(text) => s.emit(&id, AgentEvent::ThoughtDelta { text }),
                StreamEvent::Retry {
                    attempt,
                    delay,
                    reason,
                } => s.emit(
                    &id,
                    AgentEvent::Notice {
                        text: retry_notice(attempt, delay.as_secs_f64(), &reason),
                    },
                ),
                StreamEvent::ToolCall(_) | StreamEvent::Done { .. } => {}
            }),
        })
    })
}

/// The `session.*` functions.
const SESSION: &[HostFn] = &[
    HostFn {
        name: "current",
        args: "",
        doc: "The id of the session the running coroutine works for (or, from the live REPL, \
              of the one session whose prompt is running), or nil.",
        make: |lua| lua.create_function(|lua, ()| Ok(sessions(lua)?.of_thread(thread_key(lua)))),
    },
    HostFn {
        name: "list",
        args: "",
        doc: "The ids of every session of this process, sorted.",
        make: |lua| lua.create_function(|lua, ()| Ok(sessions(lua)?.ids())),
    },
    HostFn {
        name: "bind!",
        args: "?session-id",
        doc: "Make SESSION-ID the session of the running coroutine (nil unbinds it); returns the \
              previous one. An unknown SESSION-ID is an error.",
        make: |lua| {
            lua.create_function(|lua, id: Option<String>| {
                let s = sessions(lua)?;
                if let Some(id) = &id {
                    s.with(id, |_| ())
                        .ok_or_else(|| rt(format!("no session {id}")))?;
                }
                Ok(s.bind_thread(thread_key(lua), id))
            })
        },
    },
    HostFn {
        name: "cwd",
        args: "?session-id",
        doc: "The session's directory (the process's directory outside a session), as a string. \
              An unknown SESSION-ID is an error.",
        make: |lua| {
            lua.create_function(|lua, id: Option<String>| {
                Ok(session_cwd(lua, &*sessions(lua)?, id)?
                    .display()
                    .to_string())
            })
        },
    },
    HostFn {
        name: "resolve-path",
        args: "path ?session-id",
        doc: "PATH made absolute against the session's directory (~ is the home directory) with \
              every symbolic link followed, as a string: the real file, or for a new one its \
              nearest existing folder's real path and the names below it. What the permission \
              policy checks and the file tools write. An empty or unusable PATH is an error.",
        make: |lua| {
            lua.create_function(|lua, (path, id): (String, Option<String>)| {
                let cwd = session_cwd(lua, &*sessions(lua)?, id)?;
                crate::tools::resolve_real(&cwd, &path)
                    .map(|p| p.display().to_string())
                    .map_err(|e| rt(e.to_string()))
            })
        },
    },
    HostFn {
        name: "transcript",
        args: "?session-id",
        doc: "A copy of the session's transcript: the list of its OpenAI chat messages. A \
              message of more than 64 KiB of text is copied field by field as it is read, and \
              sent from the stored transcript when it goes into a model request unread; `rawget` \
              and `next` see only its fields read so far (`pairs` sees all). Without a session \
              (none bound, none given) it is an error.",
        make: |lua| {
            lua.create_function(|lua, id: Option<String>| {
                let s = sessions(lua)?;
                let id = session_id(lua, &s, id)?;
                // The lock is not held while Lisp values are made (a collection may run
                // finalizers that call back here); the list shares the messages, and a large
                // one is read from the transcript as Lisp reads its fields.
                let t = s.with(&id, |s| s.transcript.clone()).unwrap_or_default();
                crate::lisp::stored::to_lua_stored_list(lua, &t)
            })
        },
    },
    HostFn {
        name: "append-message!",
        args: "messages ?session-id",
        doc: "Append MESSAGES (one message, a table with :role, or a list of them) to the \
              session's transcript, and record them in its file. Returns nil.",
        make: |lua| {
            lua.create_function(|lua, (msgs, id): (Value, Option<String>)| {
                let s = sessions(lua)?;
                let id = session_id(lua, &s, id)?;
                let redactions = secrets::redactions(lua);
                if crate::lisp::is_large(&msgs) {
                    return append_large(lua, &s, &id, msgs, &redactions);
                }
                let msgs = messages(lua, msgs)?;
                s.with(&id, |s| {
                    // Each message is recorded and then moved into the transcript, never
                    // copied: a message can be as large as a file the model wrote.
                    for message in msgs {
                        let entry = Entry::Message { message };
                        s.record(&entry, &redactions);
                        if let Entry::Message { message } = entry {
                            s.transcript.push(Arc::new(message));
                        }
                    }
                });
                Ok(())
            })
        },
    },
    HostFn {
        name: "set-transcript!",
        args: "messages ?session-id",
        doc: "Replace the session's transcript with MESSAGES (a list of messages; nil empties \
              it). The file records the replacement; history is never rewritten. Returns nil.",
        make: |lua| {
            lua.create_function(|lua, (msgs, id): (Value, Option<String>)| {
                let s = sessions(lua)?;
                let id = session_id(lua, &s, id)?;
                let msgs = match msgs {
                    Value::Nil => Vec::new(),
                    other => messages(lua, other)?,
                };
                let redactions = secrets::redactions(lua);
                s.with(&id, |s| {
                    // Recorded, then moved into the transcript: no message is copied.
                    let entry = Entry::Transcript { messages: msgs };
                    s.record(&entry, &redactions);
                    if let Entry::Transcript { messages } = entry {
                        s.transcript = messages.into_iter().map(Arc::new).collect();
                    }
                });
                Ok(())
            })
        },
    },
    HostFn {
        name: "emit!",
        args: "event ?session-id",
        doc: "Send the agent EVENT (a table with :type, such as {:type :text-delta :text \"hi\"}) \
              to the session's frontend. Outside a session it goes nowhere; a table that is not \
              an agent event is an error. Returns nil.",
        make: |lua| {
            lua.create_function(|lua, (event, id): (Value, Option<String>)| {
                let s = sessions(lua)?;
                let json = from_lua(lua, event)?;
                let event: AgentEvent = serde_json::from_value(json)
                    .map_err(|e| rt(format!("session.emit!: not an agent event: {e}")))?;
                // A command is about to run (after its permission, if asked): the spawn helper
                // starts now, beside the question, not in front of the command.
                if matches!(&event, AgentEvent::ToolStart { kind, .. } if kind == "execute") {
                    crate::sandbox::helper::warm();
                }
                // Outside a session an event has nowhere to go, which is not an error.
                if let Some(id) = id.or_else(|| s.of_thread(thread_key(lua))) {
                    s.emit(&id, event);
                }
                Ok(())
            })
        },
    },
    HostFn {
        name: "delta-forwarder",
        args: "session-id",
        doc: "A callable that hands the text and thought deltas it is called with to \
              session.emit! for SESSION-ID, turns a retry into a notice event, and ignores other \
              events: the :on-event the agent gives llm.chat. While session.emit! is the default, llm.chat delivers those deltas \
              to the session directly.",
        make: |lua| lua.create_function(|_, id: String| Ok(DeltaForwarder { session: id })),
    },
    HostFn {
        name: "cancelled?",
        args: "?session-id",
        doc: "Whether the session's running prompt has been cancelled; false outside a session.",
        make: |lua| {
            lua.create_function(|lua, id: Option<String>| {
                let s = sessions(lua)?;
                let id = id.or_else(|| s.of_thread(thread_key(lua)));
                Ok(id
                    .and_then(|id| s.with(&id, |s| s.cancel.is_cancelled()))
                    .unwrap_or(false))
            })
        },
    },
    HostFn {
        name: "cancel!",
        args: "?session-id",
        doc: "Cancel the session's running prompt (its model call, tools and loop stop \
              cleanly). Returns nil; without a session it is an error.",
        make: |lua| {
            lua.create_function(|lua, id: Option<String>| {
                let s = sessions(lua)?;
                let id = session_id(lua, &s, id)?;
                s.with(&id, |s| s.cancel.cancel());
                Ok(())
            })
        },
    },
    HostFn {
        name: "get",
        args: "key ?session-id",
        doc: "A copy of the session's value for the string KEY (see session.put!), or nil; nil \
              outside a session too.",
        make: |lua| {
            lua.create_function(|lua, (key, id): (String, Option<String>)| {
                let s = sessions(lua)?;
                let Some(id) = id.or_else(|| s.of_thread(thread_key(lua))) else {
                    return Ok(Value::Nil);
                };
                match s.with(&id, |s| s.data.get(&key).cloned()).flatten() {
                    Some(v) => to_lua(lua, &v),
                    None => Ok(Value::Nil),
                }
            })
        },
    },
    HostFn {
        name: "put!",
        args: "key value ?session-id",
        doc: "Keep a copy of VALUE under the string KEY in the session (nil removes it). Changes \
              of :api, :model, :permission-mode, :permission-rules, :plan, :protocol and :usage are recorded in \
              the session's file (and restored when it is loaded). Returns nil.",
        make: |lua| {
            lua.create_function(|lua, (key, value, id): (String, Value, Option<String>)| {
                let s = sessions(lua)?;
                let id = session_id(lua, &s, id)?;
                let value = from_lua(lua, value)?;
                let redactions = secrets::redactions(lua);
                s.with(&id, |s| put(s, key, value, &redactions));
                Ok(())
            })
        },
    },
    HostFn {
        name: "record!",
        args: "kind data ?session-id",
        doc: "Record a custom entry {:type \"custom\" :kind KIND :data DATA} in the session's \
              file (replays and extensions read it back). Returns nil.",
        make: |lua| {
            lua.create_function(|lua, (kind, data, id): (String, Value, Option<String>)| {
                let s = sessions(lua)?;
                let id = session_id(lua, &s, id)?;
                let data = from_lua(lua, data)?;
                let redactions = secrets::redactions(lua);
                s.with(&id, |s| {
                    s.record(&Entry::Custom { kind, data }, &redactions)
                });
                Ok(())
            })
        },
    },
];

/// The `oml.*` functions of this module.
const OML: &[HostFn] = &[HostFn {
    name: "compile-string",
    args: "src ?name",
    doc: "Compile the Fennel text SRC (named ?NAME in errors, default \"eval\") with oml's \
          macros, without running it. Returns the function; a parse or compile error is raised.",
    make: |lua| {
        lua.create_function(|lua, (src, name): (String, Option<String>)| {
            compile_in(lua, &src, name.as_deref().unwrap_or("eval")).map_err(|e| rt(e.to_string()))
        })
    },
}];

/// `session.put!` on one session.
fn put(s: &mut crate::session::Session, key: String, value: Json, redactions: &Redactions) {
    if RECORDED_KEYS.contains(&key.as_str()) && s.data.get(&key) != Some(&value) {
        s.record(
            &Entry::Data {
                key: key.clone(),
                value: value.clone(),
            },
            redactions,
        );
    }
    if value.is_null() {
        s.data.remove(&key);
    } else {
        s.data.insert(key, value);
    }
}

// --- private helpers

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

/// `session.append-message!` for messages holding more than `LARGE_VALUE_BYTES` of text (a
/// `write` of a large file): each is written to the session's file straight from its Lisp table
/// and, once the writer has let the line go, copied into the transcript. Recorded first and
/// converted after, the line and the transcript's copy are never in memory at once.
fn append_large(
    lua: &Lua,
    s: &Sessions,
    id: &str,
    msgs: Value,
    redactions: &Redactions,
) -> mlua::Result<()> {
    let items = match &msgs {
        Value::Table(t) if t.get::<Value>("role")?.is_nil() => t
            .sequence_values::<Value>()
            .collect::<mlua::Result<Vec<_>>>()?,
        _ => vec![msgs],
    };
    for item in &items {
        let role = match item {
            Value::Table(t) => t.get::<Value>("role")?,
            _ => Value::Nil,
        };
        if !matches!(role, Value::String(_)) {
            return Err(rt("A message is a table with :role"));
        }
    }
    // Garbage a large value left behind (its arguments decoded for the permission question)
    // goes before the line is made, as `from_lua` collects before its copy.
    lua.gc_collect()?;
    let log = s.with(id, |s| s.log.clone()).flatten();
    for item in items {
        if let Some(log) = &log {
            let table = crate::lisp::encode::LuaJson::sorted(lua, &item);
            log.append_message_and_wait(&table, redactions)
                .map_err(|e| rt(e.to_string()))?;
        }
        let message = from_lua(lua, item)?;
        s.with(id, |s| s.transcript.push(Arc::new(message)));
    }
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

/// The notice a retried model request gives: what failed, when it is sent again, which retry.
fn retry_notice(attempt: u32, delay_secs: f64, reason: &str) -> String {
    let reason = reason.lines().next().unwrap_or("");
    format!("model request failed ({reason}); retrying in {delay_secs:.0} s (retry {attempt})")
}

impl mlua::UserData for DeltaForwarder {
    fn add_methods<M: mlua::UserDataMethods<Self>>(methods: &mut M) {
        methods.add_meta_method(mlua::MetaMethod::Call, |lua, this, event: Value| {
            let Value::Table(event) = event else {
                return Ok(());
            };
            let kind: Value = event.raw_get("type")?;
            let (kind, text) = match &kind {
                Value::String(k)
                    if matches!(k.as_bytes().as_ref(), b"text-delta" | b"thought-delta") =>
                {
                    (kind.clone(), event.raw_get::<Value>("text")?)
                }
                Value::String(k) if k.as_bytes().as_ref() == b"retry" => {
                    let text = retry_notice(
                        event.raw_get::<Option<u32>>("attempt")?.unwrap_or(1),
                        event.raw_get::<Option<f64>>("delay")?.unwrap_or(0.0),
                        &event
                            .raw_get::<Option<String>>("reason")?
                            .unwrap_or_default(),
                    );
                    (
                        Value::String(lua.create_string("notice")?),
                        Value::String(lua.create_string(text)?),
                    )
                }
                _ => return Ok(()),
            };
            let emit = Lisp::from_lua(lua)
                .and_then(|lisp| lisp.function("session.emit!").ok().flatten())
                .ok_or_else(|| rt("session.emit! is not a function"))?;
            let forwarded = lua.create_table_with_capacity(0, 2)?;
            forwarded.raw_set("type", kind)?;
            forwarded.raw_set("text", text)?;
            emit.call::<()>((forwarded, this.session.as_str()))
        });
        methods.add_meta_method(mlua::MetaMethod::ToString, |_, this, ()| {
            Ok(format!("#<delta-forwarder {}>", this.session))
        });
    }
}
