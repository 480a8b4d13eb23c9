//! What the reader, the writer and the handles of one connection share: the table of pending
//! requests, the ids given up on, and why the reader or the writer stopped.
//!
//! It does no I/O; it routes a response to its waiter and fails waiters when a side stops.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};
use serde_json::Value;
use tokio::sync::oneshot;

use super::connection::{AnswerHook, RequestError, SendError};
use super::error::RpcError;
use super::limits::ABANDONED_IDS_KEPT;
use super::message::{RequestId, Response};

/// What the reader, the writer and the handles share.
pub(super) struct Shared {
    pub(super) peer: String,
    pub(super) state: Mutex<State>,
}

#[derive(Default)]
pub(super) struct State {
    pub(super) pending: HashMap<u64, Pending>,
    /// Ids of requests given up on, oldest first, at most [`ABANDONED_IDS_KEPT`].
    pub(super) abandoned: VecDeque<u64>,
    /// Set once no answer can come any more; new requests then fail at once.
    pub(super) gone: Option<Gone>,
    /// Set once the writer has stopped, with why.
    pub(super) writer_stopped: Option<WriterStop>,
    /// The error codes of id-less answers already logged.
    pub(super) refused_codes: std::collections::HashSet<i32>,
}

pub(super) struct Pending {
    pub(super) method: String,
    pub(super) answer: oneshot::Sender<Answer>,
    /// Called as the answer is routed, before the waiter is woken.
    pub(super) on_answer: Option<AnswerHook>,
}

pub(super) enum Answer {
    Result(Value),
    Error(RpcError),
    Gone(Gone),
}

/// Why answers stopped coming.
#[derive(Clone, Debug)]
pub(super) enum Gone {
    Eof,
    Io(String),
}

impl Gone {
    pub(super) fn request_error(&self, peer: &str, method: &str) -> RequestError {
        match self {
            Self::Eof => RequestError::Closed {
                peer: peer.to_owned(),
                method: method.to_owned(),
            },
            Self::Io(reason) => RequestError::Io {
                method: method.to_owned(),
                reason: reason.clone(),
            },
        }
    }
}

#[derive(Clone, Debug)]
pub(super) enum WriterStop {
    ClosedHere,
    Failed(String),
}

impl Shared {
    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        // The lock is never held across a panic point that could leave the state half-changed.
        self.state.lock()
    }

    pub(super) fn register(
        self: &Arc<Self>,
        number: u64,
        method: &str,
        answer: oneshot::Sender<Answer>,
        on_answer: Option<AnswerHook>,
    ) -> Result<PendingGuard, Gone> {
        let mut state = self.state();
        if let Some(gone) = &state.gone {
            return Err(gone.clone());
        }
        let pending = Pending {
            method: method.to_owned(),
            answer,
            on_answer,
        };
        state.pending.insert(number, pending);
        Ok(PendingGuard {
            shared: Arc::clone(self),
            number,
            armed: true,
        })
    }

    /// Hands a response to the request waiting for it, or logs why nobody is.
    pub(super) fn route(&self, response: Response) {
        let Some(id) = response.id else {
            // An answer without an id is the peer refusing a notification of ours (Toad answers
            // `$/cancel_request` with -32601 and `session_info_update` with -32602): expected,
            // and stderr stays quiet; each error code is logged once, at debug.
            if let Err(error) = response.outcome {
                let first = self.state().refused_codes.insert(error.code);
                if first {
                    tracing::debug!(%error, "{} refused one of our notifications", self.peer);
                }
            }
            return;
        };
        let number = match &id {
            RequestId::Number(n) => n.as_u64(),
            RequestId::Exact(_) | RequestId::String(_) => None,
        };
        let mut state = self.state();
        let pending = number.and_then(|n| state.pending.remove(&n));
        let abandoned = number.is_some_and(|n| state.abandoned.contains(&n));
        drop(state);
        match pending {
            Some(mut pending) => {
                if let Some(hook) = pending.on_answer.take() {
                    hook();
                }
                let answer = match response.outcome {
                    Ok(value) => Answer::Result(value),
                    Err(error) => Answer::Error(error),
                };
                // The requester may have just gone away; then nobody wants the answer.
                let _ = pending.answer.send(answer);
            }
            None if abandoned => {
                tracing::debug!(%id, "late answer to a request given up on; dropped");
            }
            None => {
                tracing::warn!(%id, "{} answered an id no request is waiting for; dropped", self.peer);
            }
        }
    }

    /// The reader has stopped: fail every pending request and any later one.
    pub(super) fn reader_stopped(&self, gone: Gone) {
        let mut state = self.state();
        state.gone.get_or_insert(gone.clone());
        let pending: Vec<Pending> = state.pending.drain().map(|(_, p)| p).collect();
        drop(state);
        for p in pending {
            tracing::debug!(method = %p.method, "failing a pending request: {gone:?}");
            let _ = p.answer.send(Answer::Gone(gone.clone()));
        }
    }

    /// The writer has stopped: remember why, and fail the requests it could not write.
    pub(super) fn writer_stopped(&self, stop: WriterStop, unwritten: &[u64]) {
        let reason = match &stop {
            WriterStop::ClosedHere => "this side closed the connection".to_owned(),
            WriterStop::Failed(reason) => reason.clone(),
        };
        let mut state = self.state();
        state.writer_stopped.get_or_insert(stop);
        let failed: Vec<Pending> = unwritten
            .iter()
            .filter_map(|n| state.pending.remove(n))
            .collect();
        drop(state);
        for p in failed {
            let _ = p.answer.send(Answer::Gone(Gone::Io(reason.clone())));
        }
    }

    pub(super) fn send_error(&self) -> SendError {
        let reason = match &self.state().writer_stopped {
            Some(WriterStop::ClosedHere) => "this side closed the connection".to_owned(),
            Some(WriterStop::Failed(reason)) => reason.clone(),
            None => "the writer has stopped".to_owned(),
        };
        SendError::Closed {
            peer: self.peer.clone(),
            reason,
        }
    }

    pub(super) fn closed_here(&self) -> bool {
        matches!(self.state().writer_stopped, Some(WriterStop::ClosedHere))
    }
}

/// Removes a request from the pending table when its caller stops waiting for any reason other
/// than getting the answer (timeout, cancel, or the future being dropped).
pub(super) struct PendingGuard {
    shared: Arc<Shared>,
    number: u64,
    armed: bool,
}

impl PendingGuard {
    pub(super) fn answered(&mut self) {
        self.armed = false;
    }
}

impl Drop for PendingGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut state = self.shared.state();
        if state.pending.remove(&self.number).is_some() {
            if state.abandoned.len() >= ABANDONED_IDS_KEPT {
                state.abandoned.pop_front();
            }
            state.abandoned.push_back(self.number);
        }
    }
}
