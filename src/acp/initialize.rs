//! v1's answer to `initialize`, as an agent writes it: the version, the capabilities, the auth
//! methods and who the agent is. `oml acp` answers with it, and the client's v2 decoder writes a
//! v2 agent's answer in it.
//!
//! It knows the shape, not what an agent offers.

use serde::Serialize;
use serde_json::Value;

use super::requests::Offered;

/// The answer.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeAnswer {
    pub protocol_version: u64,
    pub agent_capabilities: AgentCapabilities,
    pub auth_methods: Value,
    pub agent_info: Value,
}

/// What an agent offers.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCapabilities {
    pub load_session: bool,
    pub session_capabilities: SessionCapabilities,
    pub prompt_capabilities: PromptCapabilities,
    pub mcp_capabilities: McpCapabilities,
}

/// The session methods beyond `new` and `prompt` an agent offers (each `{}` when it does).
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionCapabilities {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub list: Option<Offered>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resume: Option<Offered>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub close: Option<Offered>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delete: Option<Offered>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fork: Option<Offered>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_directories: Option<Offered>,
}

/// The content a prompt may carry besides text.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptCapabilities {
    pub image: bool,
    pub audio: bool,
    pub embedded_context: bool,
}

/// The MCP transports an agent connects besides stdio.
#[derive(Debug, Serialize)]
pub struct McpCapabilities {
    pub http: bool,
    pub sse: bool,
}

/// `Some(Offered)` when `offered`.
pub fn offered(offered: bool) -> Option<Offered> {
    offered.then_some(Offered {})
}

impl InitializeAnswer {
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_answer_is_written_as_the_schema_says() {
        let answer = InitializeAnswer {
            protocol_version: 1,
            agent_capabilities: AgentCapabilities {
                load_session: true,
                session_capabilities: SessionCapabilities {
                    list: offered(true),
                    ..SessionCapabilities::default()
                },
                prompt_capabilities: PromptCapabilities {
                    image: true,
                    audio: false,
                    embedded_context: false,
                },
                mcp_capabilities: McpCapabilities {
                    http: false,
                    sse: false,
                },
            },
            auth_methods: json!([]),
            agent_info: Value::Null,
        };
        assert_eq!(
            answer.to_value(),
            json!({"protocolVersion": 1, "agentCapabilities": {"loadSession": true,
                "sessionCapabilities": {"list": {}},
                "promptCapabilities": {"image": true, "audio": false, "embeddedContext": false},
                "mcpCapabilities": {"http": false, "sse": false}},
                "authMethods": [], "agentInfo": null})
        );
    }
}
