//! `oml repl --connect`: the terminal client of the live REPL server (`super::server`). What the
//! server writes is shown as it comes, its prompt (`>> `, `.. `) becomes the local line editor's
//! prompt, and each line typed is sent on.
//!
//! It knows the server only by its plain-line protocol and its recorded socket path; it holds no
//! Lisp state of its own.

use std::io;
use std::path::{Path, PathBuf};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::net::unix::OwnedReadHalf;
use tokio::sync::mpsc;

use crate::front::lines;
use crate::paths::Paths;

/// The prompts the server writes, ending its output while it waits for a line.
const PROMPTS: [&str; 2] = [">> ", ".. "];

/// The socket `oml repl --connect` uses when none is named: the one recorded in the state dir.
pub fn default_socket(paths: &Paths) -> Option<PathBuf> {
    let recorded = std::fs::read_to_string(paths.repl_socket_record()).ok()?;
    let p = PathBuf::from(recorded.trim());
    p.exists().then_some(p)
}

/// `oml repl --connect`: a terminal client for the server. Lines typed go to the server; what it
/// writes is shown; its prompt is used as the local prompt.
pub async fn connect(socket: &Path) -> io::Result<()> {
    let stream = UnixStream::connect(socket).await.map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot connect to {}: {e}", socket.display()),
        )
    })?;
    let (rd, mut wr) = stream.into_split();
    // Server output, split into "text" and "a prompt is waiting".
    let (prompt_tx, mut prompt_rx) = mpsc::unbounded_channel::<Option<String>>();
    tokio::spawn(show_output(rd, prompt_tx));
    let (line_tx, mut line_rx) = mpsc::unbounded_channel::<Option<String>>();
    let (want_tx, want_rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || read_typed_lines(want_rx, line_tx));

    while let Some(Some(prompt)) = prompt_rx.recv().await {
        if want_tx.send(prompt).is_err() {
            break;
        }
        match line_rx.recv().await {
            Some(Some(line)) => {
                wr.write_all(format!("{line}\n").as_bytes()).await?;
            }
            _ => break,
        }
    }
    let _ = wr.shutdown().await;
    Ok(())
}

/// The prompt `pending` output ends with, if it ends with one at the start of a line.
fn trailing_prompt(pending: &str) -> Option<&'static str> {
    PROMPTS
        .into_iter()
        .find(|p| pending == *p || pending.ends_with(&format!("\n{p}")))
}

/// Write the server's output to stdout as it comes, without its prompts; each prompt is sent on
/// `prompt_tx`, and `None` once the server is gone.
async fn show_output(mut rd: OwnedReadHalf, prompt_tx: mpsc::UnboundedSender<Option<String>>) {
    use std::io::Write as _;
    let mut buf = vec![0u8; 8192];
    let mut pending = String::new();
    loop {
        let n = match rd.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        pending.push_str(&String::from_utf8_lossy(&buf[..n]));
        let prompt = trailing_prompt(&pending);
        let text = match prompt {
            Some(p) => pending[..pending.len() - p.len()].to_string(),
            None => std::mem::take(&mut pending),
        };
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
        if let Some(p) = prompt {
            pending.clear();
            let _ = prompt_tx.send(Some(p.to_string()));
        }
    }
    let _ = prompt_tx.send(None);
}

/// The line editor, on a thread of its own: for each prompt wanted, the line typed (Ctrl-C
/// starts the line again), or `None` at the end of input, which ends it.
fn read_typed_lines(
    want_rx: std::sync::mpsc::Receiver<String>,
    line_tx: mpsc::UnboundedSender<Option<String>>,
) {
    let Some(mut editor) = lines::editor::<()>(None, lines::CLIENT_HISTORY, None) else {
        return;
    };
    while let Ok(prompt) = want_rx.recv() {
        let line = loop {
            match lines::read(&mut editor, &prompt) {
                lines::Read::Line(l) => break Some(l),
                lines::Read::Interrupted => continue,
                lines::Read::Eof => break None,
            }
        };
        let done = line.is_none();
        let _ = line_tx.send(line);
        if done {
            break;
        }
    }
}
