//! How a model call fails, and the caps on what an error quotes.
//!
//! Errors that happen after part of the reply arrived carry that part ([`LlmError::partial`]),
//! so the text the user already saw is kept in the transcript. This module only describes
//! failures; deciding which are retried is [`client`](super::client)'s job.
//!
//! Compare with pi: a failed stream is a final message with stop reason `error`; here it is an
//! `Err` that still holds the partial message.
//! Compare with oml.clj: the same two messages for a missing model and an HTTP error; transport
//! errors there were raw exceptions.

use std::time::Duration;

use super::ChatOutcome;

/// At most this many bytes of an HTTP error body are read and quoted; the head is kept (that is
/// where providers put the JSON error message).
pub const MAX_ERROR_BODY_BYTES: usize = 8 * 1024;
/// At most this many characters of a malformed chunk or a provider error are quoted; the head is
/// kept.
pub const MAX_QUOTED_CHUNK_CHARS: usize = 500;
/// At most this many characters of a provider's message are quoted in a one-line notice
/// ([`LlmError::brief`]).
pub const MAX_BRIEF_CHARS: usize = 200;

/// How providers word a refusal of a request longer than the model's context, in their error
/// bodies (OpenAI, OpenRouter, DeepSeek, Anthropic-compatible gateways, vLLM, llama.cpp), lower
/// case. Read once here, where the provider's answer is parsed, so the rest of oml asks
/// [`LlmError::exceeds_context`] instead of reading messages.
const CONTEXT_EXCEEDED_WORDINGS: &[&str] = &[
    "context_length_exceeded",
    "context length",
    "maximum context",
    "context window",
    "prompt is too long",
    "too many tokens",
    "exceeds the context",
];

/// The HTTP statuses a context refusal comes with: 400 (OpenAI, Anthropic, vLLM), 413 (gateways
/// that size the body first). A 429 that speaks of tokens is a rate limit, never this.
const CONTEXT_EXCEEDED_STATUSES: &[u16] = &[400, 413];

/// A failed model call.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// Neither the request nor the settings name a model. `found` names the providers whose
    /// key is in the environment (`super::setup::hosted`), so the message says what to choose
    /// from.
    #[error(
        "No model configured{}: run `oml` in a terminal to choose a provider and a model, or set OPENAI_MODEL (e.g. OPENAI_MODEL=gpt-4o-mini) or (setq llm.model \"...\") in init.fnl.",
        found_text(.found)
    )]
    NoModel { found: Vec<String> },

    /// The settings cannot make a request (an unusable base URL, a TLS setup failure).
    #[error("invalid model client configuration: {0}")]
    Config(String),

    /// The server answered with a non-success status. `body` is capped at
    /// [`MAX_ERROR_BODY_BYTES`]; the message quotes the provider's own message from it when the
    /// body is a JSON error, else its first line ([`LlmError::brief`]), so it is said once.
    #[error("Model request failed: {}", http_brief(*.status, .body))]
    Http { status: u16, body: String },

    /// The server answered 200 with something that is not an event stream or JSON (an HTML
    /// login or error page from a proxy): `body` is its start, capped like an error body.
    #[error("the model server answered with {content_type}, not an event stream: {body}")]
    NotAStream { content_type: String, body: String },

    /// The request could not be sent or its response never started: connection refused, DNS,
    /// TLS, connect timeout, reset before the headers or before the first delta.
    #[error("could not reach the model at {url}: {reason}")]
    Connect { url: String, reason: String },

    /// Nothing arrived for `idle` (no response headers, or no bytes between two reads).
    #[error("the model sent nothing for {}s (llm.idle-timeout)", idle.as_secs_f64())]
    IdleTimeout {
        idle: Duration,
        partial: Box<ChatOutcome>,
    },

    /// The stream went on for `quiet` without any content (only keep-alives or empty deltas).
    #[error("the model sent no content for {}s (llm.content-timeout)", quiet.as_secs_f64())]
    NoContent {
        quiet: Duration,
        partial: Box<ChatOutcome>,
    },

    /// The stream broke after it had started: reset, truncated body, or an end without
    /// `[DONE]` or a `finish_reason`.
    #[error("the model stream broke off: {reason}")]
    StreamBroken {
        reason: String,
        partial: Box<ChatOutcome>,
    },

    /// A `data:` payload was not JSON (or not shaped like a chat completion chunk). `chunk` is
    /// the payload, capped at [`MAX_QUOTED_CHUNK_CHARS`].
    #[error("malformed chunk from the model ({reason}): {chunk}")]
    MalformedChunk {
        chunk: String,
        reason: String,
        partial: Box<ChatOutcome>,
    },

    /// The provider reported an error inside the stream (a chunk with a top-level `error`, as
    /// OpenRouter sends when the upstream model fails mid-reply).
    #[error("the model provider reported an error: {message}")]
    Provider {
        message: String,
        partial: Box<ChatOutcome>,
    },
}

impl LlmError {
    /// What had arrived before the failure, for errors that happen once the stream is open.
    pub fn partial(&self) -> Option<&ChatOutcome> {
        match self {
            Self::IdleTimeout { partial, .. }
            | Self::NoContent { partial, .. }
            | Self::StreamBroken { partial, .. }
            | Self::MalformedChunk { partial, .. }
            | Self::Provider { partial, .. } => Some(partial),
            Self::NoModel { .. }
            | Self::Config(_)
            | Self::Http { .. }
            | Self::NotAStream { .. }
            | Self::Connect { .. } => None,
        }
    }

    /// Whether the provider refused the request as longer than the model's context: an HTTP 400
    /// or 413 whose body says so ([`CONTEXT_EXCEEDED_WORDINGS`]), or an error reported inside
    /// the stream that says so.
    pub fn exceeds_context(&self) -> bool {
        let says_so = |text: &str| {
            let text = text.to_lowercase();
            CONTEXT_EXCEEDED_WORDINGS.iter().any(|w| text.contains(w))
        };
        match self {
            Self::Http { status, body } => {
                CONTEXT_EXCEEDED_STATUSES.contains(status) && says_so(body)
            }
            Self::Provider { message, .. } => says_so(message),
            _ => false,
        }
    }

    /// The failure in one short line, for a notice that names it (a retry): an HTTP error as
    /// its status and the provider's own message (`error.message`, `message`, `error` or
    /// `detail` of a JSON body), or the body's first line, capped at [`MAX_BRIEF_CHARS`];
    /// any other error as its message's first line.
    pub fn brief(&self) -> String {
        match self {
            Self::Http { status, body } => http_brief(*status, body),
            other => {
                let text = other.to_string();
                cap_chars(text.lines().next().unwrap_or(""), MAX_BRIEF_CHARS)
            }
        }
    }

    /// The HTTP status, for [`LlmError::Http`].
    pub fn status(&self) -> Option<u16> {
        if let Self::Http { status, .. } = self {
            Some(*status)
        } else {
            None
        }
    }
}

/// An HTTP failure in one line: the status and the provider's message (or the body's first
/// line), capped at [`MAX_BRIEF_CHARS`].
fn http_brief(status: u16, body: &str) -> String {
    let said = provider_message(body)
        .unwrap_or_else(|| body.lines().next().unwrap_or("").trim().to_owned());
    let said = cap_chars(&said, MAX_BRIEF_CHARS);
    if said.is_empty() {
        format!("HTTP {status}")
    } else {
        format!("HTTP {status}: {said}")
    }
}

/// The message a provider put in a JSON error body: OpenAI's and Anthropic's
/// `{"error": {"message": …}}`, a top-level `message`, an `error` string, or FastAPI's `detail`.
fn provider_message(body: &str) -> Option<String> {
    let json: serde_json::Value = serde_json::from_str(body.trim()).ok()?;
    let error = json.get("error");
    [
        error.and_then(|e| e.get("message")),
        json.get("message"),
        error,
        json.get("detail"),
    ]
    .into_iter()
    .flatten()
    .find_map(|value| value.as_str().map(|text| text.trim().to_owned()))
    .filter(|text| !text.is_empty())
}

/// ` (found: A, B)` for the providers of [`LlmError::NoModel`], or nothing.
fn found_text(found: &[String]) -> String {
    if found.is_empty() {
        String::new()
    } else {
        format!(" (found: {})", found.join(", "))
    }
}

impl LlmError {
    /// [`LlmError::NoModel`] with the providers this environment holds a key for.
    pub fn no_model() -> LlmError {
        let found = super::setup::hosted(|name| std::env::var(name).ok());
        LlmError::NoModel {
            found: found.into_iter().map(|c| c.name).collect(),
        }
    }
}

pub(crate) fn cap_chars(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        None => text.to_owned(),
        Some((cut, _)) => format!("{}…", &text[..cut]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_brief_names_the_status_and_the_providers_message_once() {
        let http = |body: &str| {
            LlmError::Http {
                status: 500,
                body: body.to_owned(),
            }
            .brief()
        };
        assert_eq!(
            http(r#"{"error":{"message":"upstream overloaded","type":"server_error"}}"#),
            "HTTP 500: upstream overloaded"
        );
        assert_eq!(http(r#"{"detail":"bad gateway"}"#), "HTTP 500: bad gateway");
        assert_eq!(http("<html>\n<body>oops"), "HTTP 500: <html>");
        assert_eq!(http(""), "HTTP 500");
        let connect = LlmError::Connect {
            url: "http://x".into(),
            reason: "refused".into(),
        };
        assert_eq!(
            connect.brief(),
            "could not reach the model at http://x: refused"
        );
    }

    #[test]
    fn only_a_refusal_for_length_exceeds_the_context() {
        let http = |status, body: &str| LlmError::Http {
            status,
            body: body.to_owned(),
        };
        let provider = |message: &str| LlmError::Provider {
            message: message.to_owned(),
            partial: Box::new(ChatOutcome {
                message: serde_json::Value::Null,
                text: String::new(),
                reasoning: String::new(),
                tool_calls: Vec::new(),
                finish_reason: None,
                usage: None,
                cancelled: false,
            }),
        };
        let cases = [
            (
                http(400, r#"{"error":{"code":"context_length_exceeded"}}"#),
                true,
            ),
            (
                http(400, "This model's Maximum Context length is 8192"),
                true,
            ),
            (http(413, "prompt is too long: 210000 tokens"), true),
            (provider("input exceeds the context window"), true),
            (
                http(429, "Rate limit reached: too many tokens per minute"),
                false,
            ),
            (http(500, "context length"), false),
            (http(400, "invalid tool schema"), false),
            (LlmError::Config("context window".to_owned()), false),
        ];
        for (error, expected) in cases {
            assert_eq!(error.exceeds_context(), expected, "{error}");
        }
    }

    #[test]
    fn caps_keep_the_head_and_respect_char_boundaries() {
        assert_eq!(cap_chars("héllo", 10), "héllo");
        assert_eq!(cap_chars("héllo", 2), "hé…");
        assert_eq!(cap_chars("", 0), "");
    }
}
