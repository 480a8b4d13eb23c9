//! The ACP agent's state shared with Lisp, and its host functions: `acp.request!` (a request to
//! the client, awaited from a coroutine), `acp.update!` (a `session/update` notification, in
//! order with the session's events), `acp.running-sessions`, and `acp.terminal-bash` (the
//! `terminal` module: a command in the client's terminal).
//!
//! The hub (`super::hub`) lives in the Lua state's app data, so host functions reach the connection and the
//! per-session forwarders without holding them in closures. Before any request from a session,
//! `acp.request!` waits until that session's forwarder has queued every event emitted so far, so
//! the tool card reaches the client before the question about it.

use std::future::Future;
use std::sync::Arc;

mod terminal;

pub use terminal::{TERMINAL_CLEANUP_TIMEOUT, TERMINAL_OUTPUT_BYTE_LIMIT};

use super::hub::{Hub, hub};
use super::v2::Dialect;
use crate::acp::v2::State;
use crate::bind::rt;
use crate::cancel::CancelToken;
use crate::jsonrpc::{Connection, RequestError, SendError};
use crate::lisp::encode::LuaJson;
use crate::lisp::{HostFn, Lisp, LispError, create_async_function, define, from_lua, to_lua};
use crate::session::{PromptState, Sessions};
use mlua::{Lua, Value};

static ACP_BYTECODE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/prelude_acp.luac"));
const ACP_FILE: &str = "src/front/acp/acp.fnl";

/// Install the ACP layer's Lisp surface (`acp.*`, the ACP `agent.ask-permission`,
/// `session.on-session-start`) into a host where the agent is installed: the host functions, then
/// `acp.fnl`. Call it before the init files run, so they can redefine it.
pub fn install(lisp: &Lisp) -> Result<Arc<Hub>, LispError> {
    let hub = Arc::new(Hub::default());
    install_host_functions(lisp, hub.clone())?;
    lisp.lua()
        .load(ACP_BYTECODE)
        .set_name(format!("@{ACP_FILE}"))
        .set_mode(mlua::chunk::ChunkMode::Binary)
        .exec()?;
    lisp.register_source(ACP_FILE, include_str!("acp.fnl"));
    hub.set_default_render(lisp.function("acp.render-event")?);
    Ok(hub)
}

fn install_host_functions(lisp: &Lisp, hub: Arc<Hub>) -> Result<(), LispError> {
    let lua = lisp.lua();
    lua.set_app_data(hub);
    define(lua, "acp", ACP)?;
    define(lua, "acp", terminal::TERMINAL_FNS)?;
    Ok(())
}

/// The hub `install` put in the state's app data.
/// The host functions of the `acp` namespace.
const ACP: &[HostFn] = &[
    HostFn {
        name: "request!",
        args: "method params ?session-id",
        doc: "Send the JSON-RPC request METHOD with PARAMS (a table; nil is {}) to the ACP client \
              and wait for its answer, suspending only this coroutine; returns the result. The \
              session (?SESSION-ID, else the running coroutine's) has its pending events sent \
              first, and its cancellation cancels the request. An error answer, a timeout or a \
              closed connection is an error.",
        make: |lua| create_async_function(lua, request),
    },
    HostFn {
        name: "update!",
        args: "update ?session-id",
        doc: "Send UPDATE (a SessionUpdate table such as {:sessionUpdate :tool_call_update \
              :toolCallId … :status :in_progress}) to the ACP client as a session/update \
              notification of the session (?SESSION-ID, else the running coroutine's), after \
              the events it has emitted so far. Returns true; nil when no client is connected.",
        make: |lua| create_async_function(lua, update),
    },
    HostFn {
        name: "flush!",
        args: "?session-id",
        doc: "Wait until every event the session (?SESSION-ID, else the running coroutine's) \
              has emitted so far is rendered and queued for the ACP client, suspending only \
              this coroutine (the renderer runs Lisp, which a running turn holds until it \
              waits). Returns true; nil without a client or a session, when the prompt is \
              cancelled meanwhile, or after 5 s (an editor that stopped reading).",
        make: |lua| create_async_function(lua, flush),
    },
    HostFn {
        name: "running-sessions",
        args: "",
        doc: "The ids of the ACP sessions whose prompt is running now, sorted.",
        make: |lua| {
            lua.create_function(|lua, ()| {
                let sessions = lua.app_data_ref::<Arc<Sessions>>().map(|s| s.clone());
                Ok(sessions
                    .map(|s| hub(lua).map(|h| h.running(&s)))
                    .transpose()?
                    .unwrap_or_default())
            })
        },
    },
];

/// `acp.update!`.
fn update(
    lua: Lua,
    (update, explicit): (Value, Option<String>),
) -> impl Future<Output = mlua::Result<Option<bool>>> {
    let hub = hub(&lua);
    let sessions = lua.app_data_ref::<Arc<Sessions>>().map(|s| s.clone());
    let key = lua.current_thread().to_pointer() as usize;
    let sid = explicit.or_else(|| sessions.as_ref().and_then(|s| s.of_thread(key)));
    let update = from_lua(&lua, update);
    async move {
        let hub = hub?;
        let update = update?;
        let Some(id) = sid else {
            return Err(rt("acp.update!: no session"));
        };
        let Some(conn) = hub.connection() else {
            return Ok(None);
        };
        hub.barrier(&id).await;
        // Keys in the renderer's stable order: the same line from run to run.
        let update = super::hub::stable_order(update, "sessionUpdate");
        Ok(hub.send_update(&conn, &id, update).await.then_some(true))
    }
}

/// The session a host function acts for (`explicit`, else the running coroutine's) and the
/// cancel token of its prompt.
fn session_of(lua: &Lua, explicit: Option<String>) -> (Option<String>, Option<CancelToken>) {
    let sessions = lua.app_data_ref::<Arc<Sessions>>().map(|s| s.clone());
    let key = lua.current_thread().to_pointer() as usize;
    let sid = explicit.or_else(|| sessions.as_ref().and_then(|s| s.of_thread(key)));
    let cancel = match (&sessions, &sid) {
        (Some(s), Some(id)) => s.with(id, |s| s.cancel.clone()),
        _ => None,
    };
    (sid, cancel)
}

/// The longest `acp.flush!` waits for the session's updates to be queued: an editor that stops
/// reading holds the writer, and the turn goes on without the flush after this.
const FLUSH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// `acp.flush!`: the session's barrier, given up on its cancel or after [`FLUSH_TIMEOUT`].
fn flush(lua: Lua, explicit: Option<String>) -> impl Future<Output = mlua::Result<Option<bool>>> {
    let hub = hub(&lua).ok();
    let (sid, cancel) = session_of(&lua, explicit);
    async move {
        let (Some(hub), Some(id), Some(cancel)) = (hub, sid, cancel) else {
            return Ok(None);
        };
        tokio::select! {
            () = hub.barrier(&id) => Ok(Some(true)),
            () = cancel.cancelled() => Ok(None),
            () = tokio::time::sleep(FLUSH_TIMEOUT) => Ok(None),
        }
    }
}

/// `acp.request!`.
fn request(
    lua: Lua,
    (method, params, explicit): (String, Value, Option<String>),
) -> impl Future<Output = mlua::Result<Value>> {
    let hub = hub(&lua);
    let (sid, cancel) = session_of(&lua, explicit);
    let running = match (lua.app_data_ref::<Arc<Sessions>>(), &sid) {
        (Some(sessions), Some(id)) => sessions.prompt_state(id) == Some(PromptState::Running),
        _ => false,
    };
    async move {
        let hub = hub?;
        let conn = hub.connection().ok_or_else(|| rt("No ACP client"))?;
        if let Some(id) = &sid {
            hub.barrier(id).await;
        }
        // The params are encoded from the Lua tables into the request's line, never copied
        // into JSON values first: a question about a `write` holds the whole file (its diff).
        let params = match params {
            Value::Nil => Value::Table(lua.create_table()?),
            Value::LightUserData(null) if null.0.is_null() => Value::Table(lua.create_table()?),
            params => params,
        };
        let answer = match (hub.dialect(), sid.as_deref()) {
            (Dialect::V2, Some(id)) if asks_the_user(&method) => {
                let params = from_lua(&lua, params)?;
                let params = if method == "session/request_permission" {
                    super::v2::encode::permission_request(params)
                } else {
                    params
                };
                ask_in_v2(&hub, &conn, (id, running), &method, params, cancel.as_ref()).await
            }
            // Keys sorted: the same line from run to run, as the updates'
            // (`render::stable_order`).
            _ => {
                let encoded = LuaJson::sorted(&lua, &params);
                conn.request_with(&method, encoded, None, cancel.as_ref())
                    .await
            }
        };
        match answer {
            Ok(v) => to_lua(&lua, &v),
            Err(RequestError::Rpc { error, .. }) => {
                Err(rt(format!("{method} failed: {}", error.message)))
            }
            Err(RequestError::Cancelled { id, .. }) => {
                if let Some(id) = id {
                    // ACP's generic cancellation: the client may stop working on it.
                    let params = crate::acp::params::CancelRequestParams {
                        request_id: serde_json::to_value(&id).unwrap_or_default(),
                    };
                    let _ = conn.notify("$/cancel_request", params).await;
                }
                Err(LispError::Cancelled { what: method }.into_lua())
            }
            Err(RequestError::Timeout { .. }) => Err(rt(format!("{method} got no answer in time"))),
            Err(RequestError::Send {
                source: SendError::Encode { reason },
                ..
            }) => Err(rt(format!("cannot send {method}: {reason}"))),
            Err(
                RequestError::Closed { .. } | RequestError::Io { .. } | RequestError::Send { .. },
            ) => Err(rt(format!("ACP client closed before answering {method}"))),
        }
    }
}

/// The requests that wait for the user: v2 frames them with `requires_action` and `running`.
fn asks_the_user(method: &str) -> bool {
    matches!(method, "session/request_permission" | "elicitation/create")
}

/// Ask the v2 client `method` on session `id`'s behalf. While its turn runs, the session
/// requires action from the first question asked to the last one answered, then runs again
/// (unless the turn was cancelled meanwhile, which ends it `idle`); a question from outside a
/// turn changes no state.
async fn ask_in_v2(
    hub: &Hub,
    conn: &Connection,
    (id, running): (&str, bool),
    method: &str,
    params: serde_json::Value,
    cancel: Option<&CancelToken>,
) -> Result<serde_json::Value, RequestError> {
    let state = |s: State| s.update();
    let mut pending = Pending {
        hub,
        id,
        counted: running,
    };
    if running && hub.asking(id, 1) == 1 {
        hub.send_update(conn, id, state(State::RequiresAction))
            .await;
    }
    let answer = conn.request_with(method, params, None, cancel).await;
    pending.counted = false;
    let last = running && hub.asking(id, -1) == 0;
    if last && !cancel.is_some_and(CancelToken::is_cancelled) {
        hub.send_update(conn, id, state(State::Running)).await;
    }
    answer
}

/// A question counted in [`Hub::asking`]: uncounted when its request is dropped unanswered (its
/// coroutine abandoned), so that later questions of the session report their state again.
struct Pending<'a> {
    hub: &'a Hub,
    id: &'a str,
    counted: bool,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if self.counted {
            self.hub.asking(self.id, -1);
        }
    }
}
