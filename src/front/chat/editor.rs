//! Reading the chat's input: on a terminal, rustyline on its own thread (history across runs,
//! Alt-Enter or a trailing `\` for another line, forms read until they balance, Tab completing
//! slash commands, Lisp names and `@path` mentions); with stdin piped, plain lines by the same
//! continuation rules.
//!
//! It answers one read at a time and knows nothing of what the input means.

use std::io::BufRead as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use rustyline::completion::{Completer, Pair};
use rustyline::{Cmd, EventHandler, KeyCode, KeyEvent, Modifiers};
use tokio::sync::oneshot;

use super::input::needs_more;
use crate::front::lines;

/// Completion candidates that change while the chat runs, refreshed before each read.
#[derive(Default)]
pub struct Names {
    /// Slash command names, without the `/`.
    pub commands: Vec<String>,
    /// Global Lisp names and the fields of namespace tables (`agent.prompt`).
    pub lisp: Vec<String>,
}

/// What one read gives.
#[derive(Debug, PartialEq, Eq)]
pub enum Read {
    /// A complete input (continuation lines included, `\`s still in).
    Line(String),
    /// Ctrl-C at the prompt; `empty` when nothing had been typed.
    Interrupted { empty: bool },
    /// Ctrl-D, or the end of piped input.
    Eof,
}

struct Request {
    prompt: String,
    reply: oneshot::Sender<Read>,
}

/// The reader: a thread that answers [`Reader::read`]s.
pub struct Reader {
    requests: Option<std::sync::mpsc::Sender<Request>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Reader {
    /// A line editor on the terminal, with `history` (kept to `history_size` entries) and
    /// completion from `names`.
    pub fn terminal(
        history: Option<PathBuf>,
        history_size: usize,
        names: Arc<Mutex<Names>>,
    ) -> Reader {
        let (tx, rx) = std::sync::mpsc::channel::<Request>();
        let thread = std::thread::spawn(move || edit_lines(rx, history, history_size, names));
        Reader {
            requests: Some(tx),
            thread: Some(thread),
        }
    }

    /// Lines from piped stdin.
    pub fn piped() -> Reader {
        let (tx, rx) = std::sync::mpsc::channel::<Request>();
        let thread = std::thread::spawn(move || piped_lines(rx));
        Reader {
            requests: Some(tx),
            thread: Some(thread),
        }
    }

    /// The next input, shown after `prompt` on a terminal.
    pub async fn read(&self, prompt: &str) -> Read {
        let (reply, answer) = oneshot::channel();
        let sent = self.requests.as_ref().is_some_and(|r| {
            r.send(Request {
                prompt: prompt.to_owned(),
                reply,
            })
            .is_ok()
        });
        if !sent {
            return Read::Eof;
        }
        answer.await.unwrap_or(Read::Eof)
    }

    /// Stop the thread (saving the history) and wait for it.
    /// Stop reading without waiting for the line being read (a signal ends the chat): the
    /// thread is left to end with the process.
    pub fn abandon(mut self) {
        self.requests = None;
        self.thread = None;
    }

    pub async fn close(mut self) {
        self.requests = None;
        if let Some(thread) = self.thread.take() {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }
}

fn edit_lines(
    requests: std::sync::mpsc::Receiver<Request>,
    history: Option<PathBuf>,
    history_size: usize,
    names: Arc<Mutex<Names>>,
) {
    let empty = Arc::new(AtomicBool::new(true));
    let helper = Helper {
        names,
        empty: empty.clone(),
    };
    let Some(mut editor) = lines::editor(Some(helper), history_size, history.as_deref()) else {
        return;
    };
    editor.bind_sequence(
        KeyEvent(KeyCode::Enter, Modifiers::ALT),
        EventHandler::Simple(Cmd::Newline),
    );
    while let Ok(req) = requests.recv() {
        empty.store(true, Ordering::Relaxed);
        let read = match lines::read(&mut editor, &req.prompt) {
            lines::Read::Line(line) => Read::Line(line),
            lines::Read::Interrupted => Read::Interrupted {
                empty: empty.load(Ordering::Relaxed),
            },
            lines::Read::Eof => Read::Eof,
        };
        let eof = read == Read::Eof;
        let _ = req.reply.send(read);
        if eof {
            break;
        }
    }
    if let Some(h) = &history {
        lines::save_history(&mut editor, h);
    }
}

fn piped_lines(requests: std::sync::mpsc::Receiver<Request>) {
    let stdin = std::io::stdin();
    let mut lines = stdin.lock();
    while let Ok(req) = requests.recv() {
        let mut text = String::new();
        let read = loop {
            let mut line = Vec::new();
            match lines.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) if text.is_empty() => break Read::Eof,
                Ok(0) | Err(_) => break Read::Line(text),
                Ok(_) => {
                    text.push_str(&String::from_utf8_lossy(&line));
                    if !needs_more(&text) {
                        break Read::Line(text.trim_end_matches('\n').to_owned());
                    }
                }
            }
        };
        let eof = read == Read::Eof;
        let _ = req.reply.send(read);
        if eof {
            break;
        }
    }
}

/// rustyline's helper: continuation, completion, and whether the line is empty (for Ctrl-C).
struct Helper {
    names: Arc<Mutex<Names>>,
    empty: Arc<AtomicBool>,
}

impl rustyline::validate::Validator for Helper {
    fn validate(
        &self,
        ctx: &mut rustyline::validate::ValidationContext<'_>,
    ) -> rustyline::Result<rustyline::validate::ValidationResult> {
        Ok(if needs_more(ctx.input()) {
            rustyline::validate::ValidationResult::Incomplete
        } else {
            rustyline::validate::ValidationResult::Valid(None)
        })
    }
}

impl Completer for Helper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _: &rustyline::Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let before = &line[..pos];
        let start = before
            .rfind(|c: char| c.is_whitespace() || c == '(' || c == '[' || c == '{')
            .map_or(0, |i| i + 1);
        let word = &before[start..];
        let names = self.names.lock();
        let candidates = if let Some(cmd) = word.strip_prefix('/').filter(|_| start == 0) {
            prefixed(&names.commands, cmd, "/")
        } else if let Some(path) = word.strip_prefix('@') {
            paths(path)
        } else if !word.is_empty() {
            prefixed(&names.lisp, word, "")
        } else {
            Vec::new()
        };
        Ok((start, candidates))
    }
}

fn prefixed(names: &[String], partial: &str, sigil: &str) -> Vec<Pair> {
    names
        .iter()
        .filter(|n| n.starts_with(partial))
        .map(|n| Pair {
            display: format!("{sigil}{n}"),
            replacement: format!("{sigil}{n}"),
        })
        .collect()
}

/// `@` completions: the entries of the directory `partial` names, relative to the current
/// directory, hidden ones only when asked for with a leading dot.
fn paths(partial: &str) -> Vec<Pair> {
    let (dir, stem) = match partial.rfind('/') {
        Some(i) => (&partial[..=i], &partial[i + 1..]),
        None => ("", partial),
    };
    let Ok(entries) = std::fs::read_dir(if dir.is_empty() { "." } else { dir }) else {
        return Vec::new();
    };
    let mut out: Vec<Pair> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            if !name.starts_with(stem) || (name.starts_with('.') && !stem.starts_with('.')) {
                return None;
            }
            let slash = if e.path().is_dir() { "/" } else { "" };
            Some(Pair {
                display: format!("{name}{slash}"),
                replacement: format!("@{dir}{name}{slash}"),
            })
        })
        .collect();
    out.sort_by(|a, b| a.display.cmp(&b.display));
    out
}

impl rustyline::hint::Hinter for Helper {
    type Hint = String;

    fn hint(&self, line: &str, _: usize, _: &rustyline::Context<'_>) -> Option<String> {
        self.empty.store(line.is_empty(), Ordering::Relaxed);
        None
    }
}

impl rustyline::highlight::Highlighter for Helper {}
impl rustyline::Helper for Helper {}
