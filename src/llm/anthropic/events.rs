//! A Messages API stream, event by event, as the chat-shaped chunks [`crate::llm::fold::Fold`]
//! folds: the one fold, and so the one set of loop events, for every protocol. Pure.
//!
//! | event | chunk |
//! |---|---|
//! | `message_start` | none; its usage is kept |
//! | `content_block_start` `text` / `tool_use` | a content delta / a tool call's id and name |
//! | `content_block_start` `thinking` / `redacted_thinking` | none; the block is kept |
//! | `content_block_delta` `text_delta` / `input_json_delta` | content / arguments |
//! | `content_block_delta` `thinking_delta` | `reasoning_content`, and into the kept block |
//! | `content_block_delta` `signature_delta` | none; into the kept block |
//! | `content_block_stop` of a tool use without input | arguments `{}` |
//! | `message_delta` | the finish reason ([`finish_reason`]) and the usage |
//! | `message_stop` | none; the stream is complete |
//! | `error` | a top-level `error`, which the fold reports as the provider's |
//! | `ping`, anything else | none |
//!
//! The usage is the chat one — `prompt_tokens` counts every input token, cached or not — with
//! Anthropic's own counts beside it (`cache_read_input_tokens`, `cache_creation_input_tokens`).
//! The kept thinking blocks, with their signatures, go into the outcome's message under
//! [`THINKING_KEY`], to be sent back unchanged on the next request.
//!
//! It knows the events' shapes, not the network.

use serde_json::{Map, Value, json};

use super::THINKING_KEY;
use crate::llm::ChatOutcome;
use crate::llm::chat_shape::{delta_chunk, tool_chunk};

/// What one content block of the reply is, by its index.
#[derive(Debug)]
enum Block {
    Text,
    /// A tool use: its index among the reply's tool calls, and whether input arrived.
    Tool {
        call: usize,
        input: bool,
    },
    /// A thinking block: its place in the kept blocks.
    Thinking(usize),
    Other,
}

/// The translation state of one reply.
#[derive(Debug, Default)]
pub struct Events {
    blocks: Vec<(u64, Block)>,
    calls: usize,
    thinking: Vec<Value>,
    usage: Map<String, Value>,
    complete: bool,
}

impl Events {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `message_stop` has arrived.
    pub fn complete(&self) -> bool {
        self.complete
    }

    /// The chat-shaped chunk for one event, if it carries anything for the fold.
    pub fn chunk(&mut self, event: &Value) -> Option<Value> {
        match event.get("type").and_then(Value::as_str)? {
            "message_start" => {
                if let Some(Value::Object(usage)) = event.pointer("/message/usage") {
                    self.usage.extend(usage.clone());
                }
                None
            }
            "content_block_start" => self.start(event),
            "content_block_delta" => self.delta(event),
            "content_block_stop" => self.stop(event),
            "message_delta" => Some(self.message_delta(event)),
            "message_stop" => {
                self.complete = true;
                None
            }
            "error" => Some(json!({"error": event.get("error").cloned().unwrap_or(Value::Null)})),
            _ => None,
        }
    }

    /// Put the kept thinking blocks into `outcome`'s message (when there are any).
    pub fn finish(self, outcome: &mut ChatOutcome) {
        if !self.thinking.is_empty()
            && let Value::Object(message) = &mut outcome.message
        {
            message.insert(THINKING_KEY.into(), Value::Array(self.thinking));
        }
    }

    fn start(&mut self, event: &Value) -> Option<Value> {
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0);
        let block = event.get("content_block")?;
        let (kept, chunk) = match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                let text = block.get("text").and_then(Value::as_str).unwrap_or("");
                (
                    Block::Text,
                    (!text.is_empty()).then(|| delta_chunk(json!({"content": text}))),
                )
            }
            Some("tool_use") => {
                let call = self.calls;
                self.calls += 1;
                let chunk = tool_chunk(
                    call,
                    json!({
                    "id": block.get("id").cloned().unwrap_or(Value::Null),
                    "type": "function",
                    "function": {"name": block.get("name").cloned().unwrap_or(Value::Null),
                                 "arguments": ""}}),
                );
                (Block::Tool { call, input: false }, Some(chunk))
            }
            Some("thinking" | "redacted_thinking") => {
                self.thinking.push(block.clone());
                (Block::Thinking(self.thinking.len() - 1), None)
            }
            _ => (Block::Other, None),
        };
        self.blocks.push((index, kept));
        chunk
    }

    fn delta(&mut self, event: &Value) -> Option<Value> {
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0);
        let delta_ = event.get("delta")?;
        let text = |key: &str| delta_.get(key).and_then(Value::as_str).unwrap_or("");
        let kind = delta_.get("type").and_then(Value::as_str)?;
        let block = self.blocks.iter_mut().rev().find(|(i, _)| *i == index);
        match (kind, block) {
            ("text_delta", _) => Some(delta_chunk(json!({"content": text("text")}))),
            ("input_json_delta", Some((_, Block::Tool { call, input }))) => {
                *input = true;
                let arguments = text("partial_json");
                Some(tool_chunk(
                    *call,
                    json!({"function": {"arguments": arguments}}),
                ))
            }
            ("thinking_delta", Some((_, Block::Thinking(at)))) => {
                let piece = text("thinking");
                append(&mut self.thinking[*at], "thinking", piece);
                Some(delta_chunk(json!({"reasoning_content": piece})))
            }
            ("signature_delta", Some((_, Block::Thinking(at)))) => {
                append(&mut self.thinking[*at], "signature", text("signature"));
                None
            }
            _ => None,
        }
    }

    fn stop(&mut self, event: &Value) -> Option<Value> {
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0);
        match self.blocks.iter().rev().find(|(i, _)| *i == index) {
            Some((_, Block::Tool { call, input: false })) => {
                Some(tool_chunk(*call, json!({"function": {"arguments": "{}"}})))
            }
            _ => None,
        }
    }

    fn message_delta(&mut self, event: &Value) -> Value {
        if let Some(Value::Object(usage)) = event.get("usage") {
            for (key, value) in usage {
                if !value.is_null() {
                    self.usage.insert(key.clone(), value.clone());
                }
            }
        }
        let reason = event
            .pointer("/delta/stop_reason")
            .and_then(Value::as_str)
            .map(finish_reason);
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}],
               "usage": chat_usage(&self.usage)})
    }
}

/// The chat `finish_reason` for a Messages API `stop_reason`: `length` for the output limit
/// (which the agent reports as `max_tokens`), `tool_calls`, `refusal` as it is, else `stop`.
pub fn finish_reason(stop_reason: &str) -> &'static str {
    match stop_reason {
        "tool_use" => "tool_calls",
        "max_tokens" | "model_context_window_exceeded" => "length",
        "refusal" => "refusal",
        _ => "stop",
    }
}

/// Anthropic's usage with the chat counts added.
fn chat_usage(usage: &Map<String, Value>) -> Value {
    let count = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
    let prompt = count("input_tokens")
        + count("cache_read_input_tokens")
        + count("cache_creation_input_tokens");
    let completion = count("output_tokens");
    let mut out = usage.clone();
    out.insert("prompt_tokens".into(), json!(prompt));
    out.insert("completion_tokens".into(), json!(completion));
    out.insert("total_tokens".into(), json!(prompt + completion));
    Value::Object(out)
}

fn append(block: &mut Value, key: &str, piece: &str) {
    let now = block.get(key).and_then(Value::as_str).unwrap_or("");
    block[key] = Value::String(format!("{now}{piece}"));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(events: &[Value]) -> (Events, Vec<Value>) {
        let mut state = Events::new();
        let chunks = events.iter().filter_map(|e| state.chunk(e)).collect();
        (state, chunks)
    }

    #[test]
    fn thinking_and_a_tool_use_fold_into_chunks_and_kept_blocks() {
        let (state, chunks) = run(&[
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 5,
                "cache_read_input_tokens": 100, "cache_creation_input_tokens": 7,
                "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
            json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "thinking_delta", "thinking": "let me"}}),
            json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "signature_delta", "signature": "U0lH"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "content_block_start", "index": 1,
                "content_block": {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {}}}),
            json!({"type": "content_block_stop", "index": 1}),
            json!({"type": "ping"}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"},
                "usage": {"output_tokens": 9}}),
            json!({"type": "message_stop"}),
        ]);
        assert!(state.complete());
        assert_eq!(chunks.len(), 4, "{chunks:?}");
        assert_eq!(
            chunks[0]["choices"][0]["delta"]["reasoning_content"],
            "let me"
        );
        assert_eq!(
            chunks[1]["choices"][0]["delta"]["tool_calls"][0]["id"],
            "toolu_1"
        );
        assert_eq!(
            chunks[2]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"],
            "{}"
        );
        assert_eq!(chunks[3]["choices"][0]["finish_reason"], "tool_calls");
        let usage = &chunks[3]["usage"];
        assert_eq!(usage["prompt_tokens"], 112);
        assert_eq!(usage["completion_tokens"], 9);
        assert_eq!(usage["cache_read_input_tokens"], 100);
        let mut outcome = crate::llm::fold::Fold::new().into_partial(false);
        state.finish(&mut outcome);
        assert_eq!(
            outcome.message[THINKING_KEY],
            json!([{"type": "thinking", "thinking": "let me", "signature": "U0lH"}])
        );
    }

    #[test]
    fn redacted_thinking_is_kept_verbatim_and_errors_become_provider_errors() {
        let (state, chunks) = run(&[
            json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "redacted_thinking", "data": "EnCrYpTeD"}}),
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}),
        ]);
        assert_eq!(
            chunks,
            vec![json!({"error": {"type": "overloaded_error", "message": "busy"}})]
        );
        assert_eq!(
            state.thinking,
            vec![json!({"type": "redacted_thinking", "data": "EnCrYpTeD"})]
        );
        assert!(!state.complete());
    }

    #[test]
    fn stop_reasons_map_to_finish_reasons() {
        for (stop, finish) in [
            ("end_turn", "stop"),
            ("stop_sequence", "stop"),
            ("tool_use", "tool_calls"),
            ("max_tokens", "length"),
            ("refusal", "refusal"),
            ("pause_turn", "stop"),
        ] {
            assert_eq!(finish_reason(stop), finish, "{stop}");
        }
    }
}
