//! The ground floor of `oml acp`: the [`Hub`] (the connection and the sessions, shared with
//! Lisp through the Lua state's app data) and the sending path of a session's updates, as the
//! connection's version has them. The rest of the folder imports it; it imports nothing of the
//! folder but `v2`'s dialect.

use std::collections::HashMap;
use std::sync::Arc;

use mlua::Lua;
use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::v2::Dialect;
use crate::acp::updates::UpdateParams;
use crate::bind::rt;
use crate::jsonrpc::{Connection, SendError};
use crate::session::{PromptState, Sessions};

/// What the ACP layer keeps per session.
#[derive(Clone)]
pub(crate) struct AcpSession {
    /// Asks the session's forwarder to queue every pending event, then answer.
    pub barrier: mpsc::UnboundedSender<oneshot::Sender<()>>,
    /// Becomes true once the session's setup (project init, `session.on-session-start`) is done;
    /// prompts wait for it, so the first one already sees what the project's init defined.
    pub ready: tokio::sync::watch::Receiver<bool>,
    /// Over v2, the task that wakes the session when something is posted to it
    /// (`super::wake`); aborted when the session closes.
    pub waker: Option<tokio::task::AbortHandle>,
}

/// The connection and the sessions of `oml acp`.
#[derive(Default)]
pub struct Hub {
    conn: Mutex<Option<Connection>>,
    sessions: Mutex<HashMap<String, AcpSession>>,
    /// The `acp.render-event` that acp.fnl defines, held so that it stays alive: the forwarders
    /// render in Rust what it would render while the name still holds exactly this function.
    default_render: Mutex<Option<mlua::Function>>,
    /// The connection speaks the v2 draft (see `super::v2`).
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

/// The hub of the ACP layer installed in `lua`.
pub(crate) fn hub(lua: &Lua) -> mlua::Result<Arc<Hub>> {
    lua.app_data_ref::<Arc<Hub>>()
        .map(|h| Arc::clone(&h))
        .ok_or_else(|| rt("No ACP client"))
}

fn lock<T>(m: &Mutex<T>) -> parking_lot::MutexGuard<'_, T> {
    m.lock()
}

/// `value` with its object keys in a stable order (`first`, then the rest sorted, at every
/// level): Lua tables have no order, and the wire should not change from run to run.
pub(crate) fn stable_order(value: Value, first: &str) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|(a, _), (b, _)| (a != first, a).cmp(&(b != first, b)));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, stable_order(v, "type")))
                    .collect(),
            )
        }
        Value::Array(items) => {
            Value::Array(items.into_iter().map(|v| stable_order(v, "type")).collect())
        }
        other => other,
    }
}
