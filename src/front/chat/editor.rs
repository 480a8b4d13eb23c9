//! Reading the chat's input: on a terminal, rustyline on its own thread (history across runs,
//! Alt-Enter or a trailing `\` for another line, forms read until they balance, Tab completing
//! slash commands, Lisp names and `@path` mentions); with stdin piped, plain lines by the same
//! continuation rules.
//!
//! On a terminal a read can be woken ([`Reader::wake`]: the session has something to answer, a
//! background task's result): rustyline has no way to end a read from outside but the SIGINT
//! it handles while it reads, so the reader signals its own thread, the read ends as
//! [`Read::Woken`], and what was typed (the helper sees every change) is put back in the next
//! read, cursor and all. The signal is sent only while rustyline's handler is installed (the
//! helper arms the wake as it draws the line, and disarms it once the line is accepted); in the
//! instant after a Ctrl-C or Ctrl-D before the thread disarms it, tokio's handler, which the
//! reader registers, takes it and nothing happens.
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
    /// Ended by [`Reader::wake`]; what was typed (`kept`: something was) comes back in the
    /// next read.
    Woken { kept: bool },
}

/// Whether a read may be woken now, and what is typed in it (shared by the reader, its thread
/// and rustyline's helper).
#[derive(Default)]
struct Waking {
    /// rustyline reads, its SIGINT handler installed: set as the helper draws the line.
    armed: bool,
    /// The line was accepted: rustyline is about to put its handler back.
    accepted: bool,
    /// [`Reader::wake`] signalled this read.
    woken: bool,
    /// The text typed so far, and the cursor's byte offset in it.
    typed: String,
    pos: usize,
}

struct Request {
    prompt: String,
    reply: oneshot::Sender<Read>,
}

/// The reader: a thread that answers [`Reader::read`]s.
pub struct Reader {
    requests: Option<std::sync::mpsc::Sender<Request>>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// On a terminal: what [`Reader::wake`] needs.
    waking: Option<Arc<Mutex<Waking>>>,
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
        // A wake's SIGINT that comes just after rustyline has put its handler back finds
        // tokio's, which only notes it (a listener made later never sees it).
        let _ = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt());
        let waking = Arc::new(Mutex::new(Waking::default()));
        let shared = waking.clone();
        let thread = std::thread::spawn(move || {
            edit_lines(rx, history, history_size, names, &shared);
        });
        Reader {
            requests: Some(tx),
            thread: Some(thread),
            waking: Some(waking),
        }
    }

    /// Lines from piped stdin.
    pub fn piped() -> Reader {
        let (tx, rx) = std::sync::mpsc::channel::<Request>();
        let thread = std::thread::spawn(move || piped_lines(rx));
        Reader {
            requests: Some(tx),
            thread: Some(thread),
            waking: None,
        }
    }

    /// Whether a read can be woken (on a terminal).
    pub fn wakes(&self) -> bool {
        self.waking.is_some()
    }

    /// End the read under way as [`Read::Woken`], keeping what was typed for the next one.
    /// Whether it is (or was already) woken: `false` while no read can be woken yet (none under
    /// way, or rustyline has not drawn its line); the caller tries again.
    pub fn wake(&self) -> bool {
        use std::os::unix::thread::JoinHandleExt as _;
        let (Some(waking), Some(thread)) = (&self.waking, &self.thread) else {
            return false;
        };
        let mut w = waking.lock();
        if w.woken || !w.armed {
            return w.woken;
        }
        // SAFETY: the thread has not been joined (its handle is held here), so its id is
        // valid; while `armed`, rustyline's SIGINT handler is installed (see the module's doc),
        // so the signal only ends its read.
        let sent = unsafe { libc::pthread_kill(thread.as_pthread_t(), libc::SIGINT) } == 0;
        w.woken = sent;
        sent
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
        self.waking = None;
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
    waking: &Arc<Mutex<Waking>>,
) {
    let empty = Arc::new(AtomicBool::new(true));
    let helper = Helper {
        names,
        empty: empty.clone(),
        waking: waking.clone(),
    };
    let Some(mut editor) = lines::editor(Some(helper), history_size, history.as_deref()) else {
        return;
    };
    editor.bind_sequence(
        KeyEvent(KeyCode::Enter, Modifiers::ALT),
        EventHandler::Simple(Cmd::Newline),
    );
    // With a printer, rustyline waits on its signal pipe too, so a wake's signal that comes
    // while it is not blocked in a read still ends the read.
    let _printer = editor.create_external_printer().ok();
    // What a woken read had typed, and where its cursor was.
    let mut kept: Option<(String, usize)> = None;
    while let Ok(req) = requests.recv() {
        empty.store(true, Ordering::Relaxed);
        *waking.lock() = Waking::default();
        let initial = kept.take();
        let initial = initial
            .as_ref()
            .and_then(|(t, pos)| Some((t.get(..*pos)?, t.get(*pos..)?)));
        let read = lines::read_with(&mut editor, &req.prompt, initial);
        let (woken, typed, pos) = {
            let mut w = waking.lock();
            w.armed = false;
            (w.woken, std::mem::take(&mut w.typed), w.pos)
        };
        let read = match read {
            lines::Read::Line(line) => Read::Line(line),
            lines::Read::Interrupted if woken => {
                let typed_some = !typed.is_empty();
                kept = Some((typed, pos));
                Read::Woken { kept: typed_some }
            }
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

/// rustyline's helper: continuation, completion, whether the line is empty (for Ctrl-C), and
/// what a wake needs (see [`Waking`]).
struct Helper {
    names: Arc<Mutex<Names>>,
    empty: Arc<AtomicBool>,
    waking: Arc<Mutex<Waking>>,
}

impl rustyline::validate::Validator for Helper {
    fn validate(
        &self,
        ctx: &mut rustyline::validate::ValidationContext<'_>,
    ) -> rustyline::Result<rustyline::validate::ValidationResult> {
        Ok(if needs_more(ctx.input()) {
            rustyline::validate::ValidationResult::Incomplete
        } else {
            // rustyline puts its signal handler back next: no wake from here on.
            let mut w = self.waking.lock();
            w.accepted = true;
            w.armed = false;
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

    fn hint(&self, line: &str, pos: usize, _: &rustyline::Context<'_>) -> Option<String> {
        self.empty.store(line.is_empty(), Ordering::Relaxed);
        // Called as rustyline draws the line, its signal handler installed.
        let mut w = self.waking.lock();
        line.clone_into(&mut w.typed);
        w.pos = pos;
        w.armed |= !w.accepted;
        None
    }
}

impl rustyline::highlight::Highlighter for Helper {}
impl rustyline::Helper for Helper {}
