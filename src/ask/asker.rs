//! The asking side: reach a key's owner (starting one when none answers), send one request,
//! and read its events — or run a one-shot prompt (`exec`) with a worker of its own, read the
//! same way. `front::ask` prints what is read; `client.ask` hands it to Lisp.

use std::io::Write as _;
use std::os::unix::process::CommandExt as _;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::io::{AsyncWriteExt as _, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, oneshot};

use super::owner::read_line;
use super::wire::{self, Config, Decision, Event, Policy, Request};
use super::worker::{Link, Worker};
use super::{OWNER_ARG, OwnerSpec, Place};
use crate::cancel::CancelToken;

/// How long an asker waits for a new owner's socket.
pub const OWNER_START_WAIT: Duration = Duration::from_secs(15);
/// How often it looks.
const POLL: Duration = Duration::from_millis(5);
/// How much of a failed owner's log an error quotes.
const LOG_TAIL_BYTES: usize = 2000;

/// Why asking failed before any event.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    /// The agent could not be named or resolved (the message says what to do).
    #[error("{0}")]
    Agent(String),
    #[error("cannot start the session's owner: {0}")]
    Start(String),
    #[error("the session's owner: {0}")]
    Io(#[from] std::io::Error),
    /// The request (a prompt, in practice) is longer than a line either side reads.
    #[error(
        "the prompt is {bytes} bytes as sent, over the limit of {} MiB ({limit} bytes) that oml ask \
         sends to an agent",
        limit / (1024 * 1024)
    )]
    TooLong { bytes: usize, limit: usize },
}

/// [`AskError::TooLong`] when `prompt` (ACP content blocks) alone is longer than a line oml
/// reads: `exec` sends it to the agent as one JSON-RPC line.
pub fn check_prompt(prompt: &serde_json::Value) -> Result<(), AskError> {
    let bytes = crate::sized::encoded_len(prompt).unwrap_or(usize::MAX);
    if bytes > wire::MAX_LINE_BYTES {
        return Err(AskError::TooLong {
            bytes,
            limit: wire::MAX_LINE_BYTES,
        });
    }
    Ok(())
}

/// The request as one line for the owner, or [`AskError::TooLong`] when it is longer than the
/// owner reads (and than an agent's JSON-RPC line oml reads, the same 64 MiB).
pub fn encode(request: &Request) -> Result<Vec<u8>, AskError> {
    let line = wire::line(request);
    // The newline is not counted.
    if line.len() > wire::MAX_LINE_BYTES + 1 {
        return Err(AskError::TooLong {
            bytes: line.len() - 1,
            limit: wire::MAX_LINE_BYTES,
        });
    }
    Ok(line)
}

/// A request's events, from an owner's socket or from an in-process worker.
pub enum Conversation {
    Socket {
        read: BufReader<OwnedReadHalf>,
        write: OwnedWriteHalf,
    },
    Local {
        events: mpsc::UnboundedReceiver<Event>,
        pending: Arc<Mutex<std::collections::HashMap<u64, oneshot::Sender<Decision>>>>,
        stop: CancelToken,
        done: Option<tokio::task::JoinHandle<()>>,
    },
}

impl Conversation {
    /// The next event; `None` when the owner closed the connection (or the worker ended).
    pub async fn next(&mut self) -> Result<Option<Event>, AskError> {
        match self {
            Conversation::Socket { read, .. } => match read_line(read).await? {
                Some(line) => serde_json::from_str(&line)
                    .map(Some)
                    .map_err(|e| AskError::Io(std::io::Error::other(format!("a bad event: {e}")))),
                None => Ok(None),
            },
            Conversation::Local { events, done, .. } => match events.recv().await {
                Some(e) => Ok(Some(e)),
                None => {
                    if let Some(task) = done.take() {
                        let _ = task.await;
                    }
                    Ok(None)
                }
            },
        }
    }

    /// Answers the permission question `id`.
    pub async fn answer(&mut self, id: u64, decision: Decision) -> Result<(), AskError> {
        match self {
            Conversation::Socket { write, .. } => {
                write
                    .write_all(&wire::line(&Request::Answer { id, decision }))
                    .await?;
                Ok(())
            }
            Conversation::Local { pending, .. } => {
                Link::answer(pending, id, decision);
                Ok(())
            }
        }
    }

    /// Cancels the prompt this conversation is about (an owner's prompt is cancelled when its
    /// connection closes, which dropping the conversation does).
    pub fn cancel(&self) {
        if let Conversation::Local { stop, .. } = self {
            stop.cancel();
        }
    }
}

/// A one-shot conversation dropped before its end cancels its prompt (the worker then closes
/// the agent), as an owner does when its asker goes away.
impl Drop for Conversation {
    fn drop(&mut self) {
        if let Conversation::Local { stop, done, .. } = self
            && done.is_some()
        {
            stop.cancel();
        }
    }
}

/// The owner's socket, or an error when nobody answers there.
pub async fn connect(place: &Place) -> std::io::Result<UnixStream> {
    UnixStream::connect(&place.socket).await
}

/// Sends `request` to the owner of `spec`'s key, starting the owner when none answers;
/// `resolve` says how to start the agent and is awaited only then.
pub async fn ask(
    place: &Place,
    request: &Request,
    resolve: impl Future<Output = Result<OwnerSpec, AskError>>,
) -> Result<Conversation, AskError> {
    encode(request)?;
    let stream = match connect(place).await {
        Ok(s) => s,
        Err(_) => start_and_connect(place, resolve.await?).await?,
    };
    send(stream, request).await
}

/// Sends `request` to a running owner only (`status`, `cancel`): `None` when there is none.
pub async fn ask_running(
    place: &Place,
    request: &Request,
) -> Result<Option<Conversation>, AskError> {
    match connect(place).await {
        Ok(stream) => Ok(Some(send(stream, request).await?)),
        Err(_) => Ok(None),
    }
}

async fn send(stream: UnixStream, request: &Request) -> Result<Conversation, AskError> {
    let line = encode(request)?;
    let (read, mut write) = stream.into_split();
    write.write_all(&line).await?;
    Ok(Conversation::Socket {
        read: BufReader::new(read),
        write,
    })
}

/// Starts an owner for `spec` and waits for its socket.
async fn start_and_connect(place: &Place, spec: OwnerSpec) -> Result<UnixStream, AskError> {
    let mut child = start_owner(place, &spec)?;
    let deadline = Instant::now() + OWNER_START_WAIT;
    loop {
        if let Ok(stream) = connect(place).await {
            // The owner outlives this process; reaping it is the owner's parent's business
            // only while this process lives.
            std::thread::spawn(move || child.wait());
            return Ok(stream);
        }
        if let Ok(Some(status)) = child.try_wait() {
            // Another owner may have won the race for the lock and be answering now.
            if let Ok(stream) = connect(place).await {
                return Ok(stream);
            }
            return Err(AskError::Start(format!(
                "it exited ({status}){}",
                log_tail(place)
            )));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(AskError::Start(format!(
                "no socket after {} s{}",
                OWNER_START_WAIT.as_secs(),
                log_tail(place)
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// `oml __ask-owner` in a session of its own, its spec on stdin, its stderr in the key's log.
fn start_owner(place: &Place, spec: &OwnerSpec) -> Result<std::process::Child, AskError> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let start = |e: std::io::Error| AskError::Start(e.to_string());
    if let Some(dir) = place.log.parent() {
        crate::paths::ensure_private_dir(dir).map_err(start)?;
    }
    let log = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&place.log)
        .map_err(start)?;
    let exe = std::env::current_exe().map_err(start)?;
    let mut command = std::process::Command::new(exe);
    command
        .arg(OWNER_ARG)
        .current_dir(&spec.key.cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(log);
    // SAFETY: setsid is async-signal-safe; the owner leaves the asker's terminal and process
    // group, so a Ctrl-C there does not reach it.
    unsafe {
        command.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = command.spawn().map_err(start)?;
    let spec = serde_json::to_vec(spec).map_err(|e| AskError::Start(e.to_string()))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(&spec).map_err(start)?;
    }
    Ok(child)
}

fn log_tail(place: &Place) -> String {
    let text = std::fs::read(&place.log).unwrap_or_default();
    let tail = &text[text.len().saturating_sub(LOG_TAIL_BYTES)..];
    let tail = String::from_utf8_lossy(tail);
    let tail = tail.trim();
    if tail.is_empty() {
        String::new()
    } else {
        format!(": {tail}")
    }
}

/// `exec`: a one-shot session run by a worker in this process, read like an owner's.
pub fn exec(
    spec: OwnerSpec,
    prompt: serde_json::Value,
    policy: Policy,
    config: Config,
) -> Conversation {
    let (tx, events) = mpsc::unbounded_channel();
    let link = Link::new(tx, policy);
    let pending = Arc::clone(&link.pending);
    let stop = CancelToken::new();
    let worker_stop = stop.clone();
    let done = tokio::spawn(async move {
        let mut worker = Worker::new(spec);
        worker.prompt(prompt, &config, link, worker_stop).await;
        worker.close_session().await;
    });
    Conversation::Local {
        events,
        pending,
        stop,
        done: Some(done),
    }
}

/// Reads the owner's spec from stdin and serves it: the `oml __ask-owner` process.
pub async fn owner_main() -> i32 {
    use tokio::io::AsyncReadExt as _;
    let mut bytes = Vec::new();
    if let Err(e) = tokio::io::stdin().read_to_end(&mut bytes).await {
        tracing::error!("cannot read the owner's spec: {e}");
        return 1;
    }
    let spec: OwnerSpec = match serde_json::from_slice(&bytes) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("a bad owner spec: {e}");
            return 1;
        }
    };
    super::owner::serve(spec).await
}

/// The answer `decide` (a permission handler) gives a question an owner passed on; none, or a
/// failing one, rejects.
pub async fn decide(
    decide: Option<&crate::acp_client::PermissionHandler>,
    session_id: &str,
    tool_call: &serde_json::Value,
    options: &[crate::acp::PermissionOption],
) -> Decision {
    let Some(decide) = decide else {
        return Decision::Reject;
    };
    let request = crate::acp_client::PermissionRequest {
        session_id: session_id.to_owned(),
        tool_call: tool_call.clone(),
        options: options.to_vec(),
        cancel: CancelToken::new(),
    };
    match decide(request).await {
        Ok(d) => d.into(),
        Err(e) => {
            tracing::warn!("the permission policy failed, rejecting: {e}");
            Decision::Reject
        }
    }
}
