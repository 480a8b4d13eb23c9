//! [`Connection`], the handle owners use: start the reader and writer tasks, send requests and
//! wait for their answers (with timeout and cancellation), notify, respond, flush and close.
//!
//! It holds no line-level logic (see [`super::frame`] and [`super::message`]) and no table logic
//! (see [`super::state`]); it wires them together and turns their outcomes into its errors.

use std::fmt;
use std::future::pending;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot};
use tracing::Instrument;

use super::error::RpcError;
use super::frame::FrameReader;
use super::limits::{DEFAULT_MAX_LINE_BYTES, DEFAULT_WRITE_QUEUE};
use super::message::{Incoming, Malformed, RequestId};
use super::reader::{Deliver, read_loop};
use super::state::{Answer, Gone, Shared, State};
use super::writer::{
    OutError, OutNotification, OutRequest, OutResult, WriteItem, encode, write_loop,
};
use crate::cancel::CancelToken;

/// A synchronous handler for incoming messages, called by the reader task in line order (see
/// [`Options::on_incoming`]); what it returns says whether the reader goes on.
pub type IncomingHandler = Arc<dyn Fn(Incoming) -> Flow + Send + Sync>;

/// What the reader does after the handler has seen a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Read the next line.
    Continue,
    /// Read nothing more, at this very line: no later request, notification or answer is
    /// handled, and every pending request fails with this reason (as an I/O error).
    Stop(String),
}

/// Called by the reader task as the answer to one request is routed, in line order: after every
/// line before the answer has been handled and before any line after it is read (see
/// [`Connection::request_observed`]). It must be quick and must not block.
pub type AnswerHook = Box<dyn FnOnce() + Send>;

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
        self.request_observed(method, params, timeout, cancel, None)
            .await
    }

    /// [`Connection::request_with`], calling `on_answer` on the reader task the moment the
    /// answer's line is read, in line order with everything the handler sees: what came before
    /// the answer has been handled, nothing after it yet. (When the waiter wakes is up to the
    /// scheduler; this is not.)
    pub async fn request_observed(
        &self,
        method: &str,
        params: impl Serialize,
        timeout: Option<Duration>,
        cancel: Option<&CancelToken>,
        on_answer: Option<AnswerHook>,
    ) -> Result<Value, RequestError> {
        if cancel.is_some_and(CancelToken::is_cancelled) {
            return Err(RequestError::Cancelled {
                method: method.to_owned(),
                id: None,
            });
        }
        let (number, answer_rx, mut guard) = self.send_request(method, &params, on_answer).await?;
        // From here on, giving the request up (a timeout, the cancel token, the future dropped)
        // tells the peer with `$/cancel_request`, so it can stop working on it.
        let mut notice = CancelNotice {
            queue: self.inner.queue.clone(),
            number,
            armed: true,
        };
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
                notice.armed = false;
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

    /// Encodes, registers and enqueues one request; its number, its answer's receiver and the
    /// guard that keeps it pending.
    async fn send_request(
        &self,
        method: &str,
        params: &impl Serialize,
        on_answer: Option<AnswerHook>,
    ) -> Result<(u64, oneshot::Receiver<Answer>, super::state::PendingGuard), RequestError> {
        let number = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let line = encode(&OutRequest {
            jsonrpc: "2.0",
            id: number,
            method,
            params,
        })
        .map_err(|source| RequestError::Send {
            method: method.to_owned(),
            source,
        })?;
        let (answer_tx, answer_rx) = oneshot::channel();
        let shared = &self.inner.shared;
        let guard = shared
            .register(number, method, answer_tx, on_answer)
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
        Ok((number, answer_rx, guard))
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

/// The method ACP (2026) gives the notification that a request was given up.
pub const CANCEL_REQUEST: &str = "$/cancel_request";

/// Sends `$/cancel_request` for request `number` when dropped still armed (the answer never
/// came). Best effort: a full write queue or a closed connection drops the notice.
struct CancelNotice {
    queue: mpsc::Sender<WriteItem>,
    number: u64,
    armed: bool,
}

impl Drop for CancelNotice {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let notice = OutNotification {
            jsonrpc: "2.0",
            method: CANCEL_REQUEST,
            params: &serde_json::json!({"requestId": self.number}),
        };
        if let Ok(bytes) = encode(&notice) {
            let _ = self.queue.try_send(WriteItem::Line {
                bytes,
                request: None,
            });
        }
    }
}

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
