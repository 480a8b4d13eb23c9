//! The ACP requests and notifications an agent receives (`oml acp` is the one that does), parsed
//! once, when the line is read, into a [`Method`] or a [`NotificationMethod`] with typed params.
//!
//! Each params struct is a serde struct; each field that can be wrong has its own small type whose
//! `Deserialize` names the field in its error, so a missing or mistyped field is a `-32602` that
//! says which (`Invalid params: sessionId is required`). Unknown members are ignored, and params
//! that are not an object read as `{}`. Methods oml does not know stay [`Method::Unknown`] with
//! their params untouched, for `acp.methods` in Lisp or `-32601`.
//!
//! This module only reads: it knows nothing of sessions, the hub or Lisp.

use std::fmt;
use std::path::PathBuf;

use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use super::McpServer;

/// Params that cannot be read: what a `-32602` says (the field, and what is wrong with it).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ParamsError(String);

impl From<serde_json::Error> for ParamsError {
    fn from(e: serde_json::Error) -> ParamsError {
        ParamsError(e.to_string())
    }
}

/// A request, by method, with its params read.
#[derive(Debug)]
pub enum Method {
    Initialize(InitializeParams),
    SessionNew(NewSessionParams),
    SessionLoad(LoadSessionParams),
    SessionResume(LoadSessionParams),
    SessionFork(LoadSessionParams),
    SessionList(ListSessionsParams),
    SessionClose(SessionParams),
    SessionDelete(SessionParams),
    SessionPrompt(PromptParams),
    SessionSetMode(SetModeParams),
    SessionSetConfigOption(SetConfigOptionParams),
    /// Any other method, with its params as sent (`null` when there were none).
    Unknown {
        method: String,
        params: Value,
    },
}

impl Method {
    /// Reads the request `method` with `params`; a params error is the `-32602` to answer.
    pub fn parse(method: &str, params: Option<Value>) -> Result<Method, ParamsError> {
        Ok(match method {
            "initialize" => Method::Initialize(read(params)?),
            "session/new" => Method::SessionNew(read(params)?),
            "session/load" => Method::SessionLoad(read(params)?),
            "session/resume" => Method::SessionResume(read(params)?),
            "session/fork" => Method::SessionFork(read(params)?),
            "session/list" => Method::SessionList(read(params)?),
            "session/close" => Method::SessionClose(read(params)?),
            "session/delete" => Method::SessionDelete(read(params)?),
            "session/prompt" => Method::SessionPrompt(read(params)?),
            "session/set_mode" => Method::SessionSetMode(read(params)?),
            "session/set_config_option" => Method::SessionSetConfigOption(read(params)?),
            other => Method::Unknown {
                method: other.to_owned(),
                params: params.unwrap_or(Value::Null),
            },
        })
    }
}

/// A notification, by method, with its params read.
#[derive(Debug)]
pub enum NotificationMethod {
    SessionCancel(SessionParams),
    /// `$/cancel_request`: stop the request `requestId` (stabilized in 2026).
    CancelRequest(CancelRequestParams),
    /// Any other notification, with its params as sent (`null` when there were none).
    Unknown {
        method: String,
        params: Value,
    },
}

impl NotificationMethod {
    /// Reads the notification `method` with `params`; bad params are the error to log (a
    /// notification is never answered).
    pub fn parse(method: &str, params: Option<Value>) -> Result<NotificationMethod, ParamsError> {
        Ok(match method {
            "session/cancel" => NotificationMethod::SessionCancel(read(params)?),
            "$/cancel_request" => NotificationMethod::CancelRequest(read(params)?),
            other => NotificationMethod::Unknown {
                method: other.to_owned(),
                params: params.unwrap_or(Value::Null),
            },
        })
    }
}

/// `$/cancel_request`'s params (read by whoever is asked, written by whoever gives up).
#[derive(Debug, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelRequestParams {
    /// As sent; compared by its JSON text with the ids of running requests.
    pub request_id: Value,
}

impl CancelRequestParams {
    /// A `$/cancel_request`'s params, or the error to log.
    pub fn parse(params: Option<Value>) -> Result<CancelRequestParams, ParamsError> {
        read(params)
    }
}

/// `params` as `T`; params that are not an object (absent, null, an array) read as `{}`.
fn read<T: DeserializeOwned>(params: Option<Value>) -> Result<T, ParamsError> {
    let object = match params {
        Some(Value::Object(object)) => object,
        _ => Map::new(),
    };
    serde_json::from_value(Value::Object(object)).map_err(ParamsError::from)
}

/// `initialize`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeParams {
    /// `None` when absent (null is given, and wrong).
    #[serde(default, deserialize_with = "given")]
    pub protocol_version: Option<ProtocolVersion>,
    /// What the client offers (`fs`, `terminal`, ...), as sent; kept for Lisp as
    /// `acp.client-capabilities`.
    #[serde(default)]
    pub client_capabilities: Value,
    /// A v2 client's capabilities (v2 renamed the member).
    #[serde(default)]
    pub capabilities: Value,
}

impl InitializeParams {
    /// Reads `initialize`'s params alone (`front::acp::early` answers it before the
    /// other methods can be served).
    pub fn parse(params: Option<Value>) -> Result<InitializeParams, ParamsError> {
        read(params)
    }
}

/// `session/new`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewSessionParams {
    pub cwd: Cwd,
    pub mcp_servers: McpServers,
    #[serde(default)]
    pub additional_directories: AdditionalDirectories,
}

/// `session/load`, `session/resume` and `session/fork`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadSessionParams {
    pub session_id: SessionId,
    pub cwd: Cwd,
    pub mcp_servers: McpServers,
    #[serde(default)]
    pub additional_directories: AdditionalDirectories,
    /// v2's `session/resume`: where the replay of the history starts (`{"type": "start"}`);
    /// absent or null, no replay.
    #[serde(default)]
    pub replay_from: Option<Value>,
}

/// `session/list`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListSessionsParams {
    pub cwd: ListCwd,
    pub cursor: Cursor,
}

/// Requests and notifications about one session: `session/close`, `session/delete`,
/// `session/cancel`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionParams {
    pub session_id: SessionId,
}

/// `session/prompt`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptParams {
    pub session_id: SessionId,
    pub prompt: PromptBlocks,
    /// `_meta`, of which oml reads `oml.steer` (see [`PromptMeta`]); anything else is ignored.
    #[serde(default, rename = "_meta")]
    pub meta: crate::acp::loose::Loose<PromptMeta>,
}

/// What oml reads of a prompt's `_meta`.
#[derive(Debug, Default, Deserialize)]
pub struct PromptMeta {
    #[serde(default)]
    pub oml: crate::acp::loose::Loose<OmlPromptMeta>,
}

/// A prompt's `_meta.oml`.
#[derive(Debug, Default, Deserialize)]
pub struct OmlPromptMeta {
    /// `true`: join the running turn (steer), `false`: queue, absent: the setting decides.
    #[serde(default)]
    pub steer: crate::acp::loose::Loose<bool>,
}

impl PromptParams {
    /// What `_meta.oml.steer` asks for: `Some(true)` steer, `Some(false)` queue, `None` when
    /// it says nothing (or nothing of the right type).
    pub fn steer(&self) -> Option<bool> {
        let meta = self.meta.0.as_ref()?;
        meta.oml.0.as_ref()?.steer.0
    }
}

/// `session/set_mode`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetModeParams {
    pub session_id: SessionId,
    pub mode_id: ModeId,
}

/// `session/set_config_option`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetConfigOptionParams {
    pub session_id: SessionId,
    pub config_id: ConfigId,
    /// `None` when absent; null is a value. An object's `value` member is the value.
    #[serde(default, deserialize_with = "given")]
    pub value: Option<ConfigValue>,
}

/// For optional members where null differs from absent: `Some` whenever the member is there.
fn given<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// A member read leniently: `None` when absent or null, else its value. serde hands an absent
/// member to a field's `Deserialize` as "none", so the field types below see absent and null
/// alike, and answer with their own message.
fn member<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Option::<Value>::deserialize(d)
}

/// A required string member; `message` is the error when it is absent or not a string.
fn required_string<'de, D: Deserializer<'de>>(
    d: D,
    message: &'static str,
) -> Result<String, D::Error> {
    match member(d)? {
        Some(Value::String(s)) => Ok(s),
        _ => Err(D::Error::custom(message)),
    }
}

/// A session id (`sessionId`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionId(pub String);

impl<'de> Deserialize<'de> for SessionId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        required_string(d, "sessionId is required").map(SessionId)
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A mode id (`modeId`).
#[derive(Debug)]
pub struct ModeId(pub String);

impl<'de> Deserialize<'de> for ModeId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        required_string(d, "modeId is required").map(ModeId)
    }
}

/// A config option id (`configId`).
#[derive(Debug)]
pub struct ConfigId(pub String);

impl<'de> Deserialize<'de> for ConfigId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        required_string(d, "configId is required").map(ConfigId)
    }
}

/// The protocol version the client asks for: an integer that fits 16 bits.
#[derive(Debug)]
pub struct ProtocolVersion(pub u16);

impl<'de> Deserialize<'de> for ProtocolVersion {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        value
            .as_u64()
            .and_then(|v| u16::try_from(v).ok())
            .map(ProtocolVersion)
            .ok_or_else(|| {
                D::Error::custom(format!("protocolVersion must be an integer, got {value}"))
            })
    }
}

/// A session's working directory: a non-blank absolute path.
#[derive(Debug)]
pub struct Cwd(pub PathBuf);

impl<'de> Deserialize<'de> for Cwd {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let cwd = match member(d)? {
            Some(Value::String(c)) if !c.trim().is_empty() => PathBuf::from(c),
            _ => return Err(D::Error::custom("cwd is required")),
        };
        if !cwd.is_absolute() {
            return Err(D::Error::custom(format!(
                "cwd must be an absolute path: {}",
                cwd.display()
            )));
        }
        if cwd.as_os_str().as_encoded_bytes().contains(&0) {
            return Err(D::Error::custom("cwd contains a NUL byte"));
        }
        match std::fs::metadata(&cwd) {
            Ok(meta) if meta.is_dir() => Ok(Cwd(cwd)),
            Ok(_) => Err(D::Error::custom(format!(
                "cwd is not a directory: {}",
                cwd.display()
            ))),
            Err(_) => Err(D::Error::custom(format!(
                "cwd does not exist: {}",
                cwd.display()
            ))),
        }
    }
}

/// `additionalDirectories`: more workspace roots for the session, each an absolute path to an
/// existing directory (checked as `cwd` is). Absent or null is none.
#[derive(Debug, Default)]
pub struct AdditionalDirectories(pub Vec<PathBuf>);

impl<'de> Deserialize<'de> for AdditionalDirectories {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let dirs = match member(d)? {
            None | Some(Value::Null) => return Ok(AdditionalDirectories::default()),
            Some(Value::Array(items)) => items,
            Some(_) => {
                return Err(D::Error::custom(
                    "additionalDirectories must be a list of paths",
                ));
            }
        };
        let mut out = Vec::with_capacity(dirs.len());
        for dir in dirs {
            let Cwd(dir) = Cwd::deserialize(dir).map_err(|e| {
                D::Error::custom(format!(
                    "additionalDirectories: {}",
                    e.to_string().replace("cwd", "a directory")
                ))
            })?;
            out.push(dir);
        }
        Ok(AdditionalDirectories(out))
    }
}

/// The MCP servers the client asks for, each read ([`McpServer::parse`]) or the reason it cannot
/// be: one bad entry is reported to the session, it does not fail the request. Absent or null is
/// none.
#[derive(Debug, Default)]
pub struct McpServers(pub Vec<Result<McpServer, super::mcp_server::BadMcpServer>>);

impl<'de> Deserialize<'de> for McpServers {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match member(d)? {
            None => Ok(McpServers::default()),
            Some(Value::Array(servers)) => {
                Ok(McpServers(servers.iter().map(McpServer::parse).collect()))
            }
            Some(_) => Err(D::Error::custom("mcpServers must be an array")),
        }
    }
}

/// The prompt's content blocks, each read leniently by the agent (`front::acp::content`).
#[derive(Debug)]
pub struct PromptBlocks(pub Vec<Value>);

impl<'de> Deserialize<'de> for PromptBlocks {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match member(d)? {
            Some(Value::Array(blocks)) => Ok(PromptBlocks(blocks)),
            _ => Err(D::Error::custom(
                "prompt must be an array of content blocks",
            )),
        }
    }
}

/// The value of `session/set_config_option`: the member itself, or an object's `value` member.
#[derive(Debug)]
pub struct ConfigValue(pub Value);

impl<'de> Deserialize<'de> for ConfigValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(ConfigValue(match Value::deserialize(d)? {
            Value::Object(mut o) => o.remove("value").unwrap_or(Value::Null),
            other => other,
        }))
    }
}

/// `session/list`'s filter: only sessions in this directory (absent or null: all).
#[derive(Debug, Default)]
pub struct ListCwd(pub Option<PathBuf>);

impl<'de> Deserialize<'de> for ListCwd {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match member(d)? {
            None => Ok(ListCwd(None)),
            Some(Value::String(c)) => Ok(ListCwd(Some(PathBuf::from(c)))),
            Some(_) => Err(D::Error::custom("cwd must be a string")),
        }
    }
}

/// Where a `session/list` page starts: the offset in the opaque cursor `o<n>` (absent or null:
/// the first page).
#[derive(Debug, Default)]
pub struct Cursor(pub usize);

impl<'de> Deserialize<'de> for Cursor {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match member(d)? {
            None => Ok(Cursor(0)),
            Some(Value::String(c)) => c
                .strip_prefix("o")
                .and_then(|n| n.parse::<usize>().ok())
                .map(Cursor)
                .ok_or_else(|| D::Error::custom("bad cursor")),
            Some(_) => Err(D::Error::custom("cursor must be a string")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn error(method: &str, params: Value) -> String {
        match Method::parse(method, Some(params)) {
            Err(e) => {
                format!("Invalid params: {e}")
            }
            Ok(m) => panic!("{method}: expected an error, got {m:?}"),
        }
    }

    #[test]
    fn a_missing_or_mistyped_field_is_named() {
        let cases = [
            (
                "session/prompt",
                json!({"prompt": []}),
                "sessionId is required",
            ),
            (
                "session/prompt",
                json!({"sessionId": 5, "prompt": []}),
                "sessionId is required",
            ),
            (
                "session/prompt",
                json!({"sessionId": "s"}),
                "prompt must be an array of content blocks",
            ),
            ("session/new", json!({}), "cwd is required"),
            ("session/new", json!({"cwd": "  "}), "cwd is required"),
            (
                "session/new",
                json!({"cwd": "rel"}),
                "cwd must be an absolute path: rel",
            ),
            (
                "session/new",
                json!({"cwd": "/", "mcpServers": {}}),
                "mcpServers must be an array",
            ),
            ("session/load", json!({"cwd": "/"}), "sessionId is required"),
            (
                "session/set_mode",
                json!({"sessionId": "s"}),
                "modeId is required",
            ),
            (
                "session/set_config_option",
                json!({"sessionId": "s"}),
                "configId is required",
            ),
            ("session/list", json!({"cwd": 1}), "cwd must be a string"),
            ("session/list", json!({"cursor": "x"}), "bad cursor"),
            (
                "session/list",
                json!({"cursor": 3}),
                "cursor must be a string",
            ),
            (
                "session/new",
                json!({"cwd": "/no/such/dir/here"}),
                "cwd does not exist: /no/such/dir/here",
            ),
            (
                "session/new",
                json!({"cwd": "/etc/hostname"}),
                "cwd is not a directory: /etc/hostname",
            ),
            (
                "session/new",
                json!({"cwd": "/tmp/a\u{0}b"}),
                "cwd contains a NUL byte",
            ),
            (
                "initialize",
                json!({"protocolVersion": "1.0.0"}),
                "protocolVersion must be an integer, got \"1.0.0\"",
            ),
            (
                "initialize",
                json!({"protocolVersion": null}),
                "protocolVersion must be an integer, got null",
            ),
        ];
        for (method, params, message) in cases {
            assert_eq!(error(method, params), format!("Invalid params: {message}"));
        }
    }

    #[test]
    fn good_params_are_read_and_others_left_alone() {
        let Ok(Method::SessionNew(p)) = Method::parse(
            "session/new",
            Some(json!({"cwd": "/", "mcpServers": [{"name": "a"}, {}], "extra": 1})),
        ) else {
            panic!("expected session/new");
        };
        assert_eq!(p.cwd.0, std::path::PathBuf::from("/"));
        let servers: Vec<Result<String, String>> = p
            .mcp_servers
            .0
            .into_iter()
            .map(|s| s.map(|s| s.name().to_owned()).map_err(|e| e.to_string()))
            .collect();
        assert_eq!(servers.len(), 2);
        assert!(
            servers[0]
                .as_ref()
                .unwrap_err()
                .contains("MCP server a has no command")
        );
        assert!(
            servers[1]
                .as_ref()
                .unwrap_err()
                .contains("invalid MCP server")
        );
        let Ok(Method::SessionList(p)) = Method::parse("session/list", None) else {
            panic!("expected session/list");
        };
        assert_eq!((p.cwd.0, p.cursor.0), (None, 0));
        let Ok(Method::SessionSetConfigOption(p)) = Method::parse(
            "session/set_config_option",
            Some(json!({"sessionId": "s", "configId": "c", "value": {"value": 3}})),
        ) else {
            panic!("expected session/set_config_option");
        };
        assert_eq!(p.value.map(|v| v.0), Some(json!(3)));
        let Ok(Method::Initialize(p)) = Method::parse("initialize", Some(json!([1]))) else {
            panic!("expected initialize");
        };
        assert!(p.protocol_version.is_none());
        let Ok(Method::Unknown { method, params }) = Method::parse("_x/y", None) else {
            panic!("expected an unknown method");
        };
        assert_eq!((method.as_str(), params), ("_x/y", Value::Null));
    }
}
