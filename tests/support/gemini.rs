//! Gemini `streamGenerateContent?alt=sse` responses for the fake model ([`Reply::Events`]), in
//! the shapes Google documents (<https://ai.google.dev/api/generate-content>): each event is a
//! whole `GenerateContentResponse` with the new parts of the first candidate; the last one has
//! the `finishReason` and the `usageMetadata`.

use serde_json::{Value, json};

use super::fake_model::{Reply, Step};

/// A response whose candidate has these `parts`.
pub fn parts(parts: Value) -> Step {
    Step::Chunk(json!({"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}]}))
}

/// The last response: these `parts`, `finish_reason`, and the usage.
pub fn last(parts: Value, finish_reason: &str) -> Step {
    Step::Chunk(json!({
        "candidates": [{"content": {"role": "model", "parts": parts},
            "finishReason": finish_reason, "index": 0}],
        "usageMetadata": {"promptTokenCount": 40, "candidatesTokenCount": 5,
            "thoughtsTokenCount": 7, "cachedContentTokenCount": 30, "totalTokenCount": 52},
        "modelVersion": "gemini-fake"}))
}

/// A reply that only says `text`.
pub fn says(text: &str) -> Reply {
    Reply::Events(vec![last(json!([{"text": text}]), "STOP")])
}
