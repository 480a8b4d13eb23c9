//! `Client`: one connection to an external agent — connect and negotiate, prompts as `Turn`s,
//! cancel, close. How transport failures become `ClientError`s with a category is in
//! `failures.rs`; the session methods are in `sessions.rs`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::mpsc;

use super::capabilities::Initialized;
use super::process::{self, AgentProcess};
use super::router::{self, OutOfTurn};
use super::{
    Category, ClientError, ConnectOptions, DEFAULT_REQUEST_TIMEOUT, DEFAULT_STARTUP_TIMEOUT,
    PROTOCOL_VERSION, Stop, Turn,
};
use crate::acp::StopReason;
use crate::acp::requests::{self, InitializeRequest};
use crate::jsonrpc::{self, Connection, Options};

/// A connection to one agent process. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    pub(super) inner: Arc<ClientInner>,
}

pub(super) struct ClientInner {
    pub(super) name: String,
    rpc: Connection,
    /// The agent process; `None` for an agent at a URL.
    pub(super) process: Option<AgentProcess>,
    pub(super) router: Arc<router::Router>,
    pub(super) initialized: Initialized,
    /// The method `connect` authenticated with by itself, if any.
    authenticated: Option<String>,
    request_timeout: Duration,
    out_of_turn: Mutex<Option<mpsc::UnboundedReceiver<OutOfTurn>>>,
    /// `None` until closed; then whether the first close was graceful.
    closed: tokio::sync::Mutex<Option<bool>>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.describe())
    }
}

impl Client {
    /// Spawns the agent and negotiates `initialize`. On any failure the process is reaped
    /// before the error is returned.
    pub async fn connect(options: ConnectOptions) -> Result<Client, ClientError> {
        let (process, reader, writer, name) = match &options.remote {
            Some(remote) => {
                let stream = super::remote::open(&remote.url, remote.token.clone())
                    .await
                    .map_err(|e| {
                        ClientError::new(
                            Category::Connection,
                            format!("cannot reach the agent at {}: {e}", remote.url),
                        )
                    })?;
                let (r, w) = tokio::io::split(stream);
                let (r, w): (Reader, Writer) = (Box::new(r), Box::new(w));
                (None, r, w, remote.url.clone())
            }
            None => {
                let (process, stdin, stdout) = spawn_agent(&options.spawn)?;
                let name = Path::new(&options.spawn.command).file_name().map_or_else(
                    || options.spawn.command.clone(),
                    |n| n.to_string_lossy().into_owned(),
                );
                let (r, w): (Reader, Writer) = (Box::new(stdout), Box::new(stdin));
                (Some(process), r, w, name)
            }
        };
        let (reader, writer) = if options.offer_v2 {
            let (r, w) = tokio::io::split(super::v2::wrap(reader, writer));
            (Box::new(r) as Reader, Box::new(w) as Writer)
        } else {
            (reader, writer)
        };
        let (router, out_of_turn) = router::Router::new(router::Handlers {
            permission: options.on_permission.clone(),
            elicitation: options.on_elicitation.clone(),
            fs: options.fs.clone(),
            terminal: options.terminal.clone(),
        });
        let handler_router = Arc::clone(&router);
        let (rpc, _unused) = Connection::start(
            reader,
            writer,
            Options {
                peer: format!("agent {name}"),
                on_incoming: Some(Arc::new(move |incoming| handler_router.handle(incoming))),
                ..Options::default()
            },
        );
        let _ = router.rpc.set(rpc.clone());
        let client = Client {
            inner: Arc::new(ClientInner {
                name,
                rpc,
                process,
                router,
                initialized: Initialized::default(),
                authenticated: None,
                request_timeout: options.request_timeout.unwrap_or(DEFAULT_REQUEST_TIMEOUT),
                out_of_turn: Mutex::new(Some(out_of_turn)),
                closed: tokio::sync::Mutex::new(None),
            }),
        };
        let (initialized, method) = client.negotiate_or_give_up(&options).await?;
        // Only this function has the Arc so far (the router holds no client), so it can be filled.
        let mut client = client;
        let inner = Arc::get_mut(&mut client.inner).expect("the client is not shared yet");
        inner.initialized = initialized;
        inner.authenticated = method;
        Ok(client)
    }

    /// [`Client::negotiate`], the client closed when it fails; given up at once when
    /// `options.cancel` is cancelled first (the agent is then closed in the background: one that
    /// does not end at EOF takes the ladder's seconds, which the caller does not wait for).
    async fn negotiate_or_give_up(
        &self,
        options: &ConnectOptions,
    ) -> Result<(Initialized, Option<String>), ClientError> {
        let negotiated = match &options.cancel {
            Some(cancel) => tokio::select! {
                negotiated = self.negotiate(options) => negotiated,
                () = cancel.cancelled() => {
                    let closing = self.clone();
                    tokio::spawn(async move { closing.close().await });
                    return Err(ClientError::new(
                        Category::Connection,
                        "cancelled while the agent was starting",
                    ));
                }
            },
            None => self.negotiate(options).await,
        };
        if negotiated.is_err() {
            self.close().await;
        }
        negotiated
    }

    /// `initialize`, the version check, and `authenticate` when an environment-variable method
    /// applies: the answer, read, and the method authenticated with.
    async fn negotiate(
        &self,
        options: &ConnectOptions,
    ) -> Result<(Initialized, Option<String>), ClientError> {
        // No fs or terminal unless the program serves them: the agent uses its own tools.
        let fs = options.fs.is_some();
        let terminal = options.terminal.is_some();
        let request = InitializeRequest::new(
            PROTOCOL_VERSION,
            (fs, terminal, options.on_elicitation.is_some()),
            env!("CARGO_PKG_VERSION"),
        );
        let params = requests::params(&request);
        let startup = options.startup_timeout.unwrap_or(DEFAULT_STARTUP_TIMEOUT);
        let answer = Initialized::read(self.call("initialize", params, Some(startup)).await?);
        let version = answer.protocol_version.as_u64();
        let v2 = options.offer_v2 && version == Some(2);
        if version != Some(PROTOCOL_VERSION) && !v2 {
            let shown = answer.protocol_version.clone();
            let mut error = ClientError::new(
                Category::Protocol,
                format!(
                    "the agent answered protocol version {shown}; this client speaks only version {PROTOCOL_VERSION}"
                ),
            );
            error.data = Some(data(&VersionData {
                protocol_version: shown,
            }));
            return Err(error);
        }
        let method = options
            .auto_authenticate
            .then(|| {
                super::auth::env_method(&answer.methods, |name| variable_set(&options.spawn, name))
            })
            .flatten();
        if let Some(method) = &method {
            self.authenticate(method).await?;
        }
        Ok((answer, method))
    }

    /// `authenticate` with the method `method_id` (one of the agent's `authMethods`).
    pub async fn authenticate(&self, method_id: &str) -> Result<(), ClientError> {
        let request = requests::AuthenticateRequest { method_id };
        self.request("authenticate", requests::params(&request))
            .await
            .map(|_| ())
    }

    /// The method `connect` authenticated with by itself (an environment-variable method whose
    /// variables were set), if it did.
    pub fn authenticated_method(&self) -> Option<&str> {
        self.inner.authenticated.as_deref()
    }

    /// `name (pid N)`, for `tostring`.
    pub fn describe(&self) -> String {
        let info = &self.inner.initialized.agent;
        let agent = (info.title.as_deref())
            .or(info.name.as_deref())
            .unwrap_or(&self.inner.name);
        let version = (info.version.as_deref())
            .map(|v| format!(" {v}"))
            .unwrap_or_default();
        match &self.inner.process {
            Some(p) => format!("#<acp-connection {agent}{version} pid {}>", p.pid()),
            None => format!("#<acp-connection {agent}{version} at {}>", self.inner.name),
        }
    }

    /// The agent process; `None` for an agent at a URL.
    pub fn process(&self) -> Option<&AgentProcess> {
        self.inner.process.as_ref()
    }

    /// The whole `initialize` answer (`protocolVersion`, `agentCapabilities`, `authMethods`,
    /// `agentInfo`, ...), as on the wire.
    pub fn initialize_response(&self) -> &Value {
        &self.inner.initialized.answer
    }

    /// The `initialize` answer as read when the agent connected: its capabilities typed.
    pub fn initialized(&self) -> &Initialized {
        &self.inner.initialized
    }

    /// Whether the agent advertises `session/load`.
    pub fn can_load_session(&self) -> bool {
        self.inner.initialized.capabilities.load_session.0
    }

    /// Whether the agent advertises `sessionCapabilities.<name>` (`list`, `close`, `resume`,
    /// `delete`, `fork`).
    pub fn has_session_capability(&self, name: &str) -> bool {
        let s = &self.inner.initialized.capabilities.session_capabilities;
        match name {
            "list" => s.list.0,
            "close" => s.close.0,
            "resume" => s.resume.0,
            "delete" => s.delete.0,
            "fork" => s.fork.0,
            _ => false,
        }
    }

    /// The out-of-turn updates (late ones, and those before any turn), once.
    pub fn take_out_of_turn(&self) -> Option<mpsc::UnboundedReceiver<OutOfTurn>> {
        self.inner.out_of_turn.lock().take()
    }

    /// Sends a request that fails as soon as the connection is unusable, mapping failures to
    /// categories.
    pub async fn call(
        &self,
        method: &str,
        params: Value,
        timeout: Option<Duration>,
    ) -> Result<Value, ClientError> {
        self.call_observed(method, params, timeout, None).await
    }

    /// [`Client::call`] with a hook run as the answer's line is read (see
    /// [`jsonrpc::Connection::request_observed`]).
    async fn call_observed(
        &self,
        method: &str,
        params: Value,
        timeout: Option<Duration>,
        on_answer: Option<jsonrpc::AnswerHook>,
    ) -> Result<Value, ClientError> {
        let router = &self.inner.router;
        if let Some(e) = router.fatal_error() {
            return Err(e);
        }
        let result = self
            .inner
            .rpc
            .request_observed(method, params, timeout, Some(&router.fatal), on_answer)
            .await;
        match result {
            Ok(value) => Ok(value),
            Err(e) => Err(self.map_error(e).await),
        }
    }

    pub(super) async fn request(&self, method: &str, params: Value) -> Result<Value, ClientError> {
        self.call(method, params, Some(self.inner.request_timeout))
            .await
    }

    /// The router of this connection's sessions (for the session methods).
    pub(super) fn router(&self) -> &router::Router {
        &self.inner.router
    }

    /// Sends `session/prompt` and returns the turn, whose [`Turn::next`] hands out its updates
    /// in order and then its stop reason. `timeout` bounds the whole turn (none by default).
    pub fn prompt(
        &self,
        session_id: &str,
        prompt: Value,
        timeout: Option<Duration>,
    ) -> Result<Turn, ClientError> {
        if let Some(e) = self.inner.router.fatal_error() {
            return Err(e);
        }
        let shared = self.inner.router.start_turn(session_id)?;
        let client = self.clone();
        let turn = Arc::clone(&shared);
        let params = requests::params(&requests::PromptRequest {
            session_id,
            prompt: &prompt,
        });
        let task = tokio::spawn(async move {
            // Updates on lines after the answer's are late, however soon this task wakes.
            let read = Arc::clone(&turn);
            let hook: jsonrpc::AnswerHook = Box::new(move || read.answer_read());
            let answer = client
                .call_observed("session/prompt", params, timeout, Some(hook))
                .await;
            let cancelled = turn.cancel_sent.load(Ordering::SeqCst);
            let result = match answer {
                Ok(answer) => match crate::acp::answers::stop_reason(&answer) {
                    Some(reason) => Ok(Stop::new(reason)),
                    None if cancelled => Ok(Stop::new(StopReason::Cancelled)),
                    None => Err(ClientError::new(
                        Category::Protocol,
                        format!("the agent's session/prompt answer has no stopReason: {answer}"),
                    )),
                },
                // After we sent session/cancel, an error answer means "cancelled" (agents that
                // surface the aborted call as an error), and -32800 always does.
                Err(e)
                    if e.category == Category::Agent
                        && (cancelled || e.code == Some(jsonrpc::REQUEST_CANCELLED.into())) =>
                {
                    Ok(Stop::new(StopReason::Cancelled))
                }
                Err(e) => Err(e),
            };
            turn.set_result(result);
        });
        Ok(Turn {
            shared,
            client: self.clone(),
            task: task.abort_handle(),
            done: false,
        })
    }

    /// `session/cancel` for the session's running turn: pending permission requests of the turn
    /// are answered `cancelled`, and the prompt ends `cancelled` once the agent answers.
    pub async fn cancel(&self, session_id: &str) -> Result<(), ClientError> {
        if let Some(turn) = self.inner.router.running_turn(session_id) {
            turn.cancel_sent.store(true, Ordering::SeqCst);
            turn.cancel.cancel();
        }
        self.inner
            .rpc
            .notify(
                "session/cancel",
                requests::params(&requests::SessionRequest { session_id }),
            )
            .await
            .map_err(|e| ClientError::new(Category::Connection, e.to_string()))
    }

    /// Closes the connection: stdin, grace, SIGTERM and SIGKILL to the group, reap. Idempotent
    /// and bounded; the first call returns whether the agent exited by itself, later ones false.
    pub async fn close(&self) -> bool {
        let mut closed = self.inner.closed.lock().await;
        if closed.is_some() {
            return false;
        }
        self.inner.router.release_terminals().await;
        let _ = tokio::time::timeout(process::CLOSE_GRACE, self.inner.rpc.close()).await;
        let graceful = match &self.inner.process {
            Some(p) => p.shutdown().await,
            None => true,
        };
        *closed = Some(graceful);
        graceful
    }

    /// Whether `close` has run.
    pub async fn is_closed(&self) -> bool {
        self.inner.closed.lock().await.is_some()
    }
}

type Reader = Box<dyn tokio::io::AsyncRead + Unpin + Send>;
type Writer = Box<dyn tokio::io::AsyncWrite + Unpin + Send>;

/// Spawn the agent command, with an error that says what is missing.
fn spawn_agent(
    spawn: &super::Spawn,
) -> Result<
    (
        AgentProcess,
        tokio::process::ChildStdin,
        tokio::process::ChildStdout,
    ),
    ClientError,
> {
    AgentProcess::spawn(spawn).map_err(|e| {
        let why = if e.kind() == std::io::ErrorKind::NotFound && !spawn.command.contains('/') {
            format!("there is no program `{}` on PATH", spawn.command)
        } else {
            e.to_string()
        };
        ClientError::new(
            Category::Connection,
            format!("cannot start the agent `{}`: {why}", spawn.command),
        )
    })
}

/// An error's data, as JSON.
pub(super) fn data<T: serde::Serialize>(data: &T) -> Value {
    serde_json::to_value(data).unwrap_or(Value::Null)
}

/// A version refused: the error's data.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct VersionData {
    protocol_version: Value,
}

/// Whether the agent's environment has `name` set (not empty): its own `env`, else oml's.
fn variable_set(spawn: &super::Spawn, name: &str) -> bool {
    match spawn.env.iter().rev().find(|(k, _)| k == name) {
        Some((_, v)) => !v.is_empty(),
        None => std::env::var_os(name).is_some_and(|v| !v.is_empty()),
    }
}

pub(super) fn null_to_object(v: Value) -> Value {
    if v.is_null() {
        Value::Object(serde_json::Map::new())
    } else {
        v
    }
}

pub(super) fn capability(method: &str, flag: &str) -> ClientError {
    ClientError::new(
        Category::Capability,
        format!("the agent does not advertise {method} ({flag})"),
    )
}

pub(super) fn absolute(cwd: &Path) -> Result<PathBuf, ClientError> {
    if cwd.is_absolute() {
        Ok(cwd.to_path_buf())
    } else {
        Err(ClientError::new(
            Category::Protocol,
            format!(
                "the session cwd must be an absolute path, not {}",
                cwd.display()
            ),
        ))
    }
}
