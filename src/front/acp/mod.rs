//! oml as an ACP v1 agent over stdio (`oml acp`).
//!
//! The idea: one [`Connection`] (the shared JSON-RPC transport) owns stdin and stdout; every
//! message written goes through its single ordered queue. Each request runs in its own task, so a
//! long `session/prompt` never blocks `session/cancel` or another session's prompt. Each session
//! has a *forwarder* task that turns the loop's [`AgentEvent`](crate::agent::AgentEvent)s into
//! `session/update` notifications through the Lisp function `acp.render-event` (called by name
//! for every event). Before a prompt's response, and before any request the agent sends on a
//! session's behalf, the forwarder is asked to queue everything pending (a barrier), so every
//! update of a turn is written before the turn's response and a tool card before the permission
//! question about it. Setup notifications (init warnings, `available_commands_update`) are queued
//! after the `session/new` response.
//!
//! Each request and notification is parsed once, as it is read, into a typed method with serde
//! params (`crate::acp::params`; see Cargo.toml for why not the schema crate). Errors: `-32700` for lines
//! that are not JSON (the transport classifies them), `-32600` for JSON that is not a request,
//! `-32601 Method not found: <method>`, `-32602` for bad params or an unknown session,
//! `-32011` for a prompt over the queue's cap (`queue`), `-32603` for failures inside (a model
//! error). Notifications are never answered; unknown
//! ones are ignored. A cancelled prompt always answers `stopReason: "cancelled"`, never an error.
//!
//! `initialize` is answered from the moment the connection is opened, before the image is built
//! (`early`); everything else waits for the image, in line order.
//!
//! This file holds the serve loop, the dispatch and the version negotiation; the rest is one
//! concern a file, and imports inside the folder go one way, down from here. The ground floor,
//! which imports nothing of the folder above it: `hub` (the connection and the sessions shared
//! with Lisp, and the sending path of updates), `queue` (each session's line of prompts: queued,
//! steered, cancelled), `ctx` (what every handler needs, and sending to a session in order),
//! `early` (the connection while the image is built, and the v1 `initialize` answer), `auth`
//! (the terminal auth method and `authenticate`), `v2`,
//! `content` and `message_ids`. Above it: `calls` (into Lisp),
//! `config` (modes and config options), `replay` (stored history as updates), `render` (the
//! forwarder and the renderer), `prompt`, `wake` (over v2, the turns what is posted to an idle
//! session starts), `sessions` (new, load, resume, list, close, delete)
//! and `surface` (the `acp` table).
//!
//! Compare with oml.clj: `oml.acp` (one reader thread, prompts on futures).

use std::sync::Arc;

use serde_json::Value;
use tokio::task::JoinSet;

pub use ctx::ServeOptions;
pub use hub::Hub;

use crate::agent::Agent;
use crate::cancel::CancelToken;
use crate::jsonrpc::{self, Connection, Incoming, Notification, RequestId, RpcError};
use crate::lisp::{Lisp, LispError};
use crate::session::store::Store;

mod auth;
mod calls;
mod config;
mod content;
mod ctx;
mod early;
mod hub;
mod message_ids;
mod prompt;
mod queue;
mod render;
mod replay;
mod sessions;
pub mod surface;
mod v2;
mod wake;

use crate::acp::params::{InitializeParams, Method, NotificationMethod};
use calls::{call_user_method, has_user_method};
use config::{set_config_option, set_mode};
pub use content::{PromptContent, prompt_content, prompt_text};
use ctx::{Ctx, SHUTDOWN_GRACE, SHUTDOWN_STRAGGLERS};
pub use early::Opened;
pub use early::PROTOCOL_VERSION;
use early::{Greeted, initialize};
use prompt::prompt;
pub use prompt::stop_reason;
pub use queue::{MAX_WAITING_PROMPTS, PROMPT_QUEUE_FULL};
pub use replay::replay_updates;
pub use sessions::{LIST_PAGE, SESSION_IN_USE};
use sessions::{
    Open, session_close, session_delete, session_fork, session_list, session_load, session_new,
};

/// The environment variable that caps the length of one incoming line, in bytes (default
/// [`jsonrpc::DEFAULT_MAX_LINE_BYTES`], 64 MiB).
pub const MAX_LINE_ENV: &str = "OML_ACP_MAX_LINE_BYTES";

/// Install the `acp` namespace (see [`surface::install`]).
pub fn install(lisp: &Lisp) -> Result<Arc<Hub>, LispError> {
    surface::install(lisp)
}

/// Open the ACP connection on stdin and stdout, with lines of at most `max_line_bytes`: from
/// now on `initialize` is answered, while the caller builds the image (see [`early`]).
pub fn open_stdio(max_line_bytes: usize) -> Opened {
    open(tokio::io::stdin(), tokio::io::stdout(), max_line_bytes)
}

/// [`open_stdio`] on any reader and writer.
pub fn open<R, W>(reader: R, writer: W, max_line_bytes: usize) -> Opened
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (conn, incoming) = Connection::start(
        reader,
        writer,
        jsonrpc::Options {
            max_line_bytes,
            peer: "ACP client".to_owned(),
            ..jsonrpc::Options::default()
        },
    );
    early::open(conn, incoming)
}

/// Serve ACP on the `opened` connection until its input ends, SIGTERM or SIGHUP; returns the
/// exit status. What was read while the image was built is served first, in line order.
pub async fn serve(agent: Agent, hub: Arc<Hub>, options: ServeOptions, opened: Opened) -> i32 {
    let (conn, greeted) = opened.ready().await;
    let Greeted {
        mut incoming,
        held,
        capabilities,
    } = greeted;
    hub.set_connection(conn.clone());
    if agent.sessions().store().is_none() {
        agent
            .sessions()
            .set_store(Some(Store::new(options.paths.sessions_dir())));
    }
    let agent_for_queues = agent.clone();
    let ctx = Arc::new(Ctx {
        lisp: agent.lisp().clone(),
        agent,
        conn: conn.clone(),
        hub: hub.clone(),
        options,
        shutdown: CancelToken::new(),
        prompts: Default::default(),
        queues: queue::Queues::new(agent_for_queues),
    });
    if let Some(capabilities) = &capabilities {
        remember_client(&ctx, capabilities);
    }
    let mut held = held.into_iter();
    let mut tasks = JoinSet::new();
    let mut signals = crate::front::signals::Shutdown::listen();
    tracing::info!("ACP agent ready on stdio");
    loop {
        let message = match held.next() {
            Some(m) => Some(m),
            None => tokio::select! {
                m = incoming.recv() => m,
                _ = signals.recv() => None,
            },
        };
        let Some(message) = message else { break };
        while tasks.try_join_next().is_some() {}
        match message {
            Incoming::Malformed { malformed, .. } => {
                tracing::warn!("bad line from the client: {}", malformed.detail);
                let _ = conn.respond_malformed(&malformed).await;
            }
            Incoming::Notification(n) => notification(&ctx, n, &mut tasks),
            Incoming::Request(r) => spawn_request(&ctx, r, &mut tasks),
        }
    }

    shut_down(&ctx, &mut tasks).await;
    0
}

/// Parse request `r` and answer it in a task of its own. A prompt takes its place in its
/// session's line now, in line order ([`queue`]), and a free session's token is armed, so that a
/// cancel read after it reaches it even before its task has started.
fn spawn_request(ctx: &Arc<Ctx>, r: crate::jsonrpc::Request, tasks: &mut JoinSet<()>) {
    let method = Method::parse(&r.method, r.params).map_err(RpcError::invalid_params);
    let ctx = ctx.clone();
    let Ok(Method::SessionPrompt(p)) = method else {
        tasks.spawn(async move { request(&ctx, r.id, method).await });
        return;
    };
    let sid = p.session_id.0.clone();
    let key = r.id.to_string();
    let ticket = ctx.queues.enter(&sid, key.clone());
    ctx.prompts.lock().insert(key.clone(), sid);
    tasks.spawn(async move {
        match ticket {
            Err(e) => {
                let _ = ctx.conn.respond_error(&r.id, e).await;
            }
            Ok(ticket) if ctx.hub.dialect() == v2::Dialect::V2 => {
                prompt::prompt_v2(&ctx, &r.id, &p, ticket).await;
            }
            Ok(ticket) => {
                let keep = prompt::Keep::default();
                let answer = prompt(&ctx, &key, &p, ticket, None, &keep).await;
                let _ = match &answer {
                    Ok(value) => ctx.conn.respond(&r.id, value.clone()).await,
                    Err(error) => ctx.conn.respond_error(&r.id, error.clone()).await,
                };
                prompt::finish(&keep, &answer);
            }
        }
        ctx.prompts.lock().remove(&key);
    });
}

/// Cancel every prompt (the model stream, bash, pending client requests), let them answer
/// `cancelled` within [`SHUTDOWN_GRACE`] (then interrupt and abort them), and write everything
/// queued.
async fn shut_down(ctx: &Ctx, tasks: &mut JoinSet<()>) {
    ctx.queues.cancel_all();
    for id in ctx.hub.ids() {
        ctx.agent.cancel(&id);
    }
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        ctx.shutdown.cancel();
        let _ = tokio::time::timeout(SHUTDOWN_STRAGGLERS, async {
            while tasks.join_next().await.is_some() {}
        })
        .await;
        tasks.abort_all();
    }
    crate::bind::mcp::stop_all(&ctx.lisp).await;
    let _ = tokio::time::timeout(SHUTDOWN_STRAGGLERS, ctx.conn.flush()).await;
}

fn notification(ctx: &Arc<Ctx>, n: Notification, tasks: &mut JoinSet<()>) {
    match NotificationMethod::parse(&n.method, n.params).map_err(RpcError::invalid_params) {
        // The running prompt and every prompt waiting behind it (see `queue`).
        Ok(NotificationMethod::SessionCancel(p)) => ctx.queues.cancel(&p.session_id.0),
        // A running prompt named by `$/cancel_request` is cancelled as by `session/cancel`, and
        // answers with its partial result (`stopReason: cancelled`). Every other request is
        // answered at once anyway, so there is nothing to stop.
        Ok(NotificationMethod::CancelRequest(p)) => {
            let sid = ctx.prompts.lock().get(&p.request_id.to_string()).cloned();
            match sid {
                Some(sid) => ctx.queues.cancel_request(&sid, &p.request_id.to_string()),
                None => tracing::debug!("$/cancel_request for {}: nothing to cancel", p.request_id),
            }
        }
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
        Ok(Method::Initialize(p)) => initialize_negotiated(ctx, &p),
        Ok(Method::SessionNew(p)) => return session_new(ctx, &id, p).await,
        Ok(Method::SessionLoad(p)) => return session_load(ctx, &id, p, Open::Load).await,
        Ok(Method::SessionResume(p)) => match v2::replay(ctx.hub.dialect(), p.replay_from.as_ref())
        {
            Ok(true) => return session_load(ctx, &id, p, Open::Load).await,
            Ok(false) => return session_load(ctx, &id, p, Open::Resume).await,
            Err(e) => Err(e),
        },
        Ok(Method::SessionFork(p)) => return session_fork(ctx, &id, p).await,
        Ok(Method::SessionList(p)) => session_list(ctx, p),
        Ok(Method::SessionClose(p)) => session_close(ctx, &p).await,
        Ok(Method::SessionDelete(p)) => session_delete(ctx, &p).await,
        // Put in line as it was read (`spawn_request`).
        Ok(Method::SessionPrompt(_)) => Err(RpcError::new(
            jsonrpc::INTERNAL_ERROR,
            "session/prompt reached the wrong handler",
        )),
        Ok(Method::SessionSetMode(p)) => set_mode(ctx, &p).await,
        Ok(Method::SessionSetConfigOption(p)) => {
            let answer = set_config_option(ctx, p).await;
            match ctx.hub.dialect() {
                v2::Dialect::V1 => answer,
                v2::Dialect::V2 => answer.map(v2::encode::setup_answer),
            }
        }
        Ok(Method::Unknown { method, params }) if method == "authenticate" => {
            auth::authenticate(&ctx.lisp, params).map_err(RpcError::from)
        }
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

/// The answer to `initialize` once the image is there: version 2 when the client asks for it
/// and `acp.protocol-versions` offers it (see [`v2`]), else [`initialize`].
fn initialize_negotiated(ctx: &Ctx, params: &InitializeParams) -> Result<Value, RpcError> {
    let asked = params
        .protocol_version
        .as_ref()
        .map_or(0, |v| u64::from(v.0));
    let offered: Vec<u64> = ctx
        .lisp
        .setting(v2::VERSIONS_SETTING)
        .unwrap_or_else(|_| vec![PROTOCOL_VERSION]);
    let dialect = v2::negotiate(asked, &offered);
    ctx.hub.set_dialect(dialect);
    match dialect {
        v2::Dialect::V1 => {
            remember_client(ctx, &params.client_capabilities);
            initialize(params)
        }
        v2::Dialect::V2 => {
            remember_client(
                ctx,
                &crate::acp::v2::client_capabilities(&params.capabilities),
            );
            Ok(v2::initialize_answer())
        }
    }
}

/// Keep the client's capabilities as `acp.client-capabilities`, where the tools' ACP advice
/// (`acp.client-fs?`, `acp.client-terminal?`) reads them.
fn remember_client(ctx: &Ctx, capabilities: &Value) {
    let lua = ctx.lisp.lua();
    let kept = crate::lisp::to_lua(lua, capabilities).and_then(|v| {
        let acp: mlua::Table = lua.globals().get("acp")?;
        acp.raw_set("client-capabilities", v)?;
        Ok(())
    });
    if let Err(e) = kept {
        tracing::warn!("cannot keep the client's capabilities: {e}");
    }
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
    use serde_json::json;

    #[test]
    fn initialize_answers_version_one_and_checks_the_version() {
        let read = |p: Value| match Method::parse("initialize", Some(p)) {
            Ok(Method::Initialize(p)) => initialize(&p),
            Ok(other) => panic!("not initialize: {other:?}"),
            Err(e) => Err(RpcError::invalid_params(e)),
        };
        let r = read(json!({"protocolVersion": 7})).unwrap();
        assert_eq!(r["protocolVersion"], 1);
        assert_eq!(r["authMethods"], json!([]));
        assert!(read(json!({"protocolVersion": "1.0.0"})).is_err());
        assert!(read(json!({})).is_err());
    }
}
