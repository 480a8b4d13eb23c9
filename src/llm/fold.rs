//! A pure fold of chat completion chunks into stream events and the final assistant message.
//!
//! [`Fold`] is fed one chunk at a time, either as the JSON text of a `data:` payload
//! ([`Fold::push_json`]) or as an already parsed value ([`Fold::push_value`], used when an
//! on-chunk observer needed the value anyway). Each chunk yields zero or more [`StreamEvent`]s
//! through the `emit` callback; [`Fold::finish`] yields the tool calls and `Done`, and builds the
//! [`ChatOutcome`]. The rules, per chunk:
//! - a top-level `error` (OpenRouter's mid-stream failure) fails the fold with its message;
//! - a top-level `usage` replaces the recorded one (the last wins; `null` is ignored), also in a
//!   usage-only chunk with `choices: []`;
//! - only the first choice counts. From its `delta`:
//!   - reasoning comes from the first non-empty source among `reasoning_content` (DeepSeek,
//!     vLLM, llama.cpp), `reasoning` (OpenRouter, Ollama and other gateways) and
//!     `reasoning_details` (OpenRouter's structured form: the `text` of `reasoning.text` items
//!     and the `summary` of `reasoning.summary` items; encrypted items have neither). One
//!     source per chunk, because OpenRouter sends the same text as both `reasoning` and
//!     `reasoning_details`. The `reasoning_details` items themselves are also kept raw, every
//!     item of every chunk appended in order (encrypted ones too), so that they can go back to
//!     OpenRouter unmodified;
//!   - non-empty `content` is answer text (a non-string `content` is ignored);
//!   - `tool_calls` fragments merge by `index`: a non-empty `id` sets the id, `function.name`
//!     and `function.arguments` fragments are concatenated, so interleaved parallel calls work.
//!     A fragment without `index` belongs to the last call, unless it brings a new `id`, which
//!     starts a new call (some compatibility layers send whole calls without an index);
//! - the first choice's `finish_reason`, when present, is recorded.
//!
//! The final message keeps the reasoning (as `reasoning_content`, and the raw items as
//! `reasoning_details`) when the call's [`SendReasoning`] policy would send it back for a
//! message like this one (with or without tool calls), so the transcript holds what the next
//! request needs and no more.
//!
//! Chunks are deserialised into borrowing, lenient structs rather than a `serde_json::Value`
//! (only the `reasoning_details` items, which are kept, are built as values): fields we do not
//! read are skipped without being built, strings without escapes are not copied, and any
//! non-string where a string is expected reads as absent. Only JSON that does not
//! parse, or structure of the wrong kind (`choices` that is not an array, ...), is malformed.
//!
//! It does no I/O, knows nothing of HTTP, SSE framing or channels, and never sees the request.
//!
//! Compare with pi: the OpenAI-completions provider's accumulation of `choices[0].delta`.
//! Compare with oml.clj: `oml.llm/accumulate` (same rules; `reasoning_details`, missing-index
//! calls, synthesised ids and provider errors are new).

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::error::{MAX_QUOTED_CHUNK_CHARS, cap_chars};
use super::provider::SendReasoning;
use super::{ChatOutcome, StreamEvent, ToolCall};

/// Why a chunk could not be folded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FoldError {
    /// The payload is not JSON, or not shaped like a chunk. `chunk` is the payload capped at
    /// [`MAX_QUOTED_CHUNK_CHARS`].
    #[error("malformed chunk from the model ({reason}): {chunk}")]
    Malformed { chunk: String, reason: String },
    /// The chunk carries a top-level `error`; `message` is its `message` or its JSON, capped.
    /// `transient`: its kind, status or code says the provider was busy or failed on its side
    /// ([`is_transient`]), so the same request may succeed again.
    #[error("the model provider reported an error: {message}")]
    Provider { message: String, transient: bool },
}

/// The accumulated state of one streamed reply.
#[derive(Debug, Default)]
pub struct Fold {
    text: String,
    reasoning: String,
    /// Every `reasoning_details` item, raw, in arrival order.
    reasoning_details: Vec<Value>,
    /// Kept sorted by index.
    calls: Vec<PartialCall>,
    finish_reason: Option<String>,
    usage: Option<Value>,
    /// A delta or tool-call fragment has been folded (after that, a request is not retried).
    has_output: bool,
}

impl Fold {
    pub fn new() -> Self {
        Self::default()
    }

    /// How much content has been folded (bytes of text, reasoning and tool calls, and reasoning
    /// items): it grows with every delta that carries something.
    pub fn content_len(&self) -> usize {
        let calls: usize = self
            .calls
            .iter()
            .map(|c| c.id.len() + c.name.len() + c.arguments.len())
            .sum();
        self.text.len() + self.reasoning.len() + self.reasoning_details.len() + calls
    }

    /// Fold the JSON text of one `data:` payload.
    pub fn push_json(
        &mut self,
        payload: &str,
        emit: &mut impl FnMut(StreamEvent),
    ) -> Result<(), FoldError> {
        let chunk: Chunk<'_> =
            serde_json::from_str(payload).map_err(|error| malformed(payload, &error))?;
        self.apply(chunk, emit)
    }

    /// Fold one already parsed chunk.
    pub fn push_value(
        &mut self,
        chunk: &Value,
        emit: &mut impl FnMut(StreamEvent),
    ) -> Result<(), FoldError> {
        let parsed = Chunk::deserialize(chunk).map_err(|error| {
            malformed(&serde_json::to_string(chunk).unwrap_or_default(), &error)
        })?;
        self.apply(parsed, emit)
    }

    /// Fold a piece of the answer's text that arrived alone (a native protocol's text delta,
    /// decoded without a chunk around it).
    pub fn push_text(&mut self, text: &str, emit: &mut impl FnMut(StreamEvent)) {
        if !text.is_empty() {
            self.text.push_str(text);
            self.has_output = true;
            emit(StreamEvent::TextDelta(text.to_owned()));
        }
    }

    /// Fold a piece of reasoning that arrived alone, as [`Fold::push_text`] does text.
    pub fn push_thought(&mut self, text: &str, emit: &mut impl FnMut(StreamEvent)) {
        if !text.is_empty() {
            self.reasoning.push_str(text);
            self.has_output = true;
            emit(StreamEvent::ThoughtDelta(text.to_owned()));
        }
    }

    /// Whether a delta or tool-call fragment has been folded, so the caller has (or could have)
    /// shown something of this reply.
    pub fn has_output(&self) -> bool {
        self.has_output
    }

    /// The text so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The `finish_reason` so far.
    pub fn finish_reason(&self) -> Option<&str> {
        self.finish_reason.as_deref()
    }

    /// End of a complete stream: emit one `ToolCall` per call in index order, then `Done`, and
    /// build the outcome. The message keeps the reasoning when `send` would send it back.
    pub fn finish(self, send: SendReasoning, emit: &mut impl FnMut(StreamEvent)) -> ChatOutcome {
        let tool_calls: Vec<ToolCall> = self
            .calls
            .into_iter()
            .map(|call| ToolCall {
                id: if call.id.is_empty() {
                    format!("call_{}", call.index)
                } else {
                    call.id
                },
                name: call.name,
                arguments: Arc::new(exact(call.arguments)),
            })
            .collect();
        for call in &tool_calls {
            emit(StreamEvent::ToolCall(call.clone()));
        }
        emit(StreamEvent::Done {
            finish_reason: self.finish_reason.clone(),
            usage: self.usage.clone(),
        });
        let kept = Reasoning {
            text: &self.reasoning,
            details: &self.reasoning_details,
        };
        let keep = send.sends(!tool_calls.is_empty());
        let message = assistant_head(&self.text, keep.then_some(kept), !tool_calls.is_empty());
        ChatOutcome {
            message,
            text: self.text,
            reasoning: self.reasoning,
            tool_calls,
            finish_reason: self.finish_reason,
            usage: self.usage,
            cancelled: false,
        }
    }

    /// End of an interrupted stream (cancelled, or failed after output): the outcome keeps the
    /// text and reasoning, drops the half-received tool calls, and its message has the text
    /// only. Emits nothing.
    pub fn into_partial(self, cancelled: bool) -> ChatOutcome {
        ChatOutcome {
            message: assistant_head(&self.text, None, false),
            text: self.text,
            reasoning: self.reasoning,
            tool_calls: Vec::new(),
            finish_reason: self.finish_reason,
            usage: self.usage,
            cancelled,
        }
    }

    fn apply(
        &mut self,
        chunk: Chunk<'_>,
        emit: &mut impl FnMut(StreamEvent),
    ) -> Result<(), FoldError> {
        if let Some(error) = chunk.error {
            return Err(FoldError::Provider {
                message: provider_message(&error),
                transient: is_transient(&error),
            });
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage);
        }
        let Some(choice) = chunk.choices.and_then(|first| first.0) else {
            return Ok(());
        };
        if let Some(delta) = choice.delta {
            let details = delta.reasoning_details.unwrap_or_default();
            let thought = [delta.reasoning_content.0, delta.reasoning.0]
                .into_iter()
                .flatten()
                .find(|text| !text.is_empty())
                .or_else(|| details_text(&details));
            if let Some(thought) = thought {
                self.reasoning.push_str(&thought);
                self.has_output = true;
                emit(StreamEvent::ThoughtDelta(thought.into_owned()));
            }
            self.reasoning_details.extend(details);
            if let Some(text) = delta.content.0.filter(|text| !text.is_empty()) {
                self.text.push_str(&text);
                self.has_output = true;
                emit(StreamEvent::TextDelta(text.into_owned()));
            }
            for fragment in delta.tool_calls.into_iter().flatten() {
                self.merge_call(fragment);
                self.has_output = true;
            }
        }
        if let Some(reason) = choice.finish_reason.0 {
            self.finish_reason = Some(reason.into_owned());
        }
        Ok(())
    }

    fn merge_call(&mut self, fragment: CallFragment<'_>) {
        let id = fragment.id.0.filter(|id| !id.is_empty());
        let slot = match fragment.index {
            Some(index) => self.call_at(index),
            None => match self.calls.last() {
                Some(last)
                    if id
                        .as_deref()
                        .is_none_or(|id| last.id.is_empty() || last.id == id) =>
                {
                    self.calls.len() - 1
                }
                Some(last) => {
                    let next = last.index + 1;
                    self.call_at(next)
                }
                None => self.call_at(0),
            },
        };
        let call = &mut self.calls[slot];
        if let Some(id) = id {
            call.id = id.into_owned();
        }
        if let Some(function) = fragment.function {
            if let Some(name) = function.name.0 {
                call.name.push_str(&name);
            }
            if let Some(arguments) = function.arguments.0 {
                call.arguments.push_str(&arguments);
            }
        }
    }

    /// The position of the call with `index`, inserted (in order) if new.
    fn call_at(&mut self, index: u64) -> usize {
        match self.calls.binary_search_by_key(&index, |call| call.index) {
            Ok(found) => found,
            Err(at) => {
                self.calls.insert(
                    at,
                    PartialCall {
                        index,
                        ..PartialCall::default()
                    },
                );
                at
            }
        }
    }
}

/// The reasoning an assistant message keeps: the text, and OpenRouter's raw items.
#[derive(Clone, Copy, Debug)]
pub struct Reasoning<'a> {
    pub text: &'a str,
    pub details: &'a [Value],
}

/// The assistant message without its tool calls ([`ChatOutcome::message`]): `content` is null
/// when `text` is empty and the message `has_calls`.
fn assistant_head(text: &str, reasoning: Option<Reasoning<'_>>, has_calls: bool) -> Value {
    let mut message = Map::new();
    message.insert("role".into(), "assistant".into());
    let content = if text.is_empty() && has_calls {
        Value::Null
    } else {
        Value::String(text.to_owned())
    };
    message.insert("content".into(), content);
    if let Some(Reasoning { text, details }) = reasoning {
        if !text.is_empty() {
            message.insert("reasoning_content".into(), text.into());
        }
        if !details.is_empty() {
            message.insert("reasoning_details".into(), details.to_vec().into());
        }
    }
    Value::Object(message)
}

/// `message` (an object) with `tool_calls` in the wire's shape, when there are any.
pub(super) fn with_tool_calls(mut message: Value, tool_calls: &[ToolCall]) -> Value {
    if let (Value::Object(m), false) = (&mut message, tool_calls.is_empty()) {
        let calls = tool_calls
            .iter()
            .map(|call| {
                serde_json::json!({
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": *call.arguments},
                })
            })
            .collect();
        m.insert("tool_calls".into(), Value::Array(calls));
    }
    message
}

/// `text` without the spare capacity it grew: the arguments of a large call were appended in
/// many fragments.
fn exact(mut text: String) -> String {
    text.shrink_to_fit();
    text
}

// --- private: the chunk shape we read

#[derive(Debug, Default)]
struct PartialCall {
    index: u64,
    id: String,
    name: String,
    arguments: String,
}

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(default, borrow)]
    choices: Option<First<Choice<'a>>>,
    #[serde(default)]
    usage: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    #[serde(default, borrow)]
    finish_reason: Text<'a>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(default, borrow)]
    content: Text<'a>,
    #[serde(default, borrow)]
    reasoning_content: Text<'a>,
    #[serde(default, borrow)]
    reasoning: Text<'a>,
    #[serde(default)]
    reasoning_details: Option<Vec<Value>>,
    #[serde(default, borrow)]
    tool_calls: Option<Vec<CallFragment<'a>>>,
}

#[derive(Deserialize)]
struct CallFragment<'a> {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default, borrow)]
    id: Text<'a>,
    #[serde(default, borrow)]
    function: Option<FunctionFragment<'a>>,
}

#[derive(Deserialize)]
struct FunctionFragment<'a> {
    #[serde(default, borrow)]
    name: Text<'a>,
    #[serde(default, borrow)]
    arguments: Text<'a>,
}

/// The joined `text`/`summary` strings of one chunk's `reasoning_details`, if any is non-empty.
fn details_text(details: &[Value]) -> Option<Cow<'_, str>> {
    let mut pieces = details
        .iter()
        .flat_map(|detail| [detail.get("text"), detail.get("summary")])
        .flatten()
        .filter_map(Value::as_str)
        .filter(|piece| !piece.is_empty());
    let first = pieces.next()?;
    match pieces.next() {
        None => Some(Cow::Borrowed(first)),
        Some(second) => {
            let mut joined = first.to_owned();
            joined.push_str(second);
            pieces.for_each(|piece| joined.push_str(piece));
            Some(Cow::Owned(joined))
        }
    }
}

fn malformed(payload: &str, error: &dyn fmt::Display) -> FoldError {
    FoldError::Malformed {
        chunk: cap_chars(payload, MAX_QUOTED_CHUNK_CHARS),
        reason: error.to_string(),
    }
}

/// Error kinds, statuses and codes that mean the provider was busy or failed on its side (not
/// the request's fault): Anthropic's `type`, Gemini's `status`, OpenAI's `code`, and HTTP-like
/// numeric codes.
const TRANSIENT_KINDS: [&str; 9] = [
    "overloaded_error",
    "api_error",
    "rate_limit_error",
    "server_error",
    "rate_limit_exceeded",
    "UNAVAILABLE",
    "RESOURCE_EXHAUSTED",
    "INTERNAL",
    "DEADLINE_EXCEEDED",
];

/// Whether a provider's in-stream `error` is worth the same request again.
pub fn is_transient(error: &Value) -> bool {
    let named = ["type", "status", "code"].iter().any(|key| {
        error
            .get(key)
            .and_then(Value::as_str)
            .is_some_and(|kind| TRANSIENT_KINDS.contains(&kind))
    });
    let numbered = error
        .get("code")
        .and_then(Value::as_u64)
        .is_some_and(|code| code == 429 || (500..600).contains(&code));
    named || numbered
}

fn provider_message(error: &Value) -> String {
    let message = match error.get("message").and_then(Value::as_str) {
        Some(message) => message.to_owned(),
        None => match error {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        },
    };
    cap_chars(&message, MAX_QUOTED_CHUNK_CHARS)
}

/// A string field read leniently: a string (borrowed when it has no escapes), or absent for
/// `null` and for values of any other type.
#[derive(Default)]
struct Text<'a>(Option<Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for TextVisitor<'a> {
            type Value = Text<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Some(Cow::Borrowed(v))))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Text(Some(Cow::Owned(v.to_owned()))))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Text(Some(Cow::Owned(v))))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Text(None))
            }
            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Text(None))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Text(None))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Text(None))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Text(None))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Text(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Text(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Text(None))
            }
        }
        deserializer.deserialize_any(TextVisitor(PhantomData))
    }
}

/// The first element of a JSON array; the rest are skipped without being built.
struct First<T>(Option<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for First<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FirstVisitor<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for FirstVisitor<T> {
            type Value = First<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let first = seq.next_element::<T>()?;
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(First(first))
            }
        }
        deserializer.deserialize_seq(FirstVisitor(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Folds `chunks` (as JSON text) and returns the events and the outcome.
    fn fold(chunks: &[Value], send: SendReasoning) -> (Vec<StreamEvent>, ChatOutcome) {
        let mut events = Vec::new();
        let mut emit = |event| events.push(event);
        let mut fold = Fold::new();
        for chunk in chunks {
            fold.push_json(&chunk.to_string(), &mut emit)
                .expect("folds");
        }
        let outcome = fold.finish(send, &mut emit);
        (events, outcome)
    }

    fn text_chunk(text: &str) -> Value {
        json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
    }

    fn text(text: &str) -> StreamEvent {
        StreamEvent::TextDelta(text.into())
    }

    fn thought(text: &str) -> StreamEvent {
        StreamEvent::ThoughtDelta(text.into())
    }

    #[test]
    fn accumulating_text_with_finish_reason_and_usage_from_an_empty_choices_chunk() {
        let usage = json!({"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7});
        let (events, outcome) = fold(
            &[
                json!({"choices": [{"delta": {"role": "assistant", "content": ""}}]}),
                text_chunk("Hel"),
                text_chunk("lo"),
                json!({"choices": [{"delta": {}, "finish_reason": "stop"}], "usage": null}),
                json!({"choices": [], "usage": usage}),
            ],
            SendReasoning::Never,
        );
        assert_eq!(
            events,
            vec![
                text("Hel"),
                text("lo"),
                StreamEvent::Done {
                    finish_reason: Some("stop".into()),
                    usage: Some(usage.clone()),
                },
            ]
        );
        assert_eq!(
            outcome.transcript_message(),
            json!({"role": "assistant", "content": "Hello"})
        );
        assert_eq!(outcome.finish_reason.as_deref(), Some("stop"));
        assert_eq!(outcome.usage, Some(usage));
        assert!(!outcome.cancelled);
    }

    #[test]
    fn accumulating_interleaved_tool_call_fragments_split_mid_token() {
        let call = |index: u64, extra: Value| {
            let mut fragment = json!({"index": index});
            for (key, value) in extra.as_object().into_iter().flatten() {
                fragment[key] = value.clone();
            }
            json!({"choices": [{"delta": {"tool_calls": [fragment]}}]})
        };
        let (events, outcome) = fold(
            &[
                call(
                    0,
                    json!({"id": "call_a", "type": "function", "function": {"name": "re", "arguments": ""}}),
                ),
                call(
                    1,
                    json!({"id": "call_b", "type": "function", "function": {"name": "bash", "arguments": "{\"comm"}}),
                ),
                call(0, json!({"function": {"name": "ad", "arguments": "{\"pa"}})),
                call(1, json!({"function": {"arguments": "and\": \"ls\"}"}})),
                call(0, json!({"function": {"arguments": "th\": \"a.txt\"}"}})),
                json!({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]}),
            ],
            SendReasoning::Never,
        );
        let read = ToolCall {
            id: "call_a".into(),
            name: "read".into(),
            arguments: r#"{"path": "a.txt"}"#.to_owned().into(),
        };
        let bash = ToolCall {
            id: "call_b".into(),
            name: "bash".into(),
            arguments: r#"{"command": "ls"}"#.to_owned().into(),
        };
        assert_eq!(
            events,
            vec![
                StreamEvent::ToolCall(read),
                StreamEvent::ToolCall(bash),
                StreamEvent::Done {
                    finish_reason: Some("tool_calls".into()),
                    usage: None,
                },
            ]
        );
        assert_eq!(
            outcome.transcript_message(),
            json!({
                "role": "assistant",
                "content": null,
                "tool_calls": [
                    {"id": "call_a", "type": "function", "function": {"name": "read", "arguments": "{\"path\": \"a.txt\"}"}},
                    {"id": "call_b", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}},
                ],
            })
        );
    }

    #[test]
    fn tool_calls_in_one_chunk_without_index_or_id() {
        let (_, outcome) = fold(
            &[
                json!({"choices": [{"delta": {"content": "Let me look.", "tool_calls": [
                    {"id": "a", "function": {"name": "read", "arguments": "{}"}},
                    {"id": "b", "function": {"name": "bash", "arguments": "{}"}},
                ]}}]}),
                json!({"choices": [{"delta": {"tool_calls": [{"index": 2, "function": {"name": "edit", "arguments": "{}"}}]}}]}),
            ],
            SendReasoning::Never,
        );
        let ids: Vec<_> = outcome
            .tool_calls
            .iter()
            .map(|call| (call.id.as_str(), call.name.as_str()))
            .collect();
        assert_eq!(ids, [("a", "read"), ("b", "bash"), ("call_2", "edit")]);
        assert_eq!(outcome.transcript_message()["content"], "Let me look.");
    }

    #[test]
    fn reasoning_comes_from_each_provider_field() {
        let delta = |delta: Value| json!({"choices": [{"delta": delta}]});
        let cases = [
            (
                "reasoning_content",
                delta(json!({"reasoning_content": "think"})),
            ),
            ("reasoning", delta(json!({"reasoning": "think"}))),
            (
                "reasoning_details text",
                delta(json!({"reasoning_details": [{"type": "reasoning.text", "text": "think"}]})),
            ),
            (
                "reasoning_details summary",
                delta(
                    json!({"reasoning_details": [{"type": "reasoning.summary", "summary": "think"}]}),
                ),
            ),
            (
                "reasoning and reasoning_details together count once",
                delta(
                    json!({"reasoning": "think", "reasoning_details": [{"type": "reasoning.text", "text": "think"}]}),
                ),
            ),
            (
                "encrypted details and empty strings are not text",
                delta(json!({"reasoning_content": "", "reasoning_details": [
                    {"type": "reasoning.encrypted", "data": "xyz"},
                    {"type": "reasoning.text", "text": "think"},
                ]})),
            ),
        ];
        for (name, chunk) in cases {
            let (events, outcome) = fold(&[chunk, text_chunk("ok")], SendReasoning::Never);
            assert_eq!(events[..2], [thought("think"), text("ok")], "{name}");
            assert_eq!(outcome.reasoning, "think", "{name}");
        }
    }

    #[test]
    fn the_policy_decides_whether_the_message_keeps_the_reasoning() {
        let chunks = [
            json!({"choices": [{"delta": {"reasoning_content": "hmm"}}]}),
            text_chunk("answer"),
        ];
        let (_, off) = fold(&chunks, SendReasoning::Never);
        assert_eq!(
            off.transcript_message(),
            json!({"role": "assistant", "content": "answer"})
        );
        let (_, plain) = fold(&chunks, SendReasoning::ToolTurns);
        assert_eq!(
            plain.transcript_message(),
            off.transcript_message(),
            "no tool calls, nothing kept"
        );
        let (_, on) = fold(&chunks, SendReasoning::Always);
        assert_eq!(
            on.transcript_message(),
            json!({"role": "assistant", "content": "answer", "reasoning_content": "hmm"})
        );
        let (_, none) = fold(&[text_chunk("answer")], SendReasoning::Always);
        assert_eq!(
            none.transcript_message(),
            json!({"role": "assistant", "content": "answer"})
        );
    }

    #[test]
    fn reasoning_details_are_kept_raw_and_in_order_on_tool_turns() {
        let items = [
            json!({"type": "reasoning.text", "text": "a", "format": "f", "index": 0}),
            json!({"type": "reasoning.text", "text": "b", "signature": null, "index": 0}),
            json!({"type": "reasoning.encrypted", "data": "xyz", "id": "r1", "index": 1}),
        ];
        let chunks = [
            json!({"choices": [{"delta": {"reasoning": "a", "reasoning_details": [items[0]]}}]}),
            json!({"choices": [{"delta": {"reasoning_details": [items[1], items[2]]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c", "function": {"name": "ls", "arguments": "{}"}}]}}]}),
        ];
        let (events, outcome) = fold(&chunks, SendReasoning::ToolTurns);
        assert_eq!(events[..2], [thought("a"), thought("b")]);
        assert_eq!(outcome.transcript_message()["reasoning_content"], "ab");
        assert_eq!(
            outcome.transcript_message()["reasoning_details"],
            json!(items)
        );
        let (_, never) = fold(&chunks, SendReasoning::Never);
        assert!(
            never
                .transcript_message()
                .get("reasoning_details")
                .is_none()
        );
    }

    #[test]
    fn an_empty_reply_has_empty_string_content() {
        let (_, outcome) = fold(&[], SendReasoning::Never);
        assert_eq!(
            outcome.transcript_message(),
            json!({"role": "assistant", "content": ""})
        );
    }

    #[test]
    fn lenient_about_types_strict_about_json() {
        let mut fold = Fold::new();
        let mut events = Vec::new();
        let mut emit = |event| events.push(event);
        let odd = json!({"choices": [{"delta": {"content": 5, "reasoning": {"x": [1]}, "tool_calls": null},
                                      "finish_reason": null}], "usage": null});
        fold.push_json(&odd.to_string(), &mut emit)
            .expect("odd types are absent");
        fold.push_value(&odd, &mut emit)
            .expect("the same from a value");
        let error = fold
            .push_json("{\"choices\": [", &mut emit)
            .expect_err("bad JSON");
        assert!(
            matches!(&error, FoldError::Malformed { chunk, .. } if chunk == "{\"choices\": ["),
            "{error}"
        );
        assert!(fold.push_json("{\"choices\": 3}", &mut emit).is_err());
        assert!(events.is_empty());
    }

    #[test]
    fn transient_provider_errors_by_kind_status_or_code() {
        for error in [
            json!({"type": "overloaded_error"}),
            json!({"status": "UNAVAILABLE", "code": 503}),
            json!({"code": "server_error"}),
            json!({"code": 429}),
        ] {
            assert!(is_transient(&error), "{error}");
        }
        for error in [
            json!({"type": "invalid_request_error"}),
            json!({"status": "INVALID_ARGUMENT", "code": 400}),
            json!("plain text"),
        ] {
            assert!(!is_transient(&error), "{error}");
        }
    }

    #[test]
    fn a_provider_error_chunk_fails_with_its_message() {
        let mut fold = Fold::new();
        let chunk = json!({"error": {"code": 502, "message": "upstream died"}, "choices": []});
        let error = fold
            .push_json(&chunk.to_string(), &mut |_| {})
            .expect_err("fails");
        assert_eq!(
            error,
            FoldError::Provider {
                message: "upstream died".into(),
                transient: true,
            }
        );
    }

    #[test]
    fn a_partial_outcome_keeps_text_and_drops_tool_calls() {
        let mut fold = Fold::new();
        let mut emit = |_| {};
        fold.push_json(&text_chunk("part").to_string(), &mut emit)
            .expect("folds");
        let fragment = json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "x", "function": {"name": "bash"}}]}}]});
        fold.push_json(&fragment.to_string(), &mut emit)
            .expect("folds");
        assert!(fold.has_output());
        let outcome = fold.into_partial(true);
        assert_eq!(
            outcome.transcript_message(),
            json!({"role": "assistant", "content": "part"})
        );
        assert!(outcome.tool_calls.is_empty());
        assert!(outcome.cancelled);
    }
}
