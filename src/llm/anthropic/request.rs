//! The chat-shaped request body, translated into a Messages API body. Pure.
//!
//! - `system` (and `developer`) messages before the first other message become the top-level
//!   `system` blocks; a later one becomes a user text block (the Messages API has no system
//!   turn mid-conversation).
//! - A user message's text and `image_url` parts become `text` and `image` blocks (a `data:`
//!   URL as base64, another URL as `url`); parts of another type pass as they are.
//! - An assistant message becomes its kept thinking blocks ([`THINKING_KEY`], verbatim and
//!   first; a thinking block cut off before its signature is left out), its text, and one
//!   `tool_use` per tool call, whose `input` is the arguments parsed (arguments that are not a
//!   JSON object go as `{"arguments": <the text>}`). Call ids are made valid
//!   (`[A-Za-z0-9_-]`) and unique in the request, and each result refers to its call's.
//! - A `tool` message becomes a `tool_result` block in a user turn.
//! - Consecutive turns of one role are merged (the API alternates roles); turns left empty
//!   are dropped.
//! - Tools become `{name, description, input_schema}`.
//! - With caching, `cache_control: {type: ephemeral}` goes on the last tool, the last system
//!   block and the last block of the last turn: the prefix up to each is cached, and the
//!   rolling breakpoint on the last turn makes the next request's prefix a cache hit.
//! - `max_tokens`, required by the API, is [`DEFAULT_MAX_TOKENS`] unless `llm.extra-body`
//!   gives one; every other extra field (`thinking`, `temperature`, …) goes as it is.
//!
//! It knows the two shapes, not the network or the settings.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value, json};

use super::{DEFAULT_MAX_TOKENS, THINKING_KEY};
use crate::llm::chat_shape::{image_url, inline_data};

/// Fields of the chat body that are not carried over as they are.
const CHAT_ONLY_KEYS: [&str; 5] = ["messages", "tools", "stream_options", "stream", "model"];

/// The Messages API body for the chat-shaped `body` (the bytes `request::encode_body_with`
/// made), with cache breakpoints when `caching`.
pub fn translate(body: &[u8], caching: bool) -> Result<Vec<u8>, serde_json::Error> {
    let Value::Object(mut chat) = serde_json::from_slice::<Value>(body)? else {
        return Err(serde::de::Error::custom(
            "the request body is not a JSON object",
        ));
    };
    let messages = match chat.remove("messages") {
        Some(Value::Array(messages)) => messages,
        _ => Vec::new(),
    };
    let tools = match chat.remove("tools") {
        Some(Value::Array(tools)) => tools,
        _ => Vec::new(),
    };
    let mut out = Map::new();
    out.insert("model".into(), chat.remove("model").unwrap_or(Value::Null));
    let (mut system, mut turns) = turns(messages);
    let mut tools: Vec<Value> = tools.into_iter().filter_map(tool).collect();
    if caching {
        mark_last(&mut tools);
        mark_last(&mut system);
        if let Some(Value::Array(blocks)) = turns.last_mut().and_then(|t| t.get_mut("content")) {
            mark_last_cacheable(blocks);
        }
    }
    if !system.is_empty() {
        out.insert("system".into(), Value::Array(system));
    }
    out.insert("messages".into(), Value::Array(turns));
    if !tools.is_empty() {
        out.insert("tools".into(), Value::Array(tools));
    }
    out.insert("stream".into(), Value::Bool(true));
    for (key, value) in chat {
        if !CHAT_ONLY_KEYS.contains(&key.as_str()) {
            out.insert(key, value);
        }
    }
    out.entry("max_tokens")
        .or_insert_with(|| json!(DEFAULT_MAX_TOKENS));
    serde_json::to_vec(&Value::Object(out))
}

/// The system blocks and the alternating turns of `messages`.
fn turns(messages: Vec<Value>) -> (Vec<Value>, Vec<Value>) {
    let mut system = Vec::new();
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    let mut ids = Ids::default();
    for message in messages {
        let Value::Object(mut message) = message else {
            continue;
        };
        let role = message.get("role").and_then(Value::as_str).unwrap_or("");
        let (role, blocks) = match role {
            "system" | "developer" if turns.is_empty() => {
                system.extend(text_blocks(message.remove("content")));
                continue;
            }
            "system" | "developer" => ("user", text_blocks(message.remove("content"))),
            "assistant" => ("assistant", assistant_blocks(message, &mut ids)),
            "tool" => ("user", vec![tool_result(message, &ids)]),
            _ => ("user", user_blocks(message.remove("content"))),
        };
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last, content)) if *last == role => content.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    let turns = turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    (system, turns)
}

/// A content value (a string, or a list of parts) as text blocks only.
fn text_blocks(content: Option<Value>) -> Vec<Value> {
    user_blocks(content)
        .into_iter()
        .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
        .collect()
}

/// A user content value as blocks: text, images, and other parts as they are.
fn user_blocks(content: Option<Value>) -> Vec<Value> {
    match content {
        Some(Value::String(text)) if text.is_empty() => Vec::new(),
        Some(Value::String(text)) => vec![json!({"type": "text", "text": text})],
        Some(Value::Array(parts)) => parts.into_iter().filter_map(part).collect(),
        _ => Vec::new(),
    }
}

/// One chat content part as a block; `None` for an empty text.
fn part(part: Value) -> Option<Value> {
    let kind = part.get("type").and_then(Value::as_str).unwrap_or("");
    match kind {
        "text" => {
            let text = part.get("text").and_then(Value::as_str).unwrap_or("");
            (!text.is_empty()).then(|| json!({"type": "text", "text": text}))
        }
        "image_url" => Some(image(image_url(&part).unwrap_or(""))),
        _ => Some(part),
    }
}

/// An image block for a chat image URL.
fn image(url: &str) -> Value {
    match inline_data(url) {
        Some((media_type, data)) => json!({"type": "image", "source": {
            "type": "base64", "media_type": media_type, "data": data}}),
        None => json!({"type": "image", "source": {"type": "url", "url": url}}),
    }
}

/// An assistant message's blocks: kept thinking (a thinking block cut off before its signature
/// is not sent: the API takes back only signed ones), text, tool uses.
fn assistant_blocks(mut message: Map<String, Value>, ids: &mut Ids) -> Vec<Value> {
    let mut blocks: Vec<Value> = match message.remove(THINKING_KEY) {
        Some(Value::Array(thinking)) => thinking.into_iter().filter(signed).collect(),
        _ => Vec::new(),
    };
    blocks.extend(text_blocks(message.remove("content")));
    if let Some(Value::Array(calls)) = message.remove("tool_calls") {
        blocks.extend(calls.into_iter().map(|call| tool_use(call, ids)));
    }
    blocks
}

/// Whether a kept block can go back: redacted thinking always, thinking with its signature.
fn signed(block: &Value) -> bool {
    block.get("type").and_then(Value::as_str) != Some("thinking")
        || block
            .get("signature")
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty())
}

/// A chat tool call as a `tool_use` block.
fn tool_use(call: Value, ids: &mut Ids) -> Value {
    let id = ids.assign(call.get("id").and_then(Value::as_str).unwrap_or(""));
    let name = call
        .pointer("/function/name")
        .cloned()
        .unwrap_or(Value::Null);
    let arguments = call
        .pointer("/function/arguments")
        .and_then(Value::as_str)
        .unwrap_or("");
    let input = match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(input)) => Value::Object(input),
        _ if arguments.trim().is_empty() => json!({}),
        _ => json!({ "arguments": arguments }),
    };
    json!({"type": "tool_use", "id": id, "name": name, "input": input})
}

/// A chat `tool` message as a `tool_result` block.
fn tool_result(mut message: Map<String, Value>, ids: &Ids) -> Value {
    let id = ids.of(message
        .get("tool_call_id")
        .and_then(Value::as_str)
        .unwrap_or(""));
    let content = match message.remove("content") {
        Some(Value::Array(parts)) => Value::Array(parts.into_iter().filter_map(part).collect()),
        Some(Value::String(text)) => Value::String(text),
        _ => Value::String(String::new()),
    };
    json!({"type": "tool_result", "tool_use_id": id, "content": content})
}

/// The tool-use ids of one request: the API takes only `[A-Za-z0-9_-]` and each id once, while a
/// transcript may hold ids of another protocol (`functions.x:0`) or the same `call_0` in every
/// reply (Gemini's calls have none of their own). Each call gets a valid id unique in the
/// request, and its result the id its call got.
#[derive(Default)]
struct Ids {
    used: HashSet<String>,
    current: HashMap<String, String>,
}

impl Ids {
    /// The id for a call whose transcript id is `id`.
    fn assign(&mut self, id: &str) -> String {
        let base: String = id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let base = if base.is_empty() {
            "toolu".to_owned()
        } else {
            base
        };
        let mut unique = base.clone();
        let mut n = 1;
        while !self.used.insert(unique.clone()) {
            n += 1;
            unique = format!("{base}_{n}");
        }
        self.current.insert(id.to_owned(), unique.clone());
        unique
    }

    /// The id a result for transcript id `id` refers to: its latest call's.
    fn of(&self, id: &str) -> String {
        self.current
            .get(id)
            .cloned()
            .unwrap_or_else(|| id.to_owned())
    }
}

/// A chat tool as a Messages API tool.
fn tool(tool: Value) -> Option<Value> {
    let function = tool.get("function")?;
    Some(json!({
        "name": function.get("name")?,
        "description": function.get("description").cloned().unwrap_or(json!("")),
        "input_schema": function.get("parameters").cloned()
            .unwrap_or_else(|| json!({"type": "object"})),
    }))
}

/// Put a cache breakpoint on the last of `blocks`.
fn mark_last(blocks: &mut [Value]) {
    if let Some(Value::Object(block)) = blocks.last_mut() {
        block.insert("cache_control".into(), json!({"type": "ephemeral"}));
    }
}

/// Put a cache breakpoint on the last block that may carry one (not a thinking block).
fn mark_last_cacheable(blocks: &mut [Value]) {
    let cacheable = blocks.iter_mut().rev().find(|block| {
        !matches!(
            block.get("type").and_then(Value::as_str),
            Some("thinking" | "redacted_thinking")
        )
    });
    if let Some(Value::Object(block)) = cacheable {
        block.insert("cache_control".into(), json!({"type": "ephemeral"}));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn translated(chat: Value, caching: bool) -> Value {
        let bytes = translate(chat.to_string().as_bytes(), caching).unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[test]
    fn a_tool_turn_becomes_blocks_with_breakpoints() {
        let thinking = json!([{"type": "thinking", "thinking": "hm", "signature": "c2ln"}]);
        let chat = json!({
            "model": "claude-x", "stream": true, "stream_options": {"include_usage": true},
            "temperature": 0.2,
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
                {"role": "assistant", "content": null, THINKING_KEY: thinking,
                 "tool_calls": [{"id": "t1", "type": "function",
                    "function": {"name": "read", "arguments": "{\"path\":\"a\"}"}},
                    {"id": "t2", "type": "function",
                    "function": {"name": "read", "arguments": "not json"}}]},
                {"role": "tool", "tool_call_id": "t1", "content": "A"},
                {"role": "tool", "tool_call_id": "t2", "content": "B"}],
            "tools": [{"type": "function", "function": {"name": "read", "description": "r",
                "parameters": {"type": "object"}}}]});
        let body = translated(chat, true);
        let expected = json!({
            "model": "claude-x", "stream": true, "temperature": 0.2,
            "max_tokens": DEFAULT_MAX_TOKENS,
            "system": [{"type": "text", "text": "be brief",
                "cache_control": {"type": "ephemeral"}}],
            "tools": [{"name": "read", "description": "r", "input_schema": {"type": "object"},
                "cache_control": {"type": "ephemeral"}}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "look"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                        "data": "AAAA"}}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hm", "signature": "c2ln"},
                    {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a"}},
                    {"type": "tool_use", "id": "t2", "name": "read",
                        "input": {"arguments": "not json"}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "A"},
                    {"type": "tool_result", "tool_use_id": "t2", "content": "B",
                        "cache_control": {"type": "ephemeral"}}]}]});
        assert_eq!(body, expected);
    }

    #[test]
    fn without_caching_there_is_no_breakpoint_and_extra_max_tokens_wins() {
        let chat = json!({"model": "m", "max_tokens": 100,
            "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}]});
        let body = translated(chat, false);
        assert!(!body.to_string().contains("cache_control"), "{body}");
        assert_eq!(body["max_tokens"], 100);
    }

    #[test]
    fn a_late_system_message_is_a_user_block_and_empty_turns_go() {
        let chat = json!({"model": "m", "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": ""},
            {"role": "system", "content": "note"},
            {"role": "user", "content": "again"}]});
        let body = translated(chat, false);
        assert_eq!(
            body["messages"],
            json!([{"role": "user", "content": [
            {"type": "text", "text": "hi"}, {"type": "text", "text": "note"},
            {"type": "text", "text": "again"}]}])
        );
        assert!(body.get("system").is_none());
    }

    #[test]
    fn the_last_breakpoint_skips_a_trailing_thinking_block() {
        let mut blocks = vec![
            json!({"type": "text", "text": "a"}),
            json!({"type": "redacted_thinking", "data": "x"}),
        ];
        mark_last_cacheable(&mut blocks);
        assert!(blocks[0].get("cache_control").is_some());
        assert!(blocks[1].get("cache_control").is_none());
    }

    #[test]
    fn repeated_and_foreign_call_ids_become_unique_valid_ones_and_unsigned_thinking_goes() {
        let call = |id: &str| {
            json!({"id": id, "type": "function",
            "function": {"name": "ls", "arguments": "{}"}})
        };
        let chat = json!({"model": "m", "messages": [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": null, "tool_calls": [call("call_0")],
             THINKING_KEY: [{"type": "thinking", "thinking": "cut", "signature": ""}]},
            {"role": "tool", "tool_call_id": "call_0", "content": "1"},
            {"role": "assistant", "content": null, "tool_calls": [call("call_0"), call("functions.ls:1")]},
            {"role": "tool", "tool_call_id": "call_0", "content": "2"},
            {"role": "tool", "tool_call_id": "functions.ls:1", "content": "3"}]});
        let body = translated(chat, false);
        let m = &body["messages"];
        assert_eq!(
            m[1]["content"].as_array().unwrap().len(),
            1,
            "the unsigned thinking went"
        );
        assert_eq!(m[1]["content"][0]["id"], "call_0");
        assert_eq!(m[2]["content"][0]["tool_use_id"], "call_0");
        assert_eq!(m[3]["content"][0]["id"], "call_0_2");
        assert_eq!(m[3]["content"][1]["id"], "functions_ls_1");
        assert_eq!(m[4]["content"][0]["tool_use_id"], "call_0_2");
        assert_eq!(m[4]["content"][1]["tool_use_id"], "functions_ls_1");
    }

    #[test]
    fn a_url_image_stays_a_url() {
        assert_eq!(
            image("https://x/y.png"),
            json!({"type": "image", "source": {"type": "url", "url": "https://x/y.png"}})
        );
    }

    #[test]
    fn a_body_that_is_not_an_object_is_an_error() {
        assert!(translate(b"[1]", true).is_err());
        assert!(translate(b"{", true).is_err());
    }
}
