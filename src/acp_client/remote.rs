//! The client's remote transports (ACP's draft RFD of 2026): an agent at an `http(s)://…/acp`
//! URL over Streamable HTTP, or at a `ws://` URL over a WebSocket, seen by the JSON-RPC layer as
//! the same byte stream of lines an agent's stdio is.
//!
//! [`open`] returns one end of an in-memory pipe; a pump task holds the other. Over HTTP each
//! line the client writes is one POST (the first, `initialize`, is answered in its body and
//! names the connection); the agent's messages come from SSE streams, the connection's and one
//! per session, opened as the SDK's client opens them: a session's when an answer names it, and
//! always before a message about it is posted. Over a WebSocket each line is one text frame.
//! Closing the pipe ends the connection (DELETE, or the socket's close).
//!
//! It knows URLs, headers and framing; not ACP's methods beyond the `sessionId` that routes them.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use parking_lot::Mutex;
use serde_json::Value;
use tokio::io::{AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use super::v2::read_line_capped;

/// The size of the in-memory pipe between the JSON-RPC layer and the pump.
const PIPE_BYTES: usize = 1 << 16;

/// The longest line or event read: the JSON-RPC layer's own cap.
const MAX_LINE_BYTES: usize = crate::jsonrpc::DEFAULT_MAX_LINE_BYTES;

/// How long connecting to the agent's host may take.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The connection header.
const CONNECTION_ID: &str = "Acp-Connection-Id";
/// The session header.
const SESSION_ID: &str = "Acp-Session-Id";

/// What the transport reads of a line to route it: its id and method, and the session its
/// params or its result (a session's answer) name.
#[derive(Default, serde::Deserialize)]
struct Routing {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<Value>,
    #[serde(default)]
    params: crate::acp::Loose<Named>,
    #[serde(default)]
    result: crate::acp::Loose<Named>,
}

/// A `sessionId` member, when it is a string.
#[derive(Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Named {
    #[serde(default)]
    session_id: crate::acp::Loose<String>,
}

/// A request refused by the endpoint, answered to its caller.
#[derive(serde::Serialize)]
struct ErrorAnswer {
    jsonrpc: &'static str,
    id: Value,
    error: crate::jsonrpc::RpcError,
}

/// Whether `target` names a remote agent rather than a command.
pub fn is_url(target: &str) -> bool {
    ["http://", "https://", "ws://", "wss://"]
        .iter()
        .any(|p| target.starts_with(p))
}

/// Connect to the agent at `url` with the bearer `token`: the JSON-RPC side of the pipe.
pub async fn open(url: &str, token: Option<String>) -> std::io::Result<DuplexStream> {
    let (ours, theirs) = tokio::io::duplex(PIPE_BYTES);
    if url.starts_with("ws://") {
        let socket = ws_connect(url, token.as_deref()).await?;
        tokio::spawn(ws_pump(socket, ours));
    } else if url.starts_with("wss://") {
        return Err(std::io::Error::other(
            "wss:// is not offered by this client; use the https:// URL of the same endpoint",
        ));
    } else {
        let http = Http::new(url, token)?;
        tokio::spawn(http_pump(http, ours));
    }
    Ok(theirs)
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn ws_connect(url: &str, token: Option<&str>) -> std::io::Result<Socket> {
    let mut request = url.into_client_request().map_err(std::io::Error::other)?;
    if let Some(token) = token {
        let value = format!("Bearer {token}")
            .parse()
            .map_err(std::io::Error::other)?;
        request.headers_mut().insert("Authorization", value);
    }
    let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .max_message_size(Some(MAX_LINE_BYTES))
        .max_frame_size(Some(MAX_LINE_BYTES));
    let connecting = tokio_tungstenite::connect_async_with_config(request, Some(config), false);
    let (socket, _) = tokio::time::timeout(CONNECT_TIMEOUT, connecting)
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "connecting timed out"))?
        .map_err(std::io::Error::other)?;
    Ok(socket)
}

/// Lines to frames and frames to lines, each way in a task of its own, until either side ends.
async fn ws_pump(socket: Socket, pipe: DuplexStream) {
    let (read, mut write) = tokio::io::split(pipe);
    let (mut sink, mut frames) = socket.split();
    let mut outgoing = tokio::spawn(async move {
        let mut lines = BufReader::new(read);
        let mut line = Vec::new();
        while matches!(read_line_capped(&mut lines, &mut line, MAX_LINE_BYTES).await, Ok(n) if n > 0)
        {
            let text = String::from_utf8_lossy(line.trim_ascii_end()).into_owned();
            line.clear();
            if sink.send(Message::text(text)).await.is_err() {
                break;
            }
        }
        let _ = tokio::time::timeout(CONNECT_TIMEOUT, sink.close()).await;
    });
    loop {
        tokio::select! {
            frame = frames.next() => match frame {
                Some(Ok(Message::Text(text))) => {
                    if write.write_all(&one_line(text.as_bytes())).await.is_err() { break }
                }
                Some(Ok(Message::Close(_)) | Err(_)) | None => break,
                Some(Ok(_)) => {}
            },
            _ = &mut outgoing => break,
        }
    }
    outgoing.abort();
    let _ = write.shutdown().await;
}

/// One JSON-RPC message as one line: re-encoded when it holds a line break (a pretty-printed
/// message, or an SSE event of several `data:` lines), with its `\n`.
fn one_line(text: &[u8]) -> Vec<u8> {
    let text = text.trim_ascii();
    let mut line = match memchr::memchr(b'\n', text) {
        None => text.to_vec(),
        Some(_) => serde_json::from_slice::<Value>(text)
            .map(|v| v.to_string().into_bytes())
            .unwrap_or_else(|_| text.to_vec()),
    };
    line.push(b'\n');
    line
}

/// The Streamable HTTP side: the endpoint, the token, the connection once `initialize` made it.
struct Http {
    url: String,
    token: Option<String>,
    client: reqwest::Client,
    connection: Mutex<Option<String>>,
    /// The session streams asked for, each with whether its GET has been answered.
    sessions: Mutex<HashMap<String, watch::Receiver<bool>>>,
    /// Requests of the agent that came on a session's stream: their answer names that session.
    asked_on: Mutex<HashMap<String, String>>,
    /// Lines for the JSON-RPC side, in order.
    inbound: mpsc::UnboundedSender<Vec<u8>>,
    inbound_rx: Mutex<Option<mpsc::UnboundedReceiver<Vec<u8>>>>,
}

impl Http {
    fn new(url: &str, token: Option<String>) -> std::io::Result<Arc<Http>> {
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(std::io::Error::other)?;
        let (inbound, inbound_rx) = mpsc::unbounded_channel();
        Ok(Arc::new(Http {
            url: url.to_owned(),
            token,
            client,
            connection: Mutex::default(),
            sessions: Mutex::default(),
            asked_on: Mutex::default(),
            inbound,
            inbound_rx: Mutex::new(Some(inbound_rx)),
        }))
    }

    fn request(&self, method: reqwest::Method, session: Option<&str>) -> reqwest::RequestBuilder {
        let mut r = self.client.request(method, &self.url);
        if let Some(token) = &self.token {
            r = r.bearer_auth(token);
        }
        if let Some(c) = &*self.connection.lock() {
            r = r.header(CONNECTION_ID, c);
        }
        if let Some(s) = session {
            r = r.header(SESSION_ID, s);
        }
        r
    }

    /// Hand `line` to the JSON-RPC side; an agent request from a session's stream is noted.
    fn deliver(self: &Arc<Self>, line: Vec<u8>, stream: Option<&str>) {
        if let Ok(v) = serde_json::from_slice::<Routing>(&line) {
            if let (Some(s), Some(id), Some(_)) = (stream, &v.id, &v.method) {
                self.asked_on.lock().insert(id.to_string(), s.to_owned());
            }
            if let Some(sid) = v.result.0.and_then(|r| r.session_id.0) {
                self.open_session(&sid);
            }
        }
        let _ = self.inbound.send(line);
    }

    /// Open session `sid`'s stream unless it is open; returns when its GET was answered.
    fn open_session(self: &Arc<Self>, sid: &str) -> watch::Receiver<bool> {
        let mut sessions = self.sessions.lock();
        if let Some(rx) = sessions.get(sid) {
            return rx.clone();
        }
        let (tx, rx) = watch::channel(false);
        sessions.insert(sid.to_owned(), rx.clone());
        tokio::spawn(read_stream(Arc::clone(self), Some(sid.to_owned()), tx));
        rx
    }

    /// POST one line from the client; the first must be `initialize`.
    async fn post(self: &Arc<Self>, line: Vec<u8>) -> Result<(), HttpFailed> {
        let v: Routing = serde_json::from_slice(&line).unwrap_or_default();
        if self.connection.lock().is_none() {
            return self.initialize(line).await;
        }
        let named = v.params.get().and_then(|p| p.session_id.0.clone());
        let session = match named {
            Some(s) => Some(s),
            None if v.method.is_none() => {
                v.id.as_ref()
                    .and_then(|id| self.asked_on.lock().remove(&id.to_string()))
            }
            None => None,
        };
        if let Some(s) = &session {
            let mut opened = self.open_session(s);
            let _ = opened.wait_for(|o| *o).await;
        }
        let sent = self
            .request(reqwest::Method::POST, session.as_deref())
            .header("Content-Type", "application/json")
            .body(line)
            .send()
            .await
            .map_err(HttpFailed::Send)?;
        let status = sent.status();
        if status.is_success() {
            return Ok(());
        }
        if matches!(status.as_u16(), 401 | 403 | 404 | 410) || v.method.is_none() {
            return Err(HttpFailed::Refused(status));
        }
        // One request refused: its caller gets an error answer, the connection goes on.
        if let Some(id) = v.id {
            let message = format!("the agent's endpoint answered {status}");
            let error = crate::jsonrpc::RpcError::new(crate::jsonrpc::INTERNAL_ERROR, message);
            let answer = ErrorAnswer {
                jsonrpc: "2.0",
                id,
                error,
            };
            let line = serde_json::to_string(&answer).unwrap_or_default();
            let _ = self.inbound.send(format!("{line}\n").into_bytes());
        }
        Ok(())
    }

    async fn initialize(self: &Arc<Self>, line: Vec<u8>) -> Result<(), HttpFailed> {
        let answer = self
            .request(reqwest::Method::POST, None)
            .header("Content-Type", "application/json")
            .body(line)
            .send()
            .await
            .map_err(HttpFailed::Send)?;
        let status = answer.status();
        let id = answer
            .headers()
            .get(CONNECTION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = answer.bytes().await.map_err(HttpFailed::Send)?;
        let (true, Some(id)) = (status.is_success(), id) else {
            return Err(HttpFailed::NotInitialized {
                status,
                body: String::from_utf8_lossy(&body).trim().to_owned(),
            });
        };
        *self.connection.lock() = Some(id);
        let (tx, mut opened) = watch::channel(false);
        tokio::spawn(read_stream(Arc::clone(self), None, tx));
        let _ = opened.wait_for(|o| *o).await;
        let mut line = body.to_vec();
        line.push(b'\n');
        let _ = self.inbound.send(line);
        Ok(())
    }
}

/// Read one SSE stream (the connection's, or session `sid`'s): each `data:` event is one line
/// for the client. `opened` turns true once the GET is answered (or failed). The connection's
/// stream ending ends the transport.
async fn read_stream(http: Arc<Http>, sid: Option<String>, opened: watch::Sender<bool>) {
    let sent = http
        .request(reqwest::Method::GET, sid.as_deref())
        .header("Accept", "text/event-stream")
        .send()
        .await;
    let _ = opened.send(true);
    let Ok(mut response) = sent else {
        return end(&http, &sid);
    };
    if !response.status().is_success() {
        return end(&http, &sid);
    }
    let mut events = Events::default();
    while let Ok(Some(chunk)) = response.chunk().await {
        match events.push(&chunk) {
            Ok(lines) => lines
                .into_iter()
                .for_each(|line| http.deliver(line, sid.as_deref())),
            Err(e) => {
                tracing::warn!("ACP over HTTP: {e}");
                // The connection's stream failing ends the transport, as its end does.
                return end(&http, &None);
            }
        }
    }
    end(&http, &sid);
}

/// A stream ended: a session's is opened again when next needed; the connection's ends all.
fn end(http: &Arc<Http>, sid: &Option<String>) {
    match sid {
        Some(s) => {
            http.sessions.lock().remove(s);
        }
        None => {
            let _ = http.inbound.send(Vec::new());
        }
    }
}

/// Why the HTTP transport cannot go on (logged; the transport ends).
#[derive(Debug, thiserror::Error)]
enum HttpFailed {
    #[error(transparent)]
    Send(reqwest::Error),
    #[error("the agent's endpoint answered {0}")]
    Refused(reqwest::StatusCode),
    #[error("initialize over HTTP answered {status}: {body}")]
    NotInitialized {
        status: reqwest::StatusCode,
        body: String,
    },
    #[error("an SSE event longer than {MAX_LINE_BYTES} bytes")]
    EventTooLong,
}

/// An SSE decoder: bytes in, the `data` of each complete event out (as one line).
#[derive(Default)]
struct Events {
    buffer: Vec<u8>,
    data: Vec<u8>,
}

impl Events {
    /// The events completed by `chunk`; an error once an event or a line passes
    /// [`MAX_LINE_BYTES`].
    fn push(&mut self, chunk: &[u8]) -> Result<Vec<Vec<u8>>, HttpFailed> {
        self.buffer.extend_from_slice(chunk);
        if self.buffer.len() > MAX_LINE_BYTES || self.data.len() > MAX_LINE_BYTES {
            return Err(HttpFailed::EventTooLong);
        }
        let mut out = Vec::new();
        while let Some(at) = memchr::memchr(b'\n', &self.buffer) {
            let line: Vec<u8> = self.buffer.drain(..=at).collect();
            let line = line.strip_suffix(b"\n").unwrap_or(&line);
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.is_empty() {
                if !self.data.is_empty() {
                    out.push(one_line(&std::mem::take(&mut self.data)));
                }
            } else if let Some(data) = line.strip_prefix(b"data:") {
                if !self.data.is_empty() {
                    self.data.push(b'\n');
                }
                self.data
                    .extend_from_slice(data.strip_prefix(b" ").unwrap_or(data));
            }
        }
        Ok(out)
    }
}

/// Lines from the client to POSTs (in order, one at a time), and lines from the streams to the
/// client, in a task of its own; at the end, DELETE.
async fn http_pump(http: Arc<Http>, pipe: DuplexStream) {
    let Some(mut inbound) = http.inbound_rx.lock().take() else {
        return;
    };
    let (read, mut write) = tokio::io::split(pipe);
    let mut incoming = tokio::spawn(async move {
        while let Some(line) = inbound.recv().await {
            if line.is_empty() || write.write_all(&line).await.is_err() {
                break;
            }
        }
        // The transport ended: the JSON-RPC layer reads the end of its stream.
        let _ = write.shutdown().await;
    });
    let mut lines = BufReader::new(read);
    let mut line = Vec::new();
    loop {
        tokio::select! {
            n = read_line_capped(&mut lines, &mut line, MAX_LINE_BYTES) => {
                if !matches!(n, Ok(n) if n > 0) { break }
                if let Err(e) = http.post(std::mem::take(&mut line)).await {
                    tracing::warn!("ACP over HTTP: {e}");
                    break;
                }
            }
            _ = &mut incoming => break,
        }
    }
    if http.connection.lock().is_some() {
        let delete = http.request(reqwest::Method::DELETE, None).send();
        let _ = tokio::time::timeout(CONNECT_TIMEOUT, delete).await;
    }
    // Let the incoming task end the client's stream (its end of file), then stop it anyway.
    let _ = http.inbound.send(Vec::new());
    let _ = tokio::time::timeout(CONNECT_TIMEOUT, &mut incoming).await;
    incoming.abort();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_cut_at_blank_lines_whatever_the_chunks() {
        let mut e = Events::default();
        assert!(e.push(b"data: {\"a\"").unwrap().is_empty());
        assert_eq!(
            e.push(b":1}\n\n:\n\ndata: [1,\r\ndata: 2]\n\n").unwrap(),
            vec![b"{\"a\":1}\n".to_vec(), b"[1,2]\n".to_vec()]
        );
        assert!(is_url("http://h/acp") && is_url("ws://h/acp") && !is_url("oml"));
    }
}
