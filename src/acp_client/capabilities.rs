//! What an agent's `initialize` answer says it can do, read once when it connects: each
//! capability a flag (present and neither `null` nor `false`, as ACP marks them with `true` or
//! an empty object), the protocol version, and what is passed on as sent (the whole
//! capabilities object, the auth methods, the agent's info).
//!
//! It knows the shape of the answer; not what the client does with it. No I/O.

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::auth::AuthMethod;

/// A capability: true when the agent marked it with anything but `null` or `false`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flag(pub bool);

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Flag, D::Error> {
        let v = Value::deserialize(d)?;
        Ok(Flag(!matches!(v, Value::Null | Value::Bool(false))))
    }
}

/// `agentCapabilities.sessionCapabilities`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SessionCapabilities {
    pub list: Flag,
    pub close: Flag,
    pub resume: Flag,
    pub delete: Flag,
    pub fork: Flag,
    pub additional_directories: Flag,
    pub system_prompt: Flag,
}

/// `agentCapabilities.promptCapabilities`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PromptCapabilities {
    pub image: Flag,
    pub audio: Flag,
    pub embedded_context: Flag,
}

/// `agentCapabilities.mcpCapabilities`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct McpCapabilities {
    pub http: Flag,
    pub sse: Flag,
}

/// `agentCapabilities.auth`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct AuthCapabilities {
    pub logout: Flag,
}

/// `agentCapabilities`, typed, with the object as sent.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AgentCapabilities {
    pub load_session: Flag,
    #[serde(deserialize_with = "lenient")]
    pub session_capabilities: SessionCapabilities,
    #[serde(deserialize_with = "lenient")]
    pub prompt_capabilities: PromptCapabilities,
    #[serde(deserialize_with = "lenient")]
    pub mcp_capabilities: McpCapabilities,
    #[serde(deserialize_with = "lenient")]
    pub auth: AuthCapabilities,
}

/// A group of capabilities that is not an object of flags counts as none of them, without
/// costing the others.
fn lenient<'de, D: Deserializer<'de>, T: serde::de::DeserializeOwned + Default>(
    d: D,
) -> Result<T, D::Error> {
    let v = Value::deserialize(d)?;
    Ok(serde_json::from_value(v).unwrap_or_default())
}

/// `agentInfo`: how the agent names itself. A field of another type counts as absent.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct AgentInfo {
    #[serde(deserialize_with = "lenient_field")]
    pub name: Option<String>,
    #[serde(deserialize_with = "lenient_field")]
    pub title: Option<String>,
    #[serde(deserialize_with = "lenient_field")]
    pub version: Option<String>,
}

/// A field of the agent's that counts as absent when it has another type than `T`.
pub(super) fn lenient_field<'de, D: Deserializer<'de>, T: serde::de::DeserializeOwned>(
    d: D,
) -> Result<Option<T>, D::Error> {
    Ok(serde_json::from_value(Value::deserialize(d)?).ok())
}

/// The `initialize` answer, read once.
#[derive(Clone, Debug, Default)]
pub struct Initialized {
    pub protocol_version: Value,
    pub capabilities: AgentCapabilities,
    /// `agentCapabilities` as sent (`{}` when absent).
    pub capabilities_as_sent: Value,
    /// `authMethods` as sent (`[]` when absent).
    pub auth_methods: Value,
    /// The auth methods, read (`super::auth`).
    pub methods: Vec<AuthMethod>,
    /// `agentInfo` as sent (`null` when absent).
    pub agent_info: Value,
    /// The agent's info, read.
    pub agent: AgentInfo,
    /// The whole answer as sent.
    pub answer: Value,
}

impl Initialized {
    /// Read `answer`; a capability object that does not have ACP's shape counts as none.
    pub fn read(answer: Value) -> Initialized {
        let field = |name: &str, absent: Value| match answer.get(name) {
            None | Some(Value::Null) => absent,
            Some(v) => v.clone(),
        };
        let capabilities_as_sent = field("agentCapabilities", Value::Object(Default::default()));
        let capabilities =
            AgentCapabilities::deserialize(&capabilities_as_sent).unwrap_or_else(|e| {
                tracing::debug!(
                    "the agent's capabilities are not ACP's shape ({e}); taken as none"
                );
                AgentCapabilities::default()
            });
        let auth_methods = field("authMethods", Value::Array(Vec::new()));
        let agent_info = field("agentInfo", Value::Null);
        Initialized {
            protocol_version: field("protocolVersion", Value::Null),
            capabilities,
            capabilities_as_sent,
            methods: super::auth::methods(&auth_methods),
            auth_methods,
            agent: AgentInfo::deserialize(&agent_info).unwrap_or_default(),
            agent_info,
            answer,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn capabilities_are_flags_marked_by_anything_but_null_or_false() {
        let read = Initialized::read(json!({
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": true,
                "sessionCapabilities": {"list": {}, "close": null, "resume": false},
                "promptCapabilities": {"image": true},
                "mcpCapabilities": {"http": true, "sse": false},
                "auth": {"logout": {}}
            }
        }));
        let c = &read.capabilities;
        assert_eq!(c.load_session, Flag(true));
        assert_eq!(
            (c.session_capabilities.list, c.session_capabilities.close),
            (Flag(true), Flag(false))
        );
        assert_eq!(c.session_capabilities.resume, Flag(false));
        assert_eq!(c.prompt_capabilities.image, Flag(true));
        assert_eq!(c.prompt_capabilities.audio, Flag(false));
        assert_eq!(
            (c.mcp_capabilities.http, c.mcp_capabilities.sse),
            (Flag(true), Flag(false))
        );
        assert_eq!(c.auth.logout, Flag(true));
        assert_eq!(read.auth_methods, json!([]));
        assert_eq!(read.protocol_version, json!(1));
    }

    #[test]
    fn an_answer_without_capabilities_or_of_another_shape_has_none() {
        for answer in [json!({}), json!({"agentCapabilities": 7})] {
            let read = Initialized::read(answer);
            assert_eq!(read.capabilities.load_session, Flag(false));
            assert_eq!(read.capabilities.session_capabilities.list, Flag(false));
        }
        // A group of another shape costs only that group.
        let read = Initialized::read(json!({"agentCapabilities":
            {"loadSession": true, "sessionCapabilities": 7, "promptCapabilities": {"image": true}}}));
        assert_eq!(read.capabilities.load_session, Flag(true));
        assert_eq!(read.capabilities.session_capabilities.list, Flag(false));
        assert_eq!(read.capabilities.prompt_capabilities.image, Flag(true));
    }
}
