//! The ground floor of a connection's requests: [`Ctx`], what every handler needs, and the
//! sending path from a handler to a session (in order after what the session emitted). The rest
//! of the folder imports it; it imports nothing of the folder but the hub and the queue.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::hub::Hub;
use crate::agent::{Agent, AgentEvent};
use crate::cancel::CancelToken;
use crate::jsonrpc::{Connection, RpcError};
use crate::lisp::Lisp;
use crate::paths::Paths;

/// How long shutdown waits for running prompts to answer `cancelled`.
pub(super) const SHUTDOWN_GRACE: Duration = Duration::from_millis(1200);

/// How long shutdown then waits for interrupted prompts, and for the last writes to flush.
pub(super) const SHUTDOWN_STRAGGLERS: Duration = Duration::from_millis(300);

/// What `oml acp` needs besides the Lisp host.
pub struct ServeOptions {
    pub paths: Paths,
    /// `--no-init`: no project init files either.
    pub no_init: bool,
    /// Errors and notices from the user init file, shown to every new session as warnings.
    pub startup_messages: Vec<String>,
}

/// Everything a request handler needs.
pub(super) struct Ctx {
    pub agent: Agent,
    pub lisp: Lisp,
    pub conn: Connection,
    pub hub: Arc<Hub>,
    pub options: ServeOptions,
    /// The hard stop of shutdown: interrupts Lisp code that ignores the cancel.
    pub shutdown: CancelToken,
    /// The running `session/prompt` requests, by id as on the wire: what `$/cancel_request`
    /// can name.
    pub prompts: parking_lot::Mutex<std::collections::HashMap<String, String>>,
    /// Each session's line of prompts (see `super::queue`).
    pub queues: Arc<super::queue::Queues>,
}

/// Show `text` in the session as agent text (through the forwarder, so in order).
pub(super) fn say(ctx: &Ctx, sid: &str, text: String) {
    ctx.agent
        .sessions()
        .emit(sid, AgentEvent::TextDelta { text });
}

/// Queue `update` for the session after everything it emitted so far.
pub(super) async fn update(ctx: &Ctx, sid: &str, update: Value) {
    ctx.hub.barrier(sid).await;
    ctx.hub.send_update(&ctx.conn, sid, update).await;
}

pub(super) fn known_session(ctx: &Ctx, sid: &str) -> Result<String, RpcError> {
    ctx.hub
        .get(sid)
        .map(|_| sid.to_owned())
        .ok_or_else(|| RpcError::invalid_params(format!("Unknown session: {sid}")))
}
