//! The owner process: holds the key's lock, listens on its socket, queues prompts in the order
//! they come, runs them one at a time through its [`Worker`], answers `status` and `cancel` at
//! any time, and ends [`Request::Prompt`]'s `ttl` seconds after its last prompt.
//!
//! Every connection is first checked with `sandbox::peer::check`, as the live REPL's are: a
//! confined command (or another user) is refused, even if it found the socket.
//!
//! Shutting down without losing a prompt: the socket is removed first (a new asker then starts
//! a new owner, which waits for this one's lock), connections already accepted are given time
//! to say what they want, and whatever got queued meanwhile still runs.

use std::collections::VecDeque;
use std::os::unix::fs::PermissionsExt as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncWriteExt as _, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{Notify, mpsc, oneshot};

use super::wire::{self, Config, Event, Policy, Request, Status};
use super::worker::{Link, Shown, Worker, failed};
use super::{OwnerSpec, Place};
use crate::cancel::CancelToken;

/// How long a second owner waits for the first one's lock before it gives up.
pub const LOCK_WAIT: Duration = Duration::from_secs(10);
/// How long shutdown waits for accepted connections to send their request.
const IN_FLIGHT_WAIT: Duration = Duration::from_secs(1);
/// How often a waiting owner looks at the lock again.
const POLL: Duration = Duration::from_millis(20);

/// One queued piece of work.
enum Job {
    Prompt {
        prompt: Value,
        config: Config,
        link: Link,
        stop: CancelToken,
    },
    NewSession(oneshot::Sender<Event>),
    Close(oneshot::Sender<Event>),
}

/// What the connections and the worker loop share.
struct Shared {
    queue: Mutex<VecDeque<Job>>,
    arrived: Notify,
    /// The running prompt's stop token.
    running: Mutex<Option<CancelToken>>,
    /// Seconds to stay after the last prompt (the latest prompt's `ttl`).
    ttl: Mutex<Duration>,
    /// When the owner became idle, if it is.
    idle_since: Mutex<Option<Instant>>,
    started: Instant,
    /// Accepted connections that have not been read yet.
    in_flight: AtomicUsize,
    /// Connections being served.
    active: AtomicUsize,
    /// The worker's state as `status` shows it.
    shown: Arc<Mutex<Shown>>,
}

/// Runs an owner for `spec` until its time is up; returns the exit status.
pub async fn serve(spec: OwnerSpec) -> i32 {
    let place = spec.place();
    let lock = match take_lock(&place).await {
        Ok(Some(lock)) => lock,
        Ok(None) => return 0,
        Err(e) => {
            tracing::error!("cannot take the owner's lock {}: {e}", place.lock.display());
            return 1;
        }
    };
    let mut worker = Worker::new(spec);
    let listener = match listen(&place) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("cannot listen on {}: {e}", place.socket.display());
            return 1;
        }
    };
    let shared = Arc::new(Shared {
        queue: Mutex::default(),
        arrived: Notify::new(),
        running: Mutex::default(),
        ttl: Mutex::new(super::DEFAULT_TTL),
        idle_since: Mutex::new(Some(Instant::now())),
        started: Instant::now(),
        in_flight: AtomicUsize::new(0),
        active: AtomicUsize::new(0),
        shown: Arc::clone(&worker.shown),
    });
    let accept = tokio::spawn(accept_loop(listener, Arc::clone(&shared)));
    let closed = work(&mut worker, &shared).await;
    // Stop taking new connections, then run what still got in.
    let _ = std::fs::remove_file(&place.socket);
    accept.abort();
    let deadline = Instant::now() + IN_FLIGHT_WAIT;
    while shared.in_flight.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
        tokio::time::sleep(POLL).await;
    }
    if !closed {
        *shared.ttl.lock() = Duration::ZERO;
        work(&mut worker, &shared).await;
    }
    worker.drop_agent().await;
    // The last answers (`close`'s, a prompt's end) go out before the process ends.
    let deadline = Instant::now() + IN_FLIGHT_WAIT;
    while shared.active.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
        tokio::time::sleep(POLL).await;
    }
    drop(lock);
    0
}

/// Runs jobs until the owner has been idle for its time to live; returns whether a `close`
/// ended it.
async fn work(worker: &mut Worker, shared: &Shared) -> bool {
    loop {
        let job = shared.queue.lock().pop_front();
        let Some(job) = job else {
            let since = *shared.idle_since.lock().get_or_insert_with(Instant::now);
            let ttl = *shared.ttl.lock();
            let left = ttl.saturating_sub(since.elapsed());
            if left.is_zero() {
                return false;
            }
            let _ = tokio::time::timeout(left, shared.arrived.notified()).await;
            continue;
        };
        *shared.idle_since.lock() = None;
        match job {
            Job::Prompt {
                prompt,
                config,
                link,
                stop,
            } => {
                if !stop.is_cancelled() {
                    *shared.running.lock() = Some(stop.clone());
                    worker.prompt(prompt, &config, link, stop).await;
                    *shared.running.lock() = None;
                }
            }
            Job::NewSession(reply) => {
                let said = match worker.new_session().await {
                    Ok(id) => Event::Ack {
                        what: format!("new session {id}"),
                    },
                    Err(e) => failed(&e),
                };
                let _ = reply.send(said);
            }
            Job::Close(reply) => {
                worker.close_session().await;
                let _ = reply.send(Event::Ack {
                    what: "closed".into(),
                });
                return true;
            }
        }
        *shared.idle_since.lock() = Some(Instant::now());
    }
}

async fn accept_loop(listener: UnixListener, shared: Arc<Shared>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        // The rule of every socket oml listens on: no confined command, no other user.
        if let Err(why) = crate::sandbox::peer::check(&stream) {
            tokio::spawn(refuse(stream, why));
            continue;
        }
        shared.in_flight.fetch_add(1, Ordering::SeqCst);
        shared.active.fetch_add(1, Ordering::SeqCst);
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            if let Err(e) = serve_connection(stream, &shared).await {
                tracing::debug!("an asker's connection ended: {e}");
            }
            shared.active.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

/// Tells a peer that may not ask why, and hangs up.
async fn refuse(mut stream: UnixStream, why: crate::sandbox::peer::PeerRefused) {
    tracing::warn!("refused a connection: {why}");
    let said = Event::Failed {
        category: "owner".into(),
        message: format!("refused: {why}"),
    };
    let _ = stream.write_all(&wire::line(&said)).await;
    let _ = stream.shutdown().await;
}

/// One asker: its request, then (for a prompt it waits for) the prompt's events out and its
/// permission answers in.
async fn serve_connection(stream: UnixStream, shared: &Shared) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    // Counted in flight until its request is queued (or answered), so that shutdown runs
    // every prompt that got in.
    let counted = InFlight(&shared.in_flight);
    let first = read_line(&mut read).await;
    let request = match first? {
        None => return Ok(()),
        Some(line) => serde_json::from_str::<Request>(&line),
    };
    let request = match request {
        Ok(r) => r,
        Err(e) => {
            let said = Event::Failed {
                category: "owner".into(),
                message: format!("not a request: {e}"),
            };
            return write.write_all(&wire::line(&said)).await;
        }
    };
    match request {
        Request::Prompt {
            prompt,
            wait,
            policy,
            ttl,
            config,
        } => {
            let job = (prompt, config, policy, wait);
            *shared.ttl.lock() = Duration::from_secs(ttl);
            serve_prompt(shared, job, &mut read, &mut write, counted).await
        }
        other => {
            let said = answer_at_once(shared, other).await;
            write.write_all(&wire::line(&said)).await
        }
    }
}

/// The answer to a request that is not a prompt: a cancel, the status, a new session or the
/// close (after the jobs queued before it), or an answer that came on its own.
async fn answer_at_once(shared: &Shared, request: Request) -> Event {
    let failed = |message: &str| Event::Failed {
        category: "owner".into(),
        message: message.into(),
    };
    match request {
        Request::Cancel => {
            let running = shared.running.lock().clone();
            let what = match running {
                Some(stop) => {
                    stop.cancel();
                    "cancelled the running prompt"
                }
                None => "nothing was running",
            };
            Event::Ack { what: what.into() }
        }
        Request::Status => Event::Status(status(shared)),
        Request::NewSession | Request::Close => {
            let (tx, rx) = oneshot::channel();
            let job = if matches!(request, Request::Close) {
                Job::Close(tx)
            } else {
                Job::NewSession(tx)
            };
            enqueue(shared, job);
            rx.await.unwrap_or_else(|_| failed("the owner ended first"))
        }
        Request::Answer { .. } => failed("an answer belongs on its prompt's connection"),
        // Served by `serve_prompt`; never handed here.
        Request::Prompt { .. } => failed("a prompt is served on its own connection"),
    }
}

/// A prompt's connection: queue it, then (when it waits) its events out and its answers in.
async fn serve_prompt(
    shared: &Shared,
    (prompt, config, policy, wait): (Value, Config, Policy, bool),
    read: &mut BufReader<tokio::net::unix::OwnedReadHalf>,
    write: &mut tokio::net::unix::OwnedWriteHalf,
    counted: InFlight<'_>,
) -> std::io::Result<()> {
    let reply = |e: Event| wire::line(&e);
    let (tx, mut rx) = mpsc::unbounded_channel();
    // Nobody is left to ask for a prompt that is not waited for.
    let policy = match (wait, policy) {
        (false, Policy::Ask) => Policy::ApproveReads,
        (_, p) => p,
    };
    let link = Link::new(tx, policy);
    let pending = Arc::clone(&link.pending);
    let stop = CancelToken::new();
    let ahead = enqueue(
        shared,
        Job::Prompt {
            prompt,
            config,
            link,
            stop: stop.clone(),
        },
    );
    drop(counted);
    write.write_all(&reply(Event::Queued { ahead })).await?;
    if !wait {
        return Ok(());
    }
    // The prompt stops (or never starts) when its asker goes away.
    let _stop_on_exit = StopOnDrop(stop);
    loop {
        tokio::select! {
            event = rx.recv() => {
                let Some(event) = event else { return Ok(()) };
                let last = matches!(event, Event::Done { .. } | Event::Failed { .. });
                write.write_all(&reply(event)).await?;
                if last {
                    return Ok(());
                }
            }
            line = read_line(read) => match line? {
                Some(line) => {
                    if let Ok(Request::Answer { id, decision }) = serde_json::from_str(&line) {
                        Link::answer(&pending, id, decision);
                    }
                }
                None => return Ok(()),
            }
        }
    }
}

/// Counts a connection whose request is not queued or answered yet; uncounts it when dropped.
struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Cancels its token when dropped.
struct StopOnDrop(CancelToken);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// Queues `job`; returns how many jobs are ahead of it (the running one included).
fn enqueue(shared: &Shared, job: Job) -> usize {
    let running = usize::from(shared.running.lock().is_some());
    let ahead = {
        let mut queue = shared.queue.lock();
        queue.push_back(job);
        queue.len() - 1 + running
    };
    shared.arrived.notify_one();
    ahead
}

fn status(shared: &Shared) -> Status {
    let Shown {
        agent_pid,
        session_id,
        last_prompt,
    } = shared.shown.lock().clone();
    let running = shared.running.lock().is_some();
    let ends_in_secs = shared
        .idle_since
        .lock()
        .map(|since| shared.ttl.lock().saturating_sub(since.elapsed()).as_secs());
    Status {
        state: if running { "running" } else { "idle" }.into(),
        owner_pid: std::process::id(),
        agent_pid,
        uptime_secs: shared.started.elapsed().as_secs(),
        session_id,
        last_prompt,
        queued: shared.queue.lock().len(),
        ends_in_secs: if running { None } else { ends_in_secs },
    }
}

/// One line as text, without its newline; `None` at the end. Longer than
/// [`wire::MAX_LINE_BYTES`] or not UTF-8 is an error.
pub async fn read_line(read: &mut (impl AsyncBufRead + Unpin)) -> std::io::Result<Option<String>> {
    match wire::read_line_bytes(read, wire::MAX_LINE_BYTES).await? {
        Some(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| std::io::Error::other("a line that is not UTF-8")),
        None => Ok(None),
    }
}

/// The lock file, held; `None` when another owner holds it and answers on the socket.
async fn take_lock(place: &Place) -> std::io::Result<Option<std::fs::File>> {
    use std::os::fd::AsRawFd as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    crate::paths::ensure_private_dir(&place.run_dir)?;
    crate::paths::check_private_dir(&place.run_dir).map_err(std::io::Error::other)?;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&place.lock)?;
    let deadline = Instant::now() + LOCK_WAIT;
    loop {
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(Some(file));
        }
        if UnixStream::connect(&place.socket).await.is_ok() || Instant::now() > deadline {
            return Ok(None);
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The socket, mode 0600, in place of any stale one (the lock says nobody else serves it).
fn listen(place: &Place) -> std::io::Result<UnixListener> {
    let _ = std::fs::remove_file(&place.socket);
    let listener = UnixListener::bind(&place.socket)?;
    std::fs::set_permissions(&place.socket, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}
