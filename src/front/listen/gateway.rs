//! One remote ACP connection: the `oml acp` process that serves it, and the routing of each line
//! that process writes to the client's streams.
//!
//! Over Streamable HTTP the client reads from several SSE streams: one for the connection and one
//! per session. A response goes back on the stream of its request (the session its POST named,
//! else the connection's); a request or notification from the agent goes on the stream of the
//! session its `params.sessionId` names, else on the connection's. A stream nobody reads yet
//! keeps what is sent to it, in order, until it is opened (the updates that follow a
//! `session/new` answer arrive before the client opens that session's stream). Over a WebSocket
//! everything goes on the one stream ([`Routing::Single`]).
//!
//! What the agent wrote and the client has not read yet (queued, or in a reader's channel) is
//! counted; past [`MAX_UNREAD_BYTES`] the connection ends, so a client that never opens a stream,
//! or stops reading one, cannot make the listener hold an agent's output without end.
//!
//! It knows JSON-RPC lines and the routes; not HTTP, SSE framing or ACP methods.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

use crate::acp_client::{AgentProcess, Spawn};

/// The most bytes the agent may have written that the client has not read yet.
pub const MAX_UNREAD_BYTES: usize = 256 << 20;

/// Where a line goes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Route {
    Connection,
    Session(String),
}

/// How lines are routed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Routing {
    /// Streamable HTTP: by session, as the module doc says.
    BySession,
    /// A WebSocket: all on the connection's stream.
    Single,
}

/// The members of a JSON-RPC line that route it.
#[derive(Deserialize)]
pub(super) struct Probe<'a> {
    #[serde(borrow, default)]
    pub id: Option<&'a RawValue>,
    #[serde(default)]
    pub method: Option<String>,
    #[serde(default)]
    pub params: Option<ProbeParams>,
}

#[derive(Deserialize, Default)]
pub(super) struct ProbeParams {
    #[serde(rename = "sessionId", default)]
    pub session_id: Option<String>,
}

impl Probe<'_> {
    /// Reads the routing members of `line`; `None` when it is not a JSON object.
    pub(super) fn read(line: &[u8]) -> Option<Probe<'_>> {
        serde_json::from_slice(line).ok()
    }

    pub(super) fn session(&self) -> Option<&str> {
        self.params.as_ref().and_then(|p| p.session_id.as_deref())
    }
}

/// A stream's lines: queued while nobody reads it, else sent to its reader.
#[derive(Default)]
struct Stream {
    queue: VecDeque<Bytes>,
    reader: Option<mpsc::UnboundedSender<Bytes>>,
}

/// One connection and its `oml acp` process.
pub(super) struct Gateway {
    process: AgentProcess,
    /// The lines for the process's stdin; taken (so the stdin closes) by [`Gateway::close`].
    stdin: Mutex<Option<mpsc::UnboundedSender<Bytes>>>,
    routing: Routing,
    streams: Mutex<HashMap<Route, Stream>>,
    /// Requests of the client not yet answered: their id (as written) and where the answer goes.
    pending: Mutex<HashMap<String, Route>>,
    /// The `initialize` being answered: its id and who waits for the answer's line.
    initialize: Mutex<Option<(String, oneshot::Sender<Bytes>)>>,
    /// Bytes delivered to a stream and not read by the client yet (see the module doc).
    pub(super) unread: Arc<AtomicUsize>,
}

/// Ends a gateway when dropped, unless disarmed: a connection whose `initialize` was given up
/// (the client went away, or it timed out) leaves no process behind.
pub(super) struct CloseOnDrop(Option<Arc<Gateway>>);

impl CloseOnDrop {
    pub(super) fn new(g: &Arc<Gateway>) -> CloseOnDrop {
        CloseOnDrop(Some(Arc::clone(g)))
    }

    pub(super) fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        if let Some(g) = self.0.take() {
            tokio::spawn(async move { g.close().await });
        }
    }
}

impl Gateway {
    /// Start `spawn` (an `oml acp`) for a new connection.
    pub(super) fn start(spawn: &Spawn, routing: Routing) -> std::io::Result<Arc<Gateway>> {
        let (process, mut child_in, child_out) = AgentProcess::spawn(spawn)?;
        let (stdin, mut lines) = mpsc::unbounded_channel::<Bytes>();
        tokio::spawn(async move {
            while let Some(line) = lines.recv().await {
                if child_in.write_all(&line).await.is_err() || child_in.flush().await.is_err() {
                    break;
                }
            }
        });
        let gateway = Arc::new(Gateway {
            process,
            stdin: Mutex::new(Some(stdin)),
            routing,
            streams: Mutex::default(),
            pending: Mutex::default(),
            initialize: Mutex::default(),
            unread: Arc::default(),
        });
        tokio::spawn(read_loop(Arc::clone(&gateway), child_out));
        Ok(gateway)
    }

    /// Send the client's `initialize` (id `id`) and wait for its answer; `None` when the process
    /// ended first.
    pub(super) async fn initialize(&self, line: Bytes, id: &str) -> Option<Bytes> {
        let (tx, rx) = oneshot::channel();
        *self.initialize.lock() = Some((id.to_owned(), tx));
        self.write(line);
        rx.await.ok()
    }

    /// Pass a line from the client to the process; a request's answer will go back on `route`.
    pub(super) fn post(&self, line: Bytes, probe: &Probe<'_>, route: Route) {
        if let (Some(id), Some(_)) = (probe.id, &probe.method) {
            self.pending.lock().insert(id.get().to_owned(), route);
        }
        self.write(line);
    }

    fn write(&self, mut line: Bytes) {
        if !line.ends_with(b"\n") {
            let mut v = line.to_vec();
            v.push(b'\n');
            line = Bytes::from(v);
        }
        if let Some(stdin) = &*self.stdin.lock() {
            let _ = stdin.send(line);
        }
    }

    /// Become the reader of `route`: what was queued for it first, then what comes. A reader
    /// already there is replaced (its stream ends).
    pub(super) fn open(&self, route: Route) -> mpsc::UnboundedReceiver<Bytes> {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut streams = self.streams.lock();
        let stream = streams.entry(route).or_default();
        for line in stream.queue.drain(..) {
            let _ = tx.send(line);
        }
        if self.process.exit_status().is_none() {
            stream.reader = Some(tx);
        }
        rx
    }

    /// Whether the connection's own stream has a reader now.
    pub(super) fn connection_read(&self) -> bool {
        self.streams
            .lock()
            .get(&Route::Connection)
            .and_then(|s| s.reader.as_ref())
            .is_some_and(|r| !r.is_closed())
    }

    /// Whether the process has exited.
    pub(super) fn ended(&self) -> bool {
        self.process.exit_status().is_some()
    }

    /// End the connection: the process sees EOF, cancels its prompts and saves its sessions,
    /// within the shutdown ladder.
    pub(super) async fn close(&self) {
        self.streams.lock().clear();
        // The writer task ends, and drops the process's stdin, once the sender is gone.
        self.stdin.lock().take();
        self.process.shutdown().await;
    }

    /// Route `line` to its stream; false when the client has left too much unread.
    fn deliver(&self, line: Bytes) -> bool {
        let size = line.len();
        if self.unread.fetch_add(size, Ordering::Relaxed) + size > MAX_UNREAD_BYTES {
            return false;
        }
        let route = match self.routing {
            Routing::Single => Route::Connection,
            Routing::BySession => self.route_of(&line),
        };
        let mut streams = self.streams.lock();
        let stream = streams.entry(route).or_default();
        let line = match &stream.reader {
            Some(reader) => match reader.send(line) {
                Ok(()) => return true,
                Err(mpsc::error::SendError(line)) => line,
            },
            None => line,
        };
        stream.reader = None;
        stream.queue.push_back(line);
        true
    }

    /// Where a line of the process goes (see the module doc); an `initialize` answer is handed
    /// to its waiter instead (and routed nowhere, as [`Route::Connection`] with no reader).
    fn route_of(&self, line: &[u8]) -> Route {
        let Some(probe) = Probe::read(line) else {
            return Route::Connection;
        };
        match (&probe.method, probe.id) {
            (None, Some(id)) => self
                .pending
                .lock()
                .remove(id.get())
                .unwrap_or(Route::Connection),
            _ => probe
                .session()
                .map_or(Route::Connection, |s| Route::Session(s.to_owned())),
        }
    }

    /// The answer to the pending `initialize`, when `line` is it.
    fn take_initialize(&self, line: &[u8]) -> Option<oneshot::Sender<Bytes>> {
        let mut pending = self.initialize.lock();
        let (id, _) = pending.as_ref()?;
        let probe = Probe::read(line)?;
        if probe.method.is_none() && probe.id.map(RawValue::get) == Some(id.as_str()) {
            pending.take().map(|(_, tx)| tx)
        } else {
            None
        }
    }
}

/// Read the process's lines and route each; at its end, every stream ends.
async fn read_loop(gateway: Arc<Gateway>, stdout: tokio::process::ChildStdout) {
    let mut reader = BufReader::new(stdout);
    loop {
        let mut line = Vec::new();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let line = Bytes::from(line);
        match gateway.take_initialize(&line) {
            Some(waiter) => {
                let _ = waiter.send(line);
            }
            None if gateway.deliver(line) => {}
            None => {
                tracing::warn!(
                    "a remote client left over {MAX_UNREAD_BYTES} bytes unread: ending its connection"
                );
                gateway.stdin.lock().take();
                gateway.process.shutdown().await;
                break;
            }
        }
    }
    for stream in gateway.streams.lock().values_mut() {
        stream.reader = None;
    }
    gateway.initialize.lock().take();
}
