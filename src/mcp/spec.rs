//! What an MCP server is, before it runs: its name and how to reach it, made once from the two
//! places servers come from — an entry of the `mcpServers` of an ACP `session/new`
//! (`acp::McpServer`) and the Lisp form of `mcp.defserver` (env and headers as tables, already
//! turned to JSON by the caller).
//!
//! It knows nothing of processes, connections or sessions.

use serde_json::Value;

use crate::acp::{McpServer, NameValue, short};

/// One MCP server to connect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerSpec {
    /// The name the user gave it; its tools are offered as `mcp__<name>__<tool>`.
    pub name: String,
    pub transport: Transport,
}

/// How the server is reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transport {
    /// A program oml starts, speaking MCP over its stdin and stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        /// Added to the environment oml passes on.
        env: Vec<(String, String)>,
    },
    /// The streamable HTTP transport at `url`, with extra request headers.
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
    /// The legacy HTTP+SSE transport; accepted so the session says why it is not connected.
    Sse { url: String },
}

impl Transport {
    /// `stdio`, `http` or `sse`.
    pub fn kind(&self) -> &'static str {
        match self {
            Transport::Stdio { .. } => "stdio",
            Transport::Http { .. } => "http",
            Transport::Sse { .. } => "sse",
        }
    }

    /// The command line or URL, for `/mcp` and error messages.
    pub fn target(&self) -> String {
        match self {
            Transport::Stdio { command, args, .. } => std::iter::once(command.as_str())
                .chain(args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
            Transport::Http { url, .. } | Transport::Sse { url } => url.clone(),
        }
    }
}

/// What is wrong with an MCP server's description (an editor's or a Lisp form).
#[derive(Debug, thiserror::Error)]
pub enum BadSpec {
    #[error(transparent)]
    Acp(#[from] crate::acp::BadMcpServer),
    #[error("MCP server {name}: expected a table, got {shown}")]
    NotATable { name: String, shown: String },
    #[error("MCP server {name}: :{key} must be a table, got {shown}")]
    KeyNotATable {
        name: String,
        key: String,
        shown: String,
    },
    #[error("MCP server {name}: :args must be a list, got {shown}")]
    ArgsNotAList { name: String, shown: String },
    #[error("MCP server {0}: give :command or :url, not both")]
    Both(String),
    #[error("MCP server {0}: give :command or :url")]
    Neither(String),
    #[error("an MCP server ({0}) has no name")]
    NoName(String),
}

impl ServerSpec {
    /// One entry of ACP's `mcpServers`; the error names what is wrong with it.
    pub fn from_acp(value: &Value) -> Result<ServerSpec, BadSpec> {
        ServerSpec::from_server(McpServer::parse(value)?)
    }

    /// An ACP `McpServer` already read; the error says when it has no name.
    pub fn from_server(server: McpServer) -> Result<ServerSpec, BadSpec> {
        let pairs = |v: Vec<NameValue>| v.into_iter().map(|p| (p.name, p.value)).collect();
        let (name, transport) = match server {
            McpServer::Stdio {
                name,
                command,
                args,
                env,
            } => (
                name,
                Transport::Stdio {
                    command,
                    args,
                    env: pairs(env),
                },
            ),
            McpServer::Http { name, url, headers } => (
                name,
                Transport::Http {
                    url,
                    headers: pairs(headers),
                },
            ),
            McpServer::Sse { name, url } => (name, Transport::Sse { url }),
        };
        ServerSpec::named(name, transport)
    }

    /// The Lisp form `{:command :args [..] :env {..}}` or `{:url :headers {..}}` (with
    /// `:type "sse"` for the legacy transport), as JSON.
    pub fn from_config(name: &str, value: &Value) -> Result<ServerSpec, BadSpec> {
        let obj = value.as_object().ok_or_else(|| BadSpec::NotATable {
            name: name.to_owned(),
            shown: short(value),
        })?;
        let text = |key: &str| obj.get(key).and_then(Value::as_str).map(str::to_owned);
        let table = |key: &str| -> Result<Vec<(String, String)>, BadSpec> {
            match obj.get(key) {
                None | Some(Value::Null) => Ok(Vec::new()),
                Some(Value::Object(m)) => m
                    .iter()
                    .map(|(k, v)| match v {
                        Value::String(s) => Ok((k.clone(), s.clone())),
                        other => Ok((k.clone(), other.to_string())),
                    })
                    .collect(),
                // An empty Lua table arrives as an empty array.
                Some(Value::Array(a)) if a.is_empty() => Ok(Vec::new()),
                Some(other) => Err(BadSpec::KeyNotATable {
                    name: name.to_owned(),
                    key: key.to_owned(),
                    shown: short(other),
                }),
            }
        };
        let transport = match (text("command"), text("url")) {
            (Some(command), None) => {
                let args = match obj.get("args") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(Value::Array(a)) => a
                        .iter()
                        .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                        .collect(),
                    Some(other) => {
                        return Err(BadSpec::ArgsNotAList {
                            name: name.to_owned(),
                            shown: short(other),
                        });
                    }
                };
                Transport::Stdio {
                    command,
                    args,
                    env: table("env")?,
                }
            }
            (None, Some(url)) if text("type").as_deref() == Some("sse") => Transport::Sse { url },
            (None, Some(url)) => Transport::Http {
                url,
                headers: table("headers")?,
            },
            (Some(_), Some(_)) => return Err(BadSpec::Both(name.to_owned())),
            (None, None) => return Err(BadSpec::Neither(name.to_owned())),
        };
        ServerSpec::named(name.to_owned(), transport)
    }

    pub(super) fn named(name: String, transport: Transport) -> Result<ServerSpec, BadSpec> {
        if name.trim().is_empty() {
            return Err(BadSpec::NoName(transport.target()));
        }
        Ok(ServerSpec { name, transport })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn acp_forms() {
        let cases: &[(Value, Result<&str, &str>)] = &[
            (
                json!({"name": "fs", "command": "npx", "args": ["a"], "env": [{"name": "K", "value": "v"}]}),
                Ok("stdio npx a"),
            ),
            (
                json!({"type": "http", "name": "h", "url": "http://x/mcp", "headers": []}),
                Ok("http http://x/mcp"),
            ),
            (
                json!({"type": "sse", "name": "s", "url": "http://x/sse", "headers": []}),
                Ok("sse http://x/sse"),
            ),
            (json!({"name": "x"}), Err("MCP server x has no command")),
            (
                json!({"type": "http", "name": "h"}),
                Err("MCP server h has no url"),
            ),
            (
                json!({"type": "ws", "name": "w", "url": "u"}),
                Err("unknown type"),
            ),
            (json!({"command": "x"}), Err("invalid MCP server")),
            (json!({"name": " ", "command": "x"}), Err("has no name")),
        ];
        for (input, want) in cases {
            let got = ServerSpec::from_acp(input)
                .map(|s| format!("{} {}", s.transport.kind(), s.transport.target()))
                .map_err(|e| e.to_string());
            match (want, &got) {
                (Ok(w), Ok(g)) => assert_eq!(w, g, "{input}"),
                (Err(w), Err(g)) => assert!(g.contains(w), "{input}: {g}"),
                _ => panic!("{input}: {got:?}"),
            }
        }
    }

    #[test]
    fn lisp_forms() {
        let s = ServerSpec::from_config(
            "g",
            &json!({"command": "srv", "args": ["--x", 3], "env": {"T": "1"}}),
        )
        .unwrap();
        assert_eq!(
            s.transport,
            Transport::Stdio {
                command: "srv".into(),
                args: vec!["--x".into(), "3".into()],
                env: vec![("T".into(), "1".into())]
            }
        );
        let h = ServerSpec::from_config("h", &json!({"url": "http://h", "headers": {"A": "b"}}))
            .unwrap();
        assert_eq!(
            h.transport,
            Transport::Http {
                url: "http://h".into(),
                headers: vec![("A".into(), "b".into())]
            }
        );
        assert!(
            ServerSpec::from_config("b", &json!({"command": "c", "url": "u"}))
                .unwrap_err()
                .to_string()
                .contains("not both")
        );
        assert!(
            ServerSpec::from_config("b", &json!({}))
                .unwrap_err()
                .to_string()
                .contains("give :command or :url")
        );
        assert!(
            ServerSpec::from_config("b", &json!({"command": "c", "env": 3}))
                .unwrap_err()
                .to_string()
                .contains(":env must be a table")
        );
        assert!(
            ServerSpec::from_config("b", &json!(5))
                .unwrap_err()
                .to_string()
                .contains("expected a table")
        );
    }
}
