//! ACP's v2 draft (2026-07-15) against v1: one mapping, used both ways. oml renders and reads v1
//! shapes everywhere; on a connection that settled on v2 the agent encodes what it sends
//! ([`encode`], used by `front::acp`) and the client decodes what it receives ([`decode`], the
//! [`Codec`] that `acp_client` puts between the agent's stream and the JSON-RPC layer, which
//! also encodes the client's requests).
//!
//! The shapes each side of a pair maps, written once here and read by both directions:
//! config option ids (`id` / `configId`), the plan (`plan` / `plan_update` with one plan per
//! session), a permission request's tool call (`toolCall` / the `tool_call` subject), the
//! client's capabilities (v2 has no client file system or terminal), and v2's `state_update`
//! ([`State`]), which carries the turn's end that v1 answers the prompt with.
//!
//! It knows the two versions' shapes, not connections, sessions or Lisp.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::StopReason;

pub mod decode;
pub mod encode;

pub use decode::Codec;

/// The plan id of a session's one plan: v2 updates it in place.
pub const PLAN_ID: &str = "plan";

/// The stop reason of a v2 turn that failed (its `state_update` carries the error).
const FAILED: &str = "error";

/// Where a config option keeps its id, in v1 and in v2.
const V1_CONFIG_ID: &str = "id";
const V2_CONFIG_ID: &str = "configId";

/// Config options with each one's id member renamed `from` → `to` (v1 ⇄ v2); anything that is
/// not a list of objects passes as it is.
fn rename_config_ids(options: Value, from: &str, to: &str) -> Value {
    let Value::Array(options) = options else {
        return options;
    };
    let renamed = options.into_iter().map(|o| match o {
        Value::Object(mut o) => {
            if let Some(id) = o.remove(from) {
                o.insert(to.into(), id);
            }
            Value::Object(o)
        }
        other => other,
    });
    Value::Array(renamed.collect())
}

/// An update's `sessionUpdate`, empty when it has none.
fn kind_of(update: &Value) -> String {
    super::answers::UpdateKind::of(update).wire().to_owned()
}

/// v2's plan: a list of items under one plan id.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Plan {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    plan_id: String,
    #[serde(default = "no_entries")]
    entries: Value,
}

fn no_entries() -> Value {
    Value::Array(Vec::new())
}

/// What a v2 permission request asks about (the one subject v1 knows: a tool call).
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Subject {
    ToolCall {
        #[serde(rename = "toolCall")]
        tool_call: Value,
    },
}

impl Subject {
    /// The `tool_call` subject holding `call`, built around it rather than serialized (a
    /// call can hold a whole file).
    fn tool_call(call: Value) -> Value {
        let mut subject = Map::new();
        subject.insert("type".into(), "tool_call".into());
        subject.insert("toolCall".into(), call);
        Value::Object(subject)
    }
}

/// A session's state: v2's `state_update`.
#[derive(Clone, Debug, PartialEq)]
pub enum State {
    Running,
    /// Waiting on the client (a permission question, an elicitation).
    RequiresAction,
    /// Nothing runs; the stop reason of the work that ended, none for a snapshot.
    Idle(Option<StopReason>),
    /// Idle after the turn failed, with its JSON-RPC error.
    Failed(Value),
    /// A state this version does not know, by name.
    Other(String),
}

/// The wire form of a `state_update`.
#[derive(Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StateWire {
    #[serde(rename = "sessionUpdate", default)]
    session_update: String,
    #[serde(default)]
    state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stop_reason: Option<StopReason>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<Value>,
}

impl State {
    /// The `state_update` for this state.
    pub fn update(&self) -> Value {
        let (state, stop_reason, error) = match self {
            State::Running => ("running", None, None),
            State::RequiresAction => ("requires_action", None, None),
            State::Idle(stop) => ("idle", stop.clone(), None),
            State::Failed(error) => ("idle", Some(StopReason::from(FAILED)), Some(error.clone())),
            State::Other(name) => (name.as_str(), None, None),
        };
        let wire = StateWire {
            session_update: "state_update".to_owned(),
            state: state.to_owned(),
            stop_reason,
            error,
        };
        serde_json::to_value(wire).unwrap_or(Value::Null)
    }

    /// The state a `state_update` reports; a failed turn without its error gets one.
    pub fn read(update: &Map<String, Value>) -> State {
        let wire: StateWire =
            serde_json::from_value(Value::Object(update.clone())).unwrap_or_default();
        match (wire.state.as_str(), wire.stop_reason) {
            ("running", _) => State::Running,
            ("requires_action", _) => State::RequiresAction,
            ("idle", Some(StopReason::Other(reason))) if reason == FAILED => {
                State::Failed(wire.error.unwrap_or_else(turn_failed))
            }
            ("idle", stop) => State::Idle(stop),
            (other, _) => State::Other(other.to_owned()),
        }
    }
}

/// JSON-RPC's `-32603 Internal error`, the error of a failed turn that did not say what failed.
const INTERNAL_ERROR: i64 = -32603;

/// The error of a failed turn that did not say what failed.
fn turn_failed() -> Value {
    #[derive(Serialize)]
    struct Error {
        code: i64,
        message: &'static str,
    }
    let error = Error {
        code: INTERNAL_ERROR,
        message: "the turn failed",
    };
    serde_json::to_value(error).unwrap_or(Value::Null)
}

/// oml's answer to a v2 client's `initialize`: version 2, `info` (who the agent is), images
/// and embedded context in prompts, MCP over HTTP and stdio, `session/delete` and additional
/// directories.
pub fn initialize_answer(info: Value) -> Value {
    use crate::acp::requests::Offered;
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Prompt {
        image: Offered,
        embedded_context: Offered,
    }
    #[derive(Serialize)]
    struct Mcp {
        http: Offered,
        stdio: Offered,
    }
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Session {
        prompt: Prompt,
        mcp: Mcp,
        delete: Offered,
        additional_directories: Offered,
    }
    #[derive(Serialize)]
    struct Capabilities {
        session: Session,
    }
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Answer {
        protocol_version: u64,
        info: Value,
        capabilities: Capabilities,
        auth_methods: [Value; 0],
    }
    let o = Offered {};
    let session = Session {
        prompt: Prompt {
            image: o,
            embedded_context: o,
        },
        mcp: Mcp { http: o, stdio: o },
        delete: o,
        additional_directories: o,
    };
    let answer = Answer {
        protocol_version: 2,
        info,
        capabilities: Capabilities { session },
        auth_methods: [],
    };
    serde_json::to_value(answer).unwrap_or(Value::Null)
}

/// Whether a v2 `replayFrom` cursor is `{type: start}`, the one this version knows.
pub fn from_start(cursor: &Value) -> bool {
    #[derive(Deserialize)]
    struct Cursor {
        #[serde(rename = "type")]
        kind: String,
    }
    Cursor::deserialize(cursor).is_ok_and(|c| c.kind == "start")
}

/// The client capabilities a v1 client sends, as a v2 agent takes them: the same, without the
/// client file system and terminal v2 does not have.
fn client_capabilities_v2(v1: Option<Value>) -> Value {
    let mut caps = match v1 {
        Some(Value::Object(caps)) => caps,
        _ => Map::new(),
    };
    caps.remove("fs");
    caps.remove("terminal");
    Value::Object(caps)
}

/// The capabilities a v2 client sent, in the v1 places an agent reads: elicitation and `_meta`
/// carry over; v2 has no client file system or terminal, and config options are always shown.
pub fn client_capabilities(v2: &Value) -> Value {
    #[derive(Deserialize, Serialize)]
    struct Kept {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        elicitation: Option<Value>,
        #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
        meta: Option<Value>,
    }
    let mut kept = Kept::deserialize(v2).unwrap_or(Kept {
        session: None,
        elicitation: None,
        meta: None,
    });
    let config_options = Map::from_iter([("configOptions".to_owned(), Value::Object(Map::new()))]);
    kept.session = Some(Value::Object(config_options));
    serde_json::to_value(kept).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_v2_client_has_no_fs_or_terminal_for_the_tools() {
        let caps = client_capabilities(&json!({"elicitation": {"form": {}},
                                               "fs": {"readTextFile": true}}));
        assert_eq!(
            caps,
            json!({"session": {"configOptions": {}},
                                "elicitation": {"form": {}}})
        );
    }

    #[test]
    fn states_read_as_they_are_written() {
        let states = [
            State::Running,
            State::RequiresAction,
            State::Idle(None),
            State::Idle(Some(StopReason::Refusal)),
            State::Failed(json!({"code": 1, "message": "m"})),
        ];
        for state in states {
            let Value::Object(update) = state.update() else {
                panic!("not an object");
            };
            assert_eq!(State::read(&update), state);
        }
        let mut failed = Map::new();
        failed.insert("state".into(), "idle".into());
        failed.insert("stopReason".into(), "error".into());
        assert_eq!(
            State::read(&failed),
            State::Failed(json!({"code": -32603, "message": "the turn failed"}))
        );
        assert!(from_start(&json!({"type": "start"})));
        assert_eq!(
            initialize_answer(json!({"name": "oml"})),
            json!({"protocolVersion": 2, "info": {"name": "oml"},
                   "capabilities": {"session": {"prompt": {"image": {}, "embeddedContext": {}},
                       "mcp": {"http": {}, "stdio": {}}, "delete": {},
                       "additionalDirectories": {}}},
                   "authMethods": []})
        );
        assert!(!from_start(&json!({"type": "message"})));
    }
}
