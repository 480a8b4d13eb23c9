//! The synchronous router: called by the JSON-RPC reader for every incoming request,
//! notification and bad line, in line order, before the next line is read (so before any later
//! response wakes its waiter).
//!
//! - `session/update` is appended to its session's current turn (with a per-session sequence
//!   number) and wakes the turn's consumer; for a session whose turn has been answered it becomes
//!   a late update of that turn; for a session id not (yet) registered, typically because the
//!   `session/new` or `session/load` answer is still on its way, it is held and attached when the
//!   session is registered. Nothing is dropped and nothing sleeps.
//! - Requests from the agent run as tasks (`served`): permission, elicitation, `fs/*` and
//!   `terminal/*` go to their handlers; anything else is answered `-32601` and the connection
//!   stays up.
//! - Too many consecutive bad lines make the connection fail with a protocol error.
//!
//! The rule, by line order and never by timing: an update belongs to a turn when its line comes
//! before the line of the turn's `session/prompt` answer (the answer's hook closes the turn as
//! the reader reads that line), and is late when it comes after. The line that makes
//! [`MAX_CONSECUTIVE_MALFORMED`] bad lines in a row stops the reader there: every update before
//! it is delivered, nothing after it is read (no update, no answer), and a turn not answered by
//! then fails with the protocol error. So one byte stream always gives one outcome.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};

use parking_lot::{Mutex, MutexGuard};
use serde_json::Value;
use tokio::sync::{Notify, mpsc};

use super::{
    Category, ClientError, MAX_CONSECUTIVE_MALFORMED, PermissionDecision, PermissionHandler, Stop,
    Update,
};
use crate::acp::{OptionKind, PermissionOption, PermissionOutcome};
use crate::cancel::CancelToken;
use crate::jsonrpc::{Connection, Flow, Incoming, MalformedKind};

mod served;

/// An update that arrived outside a running turn: a late update of a finished turn, or one for
/// a session with no turn yet.
#[derive(Clone, Debug)]
pub struct OutOfTurn {
    pub session_id: String,
    pub update: Update,
}

pub(super) struct Router {
    state: Mutex<RouterState>,
    out_of_turn: mpsc::UnboundedSender<OutOfTurn>,
    /// Fires when the connection is unusable (too many bad lines); every request awaits it.
    pub(super) fatal: CancelToken,
    fatal_error: Mutex<Option<ClientError>>,
    pub(super) rpc: OnceLock<Connection>,
    permission: Option<PermissionHandler>,
    /// Answers `elicitation/create`; without one it is not offered.
    elicitation: Option<crate::acp_client::ElicitationHandler>,
    /// Serve `fs/*` and `terminal/*`; without one they are not offered.
    fs: Option<crate::acp_client::FsHandler>,
    terminal: Option<crate::acp_client::FsHandler>,
    /// The agent's requests being answered, by id as on the wire: what its `$/cancel_request`
    /// can name.
    asked: Mutex<HashMap<String, CancelToken>>,
}

#[derive(Default)]
struct RouterState {
    sessions: HashMap<String, SessionState>,
    /// Updates for session ids not registered yet, in arrival order.
    held: HashMap<String, Vec<serde_json::Value>>,
}

/// Who answers the agent's requests.
pub(super) struct Handlers {
    pub permission: Option<PermissionHandler>,
    pub elicitation: Option<crate::acp_client::ElicitationHandler>,
    pub fs: Option<crate::acp_client::FsHandler>,
    pub terminal: Option<crate::acp_client::FsHandler>,
}

#[derive(Default)]
struct SessionState {
    /// The session's folders (`cwd`, then additional directories), for `fs/*`.
    roots: Vec<std::path::PathBuf>,
    next_seq: u64,
    turns: u64,
    /// The running turn, or the last one (finished).
    turn: Option<Arc<TurnShared>>,
}

/// One prompt turn, shared by the router (producer) and the prompt's consumer.
pub(super) struct TurnShared {
    pub(super) number: u64,
    pub(super) session_id: String,
    buf: Mutex<TurnBuf>,
    notify: Notify,
    /// Fired by `cancel`: pending permission requests of this turn answer `cancelled`.
    pub(super) cancel: CancelToken,
    /// Set once `session/cancel` has been sent for this turn.
    pub(super) cancel_sent: AtomicBool,
}

#[derive(Default)]
struct TurnBuf {
    updates: VecDeque<Update>,
    result: Option<Result<Stop, ClientError>>,
    /// A line too long to read came while the turn ran: its output is incomplete, and the turn
    /// ends with this error whatever stop reason the agent gives.
    lost: Option<ClientError>,
    /// The turn's answer has been read (or the turn ended without one): later updates are late.
    answered: bool,
    finished: bool,
}

/// What a turn's consumer gets next.
pub enum TurnEvent {
    /// Every update that has arrived since the last call, in order.
    Updates(Vec<Update>),
    /// The turn is over; every update that preceded the answer has been handed out.
    Done(Result<Stop, ClientError>),
}

impl TurnShared {
    pub(super) fn set_result(&self, result: Result<Stop, ClientError>) {
        let mut buf = self.lock();
        buf.result = Some(result);
        buf.answered = true;
        drop(buf);
        self.notify.notify_one();
    }

    /// The reader has just read the line of this turn's answer: updates after it are late.
    pub(super) fn answer_read(&self) {
        self.lock().answered = true;
    }

    fn lock(&self) -> MutexGuard<'_, TurnBuf> {
        self.buf.lock()
    }

    /// The next batch of updates, or the result once they are all out. One consumer.
    pub(super) async fn next(&self) -> TurnEvent {
        loop {
            {
                let mut buf = self.lock();
                if !buf.updates.is_empty() {
                    return TurnEvent::Updates(buf.updates.drain(..).collect());
                }
                if let Some(result) = buf.result.take() {
                    buf.finished = true;
                    return TurnEvent::Done(match (result, buf.lost.take()) {
                        (Ok(_), Some(lost)) => Err(lost),
                        (result, _) => result,
                    });
                }
                if buf.finished {
                    return TurnEvent::Done(Err(ClientError::new(
                        Category::Connection,
                        "the turn is already over",
                    )));
                }
            }
            // A notify between the check and here leaves a permit, so no wake-up is lost.
            self.notify.notified().await;
        }
    }

    /// Ends the turn without a consumer (its prompt was dropped): later updates are late.
    /// The updates that have arrived and not been handed out, without waiting.
    pub(super) fn arrived(&self) -> Vec<Update> {
        self.lock().updates.drain(..).collect()
    }

    pub(super) fn finish(&self) {
        self.lock().finished = true;
    }

    pub(super) fn is_finished(&self) -> bool {
        self.lock().finished
    }
}

impl Router {
    pub(super) fn new(handlers: Handlers) -> (Arc<Router>, mpsc::UnboundedReceiver<OutOfTurn>) {
        let Handlers {
            permission,
            elicitation,
            fs,
            terminal,
        } = handlers;
        let (tx, rx) = mpsc::unbounded_channel();
        let router = Router {
            state: Mutex::new(RouterState::default()),
            out_of_turn: tx,
            fatal: CancelToken::new(),
            fatal_error: Mutex::new(None),
            rpc: OnceLock::new(),
            permission,
            elicitation,
            fs,
            terminal,
            asked: Mutex::new(HashMap::new()),
        };
        (Arc::new(router), rx)
    }

    fn state(&self) -> MutexGuard<'_, RouterState> {
        self.state.lock()
    }

    pub(super) fn fatal_error(&self) -> Option<ClientError> {
        self.fatal_error.lock().clone()
    }

    /// The handler given to the JSON-RPC reader; it stops the reader at the line that makes the
    /// connection unusable.
    pub(super) fn handle(self: &Arc<Self>, incoming: Incoming) -> Flow {
        match incoming {
            Incoming::Notification(n) if n.method == "session/update" => {
                self.route_update(n.params.unwrap_or(Value::Null));
            }
            Incoming::Notification(n) if n.method == crate::jsonrpc::CANCEL_REQUEST => {
                // The agent no longer needs an answer: its handler stops, and the request is
                // answered -32800.
                let id = crate::acp::params::CancelRequestParams::parse(n.params)
                    .ok()
                    .map(|p| p.request_id.to_string());
                if let Some(token) = id.and_then(|id| self.asked.lock().get(&id).cloned()) {
                    token.cancel();
                }
            }
            Incoming::Notification(n) => {
                tracing::debug!(method = %n.method, "ignored a notification from the agent");
            }
            Incoming::Request(request) => {
                // Registered in line order, so that a `$/cancel_request` read next finds it.
                let abandoned = CancelToken::new();
                self.asked
                    .lock()
                    .insert(request.id.to_string(), abandoned.clone());
                let router = Arc::clone(self);
                tokio::spawn(async move { router.answer(request, abandoned).await });
            }
            Incoming::Malformed {
                consecutive,
                malformed,
            } => {
                // The reader has logged the line; the count matters here, and a line too long
                // to read, which may have been any turn's update.
                if let MalformedKind::TooLong { .. } = malformed.kind {
                    self.lost_line(&malformed.detail);
                }
                if consecutive >= MAX_CONSECUTIVE_MALFORMED {
                    let message = format!(
                        "the agent wrote {consecutive} unusable lines in a row on stdout; giving up"
                    );
                    let mut fatal = self.fatal_error.lock();
                    if fatal.is_none() {
                        *fatal = Some(ClientError::new(Category::Protocol, message.clone()));
                        drop(fatal);
                        self.fatal.cancel();
                    }
                    return Flow::Stop(message);
                }
            }
        }
        Flow::Continue
    }

    /// A line too long to read came: it cannot be told which session it was for, so every
    /// running turn ends with an error saying so, instead of a stop reason over output that is
    /// silently incomplete.
    fn lost_line(&self, detail: &str) {
        let error = ClientError::new(
            Category::Protocol,
            format!(
                "the agent sent a message too long to read ({detail}); it was dropped, so this \
                 turn's output is incomplete"
            ),
        );
        let state = self.state();
        for turn in state.sessions.values().filter_map(|s| s.turn.as_ref()) {
            let mut buf = turn.lock();
            if !buf.answered && !buf.finished && buf.lost.is_none() {
                buf.lost = Some(error.clone());
            }
        }
    }

    fn route_update(&self, params: Value) {
        let Value::Object(mut params) = params else {
            tracing::warn!("session/update without an object for params; skipped");
            return;
        };
        let Some(Value::String(session_id)) = params.remove("sessionId") else {
            tracing::warn!("session/update without a sessionId; skipped");
            return;
        };
        let update = params.remove("update").unwrap_or(Value::Null);
        let mut state = self.state();
        let Some(session) = state.sessions.get_mut(&session_id) else {
            tracing::debug!(session = %session_id, "update for a session not registered yet; held");
            state.held.entry(session_id).or_default().push(update);
            return;
        };
        let seq = session.next_seq;
        session.next_seq += 1;
        let mut update = Update::new(seq, update, None);
        if let Some(turn) = &session.turn {
            update.turn = Some(turn.number);
            let mut buf = turn.lock();
            if !buf.finished && !buf.answered {
                buf.updates.push_back(update);
                drop(buf);
                turn.notify.notify_one();
                return;
            }
            update.late = true;
        }
        let _ = self.out_of_turn.send(OutOfTurn { session_id, update });
    }

    /// Registers a session and returns the updates held for it, numbered.
    pub(super) fn register(&self, session_id: &str) -> Vec<Update> {
        let mut state = self.state();
        let held = state.held.remove(session_id).unwrap_or_default();
        let session = state.sessions.entry(session_id.to_owned()).or_default();
        held.into_iter()
            .map(|value| {
                let seq = session.next_seq;
                session.next_seq += 1;
                Update::new(seq, value, None)
            })
            .collect()
    }

    /// Records the folders of session `session_id` (registering it if needed).
    pub(super) fn set_roots(&self, session_id: &str, roots: Vec<std::path::PathBuf>) {
        self.state()
            .sessions
            .entry(session_id.to_owned())
            .or_default()
            .roots = roots;
    }

    fn roots(&self, session_id: &str) -> Vec<std::path::PathBuf> {
        self.state()
            .sessions
            .get(session_id)
            .map(|s| s.roots.clone())
            .unwrap_or_default()
    }

    pub(super) fn forget(&self, session_id: &str) {
        self.state().sessions.remove(session_id);
    }

    /// Starts a turn on a session (registering it if needed).
    pub(super) fn start_turn(&self, session_id: &str) -> Result<Arc<TurnShared>, ClientError> {
        let mut state = self.state();
        let held = state.held.remove(session_id).unwrap_or_default();
        let session = state.sessions.entry(session_id.to_owned()).or_default();
        if let Some(turn) = &session.turn
            && !turn.is_finished()
        {
            return Err(ClientError::new(
                Category::Protocol,
                format!("session {session_id} already has a prompt running"),
            ));
        }
        session.turns += 1;
        let turn = Arc::new(TurnShared {
            number: session.turns,
            session_id: session_id.to_owned(),
            buf: Mutex::new(TurnBuf::default()),
            notify: Notify::new(),
            cancel: CancelToken::new(),
            cancel_sent: AtomicBool::new(false),
        });
        // Updates held for an unregistered id go to this turn, which is the first to hear of it.
        {
            let mut buf = turn.lock();
            for value in held {
                let seq = session.next_seq;
                session.next_seq += 1;
                buf.updates
                    .push_back(Update::new(seq, value, Some(turn.number)));
            }
        }
        session.turn = Some(Arc::clone(&turn));
        Ok(turn)
    }

    /// The session's running turn, if any.
    pub(super) fn running_turn(&self, session_id: &str) -> Option<Arc<TurnShared>> {
        let state = self.state();
        let turn = state.sessions.get(session_id)?.turn.as_ref()?;
        (!turn.is_finished()).then(|| Arc::clone(turn))
    }
}

/// The outcome for a decision: an option id as given (if the agent offered it), or the first
/// option of the wanted kind (`_once` preferred). A denial never falls back to another kind;
/// with no reject option at all the answer is `cancelled`.
pub fn choose(options: &[PermissionOption], decision: &PermissionDecision) -> PermissionOutcome {
    let by_kind = |kinds: &[OptionKind]| {
        kinds.iter().find_map(|kind| {
            options
                .iter()
                .find(|o| o.kind == *kind)
                .map(|o| o.option_id.clone())
        })
    };
    let reject = || by_kind(&[OptionKind::RejectOnce, OptionKind::RejectAlways]);
    let chosen = match decision {
        PermissionDecision::Cancel => None,
        PermissionDecision::Allow => by_kind(&[OptionKind::AllowOnce, OptionKind::AllowAlways]),
        PermissionDecision::Reject => reject(),
        PermissionDecision::Option(id) => {
            if options.iter().any(|o| o.option_id == *id) {
                Some(id.clone())
            } else {
                tracing::warn!(option = %id, "the permission handler chose an option the agent did not offer; rejecting");
                reject()
            }
        }
    };
    chosen.map_or(PermissionOutcome::Cancelled, PermissionOutcome::Selected)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn options(v: Value) -> Vec<PermissionOption> {
        serde_json::from_value(v).expect("options")
    }

    fn opts() -> Vec<PermissionOption> {
        options(json!([
            {"optionId": "always", "name": "Always", "kind": "allow_always"},
            {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
            {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
        ]))
    }

    #[test]
    fn decisions_pick_options_by_kind_never_by_position() {
        let pick = |d| choose(&opts(), &d).to_value()["outcome"]["optionId"].clone();
        assert_eq!(pick(PermissionDecision::Allow), "allow");
        assert_eq!(pick(PermissionDecision::Reject), "reject");
        assert_eq!(pick(PermissionDecision::Option("always".into())), "always");
        assert_eq!(pick(PermissionDecision::Option("bogus".into())), "reject");
        assert_eq!(
            choose(&opts(), &PermissionDecision::Cancel).to_value()["outcome"]["outcome"],
            "cancelled"
        );
    }

    #[test]
    fn a_denial_without_a_reject_option_is_cancelled_not_the_first_option() {
        let only_allow = options(json!([{"optionId": "a", "name": "A", "kind": "allow_once"}]));
        assert_eq!(
            choose(&only_allow, &PermissionDecision::Reject).to_value(),
            json!({"outcome": {"outcome": "cancelled"}})
        );
        let only_always = options(
            json!([{"optionId": "r", "name": "R", "kind": "reject_always"}, {"optionId": "a", "name": "A", "kind": "allow_once"}]),
        );
        assert_eq!(
            choose(&only_always, &PermissionDecision::Reject).to_value()["outcome"]["optionId"],
            "r"
        );
    }
}
