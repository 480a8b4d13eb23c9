//! The ACP agent's state shared with Lisp, and its host functions: `acp.request!` (a request to
//! the client, awaited from a coroutine), `acp.update!` (a `session/update` notification, in
//! order with the session's events), `acp.running-sessions`, and `acp.terminal-bash` (the
//! `terminal` module: a command in the client's terminal).
//!
//! The [`Hub`] lives in the Lua state's app data, so host functions reach the connection and the
//! per-session forwarders without holding them in closures. Before any request from a session,
//! `acp.request!` waits until that session's forwarder has queued every event emitted so far, so
//! the tool card reaches the client before the question about it.

use crate::bind::rt;
use std::collections::HashMap;
use std::sync::Arc;

use std::future::Future;

use parking_lot::Mutex;

mod terminal;

pub use terminal::{TERMINAL_CLEANUP_TIMEOUT, TERMINAL_OUTPUT_BYTE_LIMIT};

use mlua::{Lua, Value};
use serde_json::json;
use tokio::sync::{mpsc, oneshot};

use crate::cancel::CancelToken;
use crate::jsonrpc::{Connection, RequestError, SendError};
use crate::lisp::encode::LuaJson;
use crate::lisp::{HostFn, Lisp, LispError, create_async_function, define, from_lua, to_lua};
use crate::session::{PromptState, Sessions};

use super::v2::Dialect;
use crate::acp::v2::State;

/// What the ACP layer keeps per session.
#[derive(Clone)]
pub(crate) struct AcpSession {
    /// Asks the session's forwarder to queue every pending event, then answer.
    pub barrier: mpsc::UnboundedSender<oneshot::Sender<()>>,
    /// Becomes true once the session's setup (project init, `session.on-session-start`) is done;
    /// prompts wait for it, so the first one already sees what the project's init defined.
    pub ready: tokio::sync::watch::Receiver<bool>,
}

/// The connection and the sessions of `oml acp`.
#[derive(Default)]
pub struct Hub {
    conn: Mutex<Option<Connection>>,
    sessions: Mutex<HashMap<String, AcpSession>>,
    /// The `acp.render-event` that acp.fnl defines, held so that it stays alive: the forwarders
    /// render in Rust what it would render while the name still holds exactly this function.
    default_render: Mutex<Option<mlua::Function>>,
    /// The connection speaks the v2 draft (see [`super::v2`]).
    v2: std::sync::atomic::AtomicBool,
    /// The questions each session has asked a v2 client and not had answered yet.
    asking: Mutex<HashMap<String, usize>>,
}

impl Hub {
    /// Count one more (`+1`) or one fewer (`-1`) question pending for session `id`; the count
    /// after.
    pub(crate) fn asking(&self, id: &str, change: i32) -> usize {
        let mut all = lock(&self.asking);
        let n = all.entry(id.to_owned()).or_default();
        *n = if change > 0 {
            *n + 1
        } else {
            n.saturating_sub(1)
        };
        let now = *n;
        if now == 0 {
            all.remove(id);
        }
        now
    }

    /// Forget the session's pending questions (its turn has ended).
    pub(crate) fn forget_asking(&self, id: &str) {
        lock(&self.asking).remove(id);
    }

    /// Note the version `initialize` settled on.
    pub(crate) fn set_dialect(&self, dialect: Dialect) {
        self.v2
            .store(dialect == Dialect::V2, std::sync::atomic::Ordering::Relaxed);
    }

    /// The version the connection speaks.
    pub(crate) fn dialect(&self) -> Dialect {
        if self.v2.load(std::sync::atomic::Ordering::Relaxed) {
            Dialect::V2
        } else {
            Dialect::V1
        }
    }

    pub(crate) fn set_default_render(&self, f: Option<mlua::Function>) {
        *lock(&self.default_render) = f;
    }

    pub(crate) fn default_render(&self) -> Option<mlua::Function> {
        lock(&self.default_render).clone()
    }

    pub(crate) fn set_connection(&self, conn: Connection) {
        *lock(&self.conn) = Some(conn);
    }

    pub(crate) fn connection(&self) -> Option<Connection> {
        lock(&self.conn).clone()
    }

    pub(crate) fn insert(&self, id: String, session: AcpSession) {
        lock(&self.sessions).insert(id, session);
    }

    pub(crate) fn remove(&self, id: &str) -> Option<AcpSession> {
        lock(&self.sessions).remove(id)
    }

    pub(crate) fn get(&self, id: &str) -> Option<AcpSession> {
        lock(&self.sessions).get(id).cloned()
    }

    pub(crate) fn ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = lock(&self.sessions).keys().cloned().collect();
        ids.sort();
        ids
    }

    /// The sessions whose prompt is running now (by their [`PromptState`] in `sessions`).
    pub(crate) fn running(&self, sessions: &Sessions) -> Vec<String> {
        // The hub's lock is not held while the registry's is taken.
        let mut ids = self.ids();
        ids.retain(|id| sessions.prompt_state(id) == Some(PromptState::Running));
        ids
    }

    /// Send the session's `update` (a v1 payload) as the connection's version has it.
    pub(crate) async fn send_update<U: serde::Serialize>(
        &self,
        conn: &Connection,
        sid: &str,
        update: U,
    ) -> bool {
        send_update(self.dialect(), conn, sid, update).await
    }

    /// Wait until every event the session emitted before this call is in the connection's
    /// write queue. Returns at once for an unknown session or a stopped forwarder.
    pub(crate) async fn barrier(&self, id: &str) {
        let Some(session) = self.get(id) else { return };
        let (ack, acked) = oneshot::channel();
        if session.barrier.send(ack).is_ok() {
            let _ = acked.await;
        }
    }
}

/// The params of a `session/update` notification.
#[derive(serde::Serialize)]
struct UpdateParams<'a, U> {
    #[serde(rename = "sessionId")]
    session_id: &'a str,
    update: U,
}

/// Send `update` (a v1 payload) to `sid`: as it is to a v1 client, re-encoded (or dropped) for
/// a v2 one ([`super::v2::encode::update`]). False when the connection is closed.
pub(crate) async fn send_update<U: serde::Serialize>(
    dialect: Dialect,
    conn: &Connection,
    sid: &str,
    update: U,
) -> bool {
    let sent = match dialect {
        Dialect::V1 => notify_update(conn, sid, update).await,
        // An update v2 has no form for is left out.
        Dialect::V2 => match serde_json::to_value(&update)
            .ok()
            .and_then(super::v2::encode::update)
        {
            Some(update) => notify_update(conn, sid, update).await,
            None => return true,
        },
    };
    sent.is_ok()
}

async fn notify_update<U: serde::Serialize>(
    conn: &Connection,
    session_id: &str,
    update: U,
) -> Result<(), SendError> {
    let params = UpdateParams { session_id, update };
    conn.notify("session/update", params).await
}

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
fn hub(lua: &Lua) -> mlua::Result<Arc<Hub>> {
    lua.app_data_ref::<Arc<Hub>>()
        .map(|h| Arc::clone(&h))
        .ok_or_else(|| rt("No ACP client"))
}

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
        let update = super::render::stable_order(update, "sessionUpdate");
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
                    let _ = conn
                        .notify("$/cancel_request", json!({ "requestId": id }))
                        .await;
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

fn lock<T>(m: &Mutex<T>) -> parking_lot::MutexGuard<'_, T> {
    m.lock()
}
