//! The few fields of an agent's messages that a client reads, each parsed once with serde from
//! the value as received: an update's `sessionUpdate` discriminator and the text of
//! a message chunk, the `stopReason` of a `session/prompt` answer, the `sessionId` of a
//! `session/new` answer, a `usage_update`'s figures. The values themselves go on to Lisp as they came.
//!
//! Lenient, as agents differ: a field of another type counts as absent. It knows no
//! connection and no Lisp.

use serde::Deserialize;
use serde_json::Value;

use super::{Loose, LooseStr, StopReason};

/// An update's `sessionUpdate`: the kinds the client tells apart, every other one by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UpdateKind {
    AgentMessageChunk,
    AgentThoughtChunk,
    UserMessageChunk,
    ToolCall,
    ToolCallUpdate,
    Plan,
    /// Any other discriminator, as sent.
    Other(String),
    /// No `sessionUpdate` string.
    Missing,
}

/// The kinds told apart, by their names on the wire.
const KNOWN: [(&str, UpdateKind); 6] = [
    ("agent_message_chunk", UpdateKind::AgentMessageChunk),
    ("agent_thought_chunk", UpdateKind::AgentThoughtChunk),
    ("user_message_chunk", UpdateKind::UserMessageChunk),
    ("tool_call", UpdateKind::ToolCall),
    ("tool_call_update", UpdateKind::ToolCallUpdate),
    ("plan", UpdateKind::Plan),
];

impl UpdateKind {
    /// The discriminator of `update`.
    pub fn of(update: &Value) -> UpdateKind {
        #[derive(Deserialize)]
        struct Head<'a> {
            #[serde(rename = "sessionUpdate", borrow)]
            session_update: &'a str,
        }
        let Ok(head) = Head::deserialize(update) else {
            return UpdateKind::Missing;
        };
        KNOWN
            .iter()
            .find(|(wire, _)| *wire == head.session_update)
            .map_or_else(
                || UpdateKind::Other(head.session_update.to_owned()),
                |(_, kind)| kind.clone(),
            )
    }

    /// Whether it is a message chunk (the agent's, its thought's, or the user's).
    pub fn is_chunk(&self) -> bool {
        matches!(
            self,
            UpdateKind::AgentMessageChunk
                | UpdateKind::AgentThoughtChunk
                | UpdateKind::UserMessageChunk
        )
    }

    /// The discriminator as on the wire (`tool_call`), empty when there is none.
    pub fn wire(&self) -> &str {
        match self {
            UpdateKind::Other(name) => name.as_str(),
            UpdateKind::Missing => "",
            known => KNOWN
                .iter()
                .find(|(_, kind)| kind == known)
                .map_or("", |(wire, _)| wire),
        }
    }

    /// The discriminator in kebab-case (`tool-call`), `unknown` when there is none: what Lisp
    /// sees as an update's `:kind`.
    pub fn kebab(&self) -> String {
        match self.wire() {
            "" => "unknown".to_owned(),
            wire => wire.replace('_', "-"),
        }
    }
}

/// Whether `update` has a `messageId` member (null counts: it was given).
pub fn has_message_id(update: &Value) -> bool {
    #[derive(Deserialize)]
    struct Head {
        #[serde(rename = "messageId")]
        _message_id: serde::de::IgnoredAny,
    }
    Head::deserialize(update).is_ok()
}

/// The text of a chunk update whose content is a text block (`{content: {type: "text", text}}`).
pub fn chunk_text(update: &Value) -> Option<&str> {
    #[derive(Deserialize)]
    struct Chunk<'a> {
        #[serde(borrow)]
        content: Block<'a>,
    }
    #[derive(Deserialize)]
    struct Block<'a> {
        #[serde(rename = "type", borrow)]
        kind: &'a str,
        #[serde(borrow)]
        text: &'a str,
    }
    Chunk::deserialize(update)
        .ok()
        .filter(|c| c.content.kind == "text")
        .map(|c| c.content.text)
}

/// What a client reads of a tool call (an update's, or a permission request's): each field
/// when it is a string.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallHead<'a> {
    #[serde(borrow, default)]
    tool_call_id: LooseStr<'a>,
    #[serde(borrow, default)]
    title: LooseStr<'a>,
    #[serde(borrow, default)]
    kind: LooseStr<'a>,
}

impl<'a> ToolCallHead<'a> {
    /// The head of `tool_call`; one that is not an object has none of its fields.
    pub fn of(tool_call: &'a Value) -> ToolCallHead<'a> {
        ToolCallHead::deserialize(tool_call).unwrap_or_default()
    }

    pub fn tool_call_id(&self) -> Option<&'a str> {
        self.tool_call_id.get()
    }

    pub fn title(&self) -> Option<&'a str> {
        self.title.get()
    }

    pub fn kind(&self) -> Option<&'a str> {
        self.kind.get()
    }
}

/// The `kind` of a tool call (`read`, `execute`, …), when it has one.
pub fn tool_kind(tool_call: &Value) -> Option<&str> {
    ToolCallHead::of(tool_call).kind()
}

/// The `title` of a tool call, when it has one.
pub fn tool_title(tool_call: &Value) -> Option<&str> {
    ToolCallHead::of(tool_call).title()
}

/// The `stopReason` of a `session/prompt` answer.
pub fn stop_reason(answer: &Value) -> Option<StopReason> {
    #[derive(Deserialize)]
    struct PromptAnswer {
        #[serde(rename = "stopReason")]
        stop_reason: StopReason,
    }
    PromptAnswer::deserialize(answer)
        .ok()
        .map(|a| a.stop_reason)
}

/// What a client shows of a session setup's answer (`session/new`, `load`, `resume`, `fork`):
/// its modes, config options and models, each as sent (null counts as absent).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSetup {
    #[serde(default)]
    pub modes: Option<Value>,
    #[serde(default)]
    pub config_options: Option<Value>,
    #[serde(default)]
    pub models: Option<Value>,
}

impl SessionSetup {
    /// The parts of `answer`; an answer that is not an object has none.
    pub fn read(answer: &Value) -> SessionSetup {
        SessionSetup::deserialize(answer).unwrap_or_default()
    }
}

/// The `sessionId` of a `session/new` answer.
pub fn session_id(answer: &Value) -> Option<&str> {
    #[derive(Deserialize)]
    struct NewSession<'a> {
        #[serde(rename = "sessionId", borrow)]
        session_id: &'a str,
    }
    NewSession::deserialize(answer).ok().map(|a| a.session_id)
}

/// What a `usage_update` says of a session's context: tokens used, the window's size, and the
/// cost so far with its currency, each when reported (and of the right type).
#[derive(Debug, Default, Deserialize)]
pub struct Usage {
    #[serde(default)]
    pub used: Loose<u64>,
    #[serde(default)]
    pub size: Loose<u64>,
    #[serde(default)]
    pub cost: Loose<Cost>,
}

/// A `usage_update`'s cost.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct Cost {
    pub amount: f64,
    pub currency: String,
}

/// The usage a `usage_update` reports; `None` for another update.
pub fn usage(update: &Value) -> Option<Usage> {
    (UpdateKind::of(update) == UpdateKind::Other("usage_update".into()))
        .then(|| Usage::deserialize(update).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kinds_are_read_once_and_named_in_kebab_case() {
        let cases = [
            (
                json!({"sessionUpdate": "tool_call"}),
                UpdateKind::ToolCall,
                "tool-call",
            ),
            (
                json!({"sessionUpdate": "usage_update", "used": 3}),
                UpdateKind::Other("usage_update".into()),
                "usage-update",
            ),
            (json!({"sessionUpdate": 7}), UpdateKind::Missing, "unknown"),
            (json!({}), UpdateKind::Missing, "unknown"),
            (json!([1]), UpdateKind::Missing, "unknown"),
        ];
        for (value, kind, name) in cases {
            assert_eq!(UpdateKind::of(&value), kind, "{value}");
            assert_eq!(kind.kebab(), name);
        }
    }

    #[test]
    fn only_a_text_block_gives_chunk_text() {
        let text = json!({"sessionUpdate": "agent_message_chunk",
                          "content": {"type": "text", "text": "hi \"there\""}});
        assert_eq!(chunk_text(&text), Some("hi \"there\""));
        let image = json!({"content": {"type": "image", "data": "…"}});
        assert_eq!(chunk_text(&image), None);
        assert_eq!(chunk_text(&json!({"content": "hi"})), None);
    }

    #[test]
    fn a_tool_call_head_reads_strings_only() {
        let call = json!({"toolCallId": "c", "title": 5, "kind": "read", "rawInput": {}});
        let head = ToolCallHead::of(&call);
        assert_eq!(
            (head.tool_call_id(), head.title(), head.kind()),
            (Some("c"), None, Some("read"))
        );
        assert_eq!(tool_kind(&json!([1])), None);
    }

    #[test]
    fn answers_give_their_field_or_none() {
        assert_eq!(
            stop_reason(&json!({"stopReason": "end_turn"})),
            Some(StopReason::EndTurn)
        );
        assert_eq!(stop_reason(&json!({"stopReason": null})), None);
        assert_eq!(stop_reason(&json!(null)), None);
        assert_eq!(
            session_id(&json!({"sessionId": "s1", "modes": {}})),
            Some("s1")
        );
        assert_eq!(session_id(&json!({"sessionId": 1})), None);
    }

    #[test]
    fn a_usage_update_gives_its_figures_and_another_update_none() {
        let u = usage(
            &json!({"sessionUpdate": "usage_update", "used": 12, "size": 100,
                               "cost": {"amount": 0.5, "currency": "USD"}}),
        )
        .unwrap();
        assert_eq!((u.used.get(), u.size.get()), (Some(&12), Some(&100)));
        assert_eq!(u.cost.get().map(|c| c.currency.as_str()), Some("USD"));
        let odd = usage(&json!({"sessionUpdate": "usage_update", "used": "many"})).unwrap();
        assert_eq!(odd.used.get(), None);
        assert!(usage(&json!({"sessionUpdate": "plan"})).is_none());
    }
}
