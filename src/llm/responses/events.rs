//! A Responses API stream, event by event, as the chat-shaped chunks the one fold folds. Pure.
//!
//! | event | chunk |
//! |---|---|
//! | `response.output_item.added` of a `function_call` | the call's id (`call_id`) and name |
//! | `response.function_call_arguments.delta` | its arguments |
//! | `response.output_text.delta`, `response.refusal.delta` | content |
//! | `response.reasoning_summary_text.delta`, `response.reasoning_text.delta` | `reasoning_content` |
//! | `response.output_item.done` of a `reasoning` item | none; the item is kept |
//! | `response.output_item.done` of a call whose arguments never streamed | its arguments |
//! | `response.completed` / `response.incomplete` | the finish reason and the usage |
//! | `response.failed`, `error` | a top-level `error` |
//!
//! The finish reason is `tool_calls` when the reply called tools, `length` when it stopped at
//! `max_output_tokens`, `refusal` when it refused or was filtered, else `stop`. The usage is
//! the chat one (`prompt_tokens`, `completion_tokens`, `prompt_tokens_details.cached_tokens`)
//! with the Responses counts beside it. The kept reasoning items, encrypted content and all, go
//! into the outcome's message under [`ITEMS_KEY`].
//!
//! It knows the events' shapes, not the network.

use serde_json::{Map, Value, json};

use super::ITEMS_KEY;
use crate::llm::ChatOutcome;
use crate::llm::chat_shape::{delta_chunk, tool_chunk};

/// A function call of the reply: its output index, its index among the calls, and whether its
/// arguments streamed.
#[derive(Debug)]
struct Call {
    output: u64,
    index: usize,
    streamed: bool,
}

/// The translation state of one reply.
#[derive(Debug, Default)]
pub struct Events {
    calls: Vec<Call>,
    reasoning: Vec<Value>,
    refused: bool,
    complete: bool,
}

impl Events {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the reply's last event (`completed`, `incomplete` or `failed`) has arrived.
    pub fn complete(&self) -> bool {
        self.complete
    }

    /// The chat-shaped chunk for one event, if it carries anything for the fold.
    pub fn chunk(&mut self, event: &Value) -> Option<Value> {
        let text = |key: &str| event.get(key).and_then(Value::as_str).unwrap_or("");
        match event.get("type").and_then(Value::as_str)? {
            "response.output_item.added" => self.added(event),
            "response.function_call_arguments.delta" => {
                let output = event.get("output_index").and_then(Value::as_u64)?;
                let call = self.calls.iter_mut().find(|c| c.output == output)?;
                call.streamed = true;
                Some(tool_chunk(
                    call.index,
                    json!({"function": {"arguments": text("delta")}}),
                ))
            }
            "response.output_text.delta" => Some(delta_chunk(json!({"content": text("delta")}))),
            "response.refusal.delta" => {
                self.refused = true;
                Some(delta_chunk(json!({"content": text("delta")})))
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                Some(delta_chunk(json!({"reasoning_content": text("delta")})))
            }
            "response.output_item.done" => self.done(event),
            "response.completed" | "response.incomplete" => {
                self.complete = true;
                Some(self.finish_chunk(event.get("response")?))
            }
            "response.failed" => {
                self.complete = true;
                let error = event.pointer("/response/error").cloned();
                Some(json!({"error": error.unwrap_or_else(|| json!({"message": "failed"}))}))
            }
            "error" => {
                Some(json!({"error": {"message": text("message"), "code": event.get("code")}}))
            }
            _ => None,
        }
    }

    /// Put the kept reasoning items into `outcome`'s message (when there are any).
    pub fn finish(self, outcome: &mut ChatOutcome) {
        if !self.reasoning.is_empty()
            && let Value::Object(message) = &mut outcome.message
        {
            message.insert(ITEMS_KEY.into(), Value::Array(self.reasoning));
        }
    }

    fn added(&mut self, event: &Value) -> Option<Value> {
        let item = event.get("item")?;
        if item.get("type").and_then(Value::as_str) != Some("function_call") {
            return None;
        }
        let output = event
            .get("output_index")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let index = self.calls.len();
        self.calls.push(Call {
            output,
            index,
            streamed: false,
        });
        Some(tool_chunk(
            index,
            json!({
                "id": item.get("call_id").cloned().unwrap_or(Value::Null),
                "type": "function",
                "function": {"name": item.get("name").cloned().unwrap_or(Value::Null), "arguments": ""},
            }),
        ))
    }

    fn done(&mut self, event: &Value) -> Option<Value> {
        let item = event.get("item")?;
        match item.get("type").and_then(Value::as_str)? {
            // Only an item with its encrypted content can be sent back with `store: false`;
            // one without (a model not asked for it) is shown as thoughts and not kept.
            "reasoning" => {
                if item.get("encrypted_content").is_some_and(Value::is_string) {
                    self.reasoning.push(item.clone());
                }
                None
            }
            "function_call" => {
                let output = event.get("output_index").and_then(Value::as_u64)?;
                let call = self
                    .calls
                    .iter()
                    .find(|c| c.output == output && !c.streamed)?;
                let arguments = item
                    .get("arguments")
                    .cloned()
                    .unwrap_or_else(|| json!("{}"));
                Some(tool_chunk(
                    call.index,
                    json!({"function": {"arguments": arguments}}),
                ))
            }
            _ => None,
        }
    }

    fn finish_chunk(&self, response: &Value) -> Value {
        let reason = response
            .pointer("/incomplete_details/reason")
            .and_then(Value::as_str);
        let finish = match reason {
            Some("max_output_tokens") => "length",
            Some("content_filter") => "refusal",
            _ if !self.calls.is_empty() => "tool_calls",
            _ if self.refused => "refusal",
            _ => "stop",
        };
        let mut chunk = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]});
        if let Some(Value::Object(usage)) = response.get("usage") {
            chunk["usage"] = chat_usage(usage);
        }
        chunk
    }
}

/// The Responses usage with the chat counts added.
fn chat_usage(usage: &Map<String, Value>) -> Value {
    let count = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
    let cached = usage
        .get("input_tokens_details")
        .and_then(|d| d.get("cached_tokens"))
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let mut out = usage.clone();
    out.insert("prompt_tokens".into(), json!(count("input_tokens")));
    out.insert("completion_tokens".into(), json!(count("output_tokens")));
    out.insert(
        "total_tokens".into(),
        json!(count("input_tokens") + count("output_tokens")),
    );
    out.insert(
        "prompt_tokens_details".into(),
        json!({"cached_tokens": cached}),
    );
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasoning_and_a_call_fold_into_chunks_and_kept_items() {
        let mut state = Events::new();
        let reasoning = json!({"type": "reasoning", "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "Think."}], "encrypted_content": "gAAA"});
        let events = [
            json!({"type": "response.created", "response": {}}),
            json!({"type": "response.output_item.added", "output_index": 0,
                "item": {"type": "reasoning", "id": "rs_1"}}),
            json!({"type": "response.reasoning_summary_text.delta", "output_index": 0,
                "delta": "Think."}),
            json!({"type": "response.output_item.done", "output_index": 0, "item": reasoning}),
            json!({"type": "response.output_item.added", "output_index": 1,
                "item": {"type": "function_call", "id": "fc_1", "call_id": "call_9",
                    "name": "ls", "arguments": ""}}),
            json!({"type": "response.output_item.done", "output_index": 1,
                "item": {"type": "function_call", "id": "fc_1", "call_id": "call_9",
                    "name": "ls", "arguments": "{}"}}),
            json!({"type": "response.completed", "response": {"status": "completed",
                "usage": {"input_tokens": 50, "input_tokens_details": {"cached_tokens": 40},
                    "output_tokens": 8}}}),
        ];
        let chunks: Vec<Value> = events.iter().filter_map(|e| state.chunk(e)).collect();
        assert!(state.complete());
        assert_eq!(chunks.len(), 4, "{chunks:?}");
        assert_eq!(
            chunks[0]["choices"][0]["delta"]["reasoning_content"],
            "Think."
        );
        assert_eq!(
            chunks[1]["choices"][0]["delta"]["tool_calls"][0]["id"],
            "call_9"
        );
        assert_eq!(
            chunks[2]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"],
            "{}"
        );
        assert_eq!(chunks[3]["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(
            chunks[3]["usage"]["prompt_tokens_details"]["cached_tokens"],
            40
        );
        let mut outcome = crate::llm::fold::Fold::new().into_partial(false);
        state.finish(&mut outcome);
        assert_eq!(outcome.message[ITEMS_KEY], json!([reasoning]));
    }

    #[test]
    fn incomplete_and_failed_replies_end_as_length_and_errors() {
        let mut state = Events::new();
        let chunk = state.chunk(&json!({"type": "response.incomplete", "response": {
            "incomplete_details": {"reason": "max_output_tokens"}}}));
        assert_eq!(chunk.unwrap()["choices"][0]["finish_reason"], "length");
        let mut state = Events::new();
        let chunk = state.chunk(&json!({"type": "response.failed", "response": {
            "error": {"code": "server_error", "message": "boom"}}}));
        assert_eq!(chunk.unwrap()["error"]["message"], "boom");
        assert!(state.complete());
    }
}
