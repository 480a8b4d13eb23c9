//! The chat's Lisp: one Fennel REPL conversation (`crate::lisp::repl::drive_with`) that lives as
//! long as the chat, so that locals and functions defined by one form are there for the next,
//! and `,doc`, `,reload`, `,apropos` and the other REPL commands work as in `oml repl`. Its
//! coroutine is mapped to the chat's session, so `session.*` and `agent.*` act on it.
//!
//! The conversation runs on a blocking thread of its own (a form that never returns must not
//! hold a runtime worker); each [`Repl::eval`] hands it one input and collects what it writes
//! until it asks for the next. It knows nothing of the screen.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::mpsc;

use crate::lisp::Lisp;
use crate::lisp::repl::{Interrupt, ReadRequest, Said, drive_with};
use crate::session::Sessions;

/// The running conversation.
pub struct Repl {
    reads: mpsc::UnboundedReceiver<ReadRequest>,
    out: mpsc::UnboundedReceiver<Said>,
    pending: Option<ReadRequest>,
    interrupt: Interrupt,
    /// The conversation's coroutine (its pointer), to map it to another session.
    thread: Arc<AtomicUsize>,
    sessions: Arc<Sessions>,
}

impl Repl {
    /// Start the conversation, its coroutine mapped to session `session`.
    pub fn start(lisp: &Lisp, sessions: Arc<Sessions>, session: &str) -> Repl {
        let (reads_tx, reads) = mpsc::unbounded_channel();
        let (out_tx, out) = mpsc::unbounded_channel();
        let interrupt = Interrupt::new();
        let thread = Arc::new(AtomicUsize::new(0));
        let (lisp, key, s, id, flag) = (
            lisp.clone(),
            thread.clone(),
            sessions.clone(),
            session.to_owned(),
            interrupt.clone(),
        );
        let handle = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || {
            handle.block_on(async move {
                let setup = |t: &mlua::Thread| {
                    let k = t.to_pointer() as usize;
                    key.store(k, Ordering::SeqCst);
                    s.bind_thread(k, Some(id));
                };
                match drive_with(&lisp, reads_tx, out_tx, flag, setup).await {
                    // `close` ends it so: the chat is leaving.
                    Ok(()) | Err(crate::lisp::LispError::Interrupted) => {}
                    Err(e) => tracing::warn!("the chat's Lisp conversation ended: {e}"),
                }
            })
        });
        Repl {
            reads,
            out,
            pending: None,
            interrupt,
            thread,
            sessions,
        }
    }

    /// Map the conversation to session `id` from now on.
    pub fn rebind(&self, id: &str) {
        let key = self.thread.load(Ordering::SeqCst);
        if key != 0 {
            self.sessions.bind_thread(key, Some(id.to_owned()));
        }
    }

    /// Stops the running form (Ctrl-C).
    pub fn interrupt(&self) -> Interrupt {
        self.interrupt.clone()
    }

    /// Evaluate one complete input; `show` gets what the REPL says (values, `print` output,
    /// errors, interrupts, each as its own [`Said`]) as it comes. `false` when the conversation
    /// has ended.
    pub async fn eval(&mut self, text: &str, mut show: impl FnMut(&Said)) -> bool {
        let request = match self.pending.take() {
            Some(r) => r,
            None => match self.reads.recv().await {
                Some(r) => r,
                None => return false,
            },
        };
        let mut chunk = text.to_owned();
        chunk.push('\n');
        if request.reply.send(Some(chunk)).is_err() {
            return false;
        }
        loop {
            tokio::select! {
                biased;
                Some(text) = self.out.recv() => show(&text),
                next = self.reads.recv() => {
                    while let Ok(text) = self.out.try_recv() {
                        show(&text);
                    }
                    let alive = next.is_some();
                    self.pending = next;
                    return alive;
                }
            }
        }
    }

    /// End the conversation.
    pub fn close(mut self) {
        if let Some(r) = self.pending.take() {
            let _ = r.reply.send(None);
        }
        self.interrupt.close();
    }
}
