//! The replay of a stored session: the `session/update` payloads that show its history to a
//! client that loads it.
//!
//! Pure: it reads the entries of a session file and returns payloads; sending them, and which
//! session they belong to, is the caller's business.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{Value, json};

use super::render::stable_order;
use crate::session::entry::{Entry, ToolRecord, lenient};

/// The tool kinds ACP knows.
pub(super) const TOOL_KINDS: &[&str] = &[
    "read",
    "edit",
    "delete",
    "move",
    "search",
    "execute",
    "think",
    "fetch",
    "switch_mode",
    "other",
];

/// The tool kind ACP shows for a built-in tool's name, for replays of sessions stored before
/// tool entries were recorded.
pub(super) fn replay_tool_kind(name: &str) -> &'static str {
    match name {
        "read" => "read",
        "write" | "edit" => "edit",
        "bash" => "execute",
        _ => "other",
    }
}

/// The `session/update` payloads that replay a stored session's history: user messages as
/// user_message_chunk, kept reasoning as agent_thought_chunk, answers as agent_message_chunk,
/// each tool call as a tool_call card and its result as a tool_call_update, completed or failed.
/// The card's title and kind and the failure come from the `tool` entries the loop records
/// ([`Entry::tool_record`]); without one, the card is titled by the tool's name and the result
/// shows as completed. Other entries (values, custom entries, transcript replacements) are not
/// shown.
pub fn replay_updates(entries: &[Entry]) -> Vec<Value> {
    let records: Vec<ToolRecord> = entries.iter().filter_map(Entry::tool_record).collect();
    // The last record of an id wins.
    let tools: HashMap<&str, &ToolRecord> = records
        .iter()
        .filter_map(|r| Some((r.id.as_deref()?, r)))
        .collect();
    let mut out = Vec::new();
    for e in entries {
        let Entry::Message { message } = e else {
            continue;
        };
        let m = StoredMessage::deserialize(message).unwrap_or_default();
        let content = message_text(&m.content);
        match m.role.as_deref() {
            Some("user") => out.push(json!({
                "sessionUpdate": "user_message_chunk", "content": text(&content)})),
            Some("assistant") => assistant_updates(&m, &content, &tools, &mut out),
            Some("tool") => {
                let id = m.tool_call_id.as_deref().unwrap_or_default();
                let failed = tools.get(id).is_some_and(|t| t.error);
                out.push(json!({
                    "sessionUpdate": "tool_call_update", "toolCallId": id,
                    "status": if failed { "failed" } else { "completed" },
                    "content": [{"type": "content", "content": text(&content)}],
                }));
            }
            _ => {}
        }
    }
    out.into_iter()
        .map(|u| stable_order(u, "sessionUpdate"))
        .collect()
}

/// An assistant message's updates: its reasoning, its text, then a card per tool call.
fn assistant_updates(
    m: &StoredMessage,
    content: &str,
    tools: &HashMap<&str, &ToolRecord>,
    out: &mut Vec<Value>,
) {
    let reasoning = [&m.reasoning_content, &m.reasoning]
        .into_iter()
        .flatten()
        .find(|r| !r.is_empty());
    if let Some(r) = reasoning {
        out.push(json!({"sessionUpdate": "agent_thought_chunk", "content": text(r)}));
    }
    if !content.is_empty() {
        out.push(json!({"sessionUpdate": "agent_message_chunk", "content": text(content)}));
    }
    for call in &m.tool_calls {
        let call = StoredCall::deserialize(call).unwrap_or_default();
        let id = call.id.as_deref().unwrap_or_default();
        let name = call.function.name.as_deref().unwrap_or("tool");
        let args = call
            .function
            .arguments
            .as_deref()
            .and_then(|a| serde_json::from_str::<Value>(a).ok())
            .unwrap_or_else(|| json!({}));
        let recorded = tools.get(id);
        let title = recorded
            .and_then(|t| t.title.as_deref())
            .filter(|t| !t.trim().is_empty())
            .unwrap_or(name);
        let kind = recorded
            .and_then(|t| t.kind.as_deref())
            .filter(|k| TOOL_KINDS.contains(k))
            .unwrap_or_else(|| replay_tool_kind(name));
        out.push(json!({
            "sessionUpdate": "tool_call", "toolCallId": id, "title": title,
            "kind": kind, "status": "pending", "rawInput": args,
        }));
    }
}

/// A text content block.
fn text(t: &str) -> Value {
    json!({"type": "text", "text": t})
}

/// The parts of a stored OpenAI message the replay shows, read leniently: a field of an odd type
/// reads as absent, as the replay always treated it.
#[derive(Debug, Default, Deserialize)]
struct StoredMessage {
    #[serde(default, deserialize_with = "lenient")]
    role: Option<String>,
    #[serde(default)]
    content: Value,
    #[serde(default, deserialize_with = "lenient")]
    reasoning_content: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    reasoning: Option<String>,
    /// Each call is read on its own ([`StoredCall`]), so one odd call does not hide the others.
    #[serde(default, deserialize_with = "lenient")]
    tool_calls: Vec<Value>,
    #[serde(default, deserialize_with = "lenient")]
    tool_call_id: Option<String>,
}

/// One tool call of a stored assistant message.
#[derive(Debug, Default, Deserialize)]
struct StoredCall {
    #[serde(default, deserialize_with = "lenient")]
    id: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    function: StoredFunction,
}

#[derive(Debug, Default, Deserialize)]
struct StoredFunction {
    #[serde(default, deserialize_with = "lenient")]
    name: Option<String>,
    /// The arguments as the model sent them: a JSON object in a string.
    #[serde(default, deserialize_with = "lenient")]
    arguments: Option<String>,
}

/// A message's content as text: a string, or the text parts of a list of parts.
pub(super) fn message_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replays_take_titles_kinds_and_failures_from_tool_entries() {
        let message = |message: Value| Entry::Message { message };
        let tool = |data: Value| Entry::Custom {
            kind: "tool".into(),
            data,
        };
        let call = |id: &str, name: &str| {
            json!({"id": id, "type": "function",
                   "function": {"name": name, "arguments": "{\"path\":\"a\"}"}})
        };
        let entries = vec![
            message(json!({"role": "user", "content": "go"})),
            message(json!({"role": "assistant", "content": null,
                           "tool_calls": [call("c1", "read"), call("c2", "edit"), call("c3", "mine")]})),
            tool(
                json!({"id": "c1", "name": "read", "title": "Read a", "kind": "read", "error?": true}),
            ),
            tool(
                json!({"id": "c3", "name": "mine", "title": "Mine a", "kind": "bogus", "error?": false}),
            ),
            message(json!({"role": "tool", "tool_call_id": "c1", "content": "no such file"})),
            message(json!({"role": "tool", "tool_call_id": "c2", "content": "edited"})),
            message(json!({"role": "tool", "tool_call_id": "c3", "content": "ok"})),
        ];
        let updates = replay_updates(&entries);
        let cards: Vec<(&str, &str)> = updates
            .iter()
            .filter(|u| u["sessionUpdate"] == "tool_call")
            .map(|u| (u["title"].as_str().unwrap(), u["kind"].as_str().unwrap()))
            .collect();
        // c2 has no entry (a session stored before they were recorded): named by the tool.
        assert_eq!(
            cards,
            [("Read a", "read"), ("edit", "edit"), ("Mine a", "other")]
        );
        let statuses: Vec<&str> = updates
            .iter()
            .filter(|u| u["sessionUpdate"] == "tool_call_update")
            .map(|u| u["status"].as_str().unwrap())
            .collect();
        assert_eq!(statuses, ["failed", "completed", "completed"]);
    }
}
