//! The stored OpenAI messages of a session file as readers see them: [`StoredMessage`] and its
//! calls, read leniently (a field of an odd type reads as absent, never an error), with the
//! text and the images of a message's content, and the `tool` records matched to the calls
//! they belong to ([`ToolRecords`]). The ACP replay and the trajectory export read messages
//! through these, never by key.
//!
//! It knows nothing of how a message was made or of what shows it.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::Value;

use super::entry::{Entry, ToolRecord, lenient};

/// The parts of a stored OpenAI message its readers use.
#[derive(Debug, Default, Deserialize)]
pub struct StoredMessage {
    #[serde(default, deserialize_with = "lenient")]
    pub role: Option<String>,
    #[serde(default)]
    pub content: Value,
    #[serde(default, deserialize_with = "lenient")]
    pub reasoning_content: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub reasoning: Option<String>,
    /// Each call is read on its own ([`StoredCall`]), so one odd call does not hide the others.
    #[serde(default, deserialize_with = "lenient")]
    pub tool_calls: Vec<Value>,
    #[serde(default, deserialize_with = "lenient")]
    pub tool_call_id: Option<String>,
}

impl StoredMessage {
    /// `message` read leniently: anything but an object is a message of no role.
    pub fn of(message: &Value) -> StoredMessage {
        StoredMessage::deserialize(message).unwrap_or_default()
    }

    /// The reasoning the message keeps (`reasoning_content`, else `reasoning`), when not empty.
    pub fn reasoning(&self) -> Option<&str> {
        [&self.reasoning_content, &self.reasoning]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .find(|r| !r.is_empty())
    }

    /// The message's calls, each read on its own.
    pub fn calls(&self) -> impl Iterator<Item = StoredCall> + '_ {
        self.tool_calls
            .iter()
            .map(|c| StoredCall::deserialize(c).unwrap_or_default())
    }
}

/// One tool call of a stored assistant message.
#[derive(Debug, Default, Deserialize)]
pub struct StoredCall {
    #[serde(default, deserialize_with = "lenient")]
    pub id: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub function: StoredFunction,
}

impl StoredCall {
    /// The call's arguments as the JSON value the model's string holds; `None` when they are
    /// absent or not JSON.
    pub fn arguments(&self) -> Option<Value> {
        let text = self.function.arguments.as_deref()?;
        serde_json::from_str(text).ok()
    }
}

#[derive(Debug, Default, Deserialize)]
pub struct StoredFunction {
    #[serde(default, deserialize_with = "lenient")]
    pub name: Option<String>,
    /// The arguments as the model sent them: a JSON object in a string.
    #[serde(default, deserialize_with = "lenient")]
    pub arguments: Option<String>,
}

/// The `image_url` parts of a message's content with data URLs: each image's MIME type and
/// base64 data.
pub fn images(content: &Value) -> Vec<(&str, &str)> {
    let Value::Array(parts) = content else {
        return Vec::new();
    };
    parts
        .iter()
        .filter_map(|p| p.pointer("/image_url/url").and_then(Value::as_str))
        .filter_map(|url| url.strip_prefix("data:")?.split_once(";base64,"))
        .collect()
}

/// A message's content as text: a string, or the text parts of a list of parts.
pub fn message_text(content: &Value) -> String {
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

/// The `tool` records of a file matched to the calls of the assistant message they belong to:
/// the loop writes a turn's records before its messages, so the records since the last
/// assistant message are the next one's. An id a provider uses again in a later turn thus gets
/// its own record.
#[derive(Debug, Default)]
pub struct ToolRecords {
    /// Records since the last assistant message.
    pending: HashMap<String, ToolRecord>,
    /// The records of the last assistant message's calls.
    current: HashMap<String, ToolRecord>,
}

impl ToolRecords {
    /// Keep `e` when it is a tool record; whether it was one.
    pub fn take(&mut self, e: &Entry) -> bool {
        let Some(record) = e.tool_record() else {
            return false;
        };
        if let Some(id) = record.id.clone() {
            self.pending.insert(id, record);
        }
        true
    }

    /// An assistant message came: the records since the last one are its calls'.
    pub fn answer(&mut self) {
        self.current = std::mem::take(&mut self.pending);
    }

    /// The record of the call `id` of the last assistant message.
    pub fn of(&self, id: &str) -> Option<&ToolRecord> {
        self.current.get(id)
    }

    /// Forget every record (the conversation was rewound).
    pub fn clear(&mut self) {
        self.pending.clear();
        self.current.clear();
    }
}
