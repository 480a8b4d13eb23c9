//! Anthropic Messages API stream events for the fake model ([`Reply::Events`]), in the shapes
//! Anthropic documents (<https://docs.anthropic.com/en/api/messages-streaming>): a reply is
//! `message_start`, content blocks (start, deltas, stop), `message_delta` with the stop reason
//! and usage, and `message_stop`.

use serde_json::{Value, json};

use super::fake_model::{Reply, Step};

/// `message_start` with its input usage.
pub fn start(input: u64, cache_read: u64, cache_write: u64) -> Step {
    Step::Chunk(json!({"type": "message_start", "message": {
        "id": "msg_fake", "type": "message", "role": "assistant", "content": [],
        "model": "claude-fake", "stop_reason": null,
        "usage": {"input_tokens": input, "cache_read_input_tokens": cache_read,
                  "cache_creation_input_tokens": cache_write, "output_tokens": 1}}}))
}

/// A text block at `index`, its text in `pieces`.
pub fn text(index: u64, pieces: &[&str]) -> Vec<Step> {
    let mut steps = vec![block_start(index, json!({"type": "text", "text": ""}))];
    steps.extend(
        pieces
            .iter()
            .map(|piece| delta(index, json!({"type": "text_delta", "text": piece}))),
    );
    steps.push(block_stop(index));
    steps
}

/// A thinking block at `index` with its text and signature.
pub fn thinking(index: u64, text: &str, signature: &str) -> Vec<Step> {
    vec![
        block_start(
            index,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
        ),
        delta(index, json!({"type": "thinking_delta", "thinking": text})),
        delta(
            index,
            json!({"type": "signature_delta", "signature": signature}),
        ),
        block_stop(index),
    ]
}

/// A redacted thinking block at `index`.
pub fn redacted(index: u64, data: &str) -> Vec<Step> {
    vec![
        block_start(index, json!({"type": "redacted_thinking", "data": data})),
        block_stop(index),
    ]
}

/// A tool use at `index`, its input JSON in `fragments`.
pub fn tool_use(index: u64, id: &str, name: &str, fragments: &[&str]) -> Vec<Step> {
    let mut steps = vec![block_start(
        index,
        json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
    )];
    steps.extend(fragments.iter().map(|fragment| {
        delta(
            index,
            json!({"type": "input_json_delta", "partial_json": fragment}),
        )
    }));
    steps.push(block_stop(index));
    steps
}

/// `message_delta` with `stop_reason` and the output tokens, then `message_stop`.
pub fn end(stop_reason: &str, output: u64) -> Vec<Step> {
    vec![
        Step::Chunk(json!({"type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {"output_tokens": output}})),
        Step::Chunk(json!({"type": "message_stop"})),
    ]
}

/// An `error` event of `kind` (e.g. `overloaded_error`).
pub fn error(kind: &str, message: &str) -> Step {
    Step::Chunk(json!({"type": "error", "error": {"type": kind, "message": message}}))
}

/// A whole reply: `message_start`, the blocks, the end.
pub fn reply(blocks: Vec<Vec<Step>>, stop_reason: &str) -> Reply {
    let mut steps = vec![start(10, 0, 0)];
    steps.extend(blocks.into_iter().flatten());
    steps.extend(end(stop_reason, 5));
    Reply::Events(steps)
}

/// A reply that only says `text`.
pub fn says(text_: &str) -> Reply {
    reply(vec![text(0, &[text_])], "end_turn")
}

fn block_start(index: u64, block: Value) -> Step {
    Step::Chunk(json!({"type": "content_block_start", "index": index, "content_block": block}))
}

fn delta(index: u64, delta: Value) -> Step {
    Step::Chunk(json!({"type": "content_block_delta", "index": index, "delta": delta}))
}

fn block_stop(index: u64) -> Step {
    Step::Chunk(json!({"type": "content_block_stop", "index": index}))
}
