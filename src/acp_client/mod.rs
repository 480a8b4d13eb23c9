//! oml as an ACP client: drives an external agent subprocess over ACP v1, with no Lisp in sight.
//!
//! [`Client::connect`] spawns the agent in its own process group ([`process`]), starts the
//! JSON-RPC transport with a synchronous router ([`router`]) so that every `session/update` that
//! precedes a response is in place when the response is seen, and negotiates `initialize`
//! (protocol version 1; the client advertises no `fs` and no `terminal` capability). Sessions,
//! prompts, cancellation and closing are methods. Updates of a prompt are consumed through a
//! [`Turn`]; updates outside a turn (late ones, or before any turn) come out of the channel
//! returned by [`Client::take_out_of_turn`]. Permission requests go to a
//! [`PermissionHandler`]; with none, or when it fails, the request is rejected safely.
//!
//! Wire types: the client hands every update to Lisp *as data on the wire*, unknown kinds and
//! fields included, so messages are kept as `serde_json::Value` rather than the
//! `agent-client-protocol-schema` crate's types (which would only be converted back, at a
//! compile cost the shared 2-core builder pays for nothing). The fields the client itself reads
//! are parsed once, with serde, into small types: the `initialize` answer ([`capabilities`]),
//! a permission request ([`router`]), an update's discriminator and chunk text, the prompt's
//! `stopReason` and the new session's `sessionId` (`acp::answers`), the auth methods ([`auth`]).

pub mod auth;
pub mod capabilities;
mod client;
mod failures;
pub mod process;
pub mod remote;
mod router;
mod sessions;
mod turn;
mod types;
mod v2;

use std::time::Duration;

pub use client::Client;
pub use process::{AgentProcess, Spawn};
pub use router::{OutOfTurn, TurnEvent, choose};
pub use turn::Turn;
pub use types::{
    BoxFuture, Category, ClientError, ConnectOptions, ElicitationHandler, FsCall, FsHandler,
    PermissionDecision, PermissionHandler, PermissionRequest, Remote, Stop, Update,
};

/// The method the client's close hands its terminal handler (no agent sends it): kill and
/// forget every terminal still there.
pub const RELEASE_TERMINALS: &str = "terminal/release-all";
/// The ACP protocol version this client speaks.
pub const PROTOCOL_VERSION: u64 = 1;
/// Default limit for every request but `session/prompt`.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// Default limit for spawning the agent and answering `initialize` (npx agents can take 20 s).
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
/// After this many unusable lines in a row on the agent's stdout, the connection fails with a
/// protocol error. Fewer are logged and skipped.
pub const MAX_CONSECUTIVE_MALFORMED: u32 = 10;
