//! What an MCP server is, before it runs: its name and how to reach it, parsed once from the two
//! places servers come from — the `mcpServers` of an ACP `session/new` (`McpServer` in the ACP
//! schema: env and headers as `[{name, value}]` lists) and the Lisp form of `mcp.defserver`
//! (env and headers as tables, already turned to JSON by the caller).
//!
//! It knows nothing of processes, connections or sessions.

use serde::Deserialize;
use serde_json::Value;

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

/// A `{name, value}` pair of the ACP schema (`EnvVariable`, `HttpHeader`).
#[derive(Deserialize)]
struct NameValue {
    name: String,
    value: String,
}

/// An ACP `McpServer`: untagged stdio, or tagged `http` / `sse`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AcpServer {
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

impl ServerSpec {
    /// One entry of ACP's `mcpServers`; the error names what is wrong with it.
    pub fn from_acp(value: &Value) -> Result<ServerSpec, String> {
        let server: AcpServer = serde_json::from_value(value.clone())
            .map_err(|e| format!("invalid MCP server {}: {e}", short(value)))?;
        let pairs = |v: Vec<NameValue>| v.into_iter().map(|p| (p.name, p.value)).collect();
        let transport = match server.kind.as_deref() {
            None | Some("stdio") => Transport::Stdio {
                command: server
                    .command
                    .ok_or_else(|| format!("MCP server {} has no command", server.name))?,
                args: server.args,
                env: pairs(server.env),
            },
            Some("http") => Transport::Http {
                url: required_url(&server.name, server.url)?,
                headers: pairs(server.headers),
            },
            Some("sse") => Transport::Sse {
                url: required_url(&server.name, server.url)?,
            },
            Some(other) => {
                return Err(format!(
                    "MCP server {} has an unknown type {other:?}",
                    server.name
                ));
            }
        };
        ServerSpec::named(server.name, transport)
    }

    /// The Lisp form `{:command :args [..] :env {..}}` or `{:url :headers {..}}` (with
    /// `:type "sse"` for the legacy transport), as JSON.
    pub fn from_config(name: &str, value: &Value) -> Result<ServerSpec, String> {
        let obj = value
            .as_object()
            .ok_or_else(|| format!("MCP server {name}: expected a table, got {}", short(value)))?;
        let text = |key: &str| obj.get(key).and_then(Value::as_str).map(str::to_owned);
        let table = |key: &str| -> Result<Vec<(String, String)>, String> {
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
                Some(other) => Err(format!(
                    "MCP server {name}: :{key} must be a table, got {}",
                    short(other)
                )),
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
                        return Err(format!(
                            "MCP server {name}: :args must be a list, got {}",
                            short(other)
                        ));
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
            (Some(_), Some(_)) => {
                return Err(format!(
                    "MCP server {name}: give :command or :url, not both"
                ));
            }
            (None, None) => return Err(format!("MCP server {name}: give :command or :url")),
        };
        ServerSpec::named(name.to_owned(), transport)
    }

    fn named(name: String, transport: Transport) -> Result<ServerSpec, String> {
        if name.trim().is_empty() {
            return Err(format!(
                "an MCP server ({}) has no name",
                transport.target()
            ));
        }
        Ok(ServerSpec { name, transport })
    }
}

fn required_url(name: &str, url: Option<String>) -> Result<String, String> {
    url.filter(|u| !u.is_empty())
        .ok_or_else(|| format!("MCP server {name} has no url"))
}

/// Characters of a bad value quoted in an error.
const QUOTE_CHARS: usize = 120;

fn short(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(QUOTE_CHARS) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text,
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
                .map(|s| format!("{} {}", s.transport.kind(), s.transport.target()));
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
                .contains("not both")
        );
        assert!(
            ServerSpec::from_config("b", &json!({}))
                .unwrap_err()
                .contains("give :command or :url")
        );
        assert!(
            ServerSpec::from_config("b", &json!({"command": "c", "env": 3}))
                .unwrap_err()
                .contains(":env must be a table")
        );
        assert!(
            ServerSpec::from_config("b", &json!(5))
                .unwrap_err()
                .contains("expected a table")
        );
    }
}
