//! The chat-shaped request body, translated into a Responses API body. Pure.
//!
//! - `system` (and `developer`) messages before the first other message become `instructions`
//!   (joined by blank lines); a later one becomes a `developer` message item.
//! - A user message becomes a `message` item whose text and `image_url` parts are `input_text`
//!   and `input_image`.
//! - An assistant message becomes its kept reasoning items ([`ITEMS_KEY`], verbatim and first),
//!   a `message` item with its text as `output_text`, and one `function_call` item per tool call.
//! - A `tool` message becomes a `function_call_output` item.
//! - Tools become `{type: "function", name, description, parameters, strict: false}`.
//! - `store: false`, so nothing is kept on OpenAI's side; for a reasoning model (see
//!   [`super::reasoning_model`]) `include: ["reasoning.encrypted_content"]`, so that its
//!   reasoning comes back encrypted and can be sent on the next request.
//! - Every `llm.extra-body` field goes as it is (`reasoning`, `max_output_tokens`, …).
//!
//! It knows the two shapes, not the network or the settings.

use serde_json::{Map, Value, json};

use super::ITEMS_KEY;
use crate::llm::chat_shape::image_url;

/// Fields of the chat body that are not carried over as they are.
const CHAT_ONLY_KEYS: [&str; 4] = ["messages", "tools", "stream_options", "stream"];

/// The Responses API body for the chat-shaped `body`.
pub fn translate(body: &[u8]) -> Result<Vec<u8>, serde_json::Error> {
    let Value::Object(mut chat) = serde_json::from_slice::<Value>(body)? else {
        return Err(serde::de::Error::custom(
            "the request body is not a JSON object",
        ));
    };
    let messages = match chat.remove("messages") {
        Some(Value::Array(messages)) => messages,
        _ => Vec::new(),
    };
    let tools: Vec<Value> = match chat.remove("tools") {
        Some(Value::Array(tools)) => tools.into_iter().filter_map(tool).collect(),
        _ => Vec::new(),
    };
    let model = chat.get("model").and_then(Value::as_str).unwrap_or("");
    let reasoning = super::reasoning_model(model) || chat.contains_key("reasoning");
    let (instructions, input) = items(messages);
    let mut out = Map::new();
    for (key, value) in chat {
        if !CHAT_ONLY_KEYS.contains(&key.as_str()) {
            out.insert(key, value);
        }
    }
    if !instructions.is_empty() {
        out.insert(
            "instructions".into(),
            Value::String(instructions.join("\n\n")),
        );
    }
    out.insert("input".into(), Value::Array(input));
    if !tools.is_empty() {
        out.insert("tools".into(), Value::Array(tools));
    }
    out.insert("stream".into(), Value::Bool(true));
    out.insert("store".into(), Value::Bool(false));
    if reasoning {
        out.entry("include")
            .or_insert_with(|| json!(["reasoning.encrypted_content"]));
    }
    serde_json::to_vec(&Value::Object(out))
}

/// The instructions and the input items of `messages`.
fn items(messages: Vec<Value>) -> (Vec<String>, Vec<Value>) {
    let mut instructions = Vec::new();
    let mut input = Vec::new();
    for message in messages {
        let Value::Object(mut message) = message else {
            continue;
        };
        match message.get("role").and_then(Value::as_str).unwrap_or("") {
            "system" | "developer" if input.is_empty() => {
                instructions.extend(texts(message.remove("content")));
            }
            "system" | "developer" => {
                let content: Vec<Value> = texts(message.remove("content"))
                    .into_iter()
                    .map(|text| json!({"type": "input_text", "text": text}))
                    .collect();
                if !content.is_empty() {
                    input.push(json!({"type": "message", "role": "developer", "content": content}));
                }
            }
            "assistant" => assistant(message, &mut input),
            "tool" => input.push(json!({
                "type": "function_call_output",
                "call_id": message.remove("tool_call_id").unwrap_or(Value::Null),
                "output": output(message.remove("content")),
            })),
            _ => {
                let content = parts(message.remove("content"));
                if !content.is_empty() {
                    input.push(json!({"type": "message", "role": "user", "content": content}));
                }
            }
        }
    }
    (instructions, input)
}

/// The texts of a content value (a string, or the text parts of a list).
fn texts(content: Option<Value>) -> Vec<String> {
    match content {
        Some(Value::String(text)) if !text.is_empty() => vec![text],
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|part| part.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .filter(|text| !text.is_empty())
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// A user content value as input parts.
fn parts(content: Option<Value>) -> Vec<Value> {
    match content {
        Some(Value::String(text)) if text.is_empty() => Vec::new(),
        Some(Value::String(text)) => vec![json!({"type": "input_text", "text": text})],
        Some(Value::Array(parts)) => parts.into_iter().filter_map(part).collect(),
        _ => Vec::new(),
    }
}

/// One chat content part as an input part.
fn part(part: Value) -> Option<Value> {
    match part.get("type").and_then(Value::as_str).unwrap_or("") {
        "text" => {
            let text = part.get("text").and_then(Value::as_str).unwrap_or("");
            (!text.is_empty()).then(|| json!({"type": "input_text", "text": text}))
        }
        "image_url" => {
            let url = image_url(&part).unwrap_or("");
            Some(json!({"type": "input_image", "image_url": url}))
        }
        _ => Some(part),
    }
}

/// A tool result's output: its text, or input parts when it holds images.
fn output(content: Option<Value>) -> Value {
    match content {
        Some(Value::String(text)) => Value::String(text),
        Some(Value::Array(list)) => Value::Array(list.into_iter().filter_map(part).collect()),
        _ => Value::String(String::new()),
    }
}

/// An assistant message's items: kept reasoning, its text, its calls.
fn assistant(mut message: Map<String, Value>, input: &mut Vec<Value>) {
    let kept = message.remove(ITEMS_KEY);
    let text = texts(message.remove("content")).join("");
    let calls = match message.remove("tool_calls") {
        Some(Value::Array(calls)) => calls,
        _ => Vec::new(),
    };
    // A reasoning item must be followed by what it led to: the items of an answer cut off with
    // neither text nor calls are not sent.
    if let Some(Value::Array(kept)) = kept.filter(|_| !text.is_empty() || !calls.is_empty()) {
        input.extend(kept);
    }
    if !text.is_empty() {
        input.push(json!({"type": "message", "role": "assistant",
            "content": [{"type": "output_text", "text": text}]}));
    }
    input.extend(calls.into_iter().map(|call| {
        json!({
            "type": "function_call",
            "call_id": call.get("id").cloned().unwrap_or(Value::Null),
            "name": call.pointer("/function/name").cloned().unwrap_or(Value::Null),
            "arguments": call.pointer("/function/arguments").cloned()
                .unwrap_or_else(|| json!("")),
        })
    }));
}

/// A chat tool as a Responses API tool.
fn tool(tool: Value) -> Option<Value> {
    let function = tool.get("function")?;
    Some(json!({
        "type": "function",
        "name": function.get("name")?,
        "description": function.get("description").cloned().unwrap_or(json!("")),
        "parameters": function.get("parameters").cloned()
            .unwrap_or_else(|| json!({"type": "object"})),
        // Left out, the Responses API makes the schema strict (every property required): a
        // tool's optional arguments would become mandatory.
        "strict": false,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn translated(chat: Value) -> Value {
        serde_json::from_slice(&translate(chat.to_string().as_bytes()).unwrap()).unwrap()
    }

    #[test]
    fn a_tool_turn_becomes_items_with_the_reasoning_first() {
        let kept = json!([{"type": "reasoning", "id": "rs_1", "summary": [],
                           "encrypted_content": "gAAAA=="}]);
        let chat = json!({"model": "o4-mini", "stream": true,
            "stream_options": {"include_usage": true}, "reasoning": {"effort": "low"},
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}]},
                {"role": "assistant", "content": "Reading.", ITEMS_KEY: kept,
                 "tool_calls": [{"id": "call_1", "type": "function",
                    "function": {"name": "read", "arguments": "{\"path\":\"a\"}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "A"}],
            "tools": [{"type": "function", "function": {"name": "read", "description": "r",
                "parameters": {"type": "object"}}}]});
        let expected = json!({
            "model": "o4-mini", "reasoning": {"effort": "low"}, "instructions": "be brief",
            "stream": true, "store": false, "include": ["reasoning.encrypted_content"],
            "tools": [{"type": "function", "name": "read", "description": "r",
                "parameters": {"type": "object"}, "strict": false}],
            "input": [
                {"type": "message", "role": "user", "content": [
                    {"type": "input_text", "text": "look"},
                    {"type": "input_image", "image_url": "data:image/png;base64,AA"}]},
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA=="},
                {"type": "message", "role": "assistant",
                    "content": [{"type": "output_text", "text": "Reading."}]},
                {"type": "function_call", "call_id": "call_1", "name": "read",
                    "arguments": "{\"path\":\"a\"}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "A"}]});
        assert_eq!(translated(chat), expected);
    }

    #[test]
    fn a_model_that_does_not_reason_is_not_asked_for_encrypted_reasoning() {
        let chat = json!({"model": "gpt-4.1", "messages": [{"role": "user", "content": "hi"},
            {"role": "system", "content": "late"}]});
        let body = translated(chat);
        assert!(body.get("include").is_none(), "{body}");
        assert!(body.get("instructions").is_none(), "{body}");
        assert_eq!(body["input"][1]["role"], "developer");
    }
}
