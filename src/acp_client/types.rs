//! The client's data: error categories and errors, permission requests and decisions, updates as
//! they came on the wire, stop reasons, and the options of a connection. No I/O.

use crate::acp::answers::UpdateKind;
use crate::acp::{PermissionOption, StopReason};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::Spawn;
use crate::cancel::CancelToken;

/// What kind of failure an error is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Category {
    /// Spawn failure, exit, EOF, I/O, timeout.
    Connection,
    /// Version mismatch, too many malformed frames, a prompt while one is running.
    Protocol,
    /// The agent does not advertise what was asked for.
    Capability,
    /// The agent answered with a JSON-RPC error.
    Agent,
}

impl Category {
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Connection => "connection",
            Category::Protocol => "protocol",
            Category::Capability => "capability",
            Category::Agent => "agent",
        }
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A client failure with its category, and the JSON-RPC code and data when the agent sent them.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("ACP {category} error: {message}")]
pub struct ClientError {
    pub category: Category,
    pub message: String,
    pub code: Option<i64>,
    pub data: Option<Value>,
}

impl ClientError {
    pub fn new(category: Category, message: impl Into<String>) -> Self {
        Self {
            category,
            message: message.into(),
            code: None,
            data: None,
        }
    }
}

/// What a permission handler decides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PermissionDecision {
    /// This option id.
    Option(String),
    /// The first `allow_once` option, else the first `allow_always`.
    Allow,
    /// The first `reject_once` option, else the first `reject_always`; `cancelled` if none.
    Reject,
    /// Answer `cancelled` (which agents take as "abort the turn").
    Cancel,
}

/// A `session/request_permission` as the handler sees it.
#[derive(Clone, Debug)]
pub struct PermissionRequest {
    pub session_id: String,
    /// The full `toolCall` object as on the wire.
    pub tool_call: Value,
    /// The options offered, read once.
    pub options: Vec<PermissionOption>,
    /// Fires when the turn is cancelled; the request is then answered `cancelled` anyway.
    pub cancel: CancelToken,
}

/// A boxed, sendable future.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Decides permission requests. An `Err` (the handler failed) rejects safely.
pub type PermissionHandler =
    Arc<dyn Fn(PermissionRequest) -> BoxFuture<Result<PermissionDecision, String>> + Send + Sync>;

/// Answers the agent's `elicitation/create` (its params as on the wire, and a token that fires
/// when the agent gives the question up): the answer in wire form (`{"action": "accept",
/// "content": {...}}`, `decline` or `cancel`). An `Err` (the handler failed) answers `cancel`.
pub type ElicitationHandler =
    Arc<dyn Fn(Value, CancelToken) -> BoxFuture<Result<Value, String>> + Send + Sync>;

/// One `fs/read_text_file` or `fs/write_text_file` from the agent, for the program's handler.
#[derive(Clone, Debug)]
pub struct FsCall {
    /// `fs/read_text_file`, `fs/write_text_file`, or a `terminal/*` method.
    pub method: String,
    /// The params as on the wire (`sessionId`, `path`, `line`, `limit`, `content`).
    pub params: Value,
    /// The session's folders: its `cwd` and additional directories, as the client sent them.
    /// An empty list is a session this client did not open.
    pub roots: Vec<std::path::PathBuf>,
    /// Fires when the agent gives the request up.
    pub cancel: CancelToken,
}

/// Serves the agent's `fs/*` requests: the result as on the wire, or why it is refused.
pub type FsHandler = Arc<dyn Fn(FsCall) -> BoxFuture<Result<Value, String>> + Send + Sync>;

/// One `session/update`, as received.
#[derive(Clone, Debug, PartialEq)]
pub struct Update {
    /// Per session, from 0, in arrival order.
    pub seq: u64,
    /// The `update` object exactly as on the wire.
    pub value: Value,
    /// Its `sessionUpdate`, read once when it arrived.
    pub kind: UpdateKind,
    /// The turn (1, 2, ... per session) it belongs to; `None` before any turn.
    pub turn: Option<u64>,
    /// It arrived after its turn's answer had been handed out.
    pub late: bool,
}

impl Update {
    /// Update number `seq` of its session, `value` as received, its kind read now.
    pub fn new(seq: u64, value: Value, turn: Option<u64>) -> Update {
        Update {
            seq,
            kind: UpdateKind::of(&value),
            value,
            turn,
            late: false,
        }
    }
}

/// How a turn ended: its reason in kebab-case, as Lisp sees it (`end-turn`, `max-tokens`,
/// `max-turn-requests`, `refusal`, `cancelled`, or an unknown reason kebab-cased as well), and
/// the reason itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stop(pub String, pub StopReason);

impl Stop {
    pub fn new(reason: StopReason) -> Stop {
        Stop(reason.kebab(), reason)
    }
}

/// How to start an agent.
#[derive(Clone, Default)]
pub struct ConnectOptions {
    pub spawn: Spawn,
    /// An agent at a URL (`http(s)://…/acp`, `ws://…`) rather than a command: `spawn` is then
    /// unused (see [`super::remote`]).
    pub remote: Option<Remote>,
    /// Offer ACP's v2 draft besides v1 (`acp.protocol-versions` holds 2): the agent's answer
    /// decides (see [`super::v2`]).
    pub offer_v2: bool,
    /// For every request but prompts; `None` means [`DEFAULT_REQUEST_TIMEOUT`].
    pub request_timeout: Option<Duration>,
    /// For `initialize`; `None` means [`DEFAULT_STARTUP_TIMEOUT`].
    pub startup_timeout: Option<Duration>,
    pub on_permission: Option<PermissionHandler>,
    /// With a handler, the client advertises form elicitation and answers `elicitation/create`.
    pub on_elicitation: Option<ElicitationHandler>,
    /// With a handler, the client advertises `fs.readTextFile` and `fs.writeTextFile` and
    /// serves them.
    pub fs: Option<FsHandler>,
    /// With a handler, the client advertises `terminal` and serves `terminal/*` (the same
    /// handler type: the method, its params, the session's folders).
    pub terminal: Option<FsHandler>,
    /// After `initialize`, send `authenticate` for the first environment-variable method whose
    /// variables are set in the agent's environment (see `auth::env_method`).
    pub auto_authenticate: bool,
    /// Gives up starting the agent when cancelled: `connect` fails at once (category
    /// `connection`) and the half-started agent is closed in the background.
    pub cancel: Option<crate::cancel::CancelToken>,
}

/// Where a remote agent is, and the bearer token it wants.
#[derive(Clone, Debug, Default)]
pub struct Remote {
    pub url: String,
    pub token: Option<String>,
}
