//! The live REPL server: a Unix domain socket into the running process's Lisp state.
//!
//! The socket lives in `$XDG_RUNTIME_DIR/oml/` (else `<state>/run/`), in a directory of mode
//! 0700, and is itself mode 0600: only its owner can connect, unlike a TCP port that anyone on the
//! machine could reach. Its path is recorded in `<state>/repl-socket` for `oml repl --connect`
//! (`super::client`).
//!
//! The protocol is plain lines, so `socat - UNIX-CONNECT:PATH` and `nc -U PATH` work: the server
//! writes the prompt `>> ` (or `.. ` inside an unfinished form), the client sends lines, the server
//! writes values, errors and printed output, each ending with a newline, then the next prompt.
//! Every connection is its own REPL coroutine; several clients can be connected at once. A client
//! that disconnects while its form runs interrupts that form.
//!
//! Every connection is first checked with [`sandbox::peer::check`]: a peer of another user, or
//! one that runs confined (as every command oml runs for the model does), is told why and hung
//! up on before it can send a form.
//!
//! This module knows nothing about what the process is otherwise doing.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::mpsc;

use crate::lisp::Lisp;
use crate::lisp::repl::{self, Interrupt, ReadRequest};
use crate::paths::{self, Paths};
use crate::sandbox;

/// A running server. Dropping it stops accepting and removes the socket file.
pub struct ReplServer {
    path: PathBuf,
    accept: tokio::task::JoinHandle<()>,
}

/// The folder for this process's socket: the runtime folder when it is private, else
/// `<state>/run` (which must be private too).
fn socket_dir(paths: &Paths) -> io::Result<PathBuf> {
    paths::ensure_private_dir(&paths.runtime)?;
    let Err(why) = paths::check_private_dir(&paths.runtime) else {
        return Ok(paths.runtime.clone());
    };
    let fallback = paths.state.join("run");
    crate::front::stdio::err!(
        "oml: not using {} for the REPL socket: {why}; using {}",
        paths.runtime.display(),
        fallback.display()
    );
    paths::ensure_private_dir(&fallback)?;
    paths::check_private_dir(&fallback).map_err(|why| {
        io::Error::other(format!(
            "{} cannot hold the REPL socket: {why}",
            fallback.display()
        ))
    })?;
    Ok(fallback)
}

impl ReplServer {
    /// Listen on `<runtime>/repl-<pid>.sock` and record the path in the state dir. A runtime
    /// folder another user owns, or that group or others can use, is refused
    /// ([`paths::check_private_dir`]) for `<state>/run`, and stderr says so.
    pub async fn start(lisp: Lisp, paths: &Paths) -> io::Result<ReplServer> {
        let dir = socket_dir(paths)?;
        let path = dir.join(format!("repl-{}.sock", std::process::id()));
        let server = Self::start_at(lisp, &path)?;
        paths::ensure_private_dir(&paths.state)?;
        std::fs::write(paths.repl_socket_record(), path.display().to_string())?;
        Ok(server)
    }

    /// Listen on `path` (replacing a stale socket file there).
    pub fn start_at(lisp: Lisp, path: &Path) -> io::Result<ReplServer> {
        if path.exists() {
            std::fs::remove_file(path)?;
        }
        let listener = UnixListener::bind(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        let accept = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                if let Err(why) = sandbox::peer::check(&stream) {
                    tokio::spawn(refuse(stream, why));
                    continue;
                }
                let lisp = lisp.clone();
                tokio::spawn(async move { serve(lisp, stream).await });
            }
        });
        Ok(ReplServer {
            path: path.to_path_buf(),
            accept,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ReplServer {
    fn drop(&mut self) {
        self.accept.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Tell a peer that may not use the REPL why ([`sandbox::peer`]), and hang up.
async fn refuse(mut stream: UnixStream, why: sandbox::peer::PeerRefused) {
    tracing::debug!("repl: refused a connection: {why}");
    let _ = stream
        .write_all(format!("oml: refused: {why}\n").as_bytes())
        .await;
    let _ = stream.shutdown().await;
}

/// One client: a reader task feeding lines, a writer task draining output, and the REPL
/// coroutine between them.
async fn serve(lisp: Lisp, stream: UnixStream) {
    use std::os::fd::AsFd as _;
    // The watchdog's own descriptor of the socket: it sees the hang-up, and holds the socket
    // open no longer than the thread lives.
    let Ok(fd) = stream.as_fd().try_clone_to_owned() else {
        tracing::warn!("cannot watch a REPL client: no descriptor left");
        return;
    };
    let (read_half, write_half) = stream.into_split();
    let (out_tx, out_rx) = mpsc::unbounded_channel::<repl::Said>();
    let (lines_tx, lines_rx) = mpsc::unbounded_channel::<String>();
    let (reads_tx, reads_rx) = mpsc::unbounded_channel::<ReadRequest>();
    let interrupt = Interrupt::new();

    let (finish_tx, finish_rx) = tokio::sync::oneshot::channel::<()>();
    let writer = tokio::spawn(write_to_client(write_half, out_rx, finish_rx));

    // A client that goes away completely interrupts the form it left running. The check runs on
    // a plain thread: a runaway form occupies its tokio worker, and tasks queued behind it on
    // that worker would never get to notice. A half-close (`nc -N`, `socat`) is not a hang-up:
    // the forms already sent still run and their output is still written.
    let done = Arc::new(AtomicBool::new(false));
    let watchdog = watch_for_hangup(fd, interrupt.clone(), done.clone());
    let reader = tokio::spawn(read_lines(read_half, lines_tx));
    let frontend = tokio::spawn(answer_reads(reads_rx, lines_rx, out_tx.clone()));

    // The conversation runs on a thread of its own, not on a runtime worker. A form runs
    // synchronously inside the coroutine's poll; on a worker, the writer task that its `print`
    // wakes is queued on that same worker (tokio's LIFO slot, which other workers cannot steal
    // from), so a client saw nothing a form printed until the form ended, and nothing at all
    // from a form that never ends. From this thread, woken tasks go to the shared queue.
    let handle = tokio::runtime::Handle::current();
    let conversation = tokio::task::spawn_blocking(move || {
        handle.block_on(async move { repl::drive(&lisp, reads_tx, out_tx, interrupt).await })
    });
    match conversation.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!("repl client ended with an error: {e}"),
        Err(e) => tracing::warn!("repl client ended abnormally: {e}"),
    }
    frontend.abort();
    reader.abort();
    let _ = finish_tx.send(());
    let _ = writer.await;
    done.store(true, Ordering::SeqCst);
    let _ = tokio::task::spawn_blocking(move || watchdog.join()).await;
}

/// The watchdog of a connection, on a thread of its own: closes `interrupt` when the peer of
/// `fd` hangs up completely, until `done` is set.
fn watch_for_hangup(
    fd: std::os::fd::OwnedFd,
    interrupt: Interrupt,
    done: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    use std::os::fd::AsFd as _;
    std::thread::spawn(move || {
        while !done.load(Ordering::SeqCst) {
            if peer_hung_up(fd.as_fd(), HANGUP_POLL) {
                interrupt.close();
                break;
            }
        }
    })
}

/// The client's lines, as they come, until it stops sending or nobody listens.
async fn read_lines(
    read_half: tokio::net::unix::OwnedReadHalf,
    lines_tx: mpsc::UnboundedSender<String>,
) {
    let mut lines = BufReader::new(read_half).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if lines_tx.send(line).is_err() {
            break;
        }
    }
}

/// Answer each of the conversation's reads with the client's next line, after writing the
/// prompt; the end of the client's input answers `None` and ends the conversation.
async fn answer_reads(
    mut reads_rx: mpsc::UnboundedReceiver<ReadRequest>,
    mut lines_rx: mpsc::UnboundedReceiver<String>,
    prompts: mpsc::UnboundedSender<repl::Said>,
) {
    while let Some(req) = reads_rx.recv().await {
        let _ = prompts.send(repl::Said::Prompt(repl::prompt(req.continuation)));
        let line = lines_rx.recv().await.map(|l| format!("{l}\n"));
        let done = line.is_none();
        let _ = req.reply.send(line);
        if done {
            break;
        }
    }
}

/// Write the conversation's output to the client in order. It stops when told to, not when
/// every sender is gone: Lisp closures that hold a sender live until the garbage collector runs.
async fn write_to_client(
    mut write_half: tokio::net::unix::OwnedWriteHalf,
    mut out_rx: mpsc::UnboundedReceiver<repl::Said>,
    mut finish_rx: tokio::sync::oneshot::Receiver<()>,
) {
    loop {
        tokio::select! {
            biased;
            text = out_rx.recv() => match text {
                Some(text) => {
                    if write_half.write_all(text.text().as_bytes()).await.is_err() {
                        return;
                    }
                }
                None => break,
            },
            _ = &mut finish_rx => {
                while let Ok(text) = out_rx.try_recv() {
                    if write_half.write_all(text.text().as_bytes()).await.is_err() {
                        return;
                    }
                }
                break;
            }
        }
    }
    let _ = write_half.shutdown().await;
}

/// How often the watchdog of a connection wakes to see whether the connection has ended.
const HANGUP_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// Whether the peer of the socket `fd` has closed the connection completely (not merely its
/// sending side).
fn peer_hung_up(fd: std::os::fd::BorrowedFd<'_>, wait: std::time::Duration) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let mut fds = [PollFd::new(&fd, PollFlags::RDHUP)];
    let timeout = Timespec::try_from(wait).unwrap_or(Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    });
    let ready = poll(&mut fds, Some(&timeout)).unwrap_or(0);
    ready > 0 && fds[0].revents().intersects(PollFlags::HUP | PollFlags::ERR)
}
