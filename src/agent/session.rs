//! Sessions: the state one conversation owns (working directory, transcript, the current
//! prompt's cancel token, the frontend's event sink, per-session data), kept in a registry.
//!
//! The idea: Lisp never holds a session object. A prompt, command or tool runs in a coroutine
//! that the registry maps to its session id, so `session.current` and every `session.*`
//! primitive find "their" session implicitly; elsewhere (the REPL, a timer) Lisp passes the id
//! explicitly or binds one with `session.with`; a form from the live REPL that does neither gets
//! the session whose prompt is running, when exactly one is. There is no "most recent session"
//! global.
//!
//! This module knows nothing of ACP, the CLI or how events are rendered: it forwards
//! [`AgentEvent`]s to whatever sink the frontend gave when it created the session.
//!
//! Compare with pi: `AgentSession` (one object per conversation, events to subscribers).
//! Compare with oml.clj: `oml.session` (`*session*` dynamic var, the `sessions` atom).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Map, Value};

use super::AgentEvent;
use crate::cancel::CancelToken;

/// Where a session's loop events go: the frontend (print mode, ACP) reads the other end.
pub type EventSink = tokio::sync::mpsc::UnboundedSender<AgentEvent>;

/// One conversation.
pub struct Session {
    pub id: String,
    /// The directory relative paths and `bash` resolve against.
    pub cwd: PathBuf,
    /// The OpenAI messages so far, without the system message (rebuilt for every request).
    pub transcript: Vec<Value>,
    /// The token of the prompt that is running (or ran last); replaced by each new prompt.
    pub cancel: CancelToken,
    sink: Option<EventSink>,
    /// Per-session values Lisp reads and writes with `session.get` and `session.put!` (the model
    /// override, the permission mode and memory, usage totals).
    pub data: Map<String, Value>,
    /// Whether a prompt is running in this session now.
    pub prompting: bool,
}

/// The registry of sessions and of the coroutines running on their behalf.
#[derive(Default)]
pub struct Sessions {
    sessions: Mutex<HashMap<String, Session>>,
    /// Coroutine (Lua thread pointer) → session id.
    threads: Mutex<HashMap<usize, String>>,
    next: AtomicU64,
}

impl Sessions {
    /// Create a session in `cwd` whose events go to `sink`; returns its id.
    pub fn create(&self, cwd: PathBuf, sink: Option<EventSink>) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let id = format!("sess_{}_{n}", std::process::id());
        let session = Session {
            id: id.clone(),
            cwd,
            transcript: Vec::new(),
            cancel: CancelToken::new(),
            sink,
            data: Map::new(),
            prompting: false,
        };
        lock(&self.sessions).insert(id.clone(), session);
        id
    }

    /// Forget a session; its sink is dropped, which ends the frontend's event stream.
    pub fn remove(&self, id: &str) -> bool {
        lock(&self.sessions).remove(id).is_some()
    }

    /// The ids of every session, sorted.
    pub fn ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = lock(&self.sessions).keys().cloned().collect();
        ids.sort();
        ids
    }

    /// Run `f` on the session `id`, or return `None` when there is no such session.
    pub fn with<R>(&self, id: &str, f: impl FnOnce(&mut Session) -> R) -> Option<R> {
        lock(&self.sessions).get_mut(id).map(f)
    }

    /// Send `event` to the session's frontend; nothing happens without a sink or a session.
    pub fn emit(&self, id: &str, event: AgentEvent) {
        let sink = self.with(id, |s| s.sink.clone()).flatten();
        if let Some(sink) = sink {
            let _ = sink.send(event);
        }
    }

    /// The session the coroutine `thread` runs for. A coroutine mapped to none (a form from the
    /// live REPL) gets the session whose prompt is running, when exactly one is.
    pub fn of_thread(&self, thread: usize) -> Option<String> {
        if let Some(id) = lock(&self.threads).get(&thread).cloned() {
            return Some(id);
        }
        self.only_running()
    }

    /// The one session whose prompt is running, if exactly one is.
    pub fn only_running(&self) -> Option<String> {
        let sessions = lock(&self.sessions);
        let mut running = sessions.values().filter(|s| s.prompting);
        match (running.next(), running.next()) {
            (Some(s), None) => Some(s.id.clone()),
            _ => None,
        }
    }

    /// Map the coroutine `thread` to the session `id` (or unmap it); returns the previous id.
    pub fn bind_thread(&self, thread: usize, id: Option<String>) -> Option<String> {
        let mut threads = lock(&self.threads);
        match id {
            Some(id) => threads.insert(thread, id),
            None => threads.remove(&thread),
        }
    }
}

/// A poisoned lock only means another task panicked mid-update; the data is still usable.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
