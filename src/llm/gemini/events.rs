//! A Gemini `streamGenerateContent` stream (`alt=sse`), response by response, as the
//! chat-shaped chunks the one fold folds. Pure.
//!
//! Each event is a whole `GenerateContentResponse`; of its first candidate's parts, a `text`
//! part is content, a `thought: true` text part is `reasoning_content`, and a `functionCall`
//! part is one whole tool call (its `args` as the arguments' JSON text). A `thoughtSignature`
//! on a part is kept: the one of each call by the call's index, the last one on text. The
//! candidate's `finishReason` ends the reply: `tool_calls` when it called tools, `length` for
//! `MAX_TOKENS`, `refusal` for the safety and recitation stops (and a prompt blocked by
//! `promptFeedback`), else `stop`. The usage is the chat one beside Gemini's `usageMetadata`
//! (`prompt_tokens`, `completion_tokens` counting thoughts, `prompt_tokens_details.cached_tokens`).
//! The stream has no end event: it ends with the body, after the finish reason.
//!
//! It knows the responses' shapes, not the network.

use serde_json::{Value, json};

use super::SIGNATURES_KEY;
use crate::llm::ChatOutcome;

/// The finish reasons that mean the model declined or was stopped by a filter.
const REFUSALS: [&str; 6] = [
    "SAFETY",
    "RECITATION",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "IMAGE_SAFETY",
];

/// The translation state of one reply.
#[derive(Debug, Default)]
pub struct Events {
    calls: Vec<Option<String>>,
    text_signature: Option<String>,
}

impl Events {
    pub fn new() -> Self {
        Self::default()
    }

    /// The chat-shaped chunk for one response.
    pub fn chunk(&mut self, response: &Value) -> Option<Value> {
        if let Some(error) = response.get("error") {
            return Some(json!({ "error": error }));
        }
        let candidate = response.pointer("/candidates/0");
        let mut delta = serde_json::Map::new();
        let (mut text, mut thought, mut calls) = (String::new(), String::new(), Vec::new());
        let parts = candidate.and_then(|c| c.pointer("/content/parts"));
        for part in parts.and_then(Value::as_array).into_iter().flatten() {
            let signature = part.get("thoughtSignature").and_then(Value::as_str);
            if let Some(call) = part.get("functionCall") {
                calls.push(self.call(call, signature));
                continue;
            }
            let Some(piece) = part.get("text").and_then(Value::as_str) else {
                continue;
            };
            if part.get("thought").and_then(Value::as_bool) == Some(true) {
                thought.push_str(piece);
            } else {
                text.push_str(piece);
                if let Some(signature) = signature.filter(|s| !s.is_empty()) {
                    self.text_signature = Some(signature.to_owned());
                }
            }
        }
        if !text.is_empty() {
            delta.insert("content".into(), json!(text));
        }
        if !thought.is_empty() {
            delta.insert("reasoning_content".into(), json!(thought));
        }
        if !calls.is_empty() {
            delta.insert("tool_calls".into(), Value::Array(calls));
        }
        let mut choice = json!({"index": 0, "delta": delta});
        if let Some(finish) = self.finish_reason(response, candidate) {
            choice["finish_reason"] = json!(finish);
        }
        let mut chunk = json!({ "choices": [choice] });
        if let Some(usage) = response.get("usageMetadata") {
            chunk["usage"] = chat_usage(usage);
        }
        Some(chunk)
    }

    /// Put the kept thought signatures into `outcome`'s message (when there are any).
    pub fn finish(self, outcome: &mut ChatOutcome) {
        let any = self.text_signature.is_some() || self.calls.iter().any(Option::is_some);
        if any && let Value::Object(message) = &mut outcome.message {
            message.insert(
                SIGNATURES_KEY.into(),
                json!({"text": self.text_signature, "calls": self.calls}),
            );
        }
    }

    /// A whole `functionCall` part as one tool-call delta.
    fn call(&mut self, call: &Value, signature: Option<&str>) -> Value {
        let index = self.calls.len();
        self.calls
            .push(signature.filter(|s| !s.is_empty()).map(str::to_owned));
        let arguments = call
            .get("args")
            .map_or_else(|| "{}".to_owned(), Value::to_string);
        let mut delta = json!({"index": index, "type": "function",
            "function": {"name": call.get("name").cloned().unwrap_or(Value::Null),
                         "arguments": arguments}});
        if let Some(id) = call.get("id").and_then(Value::as_str) {
            delta["id"] = json!(id);
        }
        delta
    }

    fn finish_reason(&self, response: &Value, candidate: Option<&Value>) -> Option<&'static str> {
        if response.pointer("/promptFeedback/blockReason").is_some() {
            return Some("refusal");
        }
        let reason = candidate?.get("finishReason")?.as_str()?;
        Some(match reason {
            "MAX_TOKENS" => "length",
            reason if REFUSALS.contains(&reason) => "refusal",
            _ if !self.calls.is_empty() => "tool_calls",
            _ => "stop",
        })
    }
}

/// Gemini's usage with the chat counts added.
fn chat_usage(usage: &Value) -> Value {
    let count = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
    let prompt = count("promptTokenCount");
    let completion = count("candidatesTokenCount") + count("thoughtsTokenCount");
    let mut out = usage.clone();
    out["prompt_tokens"] = json!(prompt);
    out["completion_tokens"] = json!(completion);
    out["total_tokens"] = json!(prompt + completion);
    out["prompt_tokens_details"] = json!({"cached_tokens": count("cachedContentTokenCount")});
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thoughts_text_and_a_signed_call_fold_into_chunks_and_kept_signatures() {
        let mut state = Events::new();
        let first = json!({"candidates": [{"content": {"role": "model", "parts": [
            {"text": "Plan.", "thought": true},
            {"text": "Reading "}]}}]});
        let second = json!({"candidates": [{"content": {"role": "model", "parts": [
            {"text": "it.", "thoughtSignature": "dA=="},
            {"functionCall": {"name": "read", "args": {"path": "a"}}, "thoughtSignature": "Yw=="}]},
            "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 4,
                "thoughtsTokenCount": 3, "cachedContentTokenCount": 6}});
        let one = state.chunk(&first).unwrap();
        assert_eq!(one["choices"][0]["delta"]["reasoning_content"], "Plan.");
        assert_eq!(one["choices"][0]["delta"]["content"], "Reading ");
        let two = state.chunk(&second).unwrap();
        assert_eq!(
            two["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"],
            "{\"path\":\"a\"}"
        );
        assert_eq!(two["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(two["usage"]["completion_tokens"], 7);
        assert_eq!(two["usage"]["prompt_tokens_details"]["cached_tokens"], 6);
        let mut outcome = crate::llm::fold::Fold::new().into_partial(false);
        state.finish(&mut outcome);
        assert_eq!(
            outcome.message[SIGNATURES_KEY],
            json!({"text": "dA==", "calls": ["Yw=="]})
        );
    }

    #[test]
    fn stops_and_errors() {
        let stop = |reason: &str| {
            let response =
                json!({"candidates": [{"content": {"parts": []}, "finishReason": reason}]});
            Events::new().chunk(&response).unwrap()["choices"][0]["finish_reason"].clone()
        };
        assert_eq!(stop("STOP"), "stop");
        assert_eq!(stop("MAX_TOKENS"), "length");
        assert_eq!(stop("SAFETY"), "refusal");
        let blocked = json!({"promptFeedback": {"blockReason": "SAFETY"}});
        assert_eq!(
            Events::new().chunk(&blocked).unwrap()["choices"][0]["finish_reason"],
            "refusal"
        );
        let error =
            json!({"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}});
        assert_eq!(
            Events::new().chunk(&error).unwrap()["error"]["message"],
            "overloaded"
        );
    }
}
