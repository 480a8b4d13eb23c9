//! What an agent writes of its own besides the loop's rendered events: the `session/update`s
//! about a session's mode, commands, config options and title, a v2 user message, a terminal in
//! a tool call's card, and the answers that carry data (`session/prompt`'s, a config option's).
//!
//! It knows the shapes, not when they are sent.

use serde::Serialize;
use serde_json::Value;

use super::StopReason;

/// The params of a `session/update` notification: the session, and its update.
#[derive(Debug, Serialize)]
pub struct UpdateParams<'a, U> {
    #[serde(rename = "sessionId")]
    pub session_id: &'a str,
    pub update: U,
}

/// One session update.
#[derive(Debug, Serialize)]
#[serde(tag = "sessionUpdate", rename_all = "snake_case")]
pub enum SessionUpdate<'a> {
    #[serde(rename_all = "camelCase")]
    CurrentModeUpdate {
        current_mode_id: &'a Value,
    },
    #[serde(rename_all = "camelCase")]
    AvailableCommandsUpdate {
        available_commands: &'a Value,
    },
    #[serde(rename_all = "camelCase")]
    ConfigOptionUpdate {
        config_options: &'a Value,
    },
    #[serde(rename_all = "camelCase")]
    SessionInfoUpdate {
        title: &'a str,
        updated_at: &'a str,
    },
    /// v2: the user's whole message, as the prompt sent it.
    #[serde(rename_all = "camelCase")]
    UserMessage {
        message_id: &'a str,
        content: &'a [Value],
    },
    /// A tool call's card changes: its status, its content.
    #[serde(rename_all = "camelCase")]
    ToolCallUpdate {
        tool_call_id: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        status: Option<&'a str>,
        content: Vec<ToolCallContent<'a>>,
    },
    /// A tool call's card as it first shows.
    #[serde(rename_all = "camelCase")]
    ToolCall {
        tool_call_id: &'a str,
        title: &'a str,
        kind: &'a str,
        status: &'a str,
        raw_input: &'a Value,
    },
    UserMessageChunk {
        content: Block<'a>,
    },
    AgentMessageChunk {
        content: Block<'a>,
    },
    AgentThoughtChunk {
        content: Block<'a>,
    },
    Plan {
        entries: Vec<PlanEntry<'a>>,
    },
}

/// A content block an agent writes: text, or an image (base64).
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block<'a> {
    Text {
        text: &'a str,
    },
    #[serde(rename_all = "camelCase")]
    Image {
        mime_type: &'a str,
        data: &'a str,
    },
}

/// One entry of a plan (each member as the plan holds it, null when it has none).
#[derive(Debug, Serialize)]
pub struct PlanEntry<'a> {
    pub content: Option<&'a Value>,
    pub priority: &'a str,
    pub status: Option<&'a Value>,
}

/// Content of a tool call's card that an agent adds itself.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolCallContent<'a> {
    /// The client's terminal the call runs in.
    #[serde(rename_all = "camelCase")]
    Terminal { terminal_id: &'a str },
    /// A content block.
    Content { content: Block<'a> },
    /// A file's change (v1: its path, text before, and after; null when not known).
    #[serde(rename_all = "camelCase")]
    Diff {
        path: Option<&'a Value>,
        old_text: Option<&'a Value>,
        new_text: Option<&'a Value>,
    },
}

/// `value` as JSON.
fn json<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

impl SessionUpdate<'_> {
    pub fn to_value(&self) -> Value {
        json(self)
    }
}

/// The answer to `session/prompt`: how the turn ended, what it used, and oml's own `_meta`.
pub fn prompt_answer(stop: &StopReason, usage: &Value, meta: &Value) -> Value {
    #[derive(Serialize)]
    struct Meta<'a> {
        oml: &'a Value,
    }
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Answer<'a> {
        stop_reason: &'a StopReason,
        usage: &'a Value,
        #[serde(rename = "_meta")]
        meta: Meta<'a>,
    }
    json(&Answer {
        stop_reason: stop,
        usage,
        meta: Meta { oml: meta },
    })
}

/// v2's answer to `session/prompt` once the prompt is taken: the user message's id.
pub fn prompt_taken(message_id: &str) -> Value {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Taken<'a> {
        message_id: &'a str,
    }
    json(&Taken { message_id })
}

/// One session of a `session/list` answer.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo<'a> {
    pub session_id: &'a str,
    pub cwd: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<&'a str>,
    pub updated_at: &'a str,
}

/// A `session/list` answer: one page of sessions, and the cursor of the next when there is one.
pub fn list_answer(sessions: &[SessionInfo<'_>], next_cursor: Option<String>) -> Value {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Answer<'a> {
        sessions: &'a [SessionInfo<'a>],
        #[serde(skip_serializing_if = "Option::is_none")]
        next_cursor: Option<String>,
    }
    json(&Answer {
        sessions,
        next_cursor,
    })
}

/// The answer to `session/set_config_option`: the session's options after the change.
pub fn config_options_answer(options: &Value) -> Value {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Answer<'a> {
        config_options: &'a Value,
    }
    json(&Answer {
        config_options: options,
    })
}

/// ACP's `usage` of a turn: its input, output and total tokens.
pub fn usage(input: u64, output: u64) -> Value {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Usage {
        input_tokens: u64,
        output_tokens: u64,
        total_tokens: u64,
    }
    json(&Usage {
        input_tokens: input,
        output_tokens: output,
        total_tokens: input + output,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn updates_and_answers_are_written_as_the_schema_says() {
        let mode = json!("ask");
        assert_eq!(
            SessionUpdate::CurrentModeUpdate {
                current_mode_id: &mode
            }
            .to_value(),
            json!({"sessionUpdate": "current_mode_update", "currentModeId": "ask"})
        );
        let card = SessionUpdate::ToolCallUpdate {
            tool_call_id: "c",
            status: None,
            content: vec![ToolCallContent::Terminal { terminal_id: "t" }],
        };
        assert_eq!(
            card.to_value(),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c",
                   "content": [{"type": "terminal", "terminalId": "t"}]})
        );
        assert_eq!(
            prompt_answer(&StopReason::EndTurn, &json!({}), &json!({"x": 1})),
            json!({"stopReason": "end_turn", "usage": {}, "_meta": {"oml": {"x": 1}}})
        );
        assert_eq!(
            usage(2, 3),
            json!({"inputTokens": 2, "outputTokens": 3, "totalTokens": 5})
        );
    }
}
