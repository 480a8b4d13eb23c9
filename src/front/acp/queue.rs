//! Prompts sent while a session's turn runs: queued in arrival order, or steered into the
//! running turn, one line of waiting prompts per session.
//!
//! A `session/prompt` enters its session's line as it is read, in line order ([`Queues::enter`]):
//! on a free session it holds it at once ([`Held`]); otherwise it waits ([`Ticket::wait`]) until
//! the prompt before it is done, and is answered with its own stop reason. A steered prompt
//! (`agent.prompt-while-busy` `:steer`, or `_meta.oml.steer`) instead posts its text to the
//! session's inbox, which the running turn takes before its next model call, and is answered
//! with that turn's answer when it ends; when the turn ends before taking it, the text is taken
//! back and the prompt runs as the next turn of its own, so nothing is lost. `session/cancel`
//! cancels the running turn and everything waiting behind it (each answered `cancelled`), as an
//! editor's stop button stops all: a queued prompt the user sees waiting should not start after
//! they pressed stop. At most [`MAX_WAITING_PROMPTS`] wait per session; one more is refused with
//! [`PROMPT_QUEUE_FULL`].
//!
//! A turn with no prompt of its own (over v2, one that a background task's result woke) takes the
//! same line ([`Queues::wake`]): it holds a free session only when nothing holds or waits for it
//! and something was posted, and a prompt sent meanwhile waits behind it. When a line empties with
//! something posted and not taken (a result that came while the turn ran, too late for its last
//! model call), the session's inbox is notified again, so that its waker looks once more.
//!
//! The hand-off from one prompt to the next happens under the line's lock, and so does a cancel,
//! so a cancel is never lost between two prompts: the next prompt's token is armed before the
//! lock is let go. It knows nothing of the prompt's content or how a turn runs.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::acp::StopReason;
use crate::acp::updates;
use crate::agent::Agent;
use crate::jsonrpc::RpcError;
use crate::session::PromptState;
use crate::session::inbox::PostId;

/// How many prompts may wait behind a session's running turn (queued and steered together).
pub const MAX_WAITING_PROMPTS: usize = 16;

/// The JSON-RPC error code of a prompt refused because [`MAX_WAITING_PROMPTS`] already wait.
pub const PROMPT_QUEUE_FULL: i32 = -32011;

/// What a waiting prompt is told.
#[derive(Debug)]
pub(super) enum Go {
    /// Its turn: the session is the prompt's now.
    Run,
    /// Cancelled while it waited.
    Cancelled,
    /// A steered prompt whose text the running turn took: that turn's answer.
    Answered(Result<Value, RpcError>),
}

/// One prompt waiting in line.
struct Waiter {
    /// The request's id as on the wire (what `$/cancel_request` names).
    key: String,
    go: oneshot::Sender<Go>,
}

/// A steered prompt attached to the running turn.
struct Steered {
    waiter: Waiter,
    post: PostId,
}

/// One session's line.
#[derive(Default)]
struct Line {
    /// A prompt holds the session (its turn runs, or is about to).
    held: bool,
    waiting: VecDeque<Waiter>,
    steered: Vec<Steered>,
}

impl Line {
    fn is_empty(&self) -> bool {
        !self.held && self.waiting.is_empty() && self.steered.is_empty()
    }
}

/// Every session's line, for one connection.
pub(super) struct Queues {
    agent: Agent,
    lines: Mutex<HashMap<String, Line>>,
}

/// A prompt's place in line, taken as it is read. Dropped before its wait is over (the prompt
/// refused, its task ended), it gives back the session if it had been handed it meanwhile.
pub(super) struct Ticket {
    /// `None`: the session is this prompt's already.
    rx: Option<oneshot::Receiver<Go>>,
    /// Not the session's (`done`) until told to run.
    held: Option<Held>,
}

/// The session held for one prompt; the next in line goes when it is finished (or dropped).
pub(super) struct Held {
    queues: Arc<Queues>,
    sid: String,
    done: bool,
}

impl Queues {
    pub(super) fn new(agent: Agent) -> Arc<Queues> {
        Arc::new(Queues {
            agent,
            lines: Mutex::new(HashMap::new()),
        })
    }

    /// Enter the prompt `key` of session `sid` in line, in the order prompts are read (no Lisp
    /// runs here: the reader calls it). A free session is held at once (its token armed). An
    /// error when [`MAX_WAITING_PROMPTS`] already wait.
    pub(super) fn enter(self: &Arc<Self>, sid: &str, key: String) -> Result<Ticket, RpcError> {
        let mut lines = self.lines.lock();
        let line = lines.entry(sid.to_owned()).or_default();
        let held = |done| Held {
            queues: self.clone(),
            sid: sid.to_owned(),
            done,
        };
        if !line.held && line.waiting.is_empty() {
            line.held = true;
            self.agent.arm(sid);
            return Ok(Ticket {
                rx: None,
                held: Some(held(false)),
            });
        }
        let waiting = line.waiting.len() + line.steered.len();
        if waiting >= MAX_WAITING_PROMPTS {
            return Err(queue_full(sid, waiting));
        }
        let (go, rx) = oneshot::channel();
        line.waiting.push_back(Waiter { key, go });
        Ok(Ticket {
            rx: Some(rx),
            held: Some(held(true)),
        })
    }

    /// Hold session `sid` for a turn woken by what was posted to it: only when no prompt holds
    /// the session or waits for it and its inbox is not empty (its token armed, as a prompt's).
    /// `None` otherwise: the prompt that holds it takes what was posted, or the line notifies
    /// the inbox again when it empties (see [`Queues::release`]).
    pub(super) fn wake(self: &Arc<Self>, sid: &str) -> Option<Held> {
        let mut lines = self.lines.lock();
        let line = lines.entry(sid.to_owned()).or_default();
        let posted = self
            .agent
            .sessions()
            .with(sid, |s| {
                !s.inbox.is_empty() && s.prompt != PromptState::Running
            })
            .unwrap_or(false);
        if line.held || !line.waiting.is_empty() || !posted {
            if line.is_empty() {
                lines.remove(sid);
            }
            return None;
        }
        line.held = true;
        self.agent.arm(sid);
        Some(Held {
            queues: self.clone(),
            sid: sid.to_owned(),
            done: false,
        })
    }

    /// Steer the waiting prompt `key` of session `sid` into the running turn: `message` (an
    /// OpenAI user message) is posted to the session's inbox and the prompt, out of the line,
    /// waits for the turn's answer. `false` (nothing done) when the prompt no longer waits.
    pub(super) fn steer(&self, sid: &str, key: &str, message: Value) -> bool {
        let mut lines = self.lines.lock();
        let Some(line) = lines.get_mut(sid) else {
            return false;
        };
        let Some(at) = line.waiting.iter().position(|w| w.key == key) else {
            return false;
        };
        let Some(post) = self.agent.sessions().post(sid, message) else {
            return false;
        };
        if let Some(waiter) = line.waiting.remove(at) {
            line.steered.push(Steered { waiter, post });
        }
        true
    }

    /// Cancel session `sid`'s running prompt and every prompt waiting behind it (each told
    /// [`Go::Cancelled`]; a steered prompt whose text the turn has taken gets the turn's answer,
    /// `cancelled`).
    pub(super) fn cancel(&self, sid: &str) {
        let mut lines = self.lines.lock();
        self.agent.cancel(sid);
        let Some(line) = lines.get_mut(sid) else {
            return;
        };
        for waiter in line.waiting.drain(..) {
            let _ = waiter.go.send(Go::Cancelled);
        }
        let sessions = self.agent.sessions();
        let (untaken, taken): (Vec<_>, Vec<_>) = std::mem::take(&mut line.steered)
            .into_iter()
            .partition(|s| sessions.unpost(sid, s.post).is_some());
        for s in untaken {
            let _ = s.waiter.go.send(Go::Cancelled);
        }
        line.steered = taken;
        if line.is_empty() {
            lines.remove(sid);
        }
    }

    /// Cancel every session's prompts (shutdown).
    pub(super) fn cancel_all(&self) {
        let sids: Vec<String> = self.lines.lock().keys().cloned().collect();
        for sid in sids {
            self.cancel(&sid);
        }
    }

    /// `$/cancel_request` for the prompt `key` of session `sid`: a waiting one leaves the line
    /// (answered `cancelled`); otherwise the running prompt is cancelled, as before.
    pub(super) fn cancel_request(&self, sid: &str, key: &str) {
        let mut lines = self.lines.lock();
        if let Some(line) = lines.get_mut(sid) {
            if let Some(at) = line.waiting.iter().position(|w| w.key == key) {
                if let Some(w) = line.waiting.remove(at) {
                    let _ = w.go.send(Go::Cancelled);
                }
                return;
            }
            let sessions = self.agent.sessions();
            if let Some(at) = line.steered.iter().position(|s| s.waiter.key == key)
                && sessions.unpost(sid, line.steered[at].post).is_some()
            {
                let s = line.steered.remove(at);
                let _ = s.waiter.go.send(Go::Cancelled);
                return;
            }
        }
        self.agent.cancel(sid);
    }

    /// The prompt holding `sid` is done, with `answer` (`None` when it ended without one):
    /// steered prompts whose text its turn took get its answer, the others go to the front of
    /// the line, and the next in line gets the session (its token armed now).
    fn release(&self, sid: &str, answer: Option<&Result<Value, RpcError>>) {
        let mut lines = self.lines.lock();
        let Some(line) = lines.get_mut(sid) else {
            return;
        };
        let sessions = self.agent.sessions();
        for s in std::mem::take(&mut line.steered).into_iter().rev() {
            if sessions.unpost(sid, s.post).is_some() {
                line.waiting.push_front(s.waiter);
            } else {
                let answer = match answer {
                    Some(Ok(turn)) => Ok(steered_answer(
                        crate::acp::answers::stop_reason(turn).unwrap_or(StopReason::EndTurn),
                    )),
                    Some(Err(e)) => Err(e.clone()),
                    None => Ok(steered_answer(StopReason::Cancelled)),
                };
                let _ = s.waiter.go.send(Go::Answered(answer));
            }
        }
        line.held = false;
        // A prompt refused before its turn began leaves its token armed: not the next one's.
        sessions.with(sid, crate::session::Session::disarm);
        while let Some(next) = line.waiting.pop_front() {
            self.agent.arm(sid);
            if next.go.send(Go::Run).is_ok() {
                line.held = true;
                break;
            }
        }
        if !line.held {
            sessions.with(sid, crate::session::Session::disarm);
            // Posted after the turn's last model call: the session's waker looks again.
            let untaken = sessions.with(sid, |s| (!s.inbox.is_empty()).then(|| s.inbox.notify()));
            if let Some(notify) = untaken.flatten() {
                notify.notify_one();
            }
        }
        if line.is_empty() {
            lines.remove(sid);
        }
    }
}

/// The answer of a steered prompt: `stop`, the stop reason of the turn it joined, marked
/// `_meta.oml.steered`, with no usage (the turn's is counted in that turn's answer).
fn steered_answer(stop: StopReason) -> Value {
    updates::prompt_answer(&stop, &updates::usage(0, 0), &json!({"steered": true}))
}

fn queue_full(sid: &str, waiting: usize) -> RpcError {
    let message = format!(
        "{waiting} prompts already wait in session {sid} (at most {MAX_WAITING_PROMPTS}); \
         send this one when the running turn has ended"
    );
    RpcError::new(PROMPT_QUEUE_FULL, message.clone()).with_data(json!({
        "sessionId": sid, "waiting": waiting, "limit": MAX_WAITING_PROMPTS,
        "details": message, "category": "busy",
    }))
}

impl Ticket {
    /// Whether the prompt waits behind another (or for a steered prompt's turn).
    pub(super) fn waits(&self) -> bool {
        self.rx.is_some()
    }

    /// Wait for this prompt's turn: the held session, or what it was told instead (cancelled
    /// while waiting, or a steered prompt's answer).
    pub(super) async fn wait(mut self) -> Result<Held, Go> {
        let go = match self.rx.as_mut() {
            Some(rx) => rx.await,
            None => Ok(Go::Run),
        };
        self.rx = None;
        match (go, self.held.take()) {
            (Ok(Go::Run), Some(mut held)) => {
                held.done = false;
                Ok(held)
            }
            (Ok(Go::Run) | Err(_), _) => Err(Go::Cancelled),
            (Ok(other), _) => Err(other),
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        // No hand-off can come once the receiver is closed; one that came before is taken
        // here, and the session it gave goes to the next in line as `held` drops.
        if let Some(mut rx) = self.rx.take() {
            rx.close();
            if let (Ok(Go::Run), Some(held)) = (rx.try_recv(), self.held.as_mut()) {
                held.done = false;
            }
        }
    }
}

impl Held {
    /// The prompt is done with `answer`; the next in line goes.
    pub(super) fn finish(mut self, answer: &Result<Value, RpcError>) {
        self.done = true;
        self.queues.release(&self.sid, Some(answer));
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if !self.done {
            self.queues.release(&self.sid, None);
        }
    }
}
