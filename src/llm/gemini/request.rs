//! The chat-shaped request body, translated into a Gemini `streamGenerateContent` body. Pure.
//!
//! - `system` (and `developer`) messages before the first other message become
//!   `systemInstruction`; a later one becomes user text.
//! - A user message becomes a `user` content whose text and images are `text` and
//!   `inlineData` parts (a `data:` URL) or `fileData` parts (another URL).
//! - An assistant message becomes a `model` content: its text, then one `functionCall` part per
//!   tool call (`args` parsed; arguments that are not a JSON object go as
//!   `{"arguments": <the text>}`), each with the thought signature kept for it
//!   ([`SIGNATURES_KEY`]).
//! - A `tool` message becomes a `functionResponse` part (`response: {"result": <its text>}`),
//!   named after the call it answers, followed by its images as `inlineData` parts.
//! - Consecutive contents of one role are merged (parallel calls' responses go in one turn).
//! - Tools become one `functionDeclarations` list, their schemas converted
//!   ([`super::schema::convert`]).
//! - Every `llm.extra-body` field goes as it is (`generationConfig`, `safetySettings`, …).
//!
//! The model is not in the body: it is part of the URL, so it is returned beside the body.
//!
//! It knows the two shapes, not the network or the settings.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::SIGNATURES_KEY;
use crate::llm::chat_shape::{image_url, inline_data};

/// Fields of the chat body that are not carried over as they are.
const CHAT_ONLY_KEYS: [&str; 5] = ["messages", "tools", "stream_options", "stream", "model"];

/// The Gemini body for the chat-shaped `body`, and the model it names.
pub fn translate(body: &[u8]) -> Result<(Vec<u8>, String), serde_json::Error> {
    let Value::Object(mut chat) = serde_json::from_slice::<Value>(body)? else {
        return Err(serde::de::Error::custom(
            "the request body is not a JSON object",
        ));
    };
    let model = chat
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("")
        .trim_start_matches("models/")
        .to_owned();
    let messages = match chat.remove("messages") {
        Some(Value::Array(messages)) => messages,
        _ => Vec::new(),
    };
    let declarations: Vec<Value> = match chat.remove("tools") {
        Some(Value::Array(tools)) => tools.iter().filter_map(declaration).collect(),
        _ => Vec::new(),
    };
    let (system, contents) = contents(messages);
    let mut out = Map::new();
    if !system.is_empty() {
        out.insert("systemInstruction".into(), json!({"parts": system}));
    }
    out.insert("contents".into(), Value::Array(contents));
    if !declarations.is_empty() {
        out.insert(
            "tools".into(),
            json!([{"functionDeclarations": declarations}]),
        );
    }
    for (key, value) in chat {
        if !CHAT_ONLY_KEYS.contains(&key.as_str()) {
            out.insert(key, value);
        }
    }
    Ok((serde_json::to_vec(&Value::Object(out))?, model))
}

/// The system parts and the merged contents of `messages`.
fn contents(messages: Vec<Value>) -> (Vec<Value>, Vec<Value>) {
    let mut system = Vec::new();
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    let mut names: HashMap<String, String> = HashMap::new();
    for message in messages {
        let Value::Object(mut message) = message else {
            continue;
        };
        let role = message.get("role").and_then(Value::as_str).unwrap_or("");
        let (role, parts) = match role {
            "system" | "developer" if turns.is_empty() => {
                system.extend(text_parts(message.remove("content")));
                continue;
            }
            "system" | "developer" => ("user", text_parts(message.remove("content"))),
            "assistant" => ("model", model_parts(message, &mut names)),
            "tool" => ("user", function_response(message, &names)),
            _ => ("user", user_parts(message.remove("content"))),
        };
        if parts.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last, content)) if *last == role => content.extend(parts),
            _ => turns.push((role, parts)),
        }
    }
    let turns = turns
        .into_iter()
        .map(|(role, parts)| json!({"role": role, "parts": parts}))
        .collect();
    (system, turns)
}

/// The text parts of a content value.
fn text_parts(content: Option<Value>) -> Vec<Value> {
    user_parts(content)
        .into_iter()
        .filter(|part| part.get("text").is_some())
        .collect()
}

/// A user content value as parts: text and images.
fn user_parts(content: Option<Value>) -> Vec<Value> {
    match content {
        Some(Value::String(text)) if text.is_empty() => Vec::new(),
        Some(Value::String(text)) => vec![json!({ "text": text })],
        Some(Value::Array(parts)) => parts.iter().filter_map(part).collect(),
        _ => Vec::new(),
    }
}

/// One chat content part as a Gemini part; `None` for an empty text or an unknown part.
fn part(part: &Value) -> Option<Value> {
    match part.get("type").and_then(Value::as_str)? {
        "text" => {
            let text = part.get("text").and_then(Value::as_str).unwrap_or("");
            (!text.is_empty()).then(|| json!({ "text": text }))
        }
        "image_url" => {
            let url = image_url(part)?;
            Some(match inline_data(url) {
                Some((mime, data)) => json!({"inlineData": {"mimeType": mime, "data": data}}),
                None => json!({"fileData": {"fileUri": url}}),
            })
        }
        _ => None,
    }
}

/// An assistant message's parts: text, then calls with their kept signatures.
fn model_parts(mut message: Map<String, Value>, names: &mut HashMap<String, String>) -> Vec<Value> {
    let signatures = message.remove(SIGNATURES_KEY).unwrap_or(Value::Null);
    let mut parts = text_parts(message.remove("content"));
    if let (Some(Value::Object(first)), Some(signature)) = (
        parts.first_mut(),
        signatures.get("text").filter(|s| s.is_string()),
    ) {
        first.insert("thoughtSignature".into(), signature.clone());
    }
    let Some(Value::Array(calls)) = message.remove("tool_calls") else {
        return parts;
    };
    for (index, call) in calls.iter().enumerate() {
        let name = call
            .pointer("/function/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        if let Some(id) = call.get("id").and_then(Value::as_str) {
            names.insert(id.to_owned(), name.to_owned());
        }
        let arguments = call
            .pointer("/function/arguments")
            .and_then(Value::as_str)
            .unwrap_or("");
        let args = match serde_json::from_str::<Value>(arguments) {
            Ok(Value::Object(args)) => Value::Object(args),
            _ if arguments.trim().is_empty() => json!({}),
            _ => json!({ "arguments": arguments }),
        };
        let mut part = json!({"functionCall": {"name": name, "args": args}});
        if let Some(signature) = signatures
            .pointer(&format!("/calls/{index}"))
            .filter(|s| s.is_string())
        {
            part["thoughtSignature"] = signature.clone();
        }
        parts.push(part);
    }
    parts
}

/// A `tool` message as a `functionResponse` part, named after its call, then its images as
/// `inlineData` parts of the same turn (a function response holds text only).
fn function_response(
    mut message: Map<String, Value>,
    names: &HashMap<String, String>,
) -> Vec<Value> {
    let id = message
        .get("tool_call_id")
        .and_then(Value::as_str)
        .unwrap_or("");
    let name = names.get(id).map_or("", String::as_str);
    let (result, images) = match message.remove("content") {
        Some(Value::String(text)) => (text, Vec::new()),
        Some(Value::Array(list)) => {
            let parts: Vec<Value> = list.iter().filter_map(part).collect();
            let (texts, images): (Vec<Value>, Vec<Value>) =
                parts.into_iter().partition(|p| p.get("text").is_some());
            let texts: Vec<&str> = texts.iter().filter_map(|p| p["text"].as_str()).collect();
            (texts.join("\n"), images)
        }
        _ => (String::new(), Vec::new()),
    };
    let mut parts =
        vec![json!({"functionResponse": {"name": name, "response": {"result": result}}})];
    parts.extend(images);
    parts
}

/// A chat tool as a function declaration.
fn declaration(tool: &Value) -> Option<Value> {
    let function = tool.get("function")?;
    let mut out = json!({
        "name": function.get("name")?,
        "description": function.get("description").cloned().unwrap_or(json!("")),
    });
    if let Some(parameters) = function.get("parameters") {
        out["parameters"] = super::schema::convert(parameters);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_turn_becomes_contents_with_signatures_and_named_responses() {
        let chat = json!({"model": "models/gemini-x", "stream": true,
            "generationConfig": {"temperature": 0.1},
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}]},
                {"role": "assistant", "content": "Reading.",
                 SIGNATURES_KEY: {"text": "dGV4dA==", "calls": ["Y2FsbDA=", null]},
                 "tool_calls": [
                    {"id": "call_0", "type": "function",
                     "function": {"name": "read", "arguments": "{\"path\":\"a\"}"}},
                    {"id": "call_1", "type": "function",
                     "function": {"name": "ls", "arguments": ""}}]},
                {"role": "tool", "tool_call_id": "call_0", "content": "A"},
                {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "B"},
                    {"type": "image_url", "image_url": {"url": "data:image/gif;base64,R0"}}]}],
            "tools": [{"type": "function", "function": {"name": "read", "description": "r",
                "parameters": {"type": "object", "additionalProperties": false}}}]});
        let (bytes, model) = translate(chat.to_string().as_bytes()).unwrap();
        assert_eq!(model, "gemini-x");
        let body: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            body,
            json!({
            "systemInstruction": {"parts": [{"text": "be brief"}]},
            "generationConfig": {"temperature": 0.1},
            "tools": [{"functionDeclarations": [{"name": "read", "description": "r",
                "parameters": {"type": "object"}}]}],
            "contents": [
                {"role": "user", "parts": [{"text": "look"},
                    {"inlineData": {"mimeType": "image/png", "data": "AA"}}]},
                {"role": "model", "parts": [
                    {"text": "Reading.", "thoughtSignature": "dGV4dA=="},
                    {"functionCall": {"name": "read", "args": {"path": "a"}},
                     "thoughtSignature": "Y2FsbDA="},
                    {"functionCall": {"name": "ls", "args": {}}}]},
                {"role": "user", "parts": [
                    {"functionResponse": {"name": "read", "response": {"result": "A"}}},
                    {"functionResponse": {"name": "ls", "response": {"result": "B"}}},
                    {"inlineData": {"mimeType": "image/gif", "data": "R0"}}]}]})
        );
    }
}
