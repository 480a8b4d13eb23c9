//! The model client: one streaming call to an OpenAI-compatible `/chat/completions` endpoint,
//! or to Anthropic's Messages API through the translation in [`anthropic`] ([`api`] says which).
//!
//! A call takes the settings ([`LlmConfig`], read by the caller at call time), a [`ChatRequest`]
//! (messages, tools, an optional model override), a channel for [`StreamEvent`]s and the
//! prompt's [`CancelToken`](crate::cancel::CancelToken). It posts the request, decodes the
//! server-sent events ([`sse`]), folds the JSON chunks into deltas and a final assistant message
//! ([`fold`]), and returns a [`ChatOutcome`] or an [`LlmError`]. Failures before the first delta
//! (429, 5xx, connect and reset errors) are retried with bounded backoff; after the first delta
//! nothing is retried, and an error carries the partial outcome so the text already shown is not
//! lost. Cancelling closes the connection and returns `Ok` with `cancelled: true`.
//!
//! The layering is: [`sse`] and [`fold`] are pure (bytes in, payloads out; chunks in, events
//! out), [`provider`] is the table of what each provider wants back of earlier reasoning,
//! [`request`] builds the URL and body, [`client`] owns the I/O (HTTP, timers, retries,
//! cancellation). Only [`client`] knows about the network.
//!
//! It deliberately knows nothing of Lisp, the agent loop, ACP or transcripts: settings arrive as
//! plain data, the raw-chunk hook is a plain Rust closure ([`ChunkObserver`]), and the caller
//! decides what a `finish_reason` of `"length"` means (the agent maps it to `max_tokens`).
//!
//! Compare with pi: `pi-ai` has one stream function per provider and never throws (a failure is
//! a final message with stop reason `error`); here one OpenAI-compatible client returns
//! `Result`, with the partial reply inside the error.
//! Compare with oml.clj: `oml.llm/stream-chat` (same request, SSE rules, folding and message
//! shape); this adds retries, connect and idle timeouts, `reasoning_details`, mid-stream provider
//! errors and a clear error for a malformed chunk.

pub mod anthropic;
pub mod api;
pub mod chat_shape;
pub mod client;
pub mod config;
pub mod error;
pub mod fold;
pub mod gemini;
pub mod hot;
pub mod models;
pub mod native;
pub mod provider;
pub mod quiet;
pub mod request;
pub mod responses;
pub mod setup;
pub mod sse;

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

pub use api::Api;
pub use client::{LlmClient, MAX_JSON_REPLY_BYTES, backoff_delay};
pub use config::{
    ChunkObserver, DEFAULT_BASE_URL, DEFAULT_CONNECT_TIMEOUT, DEFAULT_CONTENT_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_RETRIES, DEFAULT_RETRY_BASE_DELAY, DEFAULT_RETRY_MAX_DELAY,
    ENV_API_KEY, ENV_BASE_URL, ENV_MODEL, EnvDefaults, LlmConfig,
};
pub use error::{LlmError, MAX_ERROR_BODY_BYTES, MAX_QUOTED_CHUNK_CHARS};
pub use provider::{
    NATIVE_KEYS, PROVIDERS, Provider, ProviderRow, REASONING_KEYS, ReasoningField, ReasoningPolicy,
    SendReasoning, WhenMissing,
};
pub use request::{RESERVED_BODY_KEYS, chat_completions_url, model_for};

/// One model call's input. The settings live in [`LlmConfig`]; this is what changes per turn.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChatRequest {
    /// The OpenAI chat messages, sent as they are (`{role, content, ...}` objects).
    pub messages: Vec<Value>,
    /// Tools offered to the model; an empty list sends no `tools` key at all.
    pub tools: Vec<ToolSpec>,
    /// Overrides [`LlmConfig::model`] for this call only.
    pub model: Option<String>,
}

/// A tool offered to the model, sent as `{type: "function", function: {name, description,
/// parameters}}`.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// A JSON Schema object describing the arguments.
    pub parameters: Value,
}

/// A complete tool call requested by the model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolCall {
    /// The provider's call id; `call_<index>` when the provider sent none, so that the tool
    /// result can still refer to it.
    pub id: String,
    pub name: String,
    /// The arguments as the model wrote them: a JSON text that may be invalid. Shared, not
    /// copied, by the `ToolCall` event and the outcome: they can be as large as a file.
    pub arguments: Arc<String>,
}

/// What a call reports while it streams, in order.
///
/// Text and thought deltas arrive as soon as they are decoded; the tool calls come at the end,
/// one per call in index order, followed by `Done`. A cancelled or failed call sends no
/// `ToolCall` and no `Done`.
#[derive(Clone, Debug, PartialEq)]
pub enum StreamEvent {
    /// A piece of the answer's text.
    TextDelta(String),
    /// A piece of the model's reasoning (`reasoning_content`, `reasoning` or
    /// `reasoning_details`).
    ThoughtDelta(String),
    /// One complete tool call.
    ToolCall(ToolCall),
    /// The stream ended normally.
    Done {
        finish_reason: Option<String>,
        usage: Option<Value>,
    },
    /// The request failed before any delta and will be sent again after `delay`. `attempt` counts
    /// retries from 1. Sent so that a UI can say why nothing is happening.
    Retry {
        attempt: u32,
        delay: Duration,
        reason: String,
    },
}

/// The result of one call.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatOutcome {
    /// The assistant message to append to the transcript, but its tool calls: `{role:
    /// "assistant", content}`, plus `reasoning_content` and `reasoning_details` (only when the
    /// call's [`SendReasoning`] policy would send this message's reasoning back, and only when
    /// non-empty). `content` is `null` exactly when the text is empty and there are tool calls.
    /// The calls are [`ChatOutcome::tool_calls`], held once: a call's arguments can be as large
    /// as a file. [`ChatOutcome::transcript_message`] is the whole message. A cancelled or
    /// partial outcome has the text only.
    pub message: Value,
    /// The full text of the answer.
    pub text: String,
    /// The full reasoning, whether or not it goes into `message`.
    pub reasoning: String,
    /// The tool calls in index order (empty when cancelled or partial).
    pub tool_calls: Vec<ToolCall>,
    /// The first choice's last `finish_reason` (`"stop"`, `"tool_calls"`, `"length"`, ...).
    pub finish_reason: Option<String>,
    /// The last top-level `usage` object the provider sent.
    pub usage: Option<Value>,
    /// The call was cancelled; the outcome holds what had arrived.
    pub cancelled: bool,
}

impl ChatOutcome {
    /// The whole assistant message for the transcript: [`ChatOutcome::message`] with
    /// `tool_calls` in the wire's shape (`[{id, type: "function", function: {name,
    /// arguments}}]`, only when there are any). Copies the arguments.
    pub fn transcript_message(&self) -> Value {
        fold::with_tool_calls(self.message.clone(), &self.tool_calls)
    }

    /// Whether the model stopped because it hit its output limit (`finish_reason: "length"`),
    /// which the agent reports as the `max_tokens` stop reason.
    pub fn hit_length_limit(&self) -> bool {
        self.finish_reason.as_deref() == Some("length")
    }
}
