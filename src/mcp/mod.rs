//! oml as an MCP client: the servers a session connects (from the editor's `session/new`, from
//! `mcp.defserver` in init files, and from Claude Code's and Codex's files), their tools offered
//! to the model, and their lifecycle.
//!
//! One file per concern: `spec.rs` (what a server is, parsed from ACP or Lisp), `files.rs` (the
//! servers of `.mcp.json` and Codex's `config.toml`), `tools.rs` (a
//! server's tools as oml names and checks them), `result.rs` (a tool result as text),
//! `http.rs` (the streamable HTTP transport), `server.rs` (one connected server) and `set.rs`
//! (a session's servers, started in parallel and stopped together).
//!
//! The protocol is the official Rust SDK's (`rmcp`); this module adds the process group, the
//! bounded start, the tolerant tool listing and the naming. It knows nothing of Lisp, sessions
//! or the permission policy: `crate::bind::mcp` puts it in front of the agent, whose
//! `agent.execute-tool` runs these tools like any other.

pub mod files;
mod http;
pub mod result;
pub mod server;
pub mod set;
pub mod spec;
pub mod tools;

use std::time::Duration;

pub use result::{Rendered, render};
pub use server::Server;
pub use set::{ServerSet, ServerStatus};
pub use spec::{BadSpec, ServerSpec, Transport};
pub use tools::McpTool;

/// Why a server could not start or a call failed; the text is what the user and the model read.
#[derive(Debug, Clone, thiserror::Error)]
pub enum McpError {
    #[error("it did not start: {0}")]
    Start(String),
    #[error("it did not answer initialize and tools/list within {} s", .0.as_secs_f64())]
    StartTimeout(Duration),
    #[error(
        "the legacy HTTP+SSE transport is not supported; use the streamable HTTP transport (type \"http\")"
    )]
    Unsupported,
    #[error("{0}")]
    Call(String),
    #[error("{0}")]
    Exited(String),
    #[error("the call did not finish within {} s", .0.as_secs_f64())]
    CallTimeout(Duration),
    #[error("the call was cancelled")]
    Cancelled,
    #[error("no MCP server is called {0}")]
    NoServer(String),
    #[error("MCP server {0} is not running ({1})")]
    NotRunning(String, String),
    #[error("no MCP tool is called {0}")]
    NoTool(String),
}
