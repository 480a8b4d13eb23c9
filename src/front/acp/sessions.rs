//! The session methods of `oml acp`: `session/new`, `load`, `resume`, `list`, `close` and
//! `delete`, and what follows a session's setup (project init, warnings, the session-start hook,
//! the slash commands).
//!
//! It registers each open session with the hub and starts its forwarder ([`super::render`]) and,
//! over v2, its waker ([`super::wake`]); the history a load replays comes from
//! [`super::replay`]. It does not run prompts.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::calls::lisp_json;
use super::config::advertise_commands;
use super::ctx::{Ctx, SHUTDOWN_GRACE};
use super::ctx::{known_session, say, update};
use super::hub::AcpSession;
use super::render::{Renderer, forward};
use super::replay::replay_updates;
use super::v2::{self, Dialect};
use crate::acp::params::{ListSessionsParams, LoadSessionParams, NewSessionParams, SessionParams};
use crate::acp::updates::{self, SessionInfo, SessionUpdate};
use crate::acp::v2::State;
use crate::agent::{AgentEvent, PromptState};
use crate::jsonrpc::{RequestId, RpcError};
use crate::lisp::{LispError, init};

pub(super) async fn session_new(ctx: &Arc<Ctx>, id: &RequestId, params: NewSessionParams) {
    let (cwd, mcp_servers) = (params.cwd.0, params.mcp_servers.0);
    let more = params.additional_directories.0;
    let (events_tx, events_rx) = mpsc::unbounded_channel();
    let sid = match ctx.agent.try_new_session(cwd.clone(), Some(events_tx)) {
        Ok(sid) => sid,
        Err(e) => {
            let error = RpcError::new(crate::jsonrpc::INTERNAL_ERROR, e.to_string())
                .with_data(json!({"details": e.to_string(), "category": "storage"}));
            let _ = ctx.conn.respond_error(id, error).await;
            return;
        }
    };
    let mode: String = ctx
        .lisp
        .setting("agent.permission-mode")
        .unwrap_or_else(|_| "ask".to_owned());
    ctx.agent.sessions().with(&sid, |s| {
        s.data.insert("permission-mode".into(), json!(mode));
        set_additional_directories(s, &more);
    });
    let ready_tx = attach(ctx, &sid, events_rx);
    let mut result = session_setup_result(ctx, &sid).await;
    result.insert("sessionId".into(), Value::String(sid.clone()));
    respond_setup(ctx, id, result).await;
    after_setup(ctx, &sid, &cwd, mcp_servers, ready_tx).await;
}

/// The client's `additionalDirectories` for the session (what `agent.workspace-roots` adds to
/// its workspace, and the sandbox makes writable): kept in its data, replaced by each `session/load` or `session/resume`.
fn set_additional_directories(s: &mut crate::session::Session, dirs: &[std::path::PathBuf]) {
    let dirs: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    s.data.insert("additional-directories".into(), json!(dirs));
}

/// Register session `sid` with the hub and start its forwarder; returns the sender that marks
/// its setup as finished.
pub(super) fn attach(
    ctx: &Arc<Ctx>,
    sid: &str,
    events_rx: mpsc::UnboundedReceiver<AgentEvent>,
) -> tokio::sync::watch::Sender<bool> {
    let (barrier_tx, barrier_rx) = mpsc::unbounded_channel();
    let (ready_tx, ready_rx) = tokio::sync::watch::channel(false);
    // Over v2 the agent may start a turn: what is posted to the idle session wakes it.
    let waker = (ctx.hub.dialect() == Dialect::V2)
        .then(|| tokio::spawn(super::wake::watch(ctx.clone(), sid.to_owned())).abort_handle());
    let replaced = ctx.hub.remove(sid);
    ctx.hub.insert(
        sid.to_owned(),
        AcpSession {
            barrier: barrier_tx,
            ready: ready_rx,
            waker,
        },
    );
    if let Some(waker) = replaced.and_then(|s| s.waker) {
        waker.abort();
    }
    tokio::spawn(forward(
        Renderer::new(ctx),
        ctx.conn.clone(),
        sid.to_owned(),
        events_rx,
        barrier_rx,
    ));
    ready_tx
}

/// The `modes` and `configOptions` of a session/new, load or resume answer.
pub(super) async fn session_setup_result(ctx: &Arc<Ctx>, sid: &str) -> Map<String, Value> {
    let modes = lisp_json(ctx, "acp.modes-state", &[json!(sid)]).await;
    let config = lisp_json(ctx, "acp.config-options", &[json!(sid)]).await;
    let mut result = Map::new();
    if let Ok(modes) = modes {
        result.insert("modes".into(), modes);
    }
    if let Ok(config) = config {
        result.insert("configOptions".into(), config);
    }
    result
}

/// What follows a session/new, load or resume answer: the project init file, warnings, the
/// session-start hook, the slash commands; then prompts may run.
pub(super) async fn after_setup(
    ctx: &Arc<Ctx>,
    sid: &str,
    cwd: &std::path::Path,
    mcp_servers: Vec<Result<crate::acp::McpServer, crate::acp::BadMcpServer>>,
    ready_tx: tokio::sync::watch::Sender<bool>,
) {
    // Everything below is queued after the response: clients learn the session id from it and
    // drop updates for ids they do not know yet.
    let mut warnings = ctx.options.startup_messages.clone();
    if !ctx.options.no_init {
        let report = init::load_project_init(&ctx.lisp, &ctx.options.paths, cwd).await;
        warnings.extend(report.messages());
    }
    for w in warnings {
        say(ctx, sid, format!("Warning: {w}\n"));
    }
    // After the project init, so that its `mcp.defserver`s count; the servers start in the
    // background and the first model request waits for them.
    let mut editor_servers = Vec::new();
    for server in mcp_servers {
        let spec = server.map_err(crate::mcp::BadSpec::from);
        match spec.and_then(crate::mcp::ServerSpec::from_server) {
            Ok(spec) => editor_servers.push(spec),
            Err(e) => say(ctx, sid, format!("Warning: {e}\n")),
        }
    }
    crate::bind::mcp::start_session(&ctx.lisp, sid, cwd, editor_servers).await;
    if let Err(e) = session_start_hook(ctx, sid).await {
        say(
            ctx,
            sid,
            format!("Warning: session.on-session-start failed: {e}\n"),
        );
    }
    advertise_commands(ctx, sid).await;
    let _ = ready_tx.send(true);
}

/// v2: the session's current state, after any replay and before the answer.
async fn report_state(ctx: &Ctx, sid: &str) {
    let running = ctx.hub.running(ctx.agent.sessions());
    let state = if running.iter().any(|r| r == sid) {
        State::Running
    } else {
        State::Idle(None)
    };
    update(ctx, sid, state.update()).await;
}

/// Answer a session's setup request: as it is in v1, in v2's shape for a v2 client.
async fn respond_setup(ctx: &Ctx, id: &RequestId, result: Map<String, Value>) {
    let result = match ctx.hub.dialect() {
        Dialect::V1 => Value::Object(result),
        Dialect::V2 => v2::encode::setup_answer(Value::Object(result)),
    };
    let _ = ctx.conn.respond(id, result).await;
}

/// How a stored session is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Open {
    /// `session/load`: the history is replayed as updates first.
    Load,
    /// `session/resume`: no replay.
    Resume,
    /// A fork just made: no replay, and the answer names it, as `session/new`'s does.
    Fork,
}

/// `session/fork`: a new stored session with the whole history of the given one (flushed
/// first when it is open here), opened as `session/resume` opens one and answered like
/// `session/new`. The parent goes on as it was.
pub(super) async fn session_fork(ctx: &Arc<Ctx>, id: &RequestId, params: LoadSessionParams) {
    let parent = params.session_id.0.clone();
    let made = async {
        let store = ctx
            .agent
            .sessions()
            .store()
            .ok_or_else(|| RpcError::invalid_params("sessions are not persisted"))?;
        if !store.exists(&parent) {
            return Err(RpcError::invalid_params(format!(
                "Unknown session: {parent}"
            )));
        }
        ctx.agent.sessions().flush(&parent).await;
        let child = crate::session::store::new_id();
        let (from, to) = (parent.clone(), child.clone());
        tokio::task::spawn_blocking(move || {
            crate::session::fork::fork(&store, &from, &to, None, None)
        })
        .await
        .map_err(|e| RpcError::internal_error(e.to_string()))?
        .map_err(|e| RpcError::internal_error(format!("cannot fork {parent}: {e}")))?;
        let entry = crate::session::Entry::Custom {
            kind: "fork".into(),
            data: json!({"id": child, "prompt": null}),
        };
        let none = crate::session::Redactions::default();
        ctx.agent
            .sessions()
            .with(&parent, |s| s.record(&entry, &none));
        Ok(child)
    }
    .await;
    match made {
        Err(e) => {
            let _ = ctx.conn.respond_error(id, e).await;
        }
        Ok(child) => {
            let params = LoadSessionParams {
                session_id: crate::acp::params::SessionId(child),
                ..params
            };
            session_load(ctx, id, params, Open::Fork).await;
        }
    }
}

/// `session/load`, `session/resume` and the opening of a fork (see [`Open`]).
pub(super) async fn session_load(
    ctx: &Arc<Ctx>,
    id: &RequestId,
    params: LoadSessionParams,
    open: Open,
) {
    match reopen(ctx, params, open == Open::Load).await {
        Err(e) => {
            let _ = ctx.conn.respond_error(id, e).await;
        }
        Ok(Reopened {
            sid,
            cwd,
            mcp_servers,
            ready_tx,
        }) => {
            let mut result = session_setup_result(ctx, &sid).await;
            if open == Open::Fork {
                result.insert("sessionId".into(), Value::String(sid.clone()));
            }
            if ctx.hub.dialect() == Dialect::V2 {
                report_state(ctx, &sid).await;
            }
            respond_setup(ctx, id, result).await;
            announce_fork(ctx, &sid, open).await;
            if let Some(ready_tx) = ready_tx {
                after_setup(ctx, &sid, &cwd, mcp_servers, ready_tx).await;
            }
        }
    }
}

/// A stored session opened again (or found open), and what its set-up still needs: `ready_tx`
/// when it was opened now, `None` when it was open already.
struct Reopened {
    sid: String,
    cwd: std::path::PathBuf,
    mcp_servers: Vec<Result<crate::acp::McpServer, crate::acp::BadMcpServer>>,
    ready_tx: Option<tokio::sync::watch::Sender<bool>>,
}

/// Open the stored session of `params` in this process, replaying it when `replay`; one open
/// here already is answered from its file, nothing set up again.
async fn reopen(
    ctx: &Arc<Ctx>,
    params: LoadSessionParams,
    replay: bool,
) -> Result<Reopened, RpcError> {
    let sid = params.session_id.0;
    let (cwd, mcp_servers) = (params.cwd.0, params.mcp_servers.0);
    let more = params.additional_directories.0;
    let store = ctx
        .agent
        .sessions()
        .store()
        .ok_or_else(|| RpcError::invalid_params("sessions are not persisted"))?;
    if !store.exists(&sid) {
        return Err(RpcError::invalid_params(format!("Unknown session: {sid}")));
    }
    if ctx.hub.get(&sid).is_some() {
        // Already open in this process: answer from its file, nothing is set up again.
        let loaded = store
            .load(&sid)
            .map_err(|e| RpcError::internal_error(e.to_string()))?;
        if replay {
            ctx.agent.sessions().flush(&sid).await;
            let loaded = store.load(&sid).unwrap_or(loaded);
            for u in replay_updates(&loaded.entries) {
                update(ctx, &sid, u).await;
            }
        }
        return Ok(Reopened {
            sid,
            cwd,
            mcp_servers,
            ready_tx: None,
        });
    }
    let (events_tx, events_rx) = mpsc::unbounded_channel();
    let loaded = ctx
        .agent
        .sessions()
        .load(&sid, Some(events_tx))
        .map_err(|e| load_error(&sid, &e))?;
    let mode: String = ctx
        .lisp
        .setting("agent.permission-mode")
        .unwrap_or_else(|_| "ask".to_owned());
    ctx.agent.sessions().with(&sid, |s| {
        s.cwd = cwd.clone();
        s.data
            .entry("permission-mode")
            .or_insert_with(|| json!(mode));
        set_additional_directories(s, &more);
    });
    let ready_tx = attach(ctx, &sid, events_rx);
    if replay {
        for u in replay_updates(&loaded.entries) {
            ctx.hub.send_update(&ctx.conn, &sid, u).await;
        }
    }
    Ok(Reopened {
        sid,
        cwd,
        mcp_servers,
        ready_tx: Some(ready_tx),
    })
}

/// The error code of a `session/load` or `session/resume` refused because another oml process
/// has the session open (JSON-RPC's range for implementation-defined server errors; ACP uses
/// -32000 and -32002). Its `data`: `{sessionId, pid, details, category: "busy"}`.
pub const SESSION_IN_USE: i32 = -32010;

/// The answer to a session that cannot be loaded: [`SESSION_IN_USE`] when another process
/// holds it, else an internal error.
fn load_error(sid: &str, e: &std::io::Error) -> RpcError {
    match crate::session::lock::Busy::of(e) {
        Some(busy) => RpcError::new(SESSION_IN_USE, busy.to_string()).with_data(json!({
            "sessionId": sid, "pid": busy.pid, "details": busy.to_string(), "category": "busy",
        })),
        None => RpcError::internal_error(format!("cannot load session {sid}: {e}")),
    }
}

/// A fork just opened ([`Open::Fork`]; nothing for the others) names itself, as a session's
/// first prompt does: its own title (its parent's with " (fork)") and the time it was made, so
/// an editor does not show it as its parent.
async fn announce_fork(ctx: &Ctx, sid: &str, open: Open) {
    let store = ctx.agent.sessions().store();
    let Some(title) = store
        .filter(|_| open == Open::Fork)
        .and_then(|s| s.title(sid))
    else {
        return;
    };
    let now = crate::session::store::rfc3339(std::time::SystemTime::now());
    let info = SessionUpdate::SessionInfoUpdate {
        title: &title,
        updated_at: &now,
    };
    update(ctx, sid, info.to_value()).await;
}

/// How many sessions one `session/list` page holds.
pub const LIST_PAGE: usize = 50;

/// `session/list`: the stored sessions (in `cwd` when given), most recent first, in pages of
/// [`LIST_PAGE`]; the cursor is opaque to the client (an offset here).
pub(super) fn session_list(ctx: &Ctx, params: ListSessionsParams) -> Result<Value, RpcError> {
    let (cwd, start) = (params.cwd.0, params.cursor.0);
    let all = ctx
        .agent
        .sessions()
        .store()
        .map(|s| s.list(cwd.as_deref()))
        .unwrap_or_default();
    let sessions: Vec<SessionInfo<'_>> = all
        .iter()
        .skip(start)
        .take(LIST_PAGE)
        .map(|s| SessionInfo {
            session_id: &s.id,
            cwd: s.cwd.display().to_string(),
            title: s.title.as_deref(),
            updated_at: &s.updated_at,
        })
        .collect();
    let next =
        (start.saturating_add(LIST_PAGE) < all.len()).then(|| format!("o{}", start + LIST_PAGE));
    Ok(updates::list_answer(&sessions, next))
}

/// `session/close`: cancel the session's prompt, then free it (its file stays).
pub(super) async fn session_close(
    ctx: &Arc<Ctx>,
    params: &SessionParams,
) -> Result<Value, RpcError> {
    let sid = known_session(ctx, &params.session_id.0)?;
    close(ctx, &sid).await;
    Ok(crate::acp::rpc::empty_result())
}

/// How often a closing session looks whether its prompt has answered yet.
const CLOSE_POLL: Duration = Duration::from_millis(10);

pub(super) async fn close(ctx: &Arc<Ctx>, sid: &str) {
    ctx.queues.cancel(sid);
    // Wait (briefly) for a running prompt to answer `cancelled` before the session goes.
    if ctx.hub.get(sid).is_some() {
        let deadline = tokio::time::Instant::now() + SHUTDOWN_GRACE;
        let running = || ctx.agent.sessions().prompt_state(sid) == Some(PromptState::Running);
        while running() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(CLOSE_POLL).await;
        }
    }
    ctx.agent.sessions().flush(sid).await;
    crate::bind::mcp::stop_session(&ctx.lisp, sid).await;
    if let Some(waker) = ctx.hub.remove(sid).and_then(|s| s.waker) {
        waker.abort();
    }
    ctx.agent.sessions().remove(sid);
}

/// `session/delete`: close the session if it is open and delete its file; idempotent.
pub(super) async fn session_delete(
    ctx: &Arc<Ctx>,
    params: &SessionParams,
) -> Result<Value, RpcError> {
    let sid = &params.session_id.0;
    if ctx.hub.get(sid).is_some() {
        close(ctx, sid).await;
    }
    if let Some(store) = ctx.agent.sessions().store() {
        store
            .delete(sid)
            .map_err(|e| RpcError::internal_error(e.to_string()))?;
    }
    Ok(crate::acp::rpc::empty_result())
}

/// `session.on-session-start` (looked up now) with the session current.
pub(super) async fn session_start_hook(ctx: &Ctx, sid: &str) -> Result<(), LispError> {
    let Some(f) = ctx.lisp.function("session.on-session-start")? else {
        return Ok(());
    };
    let sessions = ctx.agent.sessions().clone();
    let mut key = 0usize;
    let result: Result<mlua::Value, LispError> = ctx
        .lisp
        .run_with(f, sid, &ctx.shutdown.child(), |thread| {
            key = thread.to_pointer() as usize;
            sessions.bind_thread(key, Some(sid.to_owned()));
        })
        .await;
    sessions.bind_thread(key, None);
    result.map(|_| ())
}
