//! Newline-delimited JSON-RPC 2.0 over a pair of tokio byte streams: framing, classification,
//! request ids, routing of answers, and one ordered writer per connection.
//!
//! Both faces of oml speak through this module. As an ACP agent, oml serves an editor over its own
//! stdin and stdout. As an ACP client, it drives agent subprocesses over their pipes. The idea is
//! two tasks per [`Connection`]. A reader task cuts the incoming bytes into lines (at byte level,
//! under a large cap) and turns each line into one [`Message`]. It routes responses to the pending
//! [`Connection::request`] that owns their id and hands everything else to the owner as
//! [`Incoming`]. A writer task owns the write half and writes every enqueued message as one line,
//! in the order it was enqueued. So concurrent senders never interleave bytes, and "every update
//! of a turn before the turn's response" is just queue order.
//!
//! It deliberately knows nothing of ACP methods, sessions or Lisp. Params and results are
//! `serde_json::Value`s or anything `Serialize`, and the policy on bad input is the caller's: an
//! agent answers it ([`Connection::respond_malformed`]); a client logs it as noise and may give
//! up after too many consecutive bad lines ([`Incoming::Malformed`] carries the count).
//!
//! Compare with pi: RPC mode (`docs/rpc.md`) is strictly LF-delimited JSONL too, but with pi's
//! own commands rather than JSON-RPC. Compare with oml.clj: `oml.acp` wrote under a lock and read
//! on one thread that also ran handlers, so `request!` had to refuse to run on it; here the reader
//! never runs owner code, so a handler may always await a request.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::future::pending;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};
use tracing::Instrument;

use crate::cancel::CancelToken;

// --- Limits -----------------------------------------------------------------------------------

/// The longest line the reader accepts by default, counted in bytes before its `\n` (a `\r`
/// before the `\n` counts). ACP carries whole files and images in one message, so this is
/// generous: Python's 64 KiB default crashed several ACP clients, and the Python SDK now allows
/// 50 MB. A longer line is discarded as it streams in (never buffered whole) and reported as
/// [`MalformedKind::TooLong`]; only its head is kept, as the excerpt, and reading goes on with the
/// next line.
pub const DEFAULT_MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// How much of a bad line is kept in [`Malformed::excerpt`] and in logs: the head, cut on a
/// character boundary.
pub const MALFORMED_EXCERPT_BYTES: usize = 200;

/// Size of the reader's buffer, which is how many bytes are asked of the OS per read.
pub const READ_BUFFER_BYTES: usize = 64 * 1024;

/// After a line longer than this has been read, the line buffer's memory is released instead
/// of kept for the next line, so one huge message does not hold its size for the connection's
/// life.
pub const RETAINED_LINE_BUFFER_BYTES: usize = 1024 * 1024;

/// How many messages may wait in the writer queue by default before senders wait for room. The
/// bound gives backpressure when the peer reads slowly; it cannot stall our reading, because the
/// reader never sends through the writer.
pub const DEFAULT_WRITE_QUEUE: usize = 1024;

/// The writer joins queued lines into one write until the batch reaches this many bytes (a single
/// longer line is written alone), then flushes.
pub const WRITE_BATCH_BYTES: usize = 256 * 1024;

/// How many ids of requests given up on (timed out, cancelled or dropped) are remembered, newest
/// kept, so that their late answers are logged quietly rather than warned about as unknown.
pub const ABANDONED_IDS_KEPT: usize = 1024;

// --- Error codes ------------------------------------------------------------------------------

/// JSON-RPC: the line is not JSON (also used here for invalid UTF-8 and oversize lines).
pub const PARSE_ERROR: i32 = -32700;
/// JSON-RPC: the JSON is not a valid request object.
pub const INVALID_REQUEST: i32 = -32600;
/// JSON-RPC: the method does not exist or is not available.
pub const METHOD_NOT_FOUND: i32 = -32601;
/// JSON-RPC: the params are wrong for the method.
pub const INVALID_PARAMS: i32 = -32602;
/// JSON-RPC: something failed inside the receiver.
pub const INTERNAL_ERROR: i32 = -32603;
/// ACP: authentication is required before this operation.
pub const AUTH_REQUIRED: i32 = -32000;
/// ACP: a resource (session, file) was not found.
pub const RESOURCE_NOT_FOUND: i32 = -32002;
/// ACP (from LSP): the request was cancelled.
pub const REQUEST_CANCELLED: i32 = -32800;

/// A JSON-RPC error object, as sent and as received. Unknown codes are kept as they are.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{message} ({code})")]
pub struct RpcError {
    pub code: i32,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    /// An error with any code and message and no data.
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// The same error carrying `data` (a detail string or any JSON value).
    pub fn with_data(mut self, data: impl Into<Value>) -> Self {
        self.data = Some(data.into());
        self
    }

    /// `-32700 Parse error`.
    pub fn parse_error() -> Self {
        Self::new(PARSE_ERROR, "Parse error")
    }

    /// `-32600 Invalid Request`.
    pub fn invalid_request() -> Self {
        Self::new(INVALID_REQUEST, "Invalid Request")
    }

    /// `-32601 Method not found: <method>`.
    pub fn method_not_found(method: &str) -> Self {
        Self::new(METHOD_NOT_FOUND, format!("Method not found: {method}"))
    }

    /// `-32602 Invalid params: <detail>`.
    pub fn invalid_params(detail: impl fmt::Display) -> Self {
        Self::new(INVALID_PARAMS, format!("Invalid params: {detail}"))
    }

    /// `-32603 Internal error: <detail>`.
    pub fn internal_error(detail: impl fmt::Display) -> Self {
        Self::new(INTERNAL_ERROR, format!("Internal error: {detail}"))
    }

    /// `-32000 Authentication required`.
    pub fn auth_required() -> Self {
        Self::new(AUTH_REQUIRED, "Authentication required")
    }

    /// `-32002 Resource not found: <what>`.
    pub fn resource_not_found(what: impl fmt::Display) -> Self {
        Self::new(RESOURCE_NOT_FOUND, format!("Resource not found: {what}"))
    }

    /// `-32800 Request cancelled`.
    pub fn request_cancelled() -> Self {
        Self::new(REQUEST_CANCELLED, "Request cancelled")
    }
}

// --- Messages ---------------------------------------------------------------------------------

/// A request id: a JSON number (kept exactly as received, so `0` and `7` are echoed as integers)
/// or a string. Null ids are not accepted on requests.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    Number(serde_json::Number),
    String(String),
}

impl From<u64> for RequestId {
    fn from(n: u64) -> Self {
        Self::Number(n.into())
    }
}

impl From<&str> for RequestId {
    fn from(s: &str) -> Self {
        Self::String(s.to_owned())
    }
}

impl From<String> for RequestId {
    fn from(s: String) -> Self {
        Self::String(s)
    }
}

/// Shown as on the wire: `7` or `"abc"`.
impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Number(n) => write!(f, "{n}"),
            Self::String(s) => write!(f, "{}", Value::from(s.as_str())),
        }
    }
}

/// A call that expects an answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub id: RequestId,
    pub method: String,
    /// `None` when the message had no `params` member.
    pub params: Option<Value>,
}

/// A call that expects no answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Notification {
    pub method: String,
    /// `None` when the message had no `params` member.
    pub params: Option<Value>,
}

/// An answer to a request.
#[derive(Clone, Debug, PartialEq)]
pub struct Response {
    /// `None` for an error answer with a null (or missing) id: the peer could not read one of
    /// our messages well enough to tell which.
    pub id: Option<RequestId>,
    pub outcome: Result<Value, RpcError>,
}

/// Why a line is not a usable JSON-RPC message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MalformedKind {
    /// The line is not JSON.
    ParseError,
    /// The line is not UTF-8.
    InvalidUtf8,
    /// The line is longer than the reader's cap; `len` is its whole length in bytes.
    TooLong { len: usize },
    /// Valid JSON that is not a JSON-RPC 2.0 request, notification or response: a scalar, an
    /// array (batches are not supported), an object without `"jsonrpc": "2.0"` such as a log
    /// record, or one of the wrong shape.
    InvalidRequest,
}

/// A line that could not be used. On the client side every one of these is agent noise.
#[derive(Clone, Debug, PartialEq)]
pub struct Malformed {
    pub kind: MalformedKind,
    /// The id, when the line is an invalid request whose id could still be read (a number or a
    /// string); it is what the error answer must carry.
    pub id: Option<RequestId>,
    /// What is wrong, in words (also sent as the error's `data`).
    pub detail: String,
    /// The head of the line, at most [`MALFORMED_EXCERPT_BYTES`], decoded lossily.
    pub excerpt: String,
}

impl Malformed {
    /// The error an agent answers this line with: `-32700` for lines that are not JSON (not
    /// UTF-8, too long, or unparseable) and `-32600` for JSON that is not a valid request; the
    /// detail goes in `data`. Its id is [`Malformed::id`], null when there is none.
    pub fn error(&self) -> RpcError {
        let error = match self.kind {
            MalformedKind::ParseError
            | MalformedKind::InvalidUtf8
            | MalformedKind::TooLong { .. } => RpcError::parse_error(),
            MalformedKind::InvalidRequest => RpcError::invalid_request(),
        };
        error.with_data(self.detail.clone())
    }
}

/// One line, classified.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    Request(Request),
    Notification(Notification),
    Response(Response),
    Malformed(Malformed),
}

/// What the reader hands to the owner of a [`Connection`]. Responses never appear here: the
/// reader routes them to the pending request itself.
#[derive(Clone, Debug, PartialEq)]
pub enum Incoming {
    Request(Request),
    Notification(Notification),
    /// A line that could not be used. `consecutive` counts the bad lines in a row, this one
    /// included; any good message resets it. The policy (answer, skip, give up) is the owner's.
    Malformed {
        malformed: Malformed,
        consecutive: u32,
    },
}

/// Classifies one complete line (without its line ending). Never fails: anything unusable is a
/// [`Message::Malformed`]. Strict about `"jsonrpc": "2.0"`, so a JSON log record that happens to
/// carry an `id` is never taken for a response.
pub fn classify(line: &[u8]) -> Message {
    let text = match std::str::from_utf8(line) {
        Ok(text) => text,
        Err(e) => {
            return malformed(
                MalformedKind::InvalidUtf8,
                None,
                format!("line is not valid UTF-8: {e}"),
                line,
            );
        }
    };
    match serde_json::from_str::<Value>(text) {
        Ok(value) => classify_value(value, line),
        Err(e) => malformed(
            MalformedKind::ParseError,
            None,
            format!("line is not JSON: {e}"),
            line,
        ),
    }
}

// --- Reading ----------------------------------------------------------------------------------

/// Turns a byte stream into classified messages, one per non-blank line.
///
/// Lines end at `\n`; a `\r` before it is dropped; a final line without `\n` is read at EOF;
/// blank lines are skipped. UTF-8 is decoded per complete line, so characters split across reads
/// are fine. Bad lines come out as [`Message::Malformed`] and reading goes on.
pub struct FrameReader<R> {
    inner: BufReader<R>,
    max_line_bytes: usize,
    /// The start of a line whose end has not arrived yet.
    line: Vec<u8>,
    /// Set while the rest of an oversize line is being discarded.
    skipping: Option<Skipping>,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// A reader over `reader` that rejects lines longer than `max_line_bytes`.
    pub fn new(reader: R, max_line_bytes: usize) -> Self {
        Self {
            inner: BufReader::with_capacity(READ_BUFFER_BYTES, reader),
            max_line_bytes,
            line: Vec::new(),
            skipping: None,
        }
    }

    /// The next message, or `None` at EOF. An `Err` is an I/O error of the underlying stream.
    pub async fn next_message(&mut self) -> io::Result<Option<Message>> {
        loop {
            let chunk = match self.inner.fill_buf().await {
                Ok(chunk) => chunk,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if chunk.is_empty() {
                if let Some(skipping) = self.skipping.take() {
                    return Ok(Some(skipping.finish(self.max_line_bytes)));
                }
                if self.line.is_empty() {
                    return Ok(None);
                }
                let line = std::mem::take(&mut self.line);
                match line_message(&line) {
                    Some(message) => return Ok(Some(message)),
                    None => continue,
                }
            }
            let taken = chunk.len();
            let Some(end) = memchr::memchr(b'\n', chunk) else {
                // No line end yet: keep the bytes, or count them if the line is already too long.
                if let Some(skipping) = &mut self.skipping {
                    skipping.len += taken;
                } else if self.line.len() + taken > self.max_line_bytes {
                    self.skipping = Some(Skipping::start(&self.line, chunk));
                    self.line = Vec::new();
                } else {
                    self.line.extend_from_slice(chunk);
                }
                self.inner.consume(taken);
                continue;
            };
            let message = if let Some(mut skipping) = self.skipping.take() {
                skipping.len += end;
                Some(skipping.finish(self.max_line_bytes))
            } else if self.line.len() + end > self.max_line_bytes {
                let skipping = Skipping::start(&self.line, &chunk[..end]);
                self.line = Vec::new();
                Some(skipping.finish(self.max_line_bytes))
            } else if self.line.is_empty() {
                // The whole line is in the read buffer: classify it in place, without a copy.
                line_message(&chunk[..end])
            } else {
                self.line.extend_from_slice(&chunk[..end]);
                let message = line_message(&self.line);
                self.line.clear();
                if self.line.capacity() > RETAINED_LINE_BUFFER_BYTES {
                    self.line = Vec::new();
                }
                message
            };
            self.inner.consume(end + 1);
            if let Some(message) = message {
                return Ok(Some(message));
            }
        }
    }
}

// --- Connection -------------------------------------------------------------------------------

/// A synchronous handler for incoming messages, called by the reader task in line order (see
/// [`Options::on_incoming`]).
pub type IncomingHandler = Arc<dyn Fn(Incoming) + Send + Sync>;

/// How a [`Connection`] reads and writes.
#[derive(Clone)]
pub struct Options {
    /// Lines longer than this are rejected (see [`DEFAULT_MAX_LINE_BYTES`]).
    pub max_line_bytes: usize,
    /// Messages that may wait for the writer before senders wait (see [`DEFAULT_WRITE_QUEUE`]).
    pub write_queue: usize,
    /// Who is on the other end, for logs and error messages ("client", "agent claude").
    pub peer: String,
    /// When set, the reader calls this with every incoming request, notification and bad line,
    /// on its own task, in line order, and *before it reads the next line*; the channel returned
    /// by [`Connection::start`] then stays empty. So by the time a response wakes its waiter,
    /// everything that preceded it on the wire has been handled: this is how the ACP client puts
    /// a turn's `session/update`s in place before the turn's `session/prompt` answer is seen. The
    /// handler must be quick and must not block on the connection (it runs on the reader task;
    /// it may `tokio::spawn`). `None` (the default) hands messages to the channel instead.
    pub on_incoming: Option<IncomingHandler>,
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Options")
            .field("max_line_bytes", &self.max_line_bytes)
            .field("write_queue", &self.write_queue)
            .field("peer", &self.peer)
            .field("on_incoming", &self.on_incoming.as_ref().map(|_| "Fn"))
            .finish()
    }
}

impl Default for Options {
    fn default() -> Self {
        Self {
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            write_queue: DEFAULT_WRITE_QUEUE,
            peer: "peer".to_owned(),
            on_incoming: None,
        }
    }
}

/// Why a message could not be sent.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SendError {
    /// The writer has stopped: the pipe broke, or this side closed the connection.
    #[error("connection to {peer} is closed: {reason}")]
    Closed { peer: String, reason: String },
    /// The message could not be turned into JSON.
    #[error("could not encode the message as JSON: {reason}")]
    Encode { reason: String },
}

/// Why a request got no result.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RequestError {
    /// The peer answered with an error.
    #[error("{method} failed: {error}")]
    Rpc { method: String, error: RpcError },
    /// No answer came within the timeout; the request is no longer pending.
    #[error("{method} got no answer within {after:?}")]
    Timeout {
        method: String,
        id: RequestId,
        after: Duration,
    },
    /// The cancel token fired; the request is no longer pending. `id` is `None` when the token
    /// had fired before the request was sent, so the peer never saw it. Telling the peer (with
    /// ACP's `$/cancel_request`, say) is the caller's business.
    #[error("cancelled while waiting for {method}")]
    Cancelled {
        method: String,
        id: Option<RequestId>,
    },
    /// The peer closed its end (EOF) before answering.
    #[error("{peer} closed the connection before answering {method}")]
    Closed { peer: String, method: String },
    /// Reading or writing failed before an answer came.
    #[error("i/o error while waiting for {method}: {reason}")]
    Io { method: String, reason: String },
    /// The request could not be sent at all.
    #[error("could not send {method}: {source}")]
    Send { method: String, source: SendError },
}

/// One JSON-RPC connection: a cheap, cloneable handle to its writer and its pending requests.
///
/// When the last clone is dropped, the reader task stops (the incoming channel ends) and the
/// writer writes what is queued, then shuts its stream down so the peer sees EOF. To make sure
/// everything sent has reached the peer before exiting, await [`Connection::flush`] or
/// [`Connection::close`].
#[derive(Clone)]
pub struct Connection {
    inner: Arc<Inner>,
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("peer", &self.inner.shared.peer)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// Starts the reader and writer tasks on the current tokio runtime (so this must be called
    /// inside one) and returns the handle with the channel of incoming requests, notifications
    /// and bad lines.
    ///
    /// The channel is unbounded on purpose: the reader must never wait for the owner, because it
    /// is also the one routing answers. An owner that awaits a request of its own while messages
    /// pile up would otherwise deadlock, and that is the normal case for a client awaiting a
    /// `session/prompt` answer while the turn's updates stream in. Its growth is bounded by how
    /// fast the peer can write.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime, like `tokio::spawn`.
    pub fn start<R, W>(
        reader: R,
        writer: W,
        options: Options,
    ) -> (Connection, mpsc::UnboundedReceiver<Incoming>)
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let shared = Arc::new(Shared {
            peer: options.peer.clone(),
            state: Mutex::new(State::default()),
        });
        let span = tracing::debug_span!("jsonrpc", peer = %options.peer);
        let (queue, queue_rx) = mpsc::channel(options.write_queue.max(1));
        let (incoming, incoming_rx) = mpsc::unbounded_channel();
        let frames = FrameReader::new(reader, options.max_line_bytes);
        let deliver = match options.on_incoming {
            Some(handler) => Deliver::Handler(handler),
            None => Deliver::Channel(incoming),
        };
        let reader_task =
            tokio::spawn(read_loop(frames, Arc::clone(&shared), deliver).instrument(span.clone()));
        tokio::spawn(write_loop(writer, queue_rx, Arc::clone(&shared)).instrument(span));
        let inner = Inner {
            queue,
            shared,
            next_id: AtomicU64::new(1),
            reader: reader_task.abort_handle(),
        };
        (
            Connection {
                inner: Arc::new(inner),
            },
            incoming_rx,
        )
    }

    /// Who is on the other end, as named in [`Options::peer`].
    pub fn peer(&self) -> &str {
        &self.inner.shared.peer
    }

    /// Sends a request and waits for its answer, with no timeout and no cancellation.
    pub async fn request(
        &self,
        method: &str,
        params: impl Serialize,
    ) -> Result<Value, RequestError> {
        self.request_with(method, params, None, None).await
    }

    /// Sends a request (ids count up from 1 per connection) and waits for its answer, at most
    /// `timeout`, and until `cancel` fires. When it gives up, the request stops being pending,
    /// and a late answer is dropped. Dropping the returned future also gives the request up.
    pub async fn request_with(
        &self,
        method: &str,
        params: impl Serialize,
        timeout: Option<Duration>,
        cancel: Option<&CancelToken>,
    ) -> Result<Value, RequestError> {
        if cancel.is_some_and(CancelToken::is_cancelled) {
            return Err(RequestError::Cancelled {
                method: method.to_owned(),
                id: None,
            });
        }
        let number = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let line = encode(&OutRequest {
            jsonrpc: "2.0",
            id: number,
            method,
            params: &params,
        })
        .map_err(|source| RequestError::Send {
            method: method.to_owned(),
            source,
        })?;
        let (answer_tx, answer_rx) = oneshot::channel();
        let shared = &self.inner.shared;
        let mut guard = shared
            .register(number, method, answer_tx)
            .map_err(|gone| gone.request_error(&shared.peer, method))?;
        let item = WriteItem::Line {
            bytes: line,
            request: Some(number),
        };
        if let Err(source) = self.enqueue(item).await {
            return Err(RequestError::Send {
                method: method.to_owned(),
                source,
            });
        }
        let timed_out = async {
            match timeout {
                Some(after) => tokio::time::sleep(after).await,
                None => pending().await,
            }
        };
        let cancelled = async {
            match cancel {
                Some(token) => token.cancelled().await,
                None => pending().await,
            }
        };
        tokio::select! {
            biased;
            answer = answer_rx => {
                guard.answered();
                match answer {
                    Ok(Answer::Result(value)) => Ok(value),
                    Ok(Answer::Error(error)) => Err(RequestError::Rpc {
                        method: method.to_owned(),
                        error,
                    }),
                    Ok(Answer::Gone(gone)) => Err(gone.request_error(&self.inner.shared.peer, method)),
                    Err(_) => Err(Gone::Eof.request_error(&self.inner.shared.peer, method)),
                }
            }
            () = cancelled => Err(RequestError::Cancelled {
                method: method.to_owned(),
                id: Some(RequestId::from(number)),
            }),
            () = timed_out => Err(RequestError::Timeout {
                method: method.to_owned(),
                id: RequestId::from(number),
                after: timeout.unwrap_or_default(),
            }),
        }
    }

    /// Enqueues a notification. It is written after everything enqueued before it.
    pub async fn notify(&self, method: &str, params: impl Serialize) -> Result<(), SendError> {
        let bytes = encode(&OutNotification {
            jsonrpc: "2.0",
            method,
            params: &params,
        })?;
        self.enqueue(WriteItem::Line {
            bytes,
            request: None,
        })
        .await
    }

    /// Enqueues the answer `result` to the request `id`, echoing the id exactly.
    pub async fn respond(&self, id: &RequestId, result: impl Serialize) -> Result<(), SendError> {
        let bytes = encode(&OutResult {
            jsonrpc: "2.0",
            id,
            result: &result,
        })?;
        self.enqueue(WriteItem::Line {
            bytes,
            request: None,
        })
        .await
    }

    /// Enqueues the error answer `error` to the request `id`.
    pub async fn respond_error(&self, id: &RequestId, error: RpcError) -> Result<(), SendError> {
        self.send_error(Some(id), &error).await
    }

    /// Enqueues the answer an agent owes a bad line: [`Malformed::error`] with the line's id, or
    /// a null id when none could be read.
    pub async fn respond_malformed(&self, malformed: &Malformed) -> Result<(), SendError> {
        self.send_error(malformed.id.as_ref(), &malformed.error())
            .await
    }

    /// Waits until everything enqueued before this call has been written and flushed. This is
    /// the acknowledgement "this message is on the wire": send it, then flush. Order between
    /// messages needs no flush; the queue keeps it.
    pub async fn flush(&self) -> Result<(), SendError> {
        let (ack, acked) = oneshot::channel();
        self.enqueue(WriteItem::Flush(ack)).await?;
        acked.await.map_err(|_| self.inner.shared.send_error())
    }

    /// Writes and flushes everything enqueued before this call, then shuts the write half down so
    /// the peer sees EOF (for a client: closes the agent's stdin). Later sends fail with
    /// [`SendError::Closed`]. Closing again does nothing.
    pub async fn close(&self) -> Result<(), SendError> {
        let (ack, acked) = oneshot::channel();
        let sent = self.enqueue(WriteItem::Close(ack)).await;
        let done = match sent {
            Ok(()) => acked.await.is_ok(),
            Err(_) => false,
        };
        if done || self.inner.shared.closed_here() {
            Ok(())
        } else {
            Err(self.inner.shared.send_error())
        }
    }

    /// How many requests are waiting for an answer.
    pub fn pending_requests(&self) -> usize {
        self.inner.shared.state().pending.len()
    }

    async fn send_error(&self, id: Option<&RequestId>, error: &RpcError) -> Result<(), SendError> {
        let bytes = encode(&OutError {
            jsonrpc: "2.0",
            id,
            error,
        })?;
        self.enqueue(WriteItem::Line {
            bytes,
            request: None,
        })
        .await
    }

    async fn enqueue(&self, item: WriteItem) -> Result<(), SendError> {
        self.inner
            .queue
            .send(item)
            .await
            .map_err(|_| self.inner.shared.send_error())
    }
}

// --- Internals --------------------------------------------------------------------------------

struct Inner {
    queue: mpsc::Sender<WriteItem>,
    shared: Arc<Shared>,
    next_id: AtomicU64,
    reader: tokio::task::AbortHandle,
}

impl Drop for Inner {
    /// With no handle left, nobody can answer incoming requests or await responses.
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// What the reader, the writer and the handles share.
struct Shared {
    peer: String,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    pending: HashMap<u64, Pending>,
    /// Ids of requests given up on, oldest first, at most [`ABANDONED_IDS_KEPT`].
    abandoned: VecDeque<u64>,
    /// Set once no answer can come any more; new requests then fail at once.
    gone: Option<Gone>,
    /// Set once the writer has stopped, with why.
    writer_stopped: Option<WriterStop>,
}

struct Pending {
    method: String,
    answer: oneshot::Sender<Answer>,
}

enum Answer {
    Result(Value),
    Error(RpcError),
    Gone(Gone),
}

/// Why answers stopped coming.
#[derive(Clone, Debug)]
enum Gone {
    Eof,
    Io(String),
}

impl Gone {
    fn request_error(&self, peer: &str, method: &str) -> RequestError {
        match self {
            Self::Eof => RequestError::Closed {
                peer: peer.to_owned(),
                method: method.to_owned(),
            },
            Self::Io(reason) => RequestError::Io {
                method: method.to_owned(),
                reason: reason.clone(),
            },
        }
    }
}

#[derive(Clone, Debug)]
enum WriterStop {
    ClosedHere,
    Failed(String),
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        // The lock is never held across a panic point that could leave the state half-changed.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn register(
        self: &Arc<Self>,
        number: u64,
        method: &str,
        answer: oneshot::Sender<Answer>,
    ) -> Result<PendingGuard, Gone> {
        let mut state = self.state();
        if let Some(gone) = &state.gone {
            return Err(gone.clone());
        }
        let pending = Pending {
            method: method.to_owned(),
            answer,
        };
        state.pending.insert(number, pending);
        Ok(PendingGuard {
            shared: Arc::clone(self),
            number,
            armed: true,
        })
    }

    /// Hands a response to the request waiting for it, or logs why nobody is.
    fn route(&self, response: Response) {
        let Some(id) = response.id else {
            if let Err(error) = response.outcome {
                tracing::warn!(%error, "{} could not read one of our messages", self.peer);
            }
            return;
        };
        let number = match &id {
            RequestId::Number(n) => n.as_u64(),
            RequestId::String(_) => None,
        };
        let mut state = self.state();
        let pending = number.and_then(|n| state.pending.remove(&n));
        let abandoned = number.is_some_and(|n| state.abandoned.contains(&n));
        drop(state);
        match pending {
            Some(pending) => {
                let answer = match response.outcome {
                    Ok(value) => Answer::Result(value),
                    Err(error) => Answer::Error(error),
                };
                // The requester may have just gone away; then nobody wants the answer.
                let _ = pending.answer.send(answer);
            }
            None if abandoned => {
                tracing::debug!(%id, "late answer to a request given up on; dropped");
            }
            None => {
                tracing::warn!(%id, "{} answered an id no request is waiting for; dropped", self.peer);
            }
        }
    }

    /// The reader has stopped: fail every pending request and any later one.
    fn reader_stopped(&self, gone: Gone) {
        let mut state = self.state();
        state.gone.get_or_insert(gone.clone());
        let pending: Vec<Pending> = state.pending.drain().map(|(_, p)| p).collect();
        drop(state);
        for p in pending {
            tracing::debug!(method = %p.method, "failing a pending request: {gone:?}");
            let _ = p.answer.send(Answer::Gone(gone.clone()));
        }
    }

    /// The writer has stopped: remember why, and fail the requests it could not write.
    fn writer_stopped(&self, stop: WriterStop, unwritten: &[u64]) {
        let reason = match &stop {
            WriterStop::ClosedHere => "this side closed the connection".to_owned(),
            WriterStop::Failed(reason) => reason.clone(),
        };
        let mut state = self.state();
        state.writer_stopped.get_or_insert(stop);
        let failed: Vec<Pending> = unwritten
            .iter()
            .filter_map(|n| state.pending.remove(n))
            .collect();
        drop(state);
        for p in failed {
            let _ = p.answer.send(Answer::Gone(Gone::Io(reason.clone())));
        }
    }

    fn send_error(&self) -> SendError {
        let reason = match &self.state().writer_stopped {
            Some(WriterStop::ClosedHere) => "this side closed the connection".to_owned(),
            Some(WriterStop::Failed(reason)) => reason.clone(),
            None => "the writer has stopped".to_owned(),
        };
        SendError::Closed {
            peer: self.peer.clone(),
            reason,
        }
    }

    fn closed_here(&self) -> bool {
        matches!(self.state().writer_stopped, Some(WriterStop::ClosedHere))
    }
}

/// Removes a request from the pending table when its caller stops waiting for any reason other
/// than getting the answer (timeout, cancel, or the future being dropped).
struct PendingGuard {
    shared: Arc<Shared>,
    number: u64,
    armed: bool,
}

impl PendingGuard {
    fn answered(&mut self) {
        self.armed = false;
    }
}

impl Drop for PendingGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut state = self.shared.state();
        if state.pending.remove(&self.number).is_some() {
            if state.abandoned.len() >= ABANDONED_IDS_KEPT {
                state.abandoned.pop_front();
            }
            state.abandoned.push_back(self.number);
        }
    }
}

enum WriteItem {
    /// One encoded message with its `\n`; `request` is the id when it is one of our requests.
    Line {
        bytes: Vec<u8>,
        request: Option<u64>,
    },
    /// Acknowledge once everything before has been written and flushed.
    Flush(oneshot::Sender<()>),
    /// Write everything before, shut the stream down, stop.
    Close(oneshot::Sender<()>),
}

#[derive(Serialize)]
struct OutRequest<'a, P> {
    jsonrpc: &'static str,
    id: u64,
    method: &'a str,
    params: &'a P,
}

#[derive(Serialize)]
struct OutNotification<'a, P> {
    jsonrpc: &'static str,
    method: &'a str,
    params: &'a P,
}

#[derive(Serialize)]
struct OutResult<'a, T> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    result: &'a T,
}

#[derive(Serialize)]
struct OutError<'a> {
    jsonrpc: &'static str,
    id: Option<&'a RequestId>,
    error: &'a RpcError,
}

/// One message as one line. serde_json escapes newlines inside strings, so the only `\n` is ours.
fn encode(message: &impl Serialize) -> Result<Vec<u8>, SendError> {
    let mut bytes = serde_json::to_vec(message).map_err(|e| SendError::Encode {
        reason: e.to_string(),
    })?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// Where the reader hands what is not a response.
enum Deliver {
    Channel(mpsc::UnboundedSender<Incoming>),
    Handler(IncomingHandler),
}

async fn read_loop<R: AsyncRead + Unpin>(
    mut frames: FrameReader<R>,
    shared: Arc<Shared>,
    deliver: Deliver,
) {
    let mut consecutive: u32 = 0;
    let gone = loop {
        let message = match frames.next_message().await {
            Ok(Some(message)) => message,
            Ok(None) => break Gone::Eof,
            Err(e) => break Gone::Io(format!("reading from {} failed: {e}", shared.peer)),
        };
        let delivered = match message {
            Message::Response(response) => {
                consecutive = 0;
                shared.route(response);
                continue;
            }
            Message::Request(request) => {
                consecutive = 0;
                Incoming::Request(request)
            }
            Message::Notification(notification) => {
                consecutive = 0;
                Incoming::Notification(notification)
            }
            Message::Malformed(malformed) => {
                consecutive = consecutive.saturating_add(1);
                tracing::warn!(
                    kind = ?malformed.kind,
                    consecutive,
                    excerpt = %malformed.excerpt,
                    "unusable line from {}: {}",
                    shared.peer,
                    malformed.detail,
                );
                Incoming::Malformed {
                    malformed,
                    consecutive,
                }
            }
        };
        match &deliver {
            Deliver::Channel(incoming) => {
                if incoming.send(delivered).is_err() {
                    tracing::debug!("nobody takes incoming messages any more; dropped one");
                }
            }
            // Called before the next line is read, so before any later response is routed.
            Deliver::Handler(handler) => handler(delivered),
        }
    };
    tracing::debug!("reader stopped: {gone:?}");
    shared.reader_stopped(gone);
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut writer: W,
    mut queue: mpsc::Receiver<WriteItem>,
    shared: Arc<Shared>,
) {
    let mut batch: Vec<u8> = Vec::new();
    let mut requests: Vec<u64> = Vec::new();
    let mut acks: Vec<oneshot::Sender<()>> = Vec::new();
    while let Some(first) = queue.recv().await {
        let mut close = None;
        let mut next = Some(first);
        while let Some(item) = next.take() {
            match item {
                WriteItem::Line { bytes, request } => {
                    // A line that would not fit the buffer kept from earlier batches becomes the
                    // buffer, so a large message is never copied.
                    if batch.is_empty() && bytes.len() > batch.capacity() {
                        batch = bytes;
                    } else {
                        batch.extend_from_slice(&bytes);
                    }
                    requests.extend(request);
                }
                WriteItem::Flush(ack) => acks.push(ack),
                WriteItem::Close(ack) => {
                    close = Some(ack);
                    break;
                }
            }
            if batch.len() < WRITE_BATCH_BYTES {
                next = queue.try_recv().ok();
            }
        }
        if let Err(e) = write_batch(&mut writer, &batch).await {
            let reason = format!("writing to {} failed: {e}", shared.peer);
            tracing::warn!("{reason}; the connection can no longer send");
            stop_writer(&shared, &mut queue, WriterStop::Failed(reason), requests).await;
            return;
        }
        for ack in acks.drain(..) {
            let _ = ack.send(());
        }
        requests.clear();
        batch.clear();
        if batch.capacity() > WRITE_BATCH_BYTES {
            batch = Vec::new();
        }
        if let Some(ack) = close {
            if let Err(e) = writer.shutdown().await {
                tracing::debug!("shutting the stream to {} down failed: {e}", shared.peer);
            }
            stop_writer(&shared, &mut queue, WriterStop::ClosedHere, Vec::new()).await;
            let _ = ack.send(());
            return;
        }
    }
    // Every handle is gone, so nothing more can be sent: let the peer see EOF.
    if let Err(e) = writer.shutdown().await {
        tracing::debug!("shutting the stream to {} down failed: {e}", shared.peer);
    }
}

async fn write_batch<W: AsyncWrite + Unpin>(writer: &mut W, batch: &[u8]) -> io::Result<()> {
    if !batch.is_empty() {
        writer.write_all(batch).await?;
    }
    writer.flush().await
}

/// Refuses further sends and fails the requests that will never be written: `unwritten`, and
/// those still queued.
async fn stop_writer(
    shared: &Shared,
    queue: &mut mpsc::Receiver<WriteItem>,
    stop: WriterStop,
    mut unwritten: Vec<u64>,
) {
    // Record why before closing the queue, so a sender refused by the closed queue can say why.
    shared.writer_stopped(stop.clone(), &[]);
    queue.close();
    while let Some(item) = queue.recv().await {
        // Dropping a flush or close acknowledgement tells its waiter the writer is gone.
        if let WriteItem::Line {
            request: Some(n), ..
        } = item
        {
            unwritten.push(n);
        }
    }
    shared.writer_stopped(stop, &unwritten);
}

/// A line that is being discarded because it is too long: how long it is so far, and its head.
struct Skipping {
    /// Bytes of the line seen so far.
    len: usize,
    /// The line's head, for the excerpt.
    head: Vec<u8>,
}

impl Skipping {
    fn start(held: &[u8], more: &[u8]) -> Self {
        let mut head = Vec::with_capacity(MALFORMED_EXCERPT_BYTES);
        head.extend_from_slice(&held[..held.len().min(MALFORMED_EXCERPT_BYTES)]);
        let room = MALFORMED_EXCERPT_BYTES - head.len();
        head.extend_from_slice(&more[..more.len().min(room)]);
        Self {
            len: held.len() + more.len(),
            head,
        }
    }

    fn finish(self, max_line_bytes: usize) -> Message {
        let len = self.len;
        malformed(
            MalformedKind::TooLong { len },
            None,
            format!("line of {len} bytes is longer than the limit of {max_line_bytes} bytes"),
            &self.head,
        )
    }
}

/// Classifies a line without its `\n`: drops a trailing `\r`, skips blank lines.
fn line_message(line: &[u8]) -> Option<Message> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    Some(classify(line))
}

fn classify_value(value: Value, line: &[u8]) -> Message {
    let mut object = match value {
        Value::Object(object) => object,
        Value::Array(_) => {
            let detail = "expected a JSON-RPC object, got an array (batches are not supported)";
            return invalid(None, detail, line);
        }
        other => {
            let detail = format!("expected a JSON-RPC object, got {}", json_kind(&other));
            return invalid(None, detail, line);
        }
    };
    let id_value = object.remove("id");
    let id = id_value.as_ref().and_then(request_id);
    match object.get("jsonrpc") {
        Some(Value::String(version)) if version == "2.0" => {}
        Some(other) => {
            let detail = format!("\"jsonrpc\" must be \"2.0\", got {other}");
            return invalid(id, detail, line);
        }
        None => return invalid(id, "not JSON-RPC: no \"jsonrpc\": \"2.0\"", line),
    }
    if let Some(method) = object.remove("method") {
        let Value::String(method) = method else {
            return invalid(id, "\"method\" must be a string", line);
        };
        let params = object.remove("params");
        return match (id_value, id) {
            (None, _) => Message::Notification(Notification { method, params }),
            (Some(_), Some(id)) => Message::Request(Request { id, method, params }),
            (Some(other), None) => {
                let detail = format!("a request id must be a number or a string, got {other}");
                invalid(None, detail, line)
            }
        };
    }
    match (object.remove("result"), object.remove("error")) {
        (Some(_), Some(_)) => invalid(id, "a response has both \"result\" and \"error\"", line),
        (None, None) => {
            let detail =
                "neither a request (no \"method\") nor a response (no \"result\" or \"error\")";
            invalid(id, detail, line)
        }
        (Some(result), None) => match id {
            Some(id) => Message::Response(Response {
                id: Some(id),
                outcome: Ok(result),
            }),
            None => invalid(None, "a result needs a number or string id", line),
        },
        (None, Some(error)) => match (id_value, id) {
            (_, Some(id)) => Message::Response(Response {
                id: Some(id),
                outcome: Err(rpc_error(error)),
            }),
            (None | Some(Value::Null), None) => Message::Response(Response {
                id: None,
                outcome: Err(rpc_error(error)),
            }),
            (Some(other), None) => {
                let detail =
                    format!("a response id must be a number, a string or null, got {other}");
                invalid(None, detail, line)
            }
        },
    }
}

fn request_id(value: &Value) -> Option<RequestId> {
    match value {
        Value::Number(n) => Some(RequestId::Number(n.clone())),
        Value::String(s) => Some(RequestId::String(s.clone())),
        _ => None,
    }
}

/// Reads an error object leniently: a peer's answer must fail its request even when the error is
/// oddly shaped, rather than leave the request waiting.
fn rpc_error(value: Value) -> RpcError {
    match value {
        Value::Object(mut object) => {
            let code = object
                .get("code")
                .and_then(Value::as_i64)
                .and_then(|c| i32::try_from(c).ok())
                .unwrap_or(INTERNAL_ERROR);
            let message = match object.remove("message") {
                Some(Value::String(message)) => message,
                Some(other) => other.to_string(),
                None => String::new(),
            };
            RpcError {
                code,
                message,
                data: object.remove("data"),
            }
        }
        Value::String(message) => RpcError::new(INTERNAL_ERROR, message),
        other => RpcError::new(INTERNAL_ERROR, other.to_string()),
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn invalid(id: Option<RequestId>, detail: impl Into<String>, line: &[u8]) -> Message {
    malformed(MalformedKind::InvalidRequest, id, detail.into(), line)
}

fn malformed(kind: MalformedKind, id: Option<RequestId>, detail: String, line: &[u8]) -> Message {
    Message::Malformed(Malformed {
        kind,
        id,
        detail,
        excerpt: excerpt(line),
    })
}

/// The head of `bytes`, at most [`MALFORMED_EXCERPT_BYTES`], without a character cut in half.
fn excerpt(bytes: &[u8]) -> String {
    let head = &bytes[..bytes.len().min(MALFORMED_EXCERPT_BYTES)];
    match std::str::from_utf8(head) {
        Ok(text) => text.to_owned(),
        // Only the last character is incomplete (cut by the limit): drop it.
        Err(e) if e.error_len().is_none() => {
            String::from_utf8_lossy(&head[..e.valid_up_to()]).into_owned()
        }
        Err(_) => String::from_utf8_lossy(head).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(line: &str, expected: Message) {
        assert_eq!(classify(line.as_bytes()), expected, "line: {line}");
    }

    fn invalid_with(id: Option<RequestId>, detail: &str, line: &str) -> Message {
        Message::Malformed(Malformed {
            kind: MalformedKind::InvalidRequest,
            id,
            detail: detail.to_owned(),
            excerpt: line.to_owned(),
        })
    }

    #[test]
    fn well_formed_messages_are_classified_by_shape() {
        let cases = [
            (
                r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"a":1}}"#,
                Message::Request(Request {
                    id: RequestId::from(0),
                    method: "initialize".into(),
                    params: Some(json!({"a": 1})),
                }),
            ),
            (
                r#"{"jsonrpc":"2.0","id":"x-1","method":"m"}"#,
                Message::Request(Request {
                    id: RequestId::from("x-1"),
                    method: "m".into(),
                    params: None,
                }),
            ),
            (
                r#"{"jsonrpc":"2.0","method":"session/update","params":[]}"#,
                Message::Notification(Notification {
                    method: "session/update".into(),
                    params: Some(json!([])),
                }),
            ),
            (
                r#"{"jsonrpc":"2.0","id":3,"result":null}"#,
                Message::Response(Response {
                    id: Some(RequestId::from(3)),
                    outcome: Ok(Value::Null),
                }),
            ),
            (
                r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"nope","data":[1]}}"#,
                Message::Response(Response {
                    id: Some(RequestId::from(3)),
                    outcome: Err(RpcError::new(-32601, "nope").with_data(json!([1]))),
                }),
            ),
            (
                r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#,
                Message::Response(Response {
                    id: None,
                    outcome: Err(RpcError::parse_error()),
                }),
            ),
            (
                r#"{"jsonrpc":"2.0","id":4,"error":"boom"}"#,
                Message::Response(Response {
                    id: Some(RequestId::from(4)),
                    outcome: Err(RpcError::new(INTERNAL_ERROR, "boom")),
                }),
            ),
        ];
        for (line, expected) in cases {
            check(line, expected);
        }
    }

    #[test]
    fn json_that_is_not_json_rpc_is_an_invalid_request_keeping_a_readable_id() {
        let cases: [(&str, Option<RequestId>, &str); 9] = [
            ("42", None, "expected a JSON-RPC object, got a number"),
            (
                "[1,2]",
                None,
                "expected a JSON-RPC object, got an array (batches are not supported)",
            ),
            (
                r#"{"level":"info","id":1,"msg":"started"}"#,
                Some(RequestId::from(1)),
                "not JSON-RPC: no \"jsonrpc\": \"2.0\"",
            ),
            (
                r#"{"jsonrpc":"1.0","id":"a","method":"m"}"#,
                Some(RequestId::from("a")),
                "\"jsonrpc\" must be \"2.0\", got \"1.0\"",
            ),
            (
                r#"{"jsonrpc":"2.0","id":5,"method":7}"#,
                Some(RequestId::from(5)),
                "\"method\" must be a string",
            ),
            (
                r#"{"jsonrpc":"2.0","id":null,"method":"m"}"#,
                None,
                "a request id must be a number or a string, got null",
            ),
            (
                r#"{"jsonrpc":"2.0","id":6}"#,
                Some(RequestId::from(6)),
                "neither a request (no \"method\") nor a response (no \"result\" or \"error\")",
            ),
            (
                r#"{"jsonrpc":"2.0","id":7,"result":1,"error":{}}"#,
                Some(RequestId::from(7)),
                "a response has both \"result\" and \"error\"",
            ),
            (
                r#"{"jsonrpc":"2.0","result":1}"#,
                None,
                "a result needs a number or string id",
            ),
        ];
        for (line, id, detail) in cases {
            check(line, invalid_with(id, detail, line));
        }
    }

    #[test]
    fn lines_that_are_not_json_are_parse_errors() {
        let Message::Malformed(m) = classify(b"Starting server on port 3000...") else {
            panic!("expected a malformed line");
        };
        assert_eq!(m.kind, MalformedKind::ParseError);
        assert!(m.detail.starts_with("line is not JSON: "), "{}", m.detail);
        assert_eq!(m.excerpt, "Starting server on port 3000...");
        assert_eq!(m.error().code, PARSE_ERROR);

        let Message::Malformed(m) = classify(b"{\"a\":\"\xff\"}") else {
            panic!("expected a malformed line");
        };
        assert_eq!(m.kind, MalformedKind::InvalidUtf8);
        assert_eq!(m.excerpt, "{\"a\":\"\u{fffd}\"}");
        assert_eq!(m.error().code, PARSE_ERROR);
    }

    #[test]
    fn numeric_ids_keep_their_exact_json_form() {
        for id in ["0", "7", "18446744073709551615", "-3", "1.5"] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"m"}}"#);
            let Message::Request(request) = classify(line.as_bytes()) else {
                panic!("expected a request: {line}");
            };
            assert_eq!(request.id.to_string(), id);
            assert_eq!(serde_json::to_string(&request.id).ok().as_deref(), Some(id));
        }
    }

    #[test]
    fn excerpts_keep_the_head_and_never_split_a_character() {
        let long = "é".repeat(MALFORMED_EXCERPT_BYTES);
        let cut = excerpt(long.as_bytes());
        assert_eq!(cut, "é".repeat(MALFORMED_EXCERPT_BYTES / 2));
        let odd = format!("a{long}");
        assert_eq!(excerpt(odd.as_bytes()).len(), MALFORMED_EXCERPT_BYTES - 1);
        assert_eq!(excerpt(b"short"), "short");
    }

    #[test]
    fn error_constructors_give_the_standard_codes_and_messages() {
        let cases = [
            (RpcError::parse_error(), -32700, "Parse error"),
            (RpcError::invalid_request(), -32600, "Invalid Request"),
            (
                RpcError::method_not_found("x/y"),
                -32601,
                "Method not found: x/y",
            ),
            (
                RpcError::invalid_params("missing sessionId"),
                -32602,
                "Invalid params: missing sessionId",
            ),
            (
                RpcError::internal_error("boom"),
                -32603,
                "Internal error: boom",
            ),
            (RpcError::auth_required(), -32000, "Authentication required"),
            (
                RpcError::resource_not_found("session s1"),
                -32002,
                "Resource not found: session s1",
            ),
            (RpcError::request_cancelled(), -32800, "Request cancelled"),
        ];
        for (error, code, message) in cases {
            assert_eq!((error.code, error.message.as_str()), (code, message));
            assert_eq!(error.to_string(), format!("{message} ({code})"));
        }
    }

    #[test]
    fn encoded_messages_are_one_line_even_with_newlines_in_strings() {
        let params = json!({"text": "a\nb\r\n"});
        let message = OutNotification {
            jsonrpc: "2.0",
            method: "m",
            params: &params,
        };
        let line = encode(&message).map(String::from_utf8);
        let expected =
            "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":{\"text\":\"a\\nb\\r\\n\"}}\n";
        assert_eq!(line, Ok(Ok(expected.to_owned())));
    }
}
