//! The replay of a stored session: the `session/update` payloads that show its history to a
//! client that loads it.
//!
//! Pure: it reads the entries of a session file and returns payloads; sending them, and which
//! session they belong to, is the caller's business.

use serde_json::{Value, json};

use super::render::stable_order;

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
/// (`{"type":"custom","kind":"tool","data":{id,name,title,kind,error?}}`); without one, the card is
/// titled by the tool's name and the result shows as completed. Other entries (values, custom
/// entries, transcript replacements) are not shown.
pub fn replay_updates(entries: &[Value]) -> Vec<Value> {
    let text = |t: &str| json!({"type": "text", "text": t});
    let mut out = Vec::new();
    let mut names: std::collections::HashMap<String, String> = Default::default();
    let tools: std::collections::HashMap<&str, &Value> = entries
        .iter()
        .filter(|e| e["type"] == "custom" && e["kind"] == "tool")
        .filter_map(|e| Some((e["data"]["id"].as_str()?, &e["data"])))
        .collect();
    for e in entries {
        if e.get("type").and_then(Value::as_str) != Some("message") {
            continue;
        }
        let m = &e["message"];
        let content = message_text(&m["content"]);
        match m["role"].as_str() {
            Some("user") => out.push(json!({
                "sessionUpdate": "user_message_chunk", "content": text(&content)})),
            Some("assistant") => {
                for key in ["reasoning_content", "reasoning"] {
                    if let Some(r) = m.get(key).and_then(Value::as_str).filter(|r| !r.is_empty()) {
                        out.push(
                            json!({"sessionUpdate": "agent_thought_chunk", "content": text(r)}),
                        );
                        break;
                    }
                }
                if !content.is_empty() {
                    out.push(
                        json!({"sessionUpdate": "agent_message_chunk", "content": text(&content)}),
                    );
                }
                for call in m["tool_calls"].as_array().into_iter().flatten() {
                    let id = call["id"].as_str().unwrap_or_default();
                    let name = call["function"]["name"].as_str().unwrap_or("tool");
                    names.insert(id.to_owned(), name.to_owned());
                    let args = call["function"]["arguments"]
                        .as_str()
                        .and_then(|a| serde_json::from_str::<Value>(a).ok())
                        .unwrap_or_else(|| json!({}));
                    let recorded = tools.get(id);
                    let title = recorded
                        .and_then(|t| t["title"].as_str())
                        .filter(|t| !t.trim().is_empty())
                        .unwrap_or(name);
                    let kind = recorded
                        .and_then(|t| t["kind"].as_str())
                        .filter(|k| TOOL_KINDS.contains(k))
                        .unwrap_or_else(|| replay_tool_kind(name));
                    out.push(json!({
                        "sessionUpdate": "tool_call", "toolCallId": id, "title": title,
                        "kind": kind, "status": "pending", "rawInput": args,
                    }));
                }
            }
            Some("tool") => {
                let id = m["tool_call_id"].as_str().unwrap_or_default();
                let failed = tools.get(id).is_some_and(|t| t["error?"] == true);
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
        let message = |m: Value| json!({"type": "message", "message": m});
        let call = |id: &str, name: &str| {
            json!({"id": id, "type": "function",
                   "function": {"name": name, "arguments": "{\"path\":\"a\"}"}})
        };
        let entries = vec![
            message(json!({"role": "user", "content": "go"})),
            message(json!({"role": "assistant", "content": null,
                           "tool_calls": [call("c1", "read"), call("c2", "edit"), call("c3", "mine")]})),
            json!({"type": "custom", "kind": "tool",
                   "data": {"id": "c1", "name": "read", "title": "Read a", "kind": "read", "error?": true}}),
            json!({"type": "custom", "kind": "tool",
                   "data": {"id": "c3", "name": "mine", "title": "Mine a", "kind": "bogus", "error?": false}}),
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
