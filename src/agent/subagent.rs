//! Sub-agents' turns and concurrent tool calls: the primitives `task.fnl` stands on.
//!
//! A sub-agent is a session of this process (its own transcript, file, model, mode and tools)
//! whose events go to a channel instead of a front end. `session.new-child` makes one;
//! `session.start-turn` runs one prompt of it through `agent.prompt` on a task of its own and
//! returns a handle; `session.next-event` gives what the turn reports, one event at a time, so
//! that the parent's tool card can show it (and, while the parent's prompt is the one waiting,
//! a cancel of that prompt cancels the child's turn too); `session.wait-turn` waits for how it
//! ended. `session.spawn` and `session.join` run Lisp functions concurrently in coroutines
//! mapped to the calling session, which is how several `task` calls of one model answer run in
//! parallel.
//!
//! This module knows nothing of definitions, permissions or how a card is drawn: that is Lisp.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use mlua::{Function, Lua, MultiValue, UserData, UserDataRef, Value};
use parking_lot::Mutex;
use serde_json::json;
use tokio::sync::{mpsc, watch};

use super::Agent;
use crate::cancel::CancelToken;
use crate::lisp::{HostFn, Lisp, LispError, create_async_function, define, to_lua};
use crate::session::{AgentEvent, Sessions};

/// The event channels of the sub-agents alive in this process, by session id.
#[derive(Default)]
struct Children {
    events: Mutex<HashMap<String, Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<AgentEvent>>>>>,
}

/// One turn of a sub-agent, running on a task of its own.
#[derive(Clone)]
struct TurnHandle {
    child: String,
    /// `None` while the turn runs, then `{stop-reason}` or `{error}`.
    done: watch::Receiver<Option<serde_json::Value>>,
    /// The hard stop: interrupts the Lisp code itself (after a soft cancel had its chance).
    interrupt: CancelToken,
}

impl UserData for TurnHandle {}

/// A Lisp function running concurrently in a coroutine mapped to a session.
#[derive(Clone)]
struct Spawned {
    /// `None` while it runs, then the `pcall` result as a sequence `{ok, value}` (`None`
    /// inside when it could not be kept).
    done: watch::Receiver<Option<Option<Arc<mlua::RegistryKey>>>>,
}

impl UserData for Spawned {}

/// Seconds a stopped sub-agent's turn has to end on its own before its Lisp code is
/// interrupted.
pub const STOP_GRACE_SECS: u64 = 10;

fn rt(e: impl std::fmt::Display) -> mlua::Error {
    mlua::Error::RuntimeError(e.to_string())
}

fn agent_of(lua: &Lua) -> mlua::Result<Agent> {
    Lisp::from_lua(lua)
        .and_then(|lisp| Agent::of(&lisp))
        .ok_or_else(|| rt("the agent is not installed"))
}

fn children(lua: &Lua) -> Arc<Children> {
    lua.app_data_ref::<Arc<Children>>()
        .map(|c| Arc::clone(&c))
        .unwrap_or_default()
}

/// The session the calling coroutine runs for.
fn calling_session(lua: &Lua, sessions: &Sessions) -> Option<String> {
    sessions.of_thread(lua.current_thread().to_pointer() as usize)
}

/// Installs the `session.*` functions of this module.
pub(super) fn install(lisp: &Lisp) -> Result<(), LispError> {
    lisp.lua().set_app_data(Arc::new(Children::default()));
    define(lisp.lua(), "session", FNS)?;
    Ok(())
}

const FNS: &[HostFn] = &[
    HostFn {
        name: "new-child",
        args: "cwd",
        doc: "Start a sub-agent's session in the directory CWD: a session of its own (stored like \
              any other) whose events are read with `session.next-event` rather than shown by a \
              front end. Returns its id.",
        make: |lua| {
            lua.create_function(|lua, cwd: String| {
                let agent = agent_of(lua)?;
                let (tx, rx) = mpsc::unbounded_channel();
                let id = agent.new_session(PathBuf::from(cwd), Some(tx));
                let rx = Arc::new(tokio::sync::Mutex::new(rx));
                children(lua).events.lock().insert(id.clone(), rx);
                Ok(id)
            })
        },
    },
    HostFn {
        name: "forget-child",
        args: "id",
        doc: "Forget the sub-agent's session ID (its turn ended and its result was taken): it \
              leaves the registry and memory; its file stays. Returns true when there was one.",
        make: |lua| {
            lua.create_function(|lua, id: String| {
                let gone = children(lua).events.lock().remove(&id).is_some();
                if gone {
                    let agent = agent_of(lua)?;
                    agent.sessions().remove(&id);
                    // Its own MCP servers, when it had any (`mcp.start-own`).
                    let lisp = agent.lisp().clone();
                    tokio::spawn(async move { crate::bind::mcp::stop_session(&lisp, &id).await });
                }
                Ok(gone)
            })
        },
    },
    HostFn {
        name: "start-turn",
        args: "id text",
        doc: "Run the prompt TEXT in the sub-agent's session ID through `agent.prompt`, on a task \
              of its own; returns a handle for `session.next-event`, `session.wait-turn` and \
              `session.stop-turn`. An error when the session is unknown or already busy.",
        make: |lua| lua.create_function(start_turn),
    },
    HostFn {
        name: "next-event",
        args: "handle ?follow-cancel",
        doc: "The next event the turn of HANDLE reports (a table with :type, as `session.emit!` \
              takes them), waiting for it; nil once the turn has ended and every event was read. \
              With ?FOLLOW-CANCEL true, a cancel of the calling session's prompt cancels the \
              turn (which then ends with :cancelled).",
        make: |lua| create_async_function(lua, next_event),
    },
    HostFn {
        name: "wait-turn",
        args: "handle ?seconds",
        doc: "How the turn of HANDLE ended, {:stop-reason} or {:error}, waiting for it at most \
              ?SECONDS (default: until it ends; 0 does not wait); nil when it is still running.",
        make: |lua| create_async_function(lua, wait_turn),
    },
    HostFn {
        name: "stop-turn",
        args: "handle",
        doc: "Cancel the turn of HANDLE (its model stream, tools and loop, which then ends with \
              :cancelled); after a grace period of STOP_GRACE_SECS its Lisp code is interrupted. \
              Returns nil.",
        make: |lua| {
            lua.create_function(|lua, handle: UserDataRef<TurnHandle>| {
                agent_of(lua)?.cancel(&handle.child);
                let handle = handle.clone();
                tokio::spawn(async move {
                    let mut done = handle.done.clone();
                    let ended = done.wait_for(Option::is_some);
                    let grace = Duration::from_secs(STOP_GRACE_SECS);
                    if tokio::time::timeout(grace, ended).await.is_err() {
                        handle.interrupt.cancel();
                    }
                });
                Ok(())
            })
        },
    },
    HostFn {
        name: "spawn",
        args: "f",
        doc: "Run F (no arguments) concurrently, in a coroutine of its own mapped to the calling \
              session; returns a handle for `session.join`.",
        make: |lua| lua.create_function(spawn),
    },
    HostFn {
        name: "join",
        args: "handle",
        doc: "Wait for the function of HANDLE (from `session.spawn`); returns what `pcall` \
              would: true and its value, or false and its error.",
        make: |lua| create_async_function(lua, join),
    },
];

/// `session.start-turn`.
fn start_turn(lua: &Lua, (id, text): (String, String)) -> mlua::Result<TurnHandle> {
    let agent = agent_of(lua)?;
    let turn = agent.begin(&id).map_err(rt)?;
    let (tx, done) = watch::channel(None);
    let interrupt = CancelToken::new();
    let handle = TurnHandle {
        child: id,
        done,
        interrupt: interrupt.clone(),
    };
    tokio::spawn(async move {
        let outcome = agent.run(&turn, &text, &interrupt).await;
        drop(turn);
        let value = match outcome {
            Ok(o) => json!({ "stop-reason": o.stop_reason }),
            Err(e) => json!({ "error": e.to_string() }),
        };
        let _ = tx.send(Some(value));
    });
    Ok(handle)
}

/// `session.next-event`.
async fn next_event(
    lua: Lua,
    (handle, follow): (UserDataRef<TurnHandle>, Option<bool>),
) -> mlua::Result<Value> {
    let handle = handle.clone();
    let agent = agent_of(&lua)?;
    let Some(rx) = children(&lua).events.lock().get(&handle.child).cloned() else {
        return Ok(Value::Nil);
    };
    let parent_cancel = match follow {
        Some(true) => calling_session(&lua, agent.sessions())
            .and_then(|p| agent.sessions().with(&p, |s| s.cancel.clone())),
        _ => None,
    };
    let mut rx = rx.lock().await;
    let mut done = handle.done.clone();
    let mut follow = parent_cancel;
    loop {
        let event = tokio::select! {
            biased;
            ev = rx.recv() => ev,
            _ = done.wait_for(Option::is_some) => rx.try_recv().ok(),
            () = async { match &follow { Some(t) => t.cancelled().await, None => std::future::pending().await } } => {
                agent.cancel(&handle.child);
                follow = None;
                continue;
            }
        };
        return match event {
            Some(ev) => to_lua(&lua, &serde_json::to_value(&ev).map_err(rt)?),
            None => Ok(Value::Nil),
        };
    }
}

/// `session.wait-turn`.
async fn wait_turn(
    lua: Lua,
    (handle, seconds): (UserDataRef<TurnHandle>, Option<f64>),
) -> mlua::Result<Value> {
    let mut done = handle.done.clone();
    let ended = async { done.wait_for(Option::is_some).await.ok().map(|v| v.clone()) };
    let value = match seconds {
        None => ended.await.flatten(),
        Some(s) => {
            let wait = Duration::try_from_secs_f64(s.max(0.0)).unwrap_or(Duration::ZERO);
            tokio::time::timeout(wait, ended)
                .await
                .ok()
                .flatten()
                .flatten()
        }
    };
    match value {
        Some(v) => to_lua(&lua, &v),
        None => Ok(Value::Nil),
    }
}

/// `session.spawn`.
fn spawn(lua: &Lua, f: Function) -> mlua::Result<Spawned> {
    let lisp = Lisp::from_lua(lua).ok_or_else(|| rt("the Lisp host is gone"))?;
    let sessions = agent_of(lua)?.sessions().clone();
    let sid = calling_session(lua, &sessions);
    // The coroutine's body is Lua's own `pcall` (yieldable in 5.4): its result is `ok, value`.
    let pcall: Function = lua.globals().raw_get("pcall")?;
    let (tx, done) = watch::channel(None);
    tokio::spawn(async move {
        let mut key = 0usize;
        let result: Result<MultiValue, LispError> = lisp
            .run_with(pcall, f, &CancelToken::new(), |thread| {
                key = thread.to_pointer() as usize;
                sessions.bind_thread(key, sid.clone());
            })
            .await;
        sessions.bind_thread(key, None);
        let lua = lisp.lua();
        let packed = match result {
            Ok(values) => lua.create_sequence_from(values),
            Err(e) => lua.create_sequence_from([
                Value::Boolean(false),
                Value::String(
                    lua.create_string(e.to_string())
                        .unwrap_or_else(|_| lua.create_string("").expect("a string")),
                ),
            ]),
        };
        let stored = packed
            .and_then(|t| lua.create_registry_value(t))
            .ok()
            .map(Arc::new);
        let _ = tx.send(Some(stored));
    });
    Ok(Spawned { done })
}

/// `session.join`.
async fn join(lua: Lua, handle: UserDataRef<Spawned>) -> mlua::Result<MultiValue> {
    let mut done = handle.done.clone();
    let key = done
        .wait_for(Option::is_some)
        .await
        .map_err(rt)?
        .clone()
        .flatten()
        .ok_or_else(|| rt("the spawned function left no result"))?;
    let packed: mlua::Table = lua.registry_value(&key)?;
    let ok: bool = packed.raw_get(1)?;
    let value: Value = packed.raw_get(2)?;
    Ok(MultiValue::from_iter([Value::Boolean(ok), value]))
}
