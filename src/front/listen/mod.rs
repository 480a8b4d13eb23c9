//! `oml acp --listen ADDR`: the agent over ACP's remote transport (the draft RFD of 2026):
//! Streamable HTTP and WebSocket on one endpoint, `/acp`, over HTTP/1.1 and HTTP/2.
//!
//! Each connection (a POST of `initialize`, or a WebSocket) is served by an `oml acp` process of
//! its own, spawned with this one's flags: exactly the agent a stdio client gets, with its own
//! image, so one connection's Lisp or crash never reaches another's. Sessions are stored as
//! always, so a client whose connection dropped opens a new one and resumes its sessions
//! (`session/resume` or `session/load`). A connection ends on DELETE, when its WebSocket closes,
//! or [`ORPHAN_GRACE`] after its connection stream was dropped and not opened again.
//!
//! Every request must carry `Authorization: Bearer TOKEN`, also on loopback: any local process
//! can reach a loopback port, including a command the agent itself runs with the network on, and
//! a client can start a session in any directory. The token is `--token-file`'s, else one made at
//! start and printed on stdout, never written to a file (where the sandbox cannot hide oml's
//! runtime folder, a confined command could read it). A listener on an address other than
//! loopback also needs TLS (`--tls-cert`, `--tls-key`) or `--allow-plain-http`. Slow or idle
//! clients are bounded: [`HEADER_TIMEOUT`] for headers and TLS handshakes,
//! [`MAX_TCP_CONNECTIONS`] at once, [`INITIALIZE_TIMEOUT`] for `initialize`; and connections
//! without the token apart (`door`): [`UNAUTHENTICATED_TIMEOUT`] each,
//! [`MAX_UNAUTHENTICATED_CONNECTIONS`] at once.
//!
//! This file holds the options, the listener and the request router; `http` the Streamable
//! HTTP methods, `sse` the event-stream body, `ws` the WebSocket, `gateway` the connection's
//! process and routing. It knows the transport, not ACP's methods: `oml acp` serves those.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, StatusCode, body::Incoming};
use parking_lot::Mutex;

use crate::acp_client::Spawn;

mod auth;
mod conn;
mod door;
mod gateway;
mod http;
mod sse;
mod tls;
mod ws;

pub use auth::TOKEN_BYTES;
pub use door::{MAX_UNAUTHENTICATED_CONNECTIONS, UNAUTHENTICATED_TIMEOUT};

/// The endpoint's path.
pub const ENDPOINT: &str = "/acp";

/// How long a connection lives after its connection stream was dropped without being opened
/// again (a client that went away without DELETE).
pub const ORPHAN_GRACE: Duration = Duration::from_secs(10);

/// The largest POST body read, as the stdio transport's line cap.
pub const MAX_BODY_BYTES: usize = crate::jsonrpc::DEFAULT_MAX_LINE_BYTES;

/// The most TCP connections served at once; more wait in the kernel's backlog.
pub const MAX_TCP_CONNECTIONS: usize = 256;

/// How long a client has to send a request's headers, and to finish a TLS handshake.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long `initialize` may take to be answered (the connection's image is built meanwhile).
pub const INITIALIZE_TIMEOUT: Duration = Duration::from_secs(60);

/// The response body of every route.
pub(crate) type Body = BoxBody<Bytes, Infallible>;

/// What `oml acp --listen` was given.
#[derive(Debug, Clone)]
pub struct ListenOptions {
    pub addr: SocketAddr,
    /// A file holding the token; `None`: one is made.
    pub token_file: Option<PathBuf>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub allow_plain_http: bool,
    /// The `oml acp` each connection runs.
    pub agent: Spawn,
}

/// Why the listener could not start.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(
        "{addr} is not a loopback address: give --tls-cert and --tls-key, or --allow-plain-http to send the token in clear"
    )]
    PlainOutsideLoopback { addr: SocketAddr },
    #[error("the token: {0}")]
    Token(String),
    #[error(
        "--token-file {}: {why}, so a command the agent runs could read the token and connect. \
         Put the file in oml's runtime folder, or leave --token-file out: oml then makes a \
         token and prints it",
        file.display()
    )]
    TokenFileReadable {
        file: PathBuf,
        why: crate::sandbox::NotHidden,
    },
    #[error("TLS: {0}")]
    Tls(String),
}

/// The listener's shared state.
pub(crate) struct State {
    token: String,
    agent: Spawn,
    connections: Mutex<HashMap<String, Arc<gateway::Gateway>>>,
}

/// What a started listener tells its caller.
pub struct Listening {
    pub url: String,
    /// The token, when it was made here (the user is told it); `None` for `--token-file`'s.
    pub made_token: Option<String>,
    accept: tokio::task::JoinHandle<()>,
    state: Arc<State>,
}

impl Listening {
    /// Serve until SIGTERM, SIGINT or SIGHUP, then end every connection.
    pub async fn run(self) {
        let mut signals = crate::front::signals::Shutdown::listen();
        signals.recv().await;
        self.accept.abort();
        let all: Vec<_> = self.state.connections.lock().drain().collect();
        futures_util::future::join_all(all.iter().map(|(_, g)| g.close())).await;
    }
}

/// Bind, settle the token and TLS, and start accepting.
pub async fn start(options: ListenOptions) -> Result<Listening, ListenError> {
    let tls = tls::acceptor(&options)?;
    if tls.is_none() && !options.addr.ip().is_loopback() && !options.allow_plain_http {
        return Err(ListenError::PlainOutsideLoopback { addr: options.addr });
    }
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .map_err(|source| ListenError::Bind {
            addr: options.addr,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| ListenError::Bind {
        addr: options.addr,
        source,
    })?;
    let (token, made) = auth::settle(&options)?;
    let made_token = made.then(|| token.clone());
    let state = Arc::new(State {
        token,
        agent: options.agent.clone(),
        connections: Mutex::default(),
    });
    let scheme = if tls.is_some() { "https" } else { "http" };
    let url = format!("{scheme}://{addr}{ENDPOINT}");
    let accept = tokio::spawn(conn::accept_loop(listener, tls, Arc::clone(&state)));
    Ok(Listening {
        url,
        made_token,
        accept,
        state,
    })
}

/// The router: the endpoint, the token, then the method.
pub(super) async fn route(
    state: Arc<State>,
    standing: &door::Standing,
    req: Request<Incoming>,
) -> Response<Body> {
    if req.uri().path() != ENDPOINT {
        return status(StatusCode::NOT_FOUND, "not found: the ACP endpoint is /acp");
    }
    if auth::authorized(req.headers(), &state.token) {
        standing.authenticate();
    } else {
        let mut r = status(StatusCode::UNAUTHORIZED, "a bearer token is required");
        r.headers_mut().insert(
            hyper::header::WWW_AUTHENTICATE,
            hyper::header::HeaderValue::from_static("Bearer"),
        );
        // An HTTP/1 peer without the token does not keep its connection (and slot) by asking
        // again and again.
        if req.version() < hyper::Version::HTTP_2 {
            r.headers_mut().insert(
                hyper::header::CONNECTION,
                hyper::header::HeaderValue::from_static("close"),
            );
        }
        return r;
    }
    if ws::is_upgrade(&req) {
        return ws::upgrade(state, req);
    }
    match *req.method() {
        hyper::Method::POST => http::post(state, req).await,
        hyper::Method::GET => http::get(&state, &req),
        hyper::Method::DELETE => http::delete(&state, &req).await,
        _ => status(StatusCode::METHOD_NOT_ALLOWED, "POST, GET or DELETE"),
    }
}

/// A plain-text response.
pub(crate) fn status(code: StatusCode, text: &'static str) -> Response<Body> {
    let mut r = Response::new(full(Bytes::from_static(text.as_bytes())));
    *r.status_mut() = code;
    r
}

pub(crate) fn full(bytes: Bytes) -> Body {
    Full::new(bytes).boxed()
}

impl State {
    fn connection(&self, id: &str) -> Option<Arc<gateway::Gateway>> {
        self.connections.lock().get(id).cloned()
    }

    /// A new connection id: 128 random bits in hex.
    fn new_id() -> std::io::Result<String> {
        auth::random_hex(16)
    }

    fn add(self: &Arc<Self>, id: String, g: Arc<gateway::Gateway>) {
        self.connections.lock().insert(id, g);
    }

    async fn remove(&self, id: &str) {
        let g = self.connections.lock().remove(id);
        if let Some(g) = g {
            g.close().await;
        }
    }
}
