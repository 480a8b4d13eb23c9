//! The hot path of the native streams: the events that carry only a piece of text or reasoning
//! (nearly all of a long reply) decoded straight from the payload into borrowed strings, without
//! a JSON tree, a translated chunk and a second decoding. Every other event, and any event that
//! does not match exactly, takes the full translation (`super::native`). Pure.
//!
//! - Anthropic: `content_block_delta` with a `text_delta`.
//! - Responses: `response.output_text.delta`, and the reasoning deltas
//!   (`response.reasoning_summary_text.delta`, `response.reasoning_text.delta`).
//! - Gemini: a response whose one candidate has only plain `text` parts (or only thought parts),
//!   no signature, no finish reason, no error and no prompt feedback; its usage, which Gemini
//!   repeats in every response, is left to the last one.
//!
//! It knows those shapes; nothing of the fold or the network.

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::IgnoredAny;

use super::Api;

/// A piece of the answer that needs no translation.
#[derive(Debug, PartialEq)]
pub enum Hot<'a> {
    Text(Cow<'a, str>),
    Thought(Cow<'a, str>),
}

/// The hot piece `payload` carries in `api`'s stream, or `None` for the full translation.
pub fn decode(api: Api, payload: &str) -> Option<Hot<'_>> {
    match api {
        Api::Chat => None,
        Api::Anthropic => anthropic(payload),
        Api::Responses => responses(payload),
        Api::Gemini => gemini(payload),
    }
}

#[derive(Deserialize)]
struct AnthropicEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    delta: Option<AnthropicDelta<'a>>,
}

#[derive(Deserialize)]
struct AnthropicDelta<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    text: Option<Cow<'a, str>>,
}

fn anthropic(payload: &str) -> Option<Hot<'_>> {
    let event: AnthropicEvent<'_> = serde_json::from_str(payload).ok()?;
    let delta = event.delta?;
    (event.kind == "content_block_delta" && delta.kind == "text_delta")
        .then_some(Hot::Text(delta.text?))
}

#[derive(Deserialize)]
struct ResponsesEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    delta: Option<Cow<'a, str>>,
}

fn responses(payload: &str) -> Option<Hot<'_>> {
    let event: ResponsesEvent<'_> = serde_json::from_str(payload).ok()?;
    match event.kind.as_ref() {
        "response.output_text.delta" => Some(Hot::Text(event.delta?)),
        "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
            Some(Hot::Thought(event.delta?))
        }
        _ => None,
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GeminiResponse<'a> {
    #[serde(borrow)]
    candidates: Vec<GeminiCandidate<'a>>,
    error: Option<IgnoredAny>,
    prompt_feedback: Option<IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GeminiCandidate<'a> {
    #[serde(borrow)]
    content: GeminiContent<'a>,
    finish_reason: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct GeminiContent<'a> {
    #[serde(borrow)]
    parts: Vec<GeminiPart<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GeminiPart<'a> {
    #[serde(borrow)]
    text: Option<Cow<'a, str>>,
    thought: Option<bool>,
    thought_signature: Option<IgnoredAny>,
    function_call: Option<IgnoredAny>,
}

fn gemini(payload: &str) -> Option<Hot<'_>> {
    let response: GeminiResponse<'_> = serde_json::from_str(payload).ok()?;
    let [candidate] = <[GeminiCandidate<'_>; 1]>::try_from(response.candidates).ok()?;
    if response.error.is_some()
        || response.prompt_feedback.is_some()
        || candidate.finish_reason.is_some()
    {
        return None;
    }
    let parts = candidate.content.parts;
    let plain = |p: &GeminiPart<'_>| {
        p.text.is_some() && p.thought_signature.is_none() && p.function_call.is_none()
    };
    let thought = parts.first()?.thought == Some(true);
    if !parts
        .iter()
        .all(|p| plain(p) && (p.thought == Some(true)) == thought)
    {
        return None;
    }
    let text: Cow<'_, str> = match <[GeminiPart<'_>; 1]>::try_from(parts) {
        Ok([one]) => one.text?,
        Err(parts) => Cow::Owned(parts.into_iter().filter_map(|p| p.text).collect()),
    };
    Some(if thought {
        Hot::Thought(text)
    } else {
        Hot::Text(text)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_pieces_take_the_hot_path() {
        let text = |s: &str| Some(Hot::Text(Cow::Owned(s.to_owned())));
        let cases = [
            (
                Api::Anthropic,
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}"#,
                text("hi"),
            ),
            (
                Api::Anthropic,
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"x"}}"#,
                None,
            ),
            (Api::Anthropic, r#"{"type":"message_stop"}"#, None),
            (
                Api::Responses,
                r#"{"type":"response.output_text.delta","output_index":0,"delta":"a\nb"}"#,
                text("a\nb"),
            ),
            (
                Api::Responses,
                r#"{"type":"response.completed","response":{}}"#,
                None,
            ),
            (
                Api::Gemini,
                r#"{"candidates":[{"content":{"role":"model","parts":[{"text":"x"}]},"index":0}],"usageMetadata":{"promptTokenCount":1}}"#,
                text("x"),
            ),
            (
                Api::Gemini,
                r#"{"candidates":[{"content":{"parts":[{"text":"x"}]},"finishReason":"STOP"}]}"#,
                None,
            ),
            (
                Api::Gemini,
                r#"{"candidates":[{"content":{"parts":[{"text":"x","thoughtSignature":"s"}]}}]}"#,
                None,
            ),
            (
                Api::Gemini,
                r#"{"candidates":[{"content":{"parts":[{"text":"t","thought":true},{"text":"x"}]}}]}"#,
                None,
            ),
            (
                Api::Gemini,
                r#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f"}}]}}]}"#,
                None,
            ),
            (Api::Chat, r#"{"choices":[]}"#, None),
        ];
        for (api, payload, expected) in cases {
            assert_eq!(decode(api, payload), expected, "{api:?} {payload}");
        }
        let thought = decode(
            Api::Gemini,
            r#"{"candidates":[{"content":{"parts":[{"text":"a","thought":true},{"text":"b","thought":true}]}}]}"#,
        );
        assert_eq!(thought, Some(Hot::Thought(Cow::Owned("ab".to_owned()))));
    }
}
