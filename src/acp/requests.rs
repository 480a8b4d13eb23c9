//! The requests a client sends an agent, as types: `initialize` and what the client offers,
//! `authenticate`, the session methods, `session/prompt` and `session/cancel`. [`params`]
//! turns one into the params of its line.
//!
//! It knows the shapes, not the connection or which capability allows what.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

/// The params of a request: `request` as JSON.
pub fn params<T: Serialize>(request: &T) -> Value {
    serde_json::to_value(request).unwrap_or(Value::Null)
}

/// A member with nothing in it (`{}`): a capability offered without options.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Offered {}

/// `initialize`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeRequest {
    pub protocol_version: u64,
    pub client_capabilities: ClientCapabilities,
    pub client_info: Implementation,
}

impl InitializeRequest {
    /// oml's `initialize` at `version`, offering the file system, the terminal and elicitation
    /// as `(fs, terminal, elicitation)` say; `oml_version` is the client's own.
    pub fn new(version: u64, offers: (bool, bool, bool), oml_version: &str) -> InitializeRequest {
        let (fs, terminal, elicitation) = offers;
        InitializeRequest {
            protocol_version: version,
            client_capabilities: ClientCapabilities {
                fs: FsCapability {
                    read_text_file: fs,
                    write_text_file: fs,
                },
                terminal,
                elicitation: elicitation.then(ElicitationCapability::default),
            },
            client_info: Implementation {
                name: "oml".to_owned(),
                version: oml_version.to_owned(),
            },
        }
    }
}

/// What a client offers: the file system and terminal it serves, and elicitation.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientCapabilities {
    pub fs: FsCapability,
    pub terminal: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub elicitation: Option<ElicitationCapability>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FsCapability {
    pub read_text_file: bool,
    pub write_text_file: bool,
}

/// Elicitation by form and by URL.
#[derive(Debug, Default, Serialize)]
pub struct ElicitationCapability {
    pub form: Offered,
    pub url: Offered,
}

/// A program's name and version (`clientInfo`, `agentInfo`).
#[derive(Debug, Serialize)]
pub struct Implementation {
    pub name: String,
    pub version: String,
}

/// `authenticate`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthenticateRequest<'a> {
    pub method_id: &'a str,
}

/// `session/new`: `mcpServers` is a list of ACP `McpServer` objects, sent as given.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewSessionRequest<'a> {
    pub cwd: &'a Path,
    pub mcp_servers: &'a Value,
    #[serde(skip_serializing_if = "<[PathBuf]>::is_empty")]
    pub additional_directories: &'a [PathBuf],
}

/// `session/load`, `session/resume` and `session/fork`, with no MCP servers.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReopenRequest<'a> {
    pub session_id: &'a str,
    pub cwd: &'a Path,
    pub mcp_servers: [Value; 0],
}

/// `session/list`: one page, from `cursor`, of the sessions in `cwd` (absent: all).
#[derive(Debug, Serialize)]
pub struct ListSessionsRequest<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<&'a Path>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<&'a str>,
}

/// A request or notification about one session: `session/close`, `session/delete`,
/// `session/cancel`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionRequest<'a> {
    pub session_id: &'a str,
}

/// `session/set_mode`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SetModeRequest<'a> {
    pub session_id: &'a str,
    pub mode_id: &'a str,
}

/// `session/set_config_option`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SetConfigOptionRequest<'a> {
    pub session_id: &'a str,
    pub config_id: &'a str,
    pub value: &'a Value,
}

/// The legacy, unstable `session/set_model`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SetModelRequest<'a> {
    pub session_id: &'a str,
    pub model_id: &'a str,
}

/// `session/prompt`: the prompt's content blocks as given.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptRequest<'a> {
    pub session_id: &'a str,
    pub prompt: &'a Value,
}

/// A prompt of one text block.
pub fn text_prompt(text: String) -> Value {
    #[derive(Serialize)]
    #[serde(tag = "type", rename_all = "snake_case")]
    enum Block {
        Text { text: String },
    }
    params(&[Block::Text { text }])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn requests_are_written_as_the_schema_says() {
        let init = InitializeRequest {
            protocol_version: 1,
            client_capabilities: ClientCapabilities {
                fs: FsCapability {
                    read_text_file: false,
                    write_text_file: false,
                },
                terminal: false,
                elicitation: Some(ElicitationCapability::default()),
            },
            client_info: Implementation {
                name: "oml".into(),
                version: "1".into(),
            },
        };
        assert_eq!(
            params(&init),
            json!({"protocolVersion": 1,
                "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false},
                                       "terminal": false, "elicitation": {"form": {}, "url": {}}},
                "clientInfo": {"name": "oml", "version": "1"}})
        );
        let servers = json!([]);
        let new = NewSessionRequest {
            cwd: Path::new("/p"),
            mcp_servers: &servers,
            additional_directories: &[],
        };
        assert_eq!(params(&new), json!({"cwd": "/p", "mcpServers": []}));
        let list = ListSessionsRequest {
            cwd: None,
            cursor: Some("c"),
        };
        assert_eq!(params(&list), json!({"cursor": "c"}));
        assert_eq!(
            text_prompt("hi".into()),
            json!([{"type": "text", "text": "hi"}])
        );
        let reopen = ReopenRequest {
            session_id: "s",
            cwd: Path::new("/p"),
            mcp_servers: [],
        };
        assert_eq!(
            params(&reopen),
            json!({"sessionId": "s", "cwd": "/p", "mcpServers": []})
        );
    }
}
