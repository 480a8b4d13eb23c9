//! The interactive terminal REPL (`oml repl`): line editing with rustyline, history in the state
//! dir, multi-line forms until they balance, Ctrl-C interrupting the running form, Ctrl-D to exit.
//!
//! It is one front end of a REPL conversation (`crate::lisp::repl::drive`); it knows nothing of
//! what the forms do.

use std::path::PathBuf;

use tokio::sync::{mpsc, oneshot};

use crate::front::lines::{self, Read};
use crate::lisp::repl::{Interrupt, ReadRequest, Said, drive, forms_complete, prompt};
use crate::lisp::{Lisp, LispError};

/// The greeting of the interactive REPL.
pub fn banner() -> String {
    format!(
        "oml {} (Fennel on Lua 5.4). (doc name) documents anything, (apropos \"text\") searches,\n\
         ,help lists REPL commands. Ctrl-C interrupts a running form, Ctrl-D exits.",
        env!("CARGO_PKG_VERSION")
    )
}

/// The interactive terminal REPL: line editing, history, multi-line forms, Ctrl-C interrupts
/// the running form, Ctrl-D exits.
pub async fn interactive(
    lisp: &Lisp,
    history: Option<PathBuf>,
    history_size: usize,
) -> Result<(), LispError> {
    let (reads_tx, reads_rx) = mpsc::unbounded_channel::<ReadRequest>();
    let (out_tx, out_rx) = mpsc::unbounded_channel::<Said>();
    let interrupt = Interrupt::new();

    // Ctrl-C while a form runs (the terminal is not in raw mode then) interrupts it.
    let on_sigint = interrupt.clone();
    let sigint = tokio::spawn(async move {
        while tokio::signal::ctrl_c().await.is_ok() {
            on_sigint.interrupt();
        }
    });

    // rustyline blocks, so the editor lives on its own thread and answers read requests. They
    // reach it through a plain channel that closes when the conversation ends (`,exit`, Ctrl-D):
    // the REPL's own channel never closes by itself, for the same reason as the writer's.
    let (editor_tx, editor_rx) = std::sync::mpsc::channel::<ReadRequest>();
    let (finish_tx, finish_rx) = oneshot::channel::<()>();
    let writer = tokio::spawn(serve(out_rx, reads_rx, editor_tx, finish_rx));
    let editor_thread = std::thread::spawn(move || edit_lines(editor_rx, history, history_size));

    let result = drive(lisp, reads_tx, out_tx, interrupt).await;
    sigint.abort();
    let _ = finish_tx.send(());
    let _ = writer.await;
    let _ = tokio::task::spawn_blocking(move || editor_thread.join()).await;
    result
}

/// Write the conversation's output in order and pass read requests on to the editor's thread.
/// One task does both so that what a form printed is on the screen before the next prompt: a
/// read request is sent after the output before it, so the output still queued is written first.
/// It stops when told to, not when every sender is gone: Lisp closures that hold a sender live
/// until the garbage collector runs, so waiting for the channel to close would keep Ctrl-D from
/// exiting.
async fn serve(
    mut out_rx: mpsc::UnboundedReceiver<Said>,
    mut reads_rx: mpsc::UnboundedReceiver<ReadRequest>,
    editor: std::sync::mpsc::Sender<ReadRequest>,
    mut finish_rx: oneshot::Receiver<()>,
) {
    use std::io::Write as _;
    let write = |said: Said| {
        let text = said.text();
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    };
    loop {
        tokio::select! {
            biased;
            text = out_rx.recv() => match text {
                Some(text) => write(text),
                None => break,
            },
            req = reads_rx.recv() => {
                let Some(req) = req else { break };
                while let Ok(text) = out_rx.try_recv() {
                    write(text);
                }
                if editor.send(req).is_err() {
                    break;
                }
            }
            _ = &mut finish_rx => {
                while let Ok(text) = out_rx.try_recv() {
                    write(text);
                }
                break;
            }
        }
    }
}

/// The line editor's thread: answer each read request with a line (history kept), `None` at
/// Ctrl-D; Ctrl-C at the prompt drops what was typed and asks again.
fn edit_lines(
    requests: std::sync::mpsc::Receiver<ReadRequest>,
    history: Option<PathBuf>,
    history_size: usize,
) {
    let Some(mut editor) = lines::editor(Some(Complete), history_size, history.as_deref()) else {
        return;
    };
    while let Ok(req) = requests.recv() {
        let answer = loop {
            match lines::read(&mut editor, prompt(req.continuation)) {
                Read::Line(line) => break Some(format!("{line}\n")),
                Read::Interrupted => continue,
                Read::Eof => break None,
            }
        };
        let done = answer.is_none();
        let _ = req.reply.send(answer);
        if done {
            break;
        }
    }
    if let Some(h) = &history {
        lines::save_history(&mut editor, h);
    }
}

/// The rustyline helper: keeps reading lines until the forms are complete.
struct Complete;

impl rustyline::validate::Validator for Complete {
    fn validate(
        &self,
        ctx: &mut rustyline::validate::ValidationContext<'_>,
    ) -> rustyline::Result<rustyline::validate::ValidationResult> {
        Ok(if forms_complete(ctx.input()) {
            rustyline::validate::ValidationResult::Valid(None)
        } else {
            rustyline::validate::ValidationResult::Incomplete
        })
    }
}

impl rustyline::completion::Completer for Complete {
    type Candidate = String;
}
impl rustyline::hint::Hinter for Complete {
    type Hint = String;
}
impl rustyline::highlight::Highlighter for Complete {}
impl rustyline::Helper for Complete {}
