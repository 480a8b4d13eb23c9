//! ACP's `McpServer`: one entry of a session's `mcpServers`, as the client sends it (untagged
//! stdio, or tagged `http` / `sse`; env and headers as `[{name, value}]` lists).
//!
//! It reads and writes the wire form only; what a server is to oml (`mcp::ServerSpec`) and how
//! it is reached are the `mcp` subsystem's.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A `{name, value}` pair of the ACP schema (`EnvVariable`, `HttpHeader`).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
pub struct NameValue {
    pub name: String,
    pub value: String,
}

/// One MCP server a client asks an agent to connect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum McpServer {
    /// A program the agent starts, speaking MCP on its stdin and stdout.
    Stdio {
        name: String,
        command: String,
        args: Vec<String>,
        env: Vec<NameValue>,
    },
    /// The streamable HTTP transport.
    Http {
        name: String,
        url: String,
        headers: Vec<NameValue>,
    },
    /// The legacy HTTP+SSE transport.
    Sse { name: String, url: String },
}

/// The wire form, every member optional, before it is checked.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Wire {
    name: String,
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: Vec<NameValue>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    headers: Vec<NameValue>,
}

/// Characters of a bad value quoted in an error.
const QUOTE_CHARS: usize = 120;

/// What is wrong with one entry of `mcpServers`.
#[derive(Debug, thiserror::Error)]
pub enum BadMcpServer {
    /// Not the shape of one (its start quoted).
    #[error("invalid MCP server {shown}: {source}")]
    Invalid {
        shown: String,
        source: serde_json::Error,
    },
    #[error("MCP server {0} has no command")]
    NoCommand(String),
    #[error("MCP server {0} has no url")]
    NoUrl(String),
    #[error("MCP server {name} has an unknown type {kind:?}")]
    UnknownType { name: String, kind: String },
}

impl McpServer {
    /// One entry of `mcpServers`; the error names what is wrong with it.
    pub fn parse(value: &Value) -> Result<McpServer, BadMcpServer> {
        let wire: Wire =
            serde_json::from_value(value.clone()).map_err(|source| BadMcpServer::Invalid {
                shown: short(value),
                source,
            })?;
        let name = wire.name;
        let url = |url: Option<String>, name: &str| {
            url.filter(|u| !u.is_empty())
                .ok_or_else(|| BadMcpServer::NoUrl(name.to_owned()))
        };
        Ok(match wire.kind.as_deref() {
            None | Some("stdio") => McpServer::Stdio {
                command: wire
                    .command
                    .ok_or_else(|| BadMcpServer::NoCommand(name.clone()))?,
                args: wire.args,
                env: wire.env,
                name,
            },
            Some("http") => McpServer::Http {
                url: url(wire.url, &name)?,
                headers: wire.headers,
                name,
            },
            Some("sse") => McpServer::Sse {
                url: url(wire.url, &name)?,
                name,
            },
            Some(other) => {
                return Err(BadMcpServer::UnknownType {
                    name,
                    kind: other.to_owned(),
                });
            }
        })
    }

    /// The name the client gave it.
    pub fn name(&self) -> &str {
        match self {
            McpServer::Stdio { name, .. }
            | McpServer::Http { name, .. }
            | McpServer::Sse { name, .. } => name,
        }
    }
}

/// `value` as JSON text, cut at [`QUOTE_CHARS`] characters: a bad value quoted in an error.
pub fn short(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(QUOTE_CHARS) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text,
    }
}
