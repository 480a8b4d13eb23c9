//! The I/O half of the model client: HTTP, timers, retries and cancellation around the pure
//! [`sse`](super::sse) decoder and [`fold`](super::fold).
//!
//! [`LlmClient::stream_chat`] posts one request and streams its reply. What is retried, with
//! exponential backoff from `retry_base_delay` doubling up to `retry_max_delay` (a `Retry-After`
//! or `retry-after-ms` header from the server replaces the backoff, capped the same way), at most
//! `max_retries` times, and only while no delta has been folded:
//! - HTTP 429 and 5xx;
//! - connect failures (refused, DNS, TLS, `connect_timeout`) and a connection reset or closed
//!   before the response or before the first delta.
//!
//! What is not retried: other HTTP statuses, an idle timeout (it already waited
//! `idle_timeout`), a malformed chunk, an error the provider reports inside the stream, and
//! anything after the first delta (the user has seen text; a second answer would differ). The
//! raw-chunk observer may have seen a role-only first chunk of an attempt that is then retried.
//!
//! Cancellation is checked while connecting, while reading and while waiting to retry. It drops
//! the response, which closes the connection at once, and returns `Ok` with `cancelled: true`.
//! A `200` reply with `Content-Type: application/json` (a server that ignored `stream: true`) is
//! read whole and folded as one chunk.
//!
//! It knows nothing of what the events are for, and it never writes to stdout.
//!
//! Compare with pi: the OpenAI SDK's own retries and `AbortSignal`, plus the agent's retry
//! setting (3 tries from 2 s).
//! Compare with oml.clj: `oml.llm/stream-chat` had no retries and no timeouts; cancellation
//! closed the body stream from a cancel hook, as here.

use std::time::Duration;

use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, RETRY_AFTER};
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;
use tokio::time::Instant;

use super::api::Api;
use super::error::{MAX_ERROR_BODY_BYTES, MAX_QUOTED_CHUNK_CHARS, cap_chars};
use super::fold::{Fold, FoldError};
use super::request::{encode_body, model_for};
use super::{ChatOutcome, ChatRequest, LlmConfig, LlmError, StreamEvent};
use crate::cancel::CancelToken;

/// The largest non-streamed (`application/json`) reply read; a longer one is an error. The
/// reply is held whole in memory before folding, hence a cap.
pub const MAX_JSON_REPLY_BYTES: usize = 64 * 1024 * 1024;

mod http;
mod stream;
mod wire;

pub use http::{Roots, warm_up};

pub(super) use wire::authorize;

/// A model client. Cheap to share: the connection pool is the process's (reused across calls,
/// rebuilt only when `connect_timeout` changes), and it holds nothing else; every call takes its
/// settings as an argument, so settings changed between calls apply to the next one.
#[derive(Debug, Default)]
pub struct LlmClient {}

impl LlmClient {
    pub fn new() -> Self {
        Self::default()
    }

    /// Stream one chat completion.
    ///
    /// Events go to `events` as they arrive (a closed receiver is fine; the call goes on). On
    /// success the outcome holds the assistant message, the finish reason and the usage. If
    /// `cancel` fires, the connection is closed and the outcome has `cancelled: true` and the
    /// text so far. Fails with [`LlmError::NoModel`] before any I/O when neither `request.model`
    /// nor `config.model` names a model. See the module docs for what is retried.
    pub async fn stream_chat(
        &self,
        config: &LlmConfig,
        request: &ChatRequest,
        events: &UnboundedSender<StreamEvent>,
        cancel: &CancelToken,
    ) -> Result<ChatOutcome, LlmError> {
        let model = model_for(request.model.as_deref(), config)?;
        let config = &config.clone().pinned(Some(model));
        let body = encode_body(model, request, config)
            .map_err(|error| LlmError::Config(format!("cannot encode the request: {error}")))?;
        self.stream_body(config, body, events, cancel).await
    }

    /// [`LlmClient::stream_chat`] with the body already encoded (see
    /// [`super::request::encode_body_with`]); the model in it is the caller's choice.
    pub async fn stream_body(
        &self,
        config: &LlmConfig,
        body: Vec<u8>,
        events: &UnboundedSender<StreamEvent>,
        cancel: &CancelToken,
    ) -> Result<ChatOutcome, LlmError> {
        let api = config.api();
        let (url, body) = wire::outgoing(config, body)?;
        let http = self.http(config)?;
        let builder = http
            .post(&url)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "text/event-stream")
            .body(body);
        let builder = authorize(builder, config)?;
        let template = builder.build().map_err(|error| {
            LlmError::Config(format!(
                "cannot build a request for {url}: {}",
                chain(&error)
            ))
        })?;
        let call = Call {
            api,
            http: &http,
            url: &url,
            config,
            events,
            cancel,
        };
        let mut retries = 0;
        loop {
            if cancel.is_cancelled() {
                return Ok(Fold::new().into_partial(true));
            }
            let request = template.try_clone().ok_or_else(|| {
                LlmError::Config("the request body cannot be sent twice".to_owned())
            })?;
            let (error, retry_after) = match call.attempt(request).await {
                Ok(outcome) => return Ok(outcome),
                Err(Failure::Fatal(error)) => return Err(error),
                Err(Failure::Retryable { error, retry_after }) => (error, retry_after),
            };
            if retries >= config.max_retries {
                return Err(error);
            }
            let delay = backoff_delay(config, retries, retry_after);
            retries += 1;
            tracing::debug!(attempt = retries, ?delay, %error, "retrying (the Retry event tells the UI)");
            let _ = events.send(StreamEvent::Retry {
                attempt: retries,
                delay,
                reason: error.brief(),
            });
            tokio::select! {
                biased;
                () = cancel.cancelled() => return Ok(Fold::new().into_partial(true)),
                () = tokio::time::sleep(delay) => {}
            }
        }
    }

    /// The pooled HTTP client for `config`'s connect timeout and base URL ([`Roots::for_url`]).
    pub(super) fn http(&self, config: &LlmConfig) -> Result<reqwest::Client, LlmError> {
        http::pooled(config)
    }
}

/// How long to wait before retry number `retry` (0 for the first retry): the server's
/// `retry_after` if it sent one, else `retry_base_delay * 2^retry`; never more than
/// `retry_max_delay`.
pub fn backoff_delay(config: &LlmConfig, retry: u32, retry_after: Option<Duration>) -> Duration {
    let factor = 1u32.checked_shl(retry).unwrap_or(u32::MAX);
    retry_after
        .unwrap_or_else(|| config.retry_base_delay.saturating_mul(factor))
        .min(config.retry_max_delay)
}

// --- private: one attempt

/// How an attempt failed.
enum Failure {
    /// Worth another attempt (if retries are left); `retry_after` is the server's wish.
    Retryable {
        error: LlmError,
        retry_after: Option<Duration>,
    },
    Fatal(LlmError),
}

/// What a call's attempts share.
struct Call<'a> {
    api: Api,
    http: &'a reqwest::Client,
    url: &'a str,
    config: &'a LlmConfig,
    events: &'a UnboundedSender<StreamEvent>,
    cancel: &'a CancelToken,
}

/// The end of reading a whole (non-streamed) body.
enum WholeBody {
    Cancelled,
    /// `complete` is false when the cap, the idle timeout or a transport error cut it short.
    Read {
        bytes: Vec<u8>,
        complete: bool,
    },
}

/// Content types of a 200 answer that cannot be a model's stream (a proxy's login or error
/// page): the call fails at once, naming the type, rather than being retried.
const NOT_STREAMS: &[&str] = &[
    "text/html",
    "application/xhtml",
    "text/xml",
    "application/xml",
];

/// Characters of such a page quoted in the error.
const NOT_A_STREAM_QUOTE_CHARS: usize = 300;

impl Call<'_> {
    async fn attempt(&self, request: reqwest::Request) -> Result<ChatOutcome, Failure> {
        let idle = self.config.idle_timeout;
        let response = tokio::select! {
            biased;
            () = self.cancel.cancelled() => return Ok(Fold::new().into_partial(true)),
            sent = tokio::time::timeout(idle, self.http.execute(request)) => match sent {
                Err(_elapsed) => {
                    return Err(Failure::Fatal(LlmError::IdleTimeout {
                        idle,
                        partial: Box::new(Fold::new().into_partial(false)),
                    }));
                }
                Ok(Err(error)) => {
                    return Err(Failure::Retryable {
                        error: LlmError::Connect {
                            url: self.url.to_owned(),
                            reason: chain(&error.without_url()),
                        },
                        retry_after: None,
                    });
                }
                Ok(Ok(response)) => response,
            },
        };

        let status = response.status();
        if !status.is_success() {
            let retry_after = retry_after(response.headers());
            let (bytes, complete) = match self.read_whole(response, MAX_ERROR_BODY_BYTES).await {
                WholeBody::Cancelled => return Ok(Fold::new().into_partial(true)),
                WholeBody::Read { bytes, complete } => (bytes, complete),
            };
            let mut body = String::from_utf8_lossy(&bytes).trim().to_owned();
            if !complete {
                body.push('…');
            }
            let error = LlmError::Http {
                status: status.as_u16(),
                body,
            };
            return Err(if status.as_u16() == 429 || status.is_server_error() {
                Failure::Retryable { error, retry_after }
            } else {
                Failure::Fatal(error)
            });
        }

        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if NOT_STREAMS.iter().any(|t| content_type.starts_with(t)) {
            return Err(Failure::Fatal(
                self.not_a_stream(content_type, response).await,
            ));
        }
        if content_type.starts_with("application/json") && self.api == Api::Chat {
            self.whole_reply(response).await
        } else {
            self.stream(response).await
        }
    }

    /// The error for a 200 answer that is a page, not a stream: its type and the start of it.
    async fn not_a_stream(&self, content_type: String, response: reqwest::Response) -> LlmError {
        let body = match self.read_whole(response, MAX_ERROR_BODY_BYTES).await {
            WholeBody::Cancelled => String::new(),
            WholeBody::Read { bytes, .. } => String::from_utf8_lossy(&bytes).trim().to_owned(),
        };
        LlmError::NotAStream {
            content_type,
            body: crate::llm::error::cap_chars(&body, NOT_A_STREAM_QUOTE_CHARS),
        }
    }

    /// A server that ignored `stream: true` sent the whole completion as JSON: fold its
    /// `choices[].message` as the `delta` of one chunk.
    async fn whole_reply(&self, response: reqwest::Response) -> Result<ChatOutcome, Failure> {
        let bytes = match self.read_whole(response, MAX_JSON_REPLY_BYTES).await {
            WholeBody::Cancelled => return Ok(Fold::new().into_partial(true)),
            WholeBody::Read {
                bytes,
                complete: true,
            } => bytes,
            WholeBody::Read {
                complete: false, ..
            } => {
                return Err(broken(
                    format!("the JSON reply was cut off (or is over {MAX_JSON_REPLY_BYTES} bytes)"),
                    Fold::new(),
                ));
            }
        };
        let mut fold = Fold::new();
        let mut emit = |event: StreamEvent| {
            let _ = self.events.send(event);
        };
        let completion: Value = serde_json::from_slice(&bytes).map_err(|error| {
            Failure::Fatal(LlmError::MalformedChunk {
                chunk: cap_chars(&String::from_utf8_lossy(&bytes), MAX_QUOTED_CHUNK_CHARS),
                reason: error.to_string(),
                partial: Box::new(Fold::new().into_partial(false)),
            })
        })?;
        if let Some(observer) = &self.config.on_chunk
            && let Err(message) = observer(&completion)
        {
            tracing::warn!(%message, "error in llm.on-chunk");
        }
        if let Err(error) = fold.push_value(&completion_as_chunk(completion), &mut emit) {
            return Err(Failure::Fatal(fold_failure(error, fold)));
        }
        Ok(fold.finish(self.config.reasoning_policy().send, &mut emit))
    }

    /// Fold one payload, showing it to the on-chunk observer first when there is one.
    fn fold_payload(
        &self,
        fold: &mut Fold,
        native: &mut Option<crate::llm::native::Native>,
        payload: &str,
        emit: &mut impl FnMut(StreamEvent),
    ) -> Result<(), FoldError> {
        if self.config.on_chunk.is_none() {
            if native.is_none() {
                return fold.push_json(payload, emit);
            }
            match super::hot::decode(self.api, payload) {
                Some(super::hot::Hot::Text(text)) => {
                    fold.push_text(&text, emit);
                    return Ok(());
                }
                Some(super::hot::Hot::Thought(text)) => {
                    fold.push_thought(&text, emit);
                    return Ok(());
                }
                None => {}
            }
        }
        let chunk: Value = serde_json::from_str(payload).map_err(|error| FoldError::Malformed {
            chunk: cap_chars(payload, MAX_QUOTED_CHUNK_CHARS),
            reason: error.to_string(),
        })?;
        if let Some(observer) = &self.config.on_chunk
            && let Err(message) = observer(&chunk)
        {
            tracing::warn!(%message, "error in llm.on-chunk");
        }
        match native {
            None => fold.push_value(&chunk, emit),
            Some(events) => match events.chunk(&chunk) {
                Some(chunk) => fold.push_value(&chunk, emit),
                None => Ok(()),
            },
        }
    }

    /// Read a body whole, up to `cap` bytes, within the idle timeout between reads.
    async fn read_whole(&self, mut response: reqwest::Response, cap: usize) -> WholeBody {
        let idle = self.config.idle_timeout;
        let cancelled = self.cancel.cancelled();
        tokio::pin!(cancelled);
        let timer = tokio::time::sleep(idle);
        tokio::pin!(timer);
        let mut bytes = Vec::new();
        loop {
            let read = tokio::select! {
                biased;
                () = &mut cancelled => return WholeBody::Cancelled,
                () = &mut timer => return WholeBody::Read { bytes, complete: false },
                read = response.chunk() => read,
            };
            match read {
                Ok(Some(piece)) => {
                    timer.as_mut().reset(Instant::now() + idle);
                    let room = cap - bytes.len();
                    if piece.len() > room {
                        bytes.extend_from_slice(&piece[..room]);
                        return WholeBody::Read {
                            bytes,
                            complete: false,
                        };
                    }
                    bytes.extend_from_slice(&piece);
                }
                Ok(None) => {
                    return WholeBody::Read {
                        bytes,
                        complete: true,
                    };
                }
                Err(_) => {
                    return WholeBody::Read {
                        bytes,
                        complete: false,
                    };
                }
            }
        }
    }
}

// --- private helpers

/// A stream that broke: retryable while nothing was folded, else fatal with the partial reply.
fn broken(reason: String, fold: Fold) -> Failure {
    let retryable = !fold.has_output();
    let error = LlmError::StreamBroken {
        reason,
        partial: Box::new(fold.into_partial(false)),
    };
    if retryable {
        Failure::Retryable {
            error,
            retry_after: None,
        }
    } else {
        Failure::Fatal(error)
    }
}

fn fold_failure(error: FoldError, fold: Fold) -> LlmError {
    let partial = Box::new(fold.into_partial(false));
    match error {
        FoldError::Malformed { chunk, reason } => LlmError::MalformedChunk {
            chunk,
            reason,
            partial,
        },
        FoldError::Provider { message, .. } => LlmError::Provider { message, partial },
    }
}

/// The server's requested wait: `retry-after-ms` (OpenAI), else `Retry-After` in seconds or as
/// an HTTP date (the time from now until then; a date already past means no wait).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    retry_after_at(headers, std::time::SystemTime::now())
}

fn retry_after_at(headers: &HeaderMap, now: std::time::SystemTime) -> Option<Duration> {
    let text = |name| Some(headers.get(name)?.to_str().ok()?.trim());
    let number = |name| text(name)?.parse::<f64>().ok();
    number("retry-after-ms")
        .and_then(|ms| Duration::try_from_secs_f64(ms / 1000.0).ok())
        .or_else(|| number(RETRY_AFTER.as_str()).and_then(|s| Duration::try_from_secs_f64(s).ok()))
        .or_else(|| {
            let date = httpdate::parse_http_date(text(RETRY_AFTER.as_str())?).ok()?;
            Some(date.duration_since(now).unwrap_or(Duration::ZERO))
        })
}

/// A non-streamed completion rewritten as one stream chunk: each choice's `message` becomes its
/// `delta`, and tool calls get the `index` a stream would have given them.
fn completion_as_chunk(mut completion: Value) -> Value {
    let choices = completion
        .get_mut("choices")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten();
    for choice in choices {
        let Some(choice) = choice.as_object_mut() else {
            continue;
        };
        let Some(mut message) = choice.remove("message") else {
            continue;
        };
        let calls = message
            .get_mut("tool_calls")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten();
        for (index, call) in calls.enumerate() {
            if let Some(call) = call.as_object_mut() {
                call.entry("index").or_insert(index.into());
            }
        }
        choice.insert("delta".to_owned(), message);
    }
    completion
}

/// An error with its sources, for messages that must say what actually went wrong.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::SendReasoning;
    use reqwest::header::HeaderValue;
    use serde_json::json;

    #[test]
    fn only_an_https_endpoint_reads_the_systems_roots() {
        for (url, roots) in [
            ("http://localhost:11434/v1", Roots::Bundled),
            ("HTTP://127.0.0.1:8080", Roots::Bundled),
            ("https://api.openai.com/v1", Roots::System),
            ("HTTPS://example.com", Roots::System),
            // Anything else (a typo, an empty setting) keeps the full store: it never trusts less.
            ("localhost:8080", Roots::System),
            ("", Roots::System),
        ] {
            assert_eq!(Roots::for_url(url), roots, "{url}");
        }
    }

    #[test]
    fn backoff_doubles_honours_retry_after_and_is_capped() {
        let config = LlmConfig {
            retry_base_delay: Duration::from_millis(100),
            retry_max_delay: Duration::from_secs(1),
            ..LlmConfig::default()
        };
        let delays: Vec<_> = (0..6)
            .map(|retry| backoff_delay(&config, retry, None))
            .collect();
        assert_eq!(
            delays,
            [100, 200, 400, 800, 1000, 1000].map(Duration::from_millis)
        );
        assert_eq!(backoff_delay(&config, 40, None), Duration::from_secs(1));
        let wish = Some(Duration::from_millis(50));
        assert_eq!(backoff_delay(&config, 3, wish), Duration::from_millis(50));
        let long_wish = Some(Duration::from_secs(120));
        assert_eq!(backoff_delay(&config, 0, long_wish), Duration::from_secs(1));
    }

    #[test]
    fn retry_after_headers_in_seconds_milliseconds_or_as_a_date() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut map = HeaderMap::new();
            for (name, value) in pairs {
                map.insert(*name, HeaderValue::from_static(value));
            }
            map
        };
        type Case = (&'static [(&'static str, &'static str)], Option<Duration>);
        let cases: &[Case] = &[
            (&[("retry-after", "2")], Some(Duration::from_secs(2))),
            (
                &[("retry-after", " 1.5 ")],
                Some(Duration::from_millis(1500)),
            ),
            (
                &[("retry-after-ms", "250"), ("retry-after", "9")],
                Some(Duration::from_millis(250)),
            ),
            // HTTP dates, against a fixed "now" of Wed, 21 Oct 2015 07:28:00 GMT.
            (
                &[("retry-after", "Wed, 21 Oct 2015 07:28:30 GMT")],
                Some(Duration::from_secs(30)),
            ),
            (
                &[("retry-after", "Wednesday, 21-Oct-15 07:29:00 GMT")],
                Some(Duration::from_secs(60)),
            ),
            (
                &[("retry-after", "Wed, 21 Oct 2015 07:00:00 GMT")],
                Some(Duration::ZERO),
            ),
            (&[("retry-after", "tomorrow")], None),
            (&[("retry-after", "-3")], None),
            (&[], None),
        ];
        let now = httpdate::parse_http_date("Wed, 21 Oct 2015 07:28:00 GMT").expect("a date");
        for (pairs, expected) in cases {
            assert_eq!(retry_after_at(&headers(pairs), now), *expected, "{pairs:?}");
        }
    }

    #[test]
    fn a_whole_completion_becomes_one_chunk() {
        let completion = json!({
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": "hi",
                "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
            }}],
            "usage": {"total_tokens": 3}
        });
        let mut fold = Fold::new();
        let mut events = Vec::new();
        fold.push_value(&completion_as_chunk(completion), &mut |event| {
            events.push(event)
        })
        .expect("folds");
        let outcome = fold.finish(SendReasoning::Never, &mut |event| events.push(event));
        assert_eq!(outcome.text, "hi");
        assert_eq!(outcome.tool_calls.len(), 1);
        assert_eq!(outcome.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(outcome.usage, Some(json!({"total_tokens": 3})));
        assert_eq!(events.len(), 3, "{events:?}");
    }
}
