//! oml as an ACP v1 agent over stdio (`oml acp`).
//!
//! The idea: one [`Connection`] (the shared JSON-RPC transport) owns stdin and stdout; every
//! message written goes through its single ordered queue. Each request runs in its own task, so a
//! long `session/prompt` never blocks `session/cancel` or another session's prompt. Each session
//! has a *forwarder* task that turns the loop's [`AgentEvent`]s into `session/update`
//! notifications through the Lisp function `acp.render-event` (called by name for every event).
//! Before a prompt's response, and before any request the agent sends on a session's behalf, the
//! forwarder is asked to queue everything pending (a barrier), so every update of a turn is
//! written before the turn's response and a tool card before the permission question about it.
//! Setup notifications (init warnings, `available_commands_update`) are queued after the
//! `session/new` response.
//!
//! Each request and notification is parsed once, as it is read, into a typed method with serde
//! params (`params`; see Cargo.toml for why not the schema crate). Errors: `-32700` for lines that are not JSON (the transport classifies them),
//! `-32600` for JSON that is not a request, `-32601 Method not found: <method>`, `-32602` for
//! bad params, an unknown session or a busy one, `-32603` for failures inside (a model error).
//! Notifications are never answered; unknown ones are ignored. A cancelled prompt always answers
//! `stopReason: "cancelled"`, never an error.
//!
//! Compare with oml.clj: `oml.acp` (one reader thread, prompts on futures).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

use crate::bind::acp::AcpSession;
pub use crate::bind::acp::Hub;

use crate::agent::{Agent, AgentEvent};
use crate::cancel::CancelToken;
use crate::jsonrpc::{self, Connection, Incoming, Notification, RequestId, RpcError};
use crate::lisp::{Lisp, LispError, from_lua, init, to_lua};
use crate::paths::Paths;
use crate::session::store::Store;

mod params;
use params::{
    InitializeParams, ListSessionsParams, LoadSessionParams, Method, NewSessionParams,
    NotificationMethod, PromptParams, SessionParams, SetConfigOptionParams, SetModeParams,
};

/// The protocol version we speak.
pub const PROTOCOL_VERSION: u64 = 1;

/// The environment variable that caps the length of one incoming line, in bytes (default
/// [`jsonrpc::DEFAULT_MAX_LINE_BYTES`], 64 MiB).
pub const MAX_LINE_ENV: &str = "OML_ACP_MAX_LINE_BYTES";

/// How long shutdown waits for running prompts to answer `cancelled`.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(1200);

/// What `oml acp` needs besides the Lisp host.
pub struct ServeOptions {
    pub paths: Paths,
    /// `--no-init`: no project init files either.
    pub no_init: bool,
    /// Errors and notices from the user init file, shown to every new session as warnings.
    pub startup_messages: Vec<String>,
    pub max_line_bytes: usize,
}

/// Install the `acp` namespace (see [`crate::bind::acp::install`]).
pub fn install(lisp: &Lisp) -> Result<Arc<Hub>, LispError> {
    crate::bind::acp::install(lisp)
}

/// Everything a request handler needs.
struct Ctx {
    agent: Agent,
    lisp: Lisp,
    conn: Connection,
    hub: Arc<Hub>,
    options: ServeOptions,
    /// The hard stop of shutdown: interrupts Lisp code that ignores the cancel.
    shutdown: CancelToken,
}

/// Serve ACP on stdin/stdout until stdin ends or SIGTERM; returns the exit status.
pub async fn serve(agent: Agent, hub: Arc<Hub>, options: ServeOptions) -> i32 {
    serve_on(agent, hub, options, tokio::io::stdin(), tokio::io::stdout()).await
}

/// [`serve`] on any reader and writer.
pub async fn serve_on<R, W>(
    agent: Agent,
    hub: Arc<Hub>,
    options: ServeOptions,
    reader: R,
    writer: W,
) -> i32
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (conn, mut incoming) = Connection::start(
        reader,
        writer,
        jsonrpc::Options {
            max_line_bytes: options.max_line_bytes,
            peer: "ACP client".to_owned(),
            ..jsonrpc::Options::default()
        },
    );
    hub.set_connection(conn.clone());
    if agent.sessions().store().is_none() {
        agent
            .sessions()
            .set_store(Some(Store::new(options.paths.sessions_dir())));
    }
    let ctx = Arc::new(Ctx {
        lisp: agent.lisp().clone(),
        agent,
        conn: conn.clone(),
        hub: hub.clone(),
        options,
        shutdown: CancelToken::new(),
    });
    let mut tasks = JoinSet::new();
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tracing::info!("ACP agent ready on stdio");
    loop {
        let message = tokio::select! {
            m = incoming.recv() => m,
            _ = async {
                match term.as_mut() {
                    Some(t) => { t.recv().await; }
                    None => std::future::pending().await,
                }
            } => None,
        };
        let Some(message) = message else { break };
        while tasks.try_join_next().is_some() {}
        match message {
            Incoming::Malformed { malformed, .. } => {
                tracing::warn!("bad line from the client: {}", malformed.detail);
                let _ = conn.respond_malformed(&malformed).await;
            }
            Incoming::Notification(n) => notification(&ctx, n, &mut tasks),
            Incoming::Request(r) => {
                let method = Method::parse(&r.method, r.params);
                // A cancel read after this prompt must reach it, even if it comes before the
                // prompt's task has started: the prompt's token is made now, in line order.
                if let Ok(Method::SessionPrompt(p)) = &method {
                    ctx.agent.arm(&p.session_id.0);
                }
                let ctx = ctx.clone();
                tasks.spawn(async move { request(&ctx, r.id, method).await });
            }
        }
    }

    // Shutdown: cancel every prompt (the model stream, bash, pending client requests), let them
    // answer `cancelled`, then write everything queued and stop.
    for id in hub.ids() {
        ctx.agent.cancel(&id);
    }
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        ctx.shutdown.cancel();
        let _ = tokio::time::timeout(Duration::from_millis(300), async {
            while tasks.join_next().await.is_some() {}
        })
        .await;
        tasks.abort_all();
    }
    let _ = tokio::time::timeout(Duration::from_millis(300), conn.flush()).await;
    0
}

fn notification(ctx: &Arc<Ctx>, n: Notification, tasks: &mut JoinSet<()>) {
    match NotificationMethod::parse(&n.method, n.params) {
        Ok(NotificationMethod::SessionCancel(p)) => ctx.agent.cancel(&p.session_id.0),
        Err(e) => tracing::debug!("ignoring {}: {}", n.method, e.message),
        Ok(NotificationMethod::Unknown { method, params }) => {
            if has_user_method(&ctx.lisp, &method) {
                let ctx = ctx.clone();
                tasks.spawn(async move {
                    if let Err(e) = call_user_method(&ctx, &method, params).await {
                        tracing::warn!("{method}: {}", e.message);
                    }
                });
            } else {
                // Unknown notifications (including `_`-prefixed extensions) are ignored.
                tracing::debug!("ignoring notification {method}");
            }
        }
    }
}

async fn request(ctx: &Arc<Ctx>, id: RequestId, method: Result<Method, RpcError>) {
    let result = match method {
        Err(e) => Err(e),
        Ok(Method::Initialize(p)) => initialize(&p),
        Ok(Method::SessionNew(p)) => return session_new(ctx, &id, p).await,
        Ok(Method::SessionLoad(p)) => return session_load(ctx, &id, p, true).await,
        Ok(Method::SessionResume(p)) => return session_load(ctx, &id, p, false).await,
        Ok(Method::SessionList(p)) => session_list(ctx, p),
        Ok(Method::SessionClose(p)) => session_close(ctx, &p).await,
        Ok(Method::SessionDelete(p)) => session_delete(ctx, &p).await,
        Ok(Method::SessionPrompt(p)) => prompt(ctx, &p).await,
        Ok(Method::SessionSetMode(p)) => set_mode(ctx, &p).await,
        Ok(Method::SessionSetConfigOption(p)) => set_config_option(ctx, p).await,
        Ok(Method::Unknown { method, params }) if has_user_method(&ctx.lisp, &method) => {
            call_user_method(ctx, &method, params).await
        }
        Ok(Method::Unknown { method, .. }) => Err(RpcError::method_not_found(&method)),
    };
    let _ = match result {
        Ok(value) => ctx.conn.respond(&id, value).await,
        Err(error) => ctx.conn.respond_error(&id, error).await,
    };
}

// --- methods

fn initialize(params: &InitializeParams) -> Result<Value, RpcError> {
    let Some(asked) = &params.protocol_version else {
        return Err(RpcError::invalid_params("protocolVersion is required"));
    };
    tracing::debug!("the client asks for protocol version {}", asked.0);
    // We speak only version 1: a client asking for 1 or later gets 1 (it decides whether it can
    // go on), and so does one asking for 0, 1 being our latest.
    Ok(json!({
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": true,
            "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "delete": {}},
            "promptCapabilities": {"image": false, "audio": false, "embeddedContext": true},
            "mcpCapabilities": {"http": false, "sse": false},
        },
        "authMethods": [],
        "agentInfo": {
            "name": "oml",
            "title": "oml",
            "version": env!("CARGO_PKG_VERSION"),
        },
    }))
}

async fn session_new(ctx: &Arc<Ctx>, id: &RequestId, params: NewSessionParams) {
    let (cwd, mcp_names) = (params.cwd.0, params.mcp_servers.0);
    let (events_tx, events_rx) = mpsc::unbounded_channel();
    let sid = ctx.agent.new_session(cwd.clone(), Some(events_tx));
    let mode: String = ctx
        .lisp
        .setting("agent.permission-mode")
        .unwrap_or_else(|_| "ask".to_owned());
    ctx.agent.sessions().with(&sid, |s| {
        s.data.insert("permission-mode".into(), json!(mode));
    });
    let ready_tx = attach(ctx, &sid, events_rx);
    let mut result = session_setup_result(ctx, &sid).await;
    result.insert("sessionId".into(), json!(sid));
    let _ = ctx.conn.respond(id, Value::Object(result)).await;
    after_setup(ctx, &sid, &cwd, &mcp_names, ready_tx).await;
}

/// Register session `sid` with the hub and start its forwarder; returns the sender that marks
/// its setup as finished.
fn attach(
    ctx: &Arc<Ctx>,
    sid: &str,
    events_rx: mpsc::UnboundedReceiver<AgentEvent>,
) -> tokio::sync::watch::Sender<bool> {
    let (barrier_tx, barrier_rx) = mpsc::unbounded_channel();
    let (ready_tx, ready_rx) = tokio::sync::watch::channel(false);
    ctx.hub.insert(
        sid.to_owned(),
        AcpSession {
            barrier: barrier_tx,
            running: Arc::default(),
            ready: ready_rx,
        },
    );
    tokio::spawn(forward(
        Renderer {
            lisp: ctx.lisp.clone(),
            default: ctx.hub.default_render(),
            namespace: ctx.lisp.lua().globals().raw_get("acp").ok(),
        },
        ctx.conn.clone(),
        sid.to_owned(),
        events_rx,
        barrier_rx,
    ));
    ready_tx
}

/// The `modes` and `configOptions` of a session/new, load or resume answer.
async fn session_setup_result(ctx: &Arc<Ctx>, sid: &str) -> Map<String, Value> {
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
async fn after_setup(
    ctx: &Arc<Ctx>,
    sid: &str,
    cwd: &std::path::Path,
    mcp_names: &[String],
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
    if !mcp_names.is_empty() {
        say(
            ctx,
            sid,
            format!(
                "Note: oml does not connect MCP servers yet; not connected: {}\n",
                mcp_names.join(", ")
            ),
        );
    }
    if let Err(e) = session_start_hook(ctx, sid).await {
        say(
            ctx,
            sid,
            format!(
                "Warning: session.on-session-start failed: {}\n",
                crate::lisp::clean_error(&e.to_string())
            ),
        );
    }
    advertise_commands(ctx, sid).await;
    let _ = ready_tx.send(true);
}

/// `session/load` (`replay`: the history as updates first) and `session/resume` (no replay).
async fn session_load(ctx: &Arc<Ctx>, id: &RequestId, params: LoadSessionParams, replay: bool) {
    let result = async {
        let sid = params.session_id.0;
        let (cwd, mcp_names) = (params.cwd.0, params.mcp_servers.0);
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
            return Ok((sid, cwd, mcp_names, None));
        }
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let loaded = ctx
            .agent
            .sessions()
            .load(&sid, Some(events_tx))
            .map_err(|e| RpcError::internal_error(format!("cannot load session {sid}: {e}")))?;
        let mode: String = ctx
            .lisp
            .setting("agent.permission-mode")
            .unwrap_or_else(|_| "ask".to_owned());
        ctx.agent.sessions().with(&sid, |s| {
            s.cwd = cwd.clone();
            s.data
                .entry("permission-mode")
                .or_insert_with(|| json!(mode));
        });
        let ready_tx = attach(ctx, &sid, events_rx);
        if replay {
            for u in replay_updates(&loaded.entries) {
                let _ = ctx
                    .conn
                    .notify("session/update", json!({"sessionId": sid, "update": u}))
                    .await;
            }
        }
        Ok((sid, cwd, mcp_names, Some(ready_tx)))
    }
    .await;
    match result {
        Err(e) => {
            let _ = ctx.conn.respond_error(id, e).await;
        }
        Ok((sid, cwd, mcp_names, ready_tx)) => {
            let result = session_setup_result(ctx, &sid).await;
            let _ = ctx.conn.respond(id, Value::Object(result)).await;
            if let Some(ready_tx) = ready_tx {
                after_setup(ctx, &sid, &cwd, &mcp_names, ready_tx).await;
            }
        }
    }
}

/// How many sessions one `session/list` page holds.
pub const LIST_PAGE: usize = 50;

/// `session/list`: the stored sessions (in `cwd` when given), most recent first, in pages of
/// [`LIST_PAGE`]; the cursor is opaque to the client (an offset here).
fn session_list(ctx: &Ctx, params: ListSessionsParams) -> Result<Value, RpcError> {
    let (cwd, start) = (params.cwd.0, params.cursor.0);
    let all = ctx
        .agent
        .sessions()
        .store()
        .map(|s| s.list(cwd.as_deref()))
        .unwrap_or_default();
    let sessions: Vec<Value> = all
        .iter()
        .skip(start)
        .take(LIST_PAGE)
        .map(|s| {
            let mut info = Map::new();
            info.insert("sessionId".into(), json!(s.id));
            info.insert("cwd".into(), json!(s.cwd.display().to_string()));
            if let Some(t) = &s.title {
                info.insert("title".into(), json!(t));
            }
            info.insert("updatedAt".into(), json!(s.updated_at));
            Value::Object(info)
        })
        .collect();
    let mut result = Map::new();
    result.insert("sessions".into(), Value::Array(sessions));
    if start + LIST_PAGE < all.len() {
        result.insert(
            "nextCursor".into(),
            json!(format!("o{}", start + LIST_PAGE)),
        );
    }
    Ok(Value::Object(result))
}

/// `session/close`: cancel the session's prompt, then free it (its file stays).
async fn session_close(ctx: &Arc<Ctx>, params: &SessionParams) -> Result<Value, RpcError> {
    let sid = known_session(ctx, &params.session_id.0)?;
    close(ctx, &sid).await;
    Ok(json!({}))
}

async fn close(ctx: &Arc<Ctx>, sid: &str) {
    ctx.agent.cancel(sid);
    // Wait (briefly) for a running prompt to answer `cancelled` before the session goes.
    if let Some(session) = ctx.hub.get(sid) {
        let deadline = tokio::time::Instant::now() + SHUTDOWN_GRACE;
        while session.running.load(Ordering::SeqCst) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    ctx.agent.sessions().flush(sid).await;
    ctx.hub.remove(sid);
    ctx.agent.sessions().remove(sid);
}

/// `session/delete`: close the session if it is open and delete its file; idempotent.
async fn session_delete(ctx: &Arc<Ctx>, params: &SessionParams) -> Result<Value, RpcError> {
    let sid = &params.session_id.0;
    if ctx.hub.get(sid).is_some() {
        close(ctx, sid).await;
    }
    if let Some(store) = ctx.agent.sessions().store() {
        store
            .delete(sid)
            .map_err(|e| RpcError::internal_error(e.to_string()))?;
    }
    Ok(json!({}))
}

/// The tool kinds ACP knows.
const TOOL_KINDS: &[&str] = &[
    "read",
    "edit",
    "delete",
    "move",
    "search",
    "execute",
    "think",
    "fetch",
    "switch_mode",
    "other",
];

/// The tool kind ACP shows for a built-in tool's name, for replays of sessions stored before
/// tool entries were recorded.
fn replay_tool_kind(name: &str) -> &'static str {
    match name {
        "read" => "read",
        "write" | "edit" => "edit",
        "bash" => "execute",
        _ => "other",
    }
}

/// The `session/update` payloads that replay a stored session's history: user messages as
/// user_message_chunk, kept reasoning as agent_thought_chunk, answers as agent_message_chunk,
/// each tool call as a tool_call card and its result as a tool_call_update, completed or failed.
/// The card's title and kind and the failure come from the `tool` entries the loop records
/// (`{"type":"custom","kind":"tool","data":{id,name,title,kind,error?}}`); without one, the card is
/// titled by the tool's name and the result shows as completed. Other entries (values, custom
/// entries, transcript replacements) are not shown.
pub fn replay_updates(entries: &[Value]) -> Vec<Value> {
    let text = |t: &str| json!({"type": "text", "text": t});
    let mut out = Vec::new();
    let mut names: std::collections::HashMap<String, String> = Default::default();
    let tools: std::collections::HashMap<&str, &Value> = entries
        .iter()
        .filter(|e| e["type"] == "custom" && e["kind"] == "tool")
        .filter_map(|e| Some((e["data"]["id"].as_str()?, &e["data"])))
        .collect();
    for e in entries {
        if e.get("type").and_then(Value::as_str) != Some("message") {
            continue;
        }
        let m = &e["message"];
        let content = message_text(&m["content"]);
        match m["role"].as_str() {
            Some("user") => out.push(json!({
                "sessionUpdate": "user_message_chunk", "content": text(&content)})),
            Some("assistant") => {
                for key in ["reasoning_content", "reasoning"] {
                    if let Some(r) = m.get(key).and_then(Value::as_str).filter(|r| !r.is_empty()) {
                        out.push(
                            json!({"sessionUpdate": "agent_thought_chunk", "content": text(r)}),
                        );
                        break;
                    }
                }
                if !content.is_empty() {
                    out.push(
                        json!({"sessionUpdate": "agent_message_chunk", "content": text(&content)}),
                    );
                }
                for call in m["tool_calls"].as_array().into_iter().flatten() {
                    let id = call["id"].as_str().unwrap_or_default();
                    let name = call["function"]["name"].as_str().unwrap_or("tool");
                    names.insert(id.to_owned(), name.to_owned());
                    let args = call["function"]["arguments"]
                        .as_str()
                        .and_then(|a| serde_json::from_str::<Value>(a).ok())
                        .unwrap_or_else(|| json!({}));
                    let recorded = tools.get(id);
                    let title = recorded
                        .and_then(|t| t["title"].as_str())
                        .filter(|t| !t.trim().is_empty())
                        .unwrap_or(name);
                    let kind = recorded
                        .and_then(|t| t["kind"].as_str())
                        .filter(|k| TOOL_KINDS.contains(k))
                        .unwrap_or_else(|| replay_tool_kind(name));
                    out.push(json!({
                        "sessionUpdate": "tool_call", "toolCallId": id, "title": title,
                        "kind": kind, "status": "pending", "rawInput": args,
                    }));
                }
            }
            Some("tool") => {
                let id = m["tool_call_id"].as_str().unwrap_or_default();
                let failed = tools.get(id).is_some_and(|t| t["error?"] == true);
                out.push(json!({
                    "sessionUpdate": "tool_call_update", "toolCallId": id,
                    "status": if failed { "failed" } else { "completed" },
                    "content": [{"type": "content", "content": text(&content)}],
                }));
            }
            _ => {}
        }
    }
    out.into_iter()
        .map(|u| stable_order(u, "sessionUpdate"))
        .collect()
}

/// A message's content as text: a string, or the text parts of a list of parts.
fn message_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

async fn prompt(ctx: &Arc<Ctx>, params: &PromptParams) -> Result<Value, RpcError> {
    let sid = params.session_id.0.as_str();
    let session = ctx
        .hub
        .get(sid)
        .ok_or_else(|| RpcError::invalid_params(format!("Unknown session: {sid}")))?;
    let text = prompt_text(&params.prompt.0);
    if text.trim().is_empty() {
        return Err(RpcError::invalid_params(
            "the prompt has no text, resource link or embedded text resource",
        ));
    }
    if session.running.swap(true, Ordering::SeqCst) {
        return Err(RpcError::invalid_params(
            "A prompt is already running in this session",
        ));
    }
    struct Running(Arc<std::sync::atomic::AtomicBool>);
    impl Drop for Running {
        fn drop(&mut self) {
            self.0.store(false, Ordering::SeqCst);
        }
    }
    let _running = Running(session.running.clone());
    // A prompt sent right after session/new waits for the session's setup to finish.
    let mut ready = session.ready.clone();
    let _ = ready.wait_for(|r| *r).await;

    let before = session_state(ctx, sid);
    let result = ctx.agent.prompt(sid, &text, &ctx.shutdown).await;
    ctx.hub.barrier(sid).await;
    let after = session_state(ctx, sid);
    let cancelled = after.cancelled || ctx.shutdown.is_cancelled();
    match result {
        Ok(outcome) => {
            if outcome.command.is_some() {
                advertise_commands(ctx, sid).await;
            }
            if before.mode != after.mode {
                update(
                    ctx,
                    sid,
                    json!({"sessionUpdate": "current_mode_update", "currentModeId": after.mode}),
                )
                .await;
            }
            if before.mode != after.mode || before.model != after.model {
                config_update(ctx, sid).await;
            }
            let stop = if cancelled {
                "cancelled"
            } else {
                stop_reason(&outcome.stop_reason)
            };
            Ok(json!({
                "stopReason": stop,
                "_meta": {"oml": {"usage": usage_delta(&before.usage, &after.usage)}},
            }))
        }
        Err(_) if cancelled => Ok(json!({"stopReason": "cancelled"})),
        Err(e) => Err(RpcError::new(
            jsonrpc::INTERNAL_ERROR,
            crate::lisp::clean_error(&e.to_string()),
        )),
    }
}

/// The prompt's content blocks as the text the loop gets: text as it is, a resource link as
/// `@uri`, an embedded text resource as its text (`@uri` without one); images and audio, which we
/// do not advertise, are left out. Pieces are joined with newlines.
pub fn prompt_text(blocks: &[Value]) -> String {
    let mut pieces = Vec::new();
    for block in blocks {
        let uri = |v: &Value| {
            v.get("uri")
                .and_then(Value::as_str)
                .map(|u| format!("@{u}"))
        };
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(t) = block.get("text").and_then(Value::as_str) {
                    pieces.push(t.to_owned());
                }
            }
            Some("resource_link") => pieces.extend(uri(block)),
            Some("resource") => {
                let res = block.get("resource").unwrap_or(&Value::Null);
                match res.get("text").and_then(Value::as_str) {
                    Some(t) => pieces.push(t.to_owned()),
                    None => pieces.extend(uri(res)),
                }
            }
            _ => {}
        }
    }
    pieces.join("\n")
}

/// ACP's stop reason for the loop's.
pub fn stop_reason(loop_reason: &str) -> &'static str {
    match loop_reason {
        "cancelled" => "cancelled",
        "max-turns" => "max_turn_requests",
        "max-tokens" => "max_tokens",
        "refusal" => "refusal",
        _ => "end_turn",
    }
}

async fn set_mode(ctx: &Arc<Ctx>, params: &SetModeParams) -> Result<Value, RpcError> {
    let sid = known_session(ctx, &params.session_id.0)?;
    let mode = params.mode_id.0.as_str();
    set_option(ctx, &sid, "mode", json!(mode)).await?;
    update(
        ctx,
        &sid,
        json!({"sessionUpdate": "current_mode_update", "currentModeId": mode}),
    )
    .await;
    config_update(ctx, &sid).await;
    Ok(json!({}))
}

async fn set_config_option(
    ctx: &Arc<Ctx>,
    params: SetConfigOptionParams,
) -> Result<Value, RpcError> {
    let sid = known_session(ctx, &params.session_id.0)?;
    let config_id = params.config_id.0.as_str();
    let value = params
        .value
        .ok_or_else(|| RpcError::invalid_params("value is required"))?
        .0;
    set_option(ctx, &sid, config_id, value.clone()).await?;
    if config_id == "mode" {
        update(
            ctx,
            &sid,
            json!({"sessionUpdate": "current_mode_update", "currentModeId": value}),
        )
        .await;
    }
    let options = lisp_json(ctx, "acp.config-options", &[json!(sid)])
        .await
        .map_err(RpcError::internal_error)?;
    Ok(json!({ "configOptions": options }))
}

fn known_session(ctx: &Ctx, sid: &str) -> Result<String, RpcError> {
    ctx.hub
        .get(sid)
        .map(|_| sid.to_owned())
        .ok_or_else(|| RpcError::invalid_params(format!("Unknown session: {sid}")))
}

async fn set_option(ctx: &Ctx, sid: &str, id: &str, value: Value) -> Result<(), RpcError> {
    lisp_json(
        ctx,
        "acp.set-config-option!",
        &[json!(id), value, json!(sid)],
    )
    .await
    .map(|_| ())
    .map_err(RpcError::invalid_params)
}

/// Whether `acp.methods` (looked up now) has a function for `method`.
fn has_user_method(lisp: &Lisp, method: &str) -> bool {
    let Ok(mlua::Value::Table(methods)) = lisp.lookup("acp.methods") else {
        return false;
    };
    match methods.raw_get::<mlua::Value>(method) {
        Ok(mlua::Value::Function(_)) => true,
        Ok(mlua::Value::Table(t)) => t.metatable().is_some(),
        _ => false,
    }
}

/// Call `acp.methods[method]` with the params (looked up now); its value is the result.
async fn call_user_method(ctx: &Ctx, method: &str, params: Value) -> Result<Value, RpcError> {
    let lua = ctx.lisp.lua();
    let run = async {
        let methods: mlua::Table = match ctx.lisp.lookup("acp.methods")? {
            mlua::Value::Table(t) => t,
            _ => return Err(LispError::Runtime("acp.methods is not a table".into())),
        };
        let f: mlua::Function = match methods.raw_get::<mlua::Value>(method)? {
            mlua::Value::Function(f) => f,
            mlua::Value::Table(t) => {
                let call: mlua::Function = t
                    .metatable()
                    .ok_or_else(|| LispError::Runtime(format!("{method} is not a function")))?
                    .get("__call")?;
                call.bind(t)?
            }
            _ => return Err(LispError::Runtime(format!("{method} is not a function"))),
        };
        let arg = to_lua(lua, &params)?;
        let v: mlua::Value = ctx.lisp.run(f, arg, &ctx.shutdown.child()).await?;
        Ok(from_lua(lua, v)?)
    };
    match run.await {
        Ok(Value::Null) => Ok(json!({})),
        Ok(v) => Ok(v),
        Err(e) => Err(RpcError::new(
            jsonrpc::INTERNAL_ERROR,
            crate::lisp::clean_error(&e.to_string()),
        )),
    }
}

// --- updates

/// Turn the session's loop events into `session/update` notifications, in order; on a barrier
/// request, queue every event already emitted, then acknowledge.
async fn forward(
    renderer: Renderer,
    conn: Connection,
    sid: String,
    mut events: mpsc::UnboundedReceiver<AgentEvent>,
    mut barriers: mpsc::UnboundedReceiver<oneshot::Sender<()>>,
) {
    loop {
        tokio::select! {
            biased;
            event = events.recv() => match event {
                Some(event) => send_event(&renderer, &conn, &sid, &event).await,
                None => break,
            },
            ack = barriers.recv() => match ack {
                Some(ack) => {
                    while let Ok(event) = events.try_recv() {
                        send_event(&renderer, &conn, &sid, &event).await;
                    }
                    let _ = ack.send(());
                }
                None => break,
            },
        }
    }
}

async fn send_event(renderer: &Renderer, conn: &Connection, sid: &str, event: &AgentEvent) {
    if let Some(update) = renderer.render(sid, event) {
        let _ = conn
            .notify(
                "session/update",
                UpdateParams {
                    session_id: sid,
                    update,
                },
            )
            .await;
    }
}

/// The params of a `session/update` notification.
#[derive(serde::Serialize)]
struct UpdateParams<'a> {
    #[serde(rename = "sessionId")]
    session_id: &'a str,
    update: Rendered<'a>,
}

/// One rendered update: by Rust for the default renderer's deltas, else what Lisp returned.
#[derive(Debug, serde::Serialize)]
#[serde(untagged)]
enum Rendered<'a> {
    Chunk(ChunkUpdate<'a>),
    Lisp(Value),
}

/// `agent_message_chunk` / `agent_thought_chunk` with a text block, keys in [`stable_order`].
#[derive(Debug, serde::Serialize)]
struct ChunkUpdate<'a> {
    #[serde(rename = "sessionUpdate")]
    session_update: &'static str,
    content: TextBlock<'a>,
}

#[derive(Debug, serde::Serialize)]
struct TextBlock<'a> {
    r#type: &'static str,
    text: &'a str,
}

/// Renders loop events as `session/update` payloads through `acp.render-event`.
struct Renderer {
    lisp: Lisp,
    /// The function acp.fnl defined as `acp.render-event`, if it did.
    default: Option<mlua::Function>,
    /// The `acp` table, where the renderer is looked up for each event.
    namespace: Option<mlua::Table>,
}

impl Renderer {
    /// `(acp.render-event event session-id)`, looked up now and called directly (it must not
    /// wait). While the name holds the default function, unadvised, the text and thought deltas
    /// (nearly every event of a turn) are rendered by [`chunk_update`] instead, which gives the
    /// same payload without crossing into Lua and back; a redefined or advised renderer sees
    /// every event. A failing renderer is logged and the event dropped: rendering never stops a
    /// turn.
    fn render<'e>(&self, sid: &str, event: &'e AgentEvent) -> Option<Rendered<'e>> {
        let current = match &self.namespace {
            Some(acp) => acp.raw_get::<mlua::Value>("render-event").ok()?,
            None => mlua::Value::Nil,
        };
        if let (Some(default), mlua::Value::Function(f)) = (&self.default, &current)
            && default.to_pointer() == f.to_pointer()
            && let Some(update) = chunk_update(event)
        {
            return Some(Rendered::Chunk(update));
        }
        // Anything else (a callable table too) is resolved as the name is everywhere.
        let f = self.lisp.function("acp.render-event").ok().flatten()?;
        self.render_in_lisp(&f, sid, event).map(Rendered::Lisp)
    }

    /// `(f event sid)` with the event as a Lua table, its answer as a JSON update or `None`.
    fn render_in_lisp(&self, f: &mlua::Function, sid: &str, event: &AgentEvent) -> Option<Value> {
        let lua = self.lisp.lua();
        let event = serde_json::to_value(event).ok()?;
        let arg = to_lua(lua, &event).ok()?;
        match f.call::<mlua::Value>((arg, sid)) {
            Ok(mlua::Value::Nil) => None,
            Ok(v) => match from_lua(lua, v) {
                Ok(Value::Null) => None,
                Ok(update) => Some(stable_order(update, "sessionUpdate")),
                Err(e) => {
                    tracing::warn!("acp.render-event returned something that is not JSON: {e}");
                    None
                }
            },
            Err(e) => {
                tracing::warn!(
                    "acp.render-event failed: {}",
                    crate::lisp::clean_error(&e.to_string())
                );
                None
            }
        }
    }
}

/// What the default `acp.render-event` makes of a text or thought delta; `None` for the other
/// events, which always go through Lisp.
fn chunk_update(event: &AgentEvent) -> Option<ChunkUpdate<'_>> {
    let (session_update, text) = match event {
        AgentEvent::TextDelta { text } => ("agent_message_chunk", text),
        AgentEvent::ThoughtDelta { text } => ("agent_thought_chunk", text),
        AgentEvent::ToolStart { .. } | AgentEvent::ToolEnd { .. } | AgentEvent::Usage { .. } => {
            return None;
        }
    };
    Some(ChunkUpdate {
        session_update,
        content: TextBlock {
            r#type: "text",
            text,
        },
    })
}

/// `value` with its object keys in a stable order (`first`, then the rest sorted, at every
/// level): Lua tables have no order, and the wire should not change from run to run.
fn stable_order(value: Value, first: &str) -> Value {
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

/// Show `text` in the session as agent text (through the forwarder, so in order).
fn say(ctx: &Ctx, sid: &str, text: String) {
    ctx.agent
        .sessions()
        .emit(sid, AgentEvent::TextDelta { text });
}

/// Queue `update` for the session after everything it emitted so far.
async fn update(ctx: &Ctx, sid: &str, update: Value) {
    ctx.hub.barrier(sid).await;
    let _ = ctx
        .conn
        .notify(
            "session/update",
            json!({"sessionId": sid, "update": update}),
        )
        .await;
}

async fn advertise_commands(ctx: &Ctx, sid: &str) {
    match lisp_json(ctx, "acp.available-commands", &[]).await {
        Ok(commands) => {
            let commands = if commands.is_array() {
                commands
            } else {
                json!([])
            };
            update(
                ctx,
                sid,
                json!({"sessionUpdate": "available_commands_update", "availableCommands": commands}),
            )
            .await;
        }
        Err(e) => tracing::warn!("acp.available-commands failed: {e}"),
    }
}

async fn config_update(ctx: &Ctx, sid: &str) {
    if let Ok(options) = lisp_json(ctx, "acp.config-options", &[json!(sid)]).await {
        update(
            ctx,
            sid,
            json!({"sessionUpdate": "config_option_update", "configOptions": options}),
        )
        .await;
    }
}

// --- helpers

/// `session.on-session-start` (looked up now) with the session current.
async fn session_start_hook(ctx: &Ctx, sid: &str) -> Result<(), LispError> {
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

/// Call the Lisp function `name` with JSON arguments; errors as their clean message.
async fn lisp_json(ctx: &Ctx, name: &str, args: &[Value]) -> Result<Value, String> {
    ctx.lisp
        .call_json(name, args, &ctx.shutdown.child())
        .await
        .map(|v| stable_order(v, "id"))
        .map_err(|e| crate::lisp::clean_error(&e.to_string()))
}

struct SessionState {
    mode: Option<Value>,
    model: Option<Value>,
    usage: Option<Value>,
    cancelled: bool,
}

fn session_state(ctx: &Ctx, sid: &str) -> SessionState {
    ctx.agent
        .sessions()
        .with(sid, |s| SessionState {
            mode: s.data.get("permission-mode").cloned(),
            model: s.data.get("model").cloned(),
            usage: s.data.get("usage").cloned(),
            cancelled: s.cancel.is_cancelled(),
        })
        .unwrap_or(SessionState {
            mode: None,
            model: None,
            usage: None,
            cancelled: false,
        })
}

/// The turn's usage: the session totals after minus before.
fn usage_delta(before: &Option<Value>, after: &Option<Value>) -> Value {
    let get = |v: &Option<Value>, k: &str| {
        v.as_ref()
            .and_then(|v| v.get(k))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    let mut out = Map::new();
    for k in ["calls", "prompt_tokens", "completion_tokens"] {
        out.insert(
            k.to_owned(),
            json!(get(after, k).saturating_sub(get(before, k))),
        );
    }
    Value::Object(out)
}

/// The line cap from [`MAX_LINE_ENV`], else the transport's default.
pub fn max_line_bytes_from_env() -> usize {
    std::env::var(MAX_LINE_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(jsonrpc::DEFAULT_MAX_LINE_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_blocks_flatten_to_text() {
        let blocks = vec![
            json!({"type": "text", "text": "look at"}),
            json!({"type": "resource_link", "uri": "file:///a.rs", "name": "a.rs"}),
            json!({"type": "resource", "resource": {"uri": "file:///b", "text": "B"}}),
            json!({"type": "resource", "resource": {"uri": "file:///c", "blob": "AA=="}}),
            json!({"type": "image", "data": "AA==", "mimeType": "image/png"}),
        ];
        assert_eq!(
            prompt_text(&blocks),
            "look at\n@file:///a.rs\nB\n@file:///c"
        );
    }

    #[test]
    fn updates_have_a_stable_key_order() {
        let v = json!({"b": 1, "sessionUpdate": "x", "a": {"z": 1, "type": "t"}});
        assert_eq!(
            stable_order(v, "sessionUpdate").to_string(),
            r#"{"sessionUpdate":"x","a":{"type":"t","z":1},"b":1}"#
        );
    }

    #[test]
    fn deltas_rendered_in_rust_are_what_the_default_renderer_gives() {
        let lisp = Lisp::new(crate::lisp::LispOptions {
            output: crate::lisp::Output::Stderr,
            cache_dir: None,
        })
        .expect("the Lisp host starts");
        Agent::install(&lisp).expect("the agent installs");
        let hub = install(&lisp).expect("the ACP layer installs");
        let default = hub
            .default_render()
            .expect("acp.fnl defines acp.render-event");
        let renderer = Renderer {
            namespace: lisp.lua().globals().raw_get("acp").ok(),
            lisp,
            default: Some(default.clone()),
        };
        let texts = [
            "",
            "x",
            "héllo \"quoted\" \\ back\nslash\ttab",
            "\u{1F600} \u{0}",
        ];
        for text in texts {
            for event in [
                AgentEvent::TextDelta { text: text.into() },
                AgentEvent::ThoughtDelta { text: text.into() },
            ] {
                let in_lisp = renderer.render_in_lisp(&default, "s1", &event);
                let in_rust = chunk_update(&event);
                assert_eq!(
                    in_rust.map(|u| serde_json::to_string(&u).expect("serializes")),
                    in_lisp.map(|v| v.to_string()),
                    "{event:?}"
                );
            }
        }
        let tool_end = AgentEvent::ToolEnd {
            id: "c1".into(),
            content: "done".into(),
            is_error: false,
            diff: None,
        };
        assert!(
            chunk_update(&tool_end).is_none(),
            "only deltas take the fast path"
        );
    }

    #[test]
    fn replays_take_titles_kinds_and_failures_from_tool_entries() {
        let message = |m: Value| json!({"type": "message", "message": m});
        let call = |id: &str, name: &str| {
            json!({"id": id, "type": "function",
                   "function": {"name": name, "arguments": "{\"path\":\"a\"}"}})
        };
        let entries = vec![
            message(json!({"role": "user", "content": "go"})),
            message(json!({"role": "assistant", "content": null,
                           "tool_calls": [call("c1", "read"), call("c2", "edit"), call("c3", "mine")]})),
            json!({"type": "custom", "kind": "tool",
                   "data": {"id": "c1", "name": "read", "title": "Read a", "kind": "read", "error?": true}}),
            json!({"type": "custom", "kind": "tool",
                   "data": {"id": "c3", "name": "mine", "title": "Mine a", "kind": "bogus", "error?": false}}),
            message(json!({"role": "tool", "tool_call_id": "c1", "content": "no such file"})),
            message(json!({"role": "tool", "tool_call_id": "c2", "content": "edited"})),
            message(json!({"role": "tool", "tool_call_id": "c3", "content": "ok"})),
        ];
        let updates = replay_updates(&entries);
        let cards: Vec<(&str, &str)> = updates
            .iter()
            .filter(|u| u["sessionUpdate"] == "tool_call")
            .map(|u| (u["title"].as_str().unwrap(), u["kind"].as_str().unwrap()))
            .collect();
        // c2 has no entry (a session stored before they were recorded): named by the tool.
        assert_eq!(
            cards,
            [("Read a", "read"), ("edit", "edit"), ("Mine a", "other")]
        );
        let statuses: Vec<&str> = updates
            .iter()
            .filter(|u| u["sessionUpdate"] == "tool_call_update")
            .map(|u| u["status"].as_str().unwrap())
            .collect();
        assert_eq!(statuses, ["failed", "completed", "completed"]);
    }

    #[test]
    fn loop_stop_reasons_map_to_acp() {
        assert_eq!(stop_reason("end-turn"), "end_turn");
        assert_eq!(stop_reason("max-turns"), "max_turn_requests");
        assert_eq!(stop_reason("max-tokens"), "max_tokens");
        assert_eq!(stop_reason("cancelled"), "cancelled");
    }

    #[test]
    fn initialize_answers_version_one_and_checks_the_version() {
        let read = |p: Value| match Method::parse("initialize", Some(p)) {
            Ok(Method::Initialize(p)) => initialize(&p),
            Ok(other) => panic!("not initialize: {other:?}"),
            Err(e) => Err(e),
        };
        let r = read(json!({"protocolVersion": 7})).unwrap();
        assert_eq!(r["protocolVersion"], 1);
        assert_eq!(r["authMethods"], json!([]));
        assert!(read(json!({"protocolVersion": "1.0.0"})).is_err());
        assert!(read(json!({})).is_err());
    }
}
