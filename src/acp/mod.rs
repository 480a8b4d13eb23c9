//! ACP, the Agent Client Protocol, as types: what oml reads and writes of it on either face, as
//! the agent (`front::acp`) and as the client (`acp_client`, `bind::client`, `ask`,
//! `front::proxy`). Each message is parsed here once, when it is read, with serde; above this
//! module nothing looks a field up by its key.
//!
//! - [`params`]: the requests and notifications an agent receives, as a typed [`Method`];
//! - [`answers`]: what a client reads of an agent's messages (an update's kind, a chunk's text,
//!   the prompt's stop reason, a new session's id);
//! - [`content`]: a prompt's content blocks, as an agent reads them;
//! - [`initialize`]: v1's answer to `initialize`, as an agent writes it;
//! - [`permission`]: `session/request_permission`, its options and its outcome;
//! - [`requests`]: what a client sends an agent;
//! - [`rpc`]: the JSON-RPC envelope for a program that passes messages on (`oml proxy`);
//! - [`served`]: the agent's other requests to its client (`fs/*`, `terminal/*`, elicitation);
//! - [`updates`]: the updates and answers an agent writes of its own;
//! - [`StopReason`]: how a turn ended, by its wire, Lisp and loop names;
//! - [`McpServer`]: an entry of a session's `mcpServers`;
//! - [`tool_call`]: what a client shows of a tool call it is asked about;
//! - [`v2`]: the v2 draft against v1, one mapping used both ways (the agent encodes, the client
//!   decodes).
//!
//! The messages a program sees as Lisp tables stay `serde_json::Value`s as they came (unknown
//! kinds and fields included); the conversion to Lisp happens once, at the Lisp surface. This
//! module knows no connection, no session and no Lisp.

pub mod answers;
pub mod content;
pub mod initialize;
mod loose;
mod mcp_server;
pub mod params;
pub mod permission;
pub mod requests;
pub mod rpc;
pub mod served;
mod stop;
pub mod tool_call;
pub mod updates;
pub mod v2;

pub use loose::{Loose, LooseStr};
pub use mcp_server::{BadMcpServer, McpServer, NameValue, short};
pub use params::{Method, NotificationMethod};
pub use permission::{OptionKind, PermissionOption, PermissionOutcome, PermissionParams};
pub use stop::StopReason;
