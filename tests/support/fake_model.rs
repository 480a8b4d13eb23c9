//! A fake OpenAI-compatible `/chat/completions` server over real TCP, for tests.
//!
//! It listens on `127.0.0.1` on a random port and runs on its own thread with its own tokio
//! runtime, so it serves equally well a `#[tokio::test]`, a plain `#[test]`, and a test that
//! spawns the real `oml` binary with `OPENAI_BASE_URL` set to [`FakeModel::base_url`]. Each
//! request takes the next scripted [`Reply`] and is recorded ([`FakeModel::requests`]); when the
//! script is exhausted it answers HTTP 500 `fake-model: no scripted response left`. More replies
//! can be queued at any time with [`FakeModel::push`]. A test can wait for requests to arrive
//! ([`FakeModel::wait_for_requests`]) rather than guess how long they take.
//!
//! A streamed reply is a list of [`Step`]s. The response headers are written just before the
//! first byte of the body, so a reply that starts with [`Step::Hang`] or [`Step::Sleep`] keeps the
//! client waiting for headers, and one that starts with [`Step::Drop`] closes the connection
//! before any response. The body uses chunked transfer encoding, so a [`Step::Drop`] is seen by
//! the client as a broken stream, not as a normal end. `data: [DONE]` ends every reply that runs
//! to its end. Every response says `Connection: close`. Chunks with no step between them are
//! written together, as a busy real server sends them; every pause, hang or drop writes what is
//! pending first.
//!
//! It knows nothing of oml; only the OpenAI wire format, and how Anthropic's stream is framed
//! ([`Reply::Events`]; its events are made by `support::anthropic`).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// The longest a [`Step::Hang`] lasts when the server is not dropped first.
pub const MAX_HANG: Duration = Duration::from_secs(30);
/// Requests with a larger header block are refused.
const MAX_HEADER_BYTES: usize = 64 * 1024;
const EXHAUSTED: &str = "fake-model: no scripted response left";

/// One piece of a streamed reply.
#[derive(Clone, Debug)]
pub enum Step {
    /// Sent as `data: <json>\n\n`.
    Chunk(Value),
    /// Sent exactly as given (malformed lines, comments, CRLF, odd framing).
    Raw(String),
    /// Pause for this many milliseconds.
    Sleep(u64),
    /// Stall until the server is dropped (at most [`MAX_HANG`]).
    Hang,
    /// Close the connection abruptly: no more steps, no `[DONE]`.
    Drop,
    /// End the body properly but without `[DONE]`; no more steps.
    End,
}

/// The answer to one request.
#[derive(Clone, Debug)]
pub enum Reply {
    /// `200 text/event-stream` with these steps, then `data: [DONE]`.
    Stream(Vec<Step>),
    /// `200 text/event-stream` as the native APIs stream: each [`Step::Chunk`] as `event: <its
    /// "type">` (Anthropic, Responses; none without a `type`, as Gemini's) and `data: <json>`,
    /// and no `[DONE]` (the stream ends with its last event, or with the body).
    Events(Vec<Step>),
    /// An HTTP error with a body and an optional `Retry-After` header value.
    Error {
        status: u16,
        body: String,
        retry_after: Option<String>,
    },
    /// `200 application/json` with this body, as a server that ignores `stream: true` sends.
    Json(Value),
    /// `200` with this content type and body (a proxy's HTML page).
    Page { content_type: String, body: String },
}

impl From<Vec<Step>> for Reply {
    fn from(steps: Vec<Step>) -> Self {
        Reply::Stream(steps)
    }
}

impl Reply {
    /// An HTTP error without `Retry-After`.
    pub fn error(status: u16, body: &str) -> Self {
        Reply::Error {
            status,
            body: body.to_owned(),
            retry_after: None,
        }
    }
}

/// A request as the server received it.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    pub method: String,
    /// The request target, e.g. `/v1/chat/completions`.
    pub path: String,
    /// Header names in lowercase, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON (a JSON string holding the raw text if it is not JSON).
    pub body: Value,
    /// When its last byte was read.
    pub arrived: std::time::Instant,
}

impl RecordedRequest {
    /// The first header called `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// A running fake server; dropping it stops the server and ends every hang.
pub struct FakeModel {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
    thread: Option<JoinHandle<()>>,
}

/// The script and the record, with a signal for each request recorded.
struct Shared {
    state: Mutex<State>,
    arrived: Condvar,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Block until `n` requests are recorded or `within` has passed; the requests so far.
    fn wait_for(&self, n: usize, within: Duration) -> Vec<RecordedRequest> {
        let guard = self.lock();
        let (guard, _) = self
            .arrived
            .wait_timeout_while(guard, within, |state| state.requests.len() < n)
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        assert!(
            guard.requests.len() >= n,
            "fake-model: {} of {n} requests arrived within {within:?}",
            guard.requests.len()
        );
        guard.requests.clone()
    }
}

#[derive(Default)]
struct State {
    replies: VecDeque<Reply>,
    requests: Vec<RecordedRequest>,
    /// What `GET …/models` lists (404 when `None`); such requests are counted, not recorded.
    models: Option<Vec<String>>,
    model_lists: usize,
}

impl FakeModel {
    /// Start serving `replies`, one per request, in order.
    pub fn start<R: Into<Reply>>(replies: impl IntoIterator<Item = R>) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let addr = listener.local_addr().expect("local address");
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                replies: replies.into_iter().map(Into::into).collect(),
                ..State::default()
            }),
            arrived: Condvar::new(),
        });
        let shutdown = CancellationToken::new();
        let thread = {
            let shared = Arc::clone(&shared);
            let shutdown = shutdown.clone();
            std::thread::Builder::new()
                .name("fake-model".into())
                .spawn(move || serve(listener, shared, shutdown))
                .expect("spawn the fake model thread")
        };
        Self {
            addr,
            shared,
            shutdown,
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:<port>/v1`, the value for `OPENAI_BASE_URL`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.lock().requests.clone()
    }

    /// Block until at least `n` requests have been received (each is recorded once its head and
    /// body are read, before the reply starts), for at most `within`; returns them. Panics,
    /// saying how many came, when they do not come in time.
    pub fn wait_for_requests(&self, n: usize, within: Duration) -> Vec<RecordedRequest> {
        self.shared.wait_for(n, within)
    }

    /// [`FakeModel::wait_for_requests`] for async code: waits on a blocking thread, so the
    /// runtime goes on meanwhile.
    pub async fn requests_arrived(&self, n: usize, within: Duration) -> Vec<RecordedRequest> {
        let shared = Arc::clone(&self.shared);
        tokio::task::spawn_blocking(move || shared.wait_for(n, within))
            .await
            .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
    }

    /// Answer `GET …/models` with these ids (without it, 404). Those requests take no scripted
    /// reply and are not in [`FakeModel::requests`].
    pub fn serve_models(&self, ids: &[&str]) {
        self.lock().models = Some(ids.iter().map(|s| (*s).to_owned()).collect());
    }

    /// How many `GET …/models` requests came.
    pub fn model_list_requests(&self) -> usize {
        self.lock().model_lists
    }

    /// Queue one more reply after the ones already scripted.
    pub fn push(&self, reply: impl Into<Reply>) {
        self.lock().replies.push_back(reply.into());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.shared.lock()
    }
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        self.shutdown.cancel();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

// --- chunk builders

/// One `data:` chunk whose first choice has `delta` and `finish_reason`.
pub fn delta_chunk(delta: Value, finish_reason: Option<&str>) -> Value {
    json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "fake/model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    })
}

/// Content pieces, one chunk each, then a chunk with `finish_reason: "stop"`.
pub fn text_chunks(pieces: &[&str]) -> Vec<Step> {
    let mut steps: Vec<Step> = pieces
        .iter()
        .map(|piece| Step::Chunk(delta_chunk(json!({"content": piece}), None)))
        .collect();
    steps.push(Step::Chunk(delta_chunk(json!({}), Some("stop"))));
    steps
}

/// `text` in pieces of at most `size` bytes, cut at character boundaries: a long tool call's
/// arguments as a provider streams them.
pub fn pieces(text: &str, size: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut end = size.min(rest.len()).max(1);
        while !rest.is_char_boundary(end) {
            end += 1;
        }
        let (piece, tail) = rest.split_at(end);
        out.push(piece);
        rest = tail;
    }
    out
}

/// One tool call: a first delta with role, id, type and name and empty arguments, then one chunk
/// per argument fragment, then `finish_reason: "tool_calls"`.
pub fn tool_call_chunks(id: &str, name: &str, fragments: &[&str]) -> Vec<Step> {
    let call = |fields: Value| json!({"tool_calls": [fields]});
    let mut steps = vec![Step::Chunk(delta_chunk(
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}
        ]}),
        None,
    ))];
    steps.extend(fragments.iter().map(|fragment| {
        Step::Chunk(delta_chunk(
            call(json!({"index": 0, "function": {"arguments": fragment}})),
            None,
        ))
    }));
    steps.push(Step::Chunk(delta_chunk(json!({}), Some("tool_calls"))));
    steps
}

/// Reasoning pieces in the delta field `field` (`reasoning_content`, `reasoning`, or
/// `reasoning_details`, which gets `[{type: "reasoning.text", text}]`), one chunk each.
pub fn reasoning_chunks(field: &str, pieces: &[&str]) -> Vec<Step> {
    pieces
        .iter()
        .map(|piece| {
            let value = if field == "reasoning_details" {
                json!([{"type": "reasoning.text", "text": piece, "format": "unknown", "index": 0}])
            } else {
                json!(piece)
            };
            let mut delta = serde_json::Map::new();
            delta.insert(field.to_owned(), value);
            Step::Chunk(delta_chunk(Value::Object(delta), None))
        })
        .collect()
}

/// A usage-only chunk with `choices: []`, as sent with `stream_options.include_usage`.
pub fn usage_chunk(prompt: u64, completion: u64) -> Step {
    Step::Chunk(json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }))
}

// --- the server

fn serve(listener: std::net::TcpListener, shared: Arc<Shared>, shutdown: CancellationToken) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("fake model runtime");
    runtime.block_on(async move {
        let listener = TcpListener::from_std(listener).expect("tokio listener");
        loop {
            let accepted = tokio::select! {
                () = shutdown.cancelled() => break,
                accepted = listener.accept() => accepted,
            };
            let Ok((stream, _)) = accepted else { continue };
            let shared = Arc::clone(&shared);
            let shutdown = shutdown.clone();
            tokio::spawn(async move {
                tokio::select! {
                    () = shutdown.cancelled() => {}
                    _ = connection(stream, shared, shutdown.clone()) => {}
                }
            });
        }
    });
    // Dropping the runtime drops every connection task, closing their sockets.
}

async fn connection(
    mut stream: TcpStream,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let _ = stream.set_nodelay(true);
    let Some(request) = read_request(&mut stream).await? else {
        return Ok(());
    };
    let route = request.path.split('?').next().unwrap_or("");
    if request.method == "GET" && route.ends_with("/models") {
        let models = {
            let mut state = shared.lock();
            state.model_lists += 1;
            state.models.clone()
        };
        return match models {
            None => write_error(&mut stream, 404, r#"{"error":"no model list"}"#, None).await,
            Some(ids) => {
                let data: Vec<Value> = ids.iter().map(|id| json!({"id": id})).collect();
                let body = json!({"object": "list", "data": data}).to_string();
                write_page(&mut stream, "application/json", &body).await
            }
        };
    }
    let reply = {
        let mut state = shared.lock();
        state.requests.push(request);
        shared.arrived.notify_all();
        state.replies.pop_front()
    };
    match reply {
        None => write_error(&mut stream, 500, EXHAUSTED, None).await,
        Some(Reply::Error {
            status,
            body,
            retry_after,
        }) => write_error(&mut stream, status, &body, retry_after.as_deref()).await,
        Some(Reply::Json(body)) => {
            write_page(&mut stream, "application/json", &body.to_string()).await
        }
        Some(Reply::Page { content_type, body }) => {
            write_page(&mut stream, &content_type, &body).await
        }
        Some(Reply::Stream(steps)) => write_stream(&mut stream, steps, &shutdown, false).await,
        Some(Reply::Events(steps)) => write_stream(&mut stream, steps, &shutdown, true).await,
    }
}

async fn write_page(
    stream: &mut tokio::net::TcpStream,
    content_type: &str,
    body: &str,
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

async fn write_stream(
    stream: &mut TcpStream,
    steps: Vec<Step>,
    shutdown: &CancellationToken,
    named: bool,
) -> std::io::Result<()> {
    // Consecutive chunks are framed into one buffer and written together (as a busy real server
    // does); the buffer is flushed before every pause, hang or drop, so those still happen
    // between the chunks they separate.
    let mut pending: Vec<u8> = Vec::new();
    let mut headers_sent = false;
    for step in steps {
        let data = match step {
            Step::Chunk(value) if named => match value.get("type").and_then(Value::as_str) {
                Some(name) => format!("event: {name}\ndata: {value}\n\n"),
                None => format!("data: {value}\n\n"),
            },
            Step::Chunk(value) => format!("data: {value}\n\n"),
            Step::Raw(text) => text,
            Step::Sleep(ms) => {
                flush_pending(stream, &mut pending).await?;
                tokio::time::sleep(Duration::from_millis(ms)).await;
                continue;
            }
            Step::Hang => {
                flush_pending(stream, &mut pending).await?;
                tokio::select! {
                    () = shutdown.cancelled() => return Ok(()),
                    () = tokio::time::sleep(MAX_HANG) => continue,
                }
            }
            Step::Drop => {
                flush_pending(stream, &mut pending).await?;
                return Ok(());
            }
            Step::End => {
                if !headers_sent {
                    pending.extend_from_slice(STREAM_HEAD);
                }
                pending.extend_from_slice(b"0\r\n\r\n");
                flush_pending(stream, &mut pending).await?;
                return stream.shutdown().await;
            }
        };
        if !headers_sent {
            pending.extend_from_slice(STREAM_HEAD);
            headers_sent = true;
        }
        frame_chunk(&mut pending, data.as_bytes());
        if pending.len() >= WRITE_BATCH {
            flush_pending(stream, &mut pending).await?;
        }
    }
    if !headers_sent {
        pending.extend_from_slice(STREAM_HEAD);
    }
    if !named {
        frame_chunk(&mut pending, b"data: [DONE]\n\n");
    }
    pending.extend_from_slice(b"0\r\n\r\n");
    flush_pending(stream, &mut pending).await?;
    stream.shutdown().await
}

/// How many framed bytes the fake gathers before it writes them.
const WRITE_BATCH: usize = 16 * 1024;

const STREAM_HEAD: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
              Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";

async fn flush_pending(stream: &mut TcpStream, pending: &mut Vec<u8>) -> std::io::Result<()> {
    if pending.is_empty() {
        return Ok(());
    }
    stream.write_all(pending).await?;
    pending.clear();
    stream.flush().await
}

/// Append `data` as one HTTP/1.1 body chunk; empty data is skipped (an empty chunk would end the
/// body).
fn frame_chunk(out: &mut Vec<u8>, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    out.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

async fn write_error(
    stream: &mut TcpStream,
    status: u16,
    body: &str,
    retry_after: Option<&str>,
) -> std::io::Result<()> {
    let retry_after = retry_after
        .map(|value| format!("Retry-After: {value}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "HTTP/1.1 {status} Fake\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{retry_after}Connection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

/// Read one request: the header block, then `Content-Length` bytes of body. `None` when the
/// client closed the connection without sending a request.
async fn read_request(stream: &mut TcpStream) -> std::io::Result<Option<RecordedRequest>> {
    let mut buffer = Vec::new();
    let mut piece = [0u8; 8192];
    let header_end = loop {
        if let Some(at) = find(&buffer, b"\r\n\r\n") {
            break at;
        }
        if buffer.len() > MAX_HEADER_BYTES {
            return Err(std::io::Error::other("request headers too large"));
        }
        let read = stream.read(&mut piece).await?;
        if read == 0 {
            return Ok(None);
        }
        buffer.extend_from_slice(&piece[..read]);
    };
    let head = String::from_utf8_lossy(&buffer[..header_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next().unwrap_or_default().split_whitespace();
    let method = request_line.next().unwrap_or_default().to_owned();
    let path = request_line.next().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let length = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = buffer[header_end + 4..].to_vec();
    while body.len() < length {
        let read = stream.read(&mut piece).await?;
        if read == 0 {
            break;
        }
        body.extend_from_slice(&piece[..read]);
    }
    body.truncate(length);
    let body = serde_json::from_slice(&body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
    Ok(Some(RecordedRequest {
        method,
        path,
        headers,
        body,
        arrived: std::time::Instant::now(),
    }))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}
