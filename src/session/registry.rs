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
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use serde_json::{Map, Value};

use super::AgentEvent;
use super::entry::Entry;
use super::inbox::{Inbox, PostId};
use super::redact::Redactions;
use super::store::{Flushed, Loaded, SessionLog, Store};
use crate::cancel::CancelToken;

/// Where a session's loop events go: the frontend (print mode, ACP) reads the other end.
pub type EventSink = tokio::sync::mpsc::UnboundedSender<AgentEvent>;

/// One conversation.
pub struct Session {
    pub id: String,
    /// The directory relative paths and `bash` resolve against.
    pub cwd: PathBuf,
    /// The OpenAI messages so far, without the system message (rebuilt for every request).
    /// Shared, so a copy of the list (for Lisp) copies no message: one can hold a whole file.
    pub transcript: Vec<Arc<Value>>,
    /// The token of the prompt that is running (or ran last); replaced by each new prompt.
    pub cancel: CancelToken,
    sink: Option<EventSink>,
    /// Per-session values Lisp reads and writes with `session.get` and `session.put!` (the model
    /// override, the permission mode and memory, usage totals).
    pub data: Map<String, Value>,
    /// Whether a prompt is running or about to (one prompt per session at a time).
    pub prompt: PromptState,
    /// The writer of the session's file, when sessions are persisted.
    pub log: Option<SessionLog>,
    /// The id of the tool call between its `ToolStart` and `ToolEnd` events, which the output
    /// of a running tool is reported under.
    pub running_tool: Option<String>,
    /// Messages posted for the loop's next model call (see [`super::inbox`]).
    pub inbox: Inbox,
}

/// Where a session is with its one prompt.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PromptState {
    /// No prompt is running or accepted.
    #[default]
    Idle,
    /// A prompt has been accepted (read off the wire, in order) but has not started: `cancel` is
    /// already its fresh token, so a cancel sent in between is not lost (see
    /// [`crate::agent::Agent::arm`]).
    Armed,
    /// A prompt is running; a second one is refused until it ends.
    Running,
}

impl Session {
    /// A prompt has been accepted: give it a fresh cancel token now, unless one is already armed
    /// or running.
    pub fn arm(&mut self) {
        if self.prompt == PromptState::Idle {
            self.cancel = CancelToken::new();
            self.prompt = PromptState::Armed;
        }
    }

    /// Start a prompt: `false` (and nothing changes) while one runs. An armed prompt keeps the
    /// token it was given; otherwise the prompt gets a fresh one.
    pub fn begin_prompt(&mut self) -> bool {
        match self.prompt {
            PromptState::Running => return false,
            PromptState::Armed => {}
            PromptState::Idle => self.cancel = CancelToken::new(),
        }
        self.prompt = PromptState::Running;
        true
    }

    /// An armed prompt will not run after all (refused, or cancelled while it waited): the
    /// session is idle again, and its token is not the next prompt's.
    pub fn disarm(&mut self) {
        if self.prompt == PromptState::Armed {
            self.prompt = PromptState::Idle;
        }
    }

    /// The running prompt has ended.
    pub fn end_prompt(&mut self) {
        self.prompt = PromptState::Idle;
    }

    /// Record `entry` in the session's file (nothing happens without one), with the secrets of
    /// `redactions` replaced by their names.
    pub fn record(&self, entry: &Entry, redactions: &Redactions) {
        if let Some(log) = &self.log {
            log.append_redacted(entry, redactions);
        }
    }
}

/// Called with the id of each session the registry forgets (closed, deleted, replaced, or its
/// front end done with it), after it is gone.
pub type RemoveHook = Box<dyn Fn(&str) + Send + Sync>;

/// The registry of sessions and of the coroutines running on their behalf.
#[derive(Default)]
pub struct Sessions {
    /// Told of every session removed (see [`Sessions::on_remove`]).
    remove_hooks: Mutex<Vec<RemoveHook>>,
    sessions: Mutex<HashMap<String, Session>>,
    /// Coroutine (Lua thread pointer) → session id.
    threads: Mutex<HashMap<usize, String>>,
    next: AtomicU64,
    /// Where sessions are persisted; `None` keeps them in memory only.
    store: Mutex<Option<Store>>,
}

impl Sessions {
    /// Create a session in `cwd` whose events go to `sink`; returns its id.
    ///
    /// With a store, the session's file is created too (a failure is logged, and the session
    /// lives in memory only).
    pub fn create(&self, cwd: PathBuf, sink: Option<EventSink>) -> String {
        let (id, log) = self.new_log(&cwd);
        let log = match log {
            Ok(log) => log,
            Err(e) => {
                tracing::warn!("cannot persist session {id}: {e}");
                None
            }
        };
        self.insert_new(id, cwd, sink, log)
    }

    /// [`Sessions::create`], but a session that should be stored and cannot be is an error
    /// (nothing is created): what front ends use, so that the user is told.
    pub fn try_create(&self, cwd: PathBuf, sink: Option<EventSink>) -> std::io::Result<String> {
        let (id, log) = self.new_log(&cwd);
        let log = log.map_err(|e| {
            let dir = self
                .store()
                .map(|s| s.dir().display().to_string())
                .unwrap_or_default();
            std::io::Error::new(e.kind(), format!("cannot store the session in {dir}: {e}"))
        })?;
        Ok(self.insert_new(id, cwd, sink, log))
    }

    /// A fresh id, and its file when sessions are stored.
    fn new_log(&self, cwd: &std::path::Path) -> (String, std::io::Result<Option<SessionLog>>) {
        let store = self.store();
        let id = match &store {
            Some(_) => super::store::new_id(),
            None => {
                let n = self.next.fetch_add(1, Ordering::Relaxed) + 1;
                format!("sess_{}_{n}", std::process::id())
            }
        };
        let log = store.map(|store| store.create(&id, cwd)).transpose();
        (id, log)
    }

    fn insert_new(
        &self,
        id: String,
        cwd: PathBuf,
        sink: Option<EventSink>,
        log: Option<SessionLog>,
    ) -> String {
        let session = Session {
            id: id.clone(),
            cwd,
            transcript: Vec::new(),
            cancel: CancelToken::new(),
            sink,
            data: Map::new(),
            prompt: PromptState::Idle,
            log,
            running_tool: None,
            inbox: Inbox::default(),
        };
        lock(&self.sessions).insert(id.clone(), session);
        id
    }

    /// Persist sessions created from now on in `store` (`None`: keep them in memory only).
    pub fn set_store(&self, store: Option<Store>) {
        *lock(&self.store) = store;
    }

    /// The store sessions are persisted in, if any.
    pub fn store(&self) -> Option<Store> {
        lock(&self.store).clone()
    }

    /// Bring the stored session `id` back: its transcript and values rebuilt from its file, new
    /// entries appended to it, events to `sink`. Returns what was read (for a replay).
    pub fn load(&self, id: &str, sink: Option<EventSink>) -> std::io::Result<Loaded> {
        let store = self
            .store()
            .ok_or_else(|| std::io::Error::other("sessions are not persisted"))?;
        let loaded = store.load(id)?;
        let log = store.open(id)?;
        let cwd = loaded.cwd().unwrap_or_else(|| PathBuf::from("/"));
        let session = Session {
            id: id.to_owned(),
            cwd,
            transcript: loaded.transcript().into_iter().map(Arc::new).collect(),
            cancel: CancelToken::new(),
            sink,
            data: loaded.data(),
            prompt: PromptState::Idle,
            log: Some(log),
            running_tool: None,
            inbox: Inbox::default(),
        };
        lock(&self.sessions).insert(id.to_owned(), session);
        Ok(loaded)
    }

    /// Wait until everything session `id` recorded is written and fsynced, or kept in memory
    /// because the disk refused it (the answer says what).
    pub async fn flush(&self, id: &str) -> Flushed {
        let log = self.with(id, |s| s.log.clone()).flatten();
        match log {
            Some(log) => log.flush().await,
            None => Flushed::default(),
        }
    }

    /// Forget a session; its sink is dropped, which ends the frontend's event stream. The
    /// [`Sessions::on_remove`] hooks are then called with its id.
    pub fn remove(&self, id: &str) -> bool {
        let removed = lock(&self.sessions).remove(id).is_some();
        if removed {
            for hook in lock(&self.remove_hooks).iter() {
                hook(id);
            }
        }
        removed
    }

    /// Call `hook` with the id of every session removed from now on (what the session owned
    /// outside this registry, such as delegated agents, is ended there).
    pub fn on_remove(&self, hook: RemoveHook) {
        lock(&self.remove_hooks).push(hook);
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
        let sink = self
            .with(id, |s| {
                match &event {
                    AgentEvent::ToolStart { id, .. } => s.running_tool = Some(id.clone()),
                    AgentEvent::ToolEnd { .. } => s.running_tool = None,
                    _ => {}
                }
                s.sink.clone()
            })
            .flatten();
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

    /// Where session `id` is with its prompt, or `None` when there is no such session.
    pub fn prompt_state(&self, id: &str) -> Option<PromptState> {
        self.with(id, |s| s.prompt)
    }

    /// The one session whose prompt is running, if exactly one is.
    pub fn only_running(&self) -> Option<String> {
        let sessions = lock(&self.sessions);
        let mut running = sessions
            .values()
            .filter(|s| s.prompt == PromptState::Running);
        match (running.next(), running.next()) {
            (Some(s), None) => Some(s.id.clone()),
            _ => None,
        }
    }

    /// Post `message` (an OpenAI message) to session `id`'s inbox: it joins the transcript
    /// before the loop's next model call (`agent.take-posted!`), and the session's
    /// [`Sessions::posted_notify`] is notified. `None` when there is no such session.
    pub fn post(&self, id: &str, message: Value) -> Option<PostId> {
        self.with(id, |s| s.inbox.post(message))
    }

    /// Every message posted to session `id` since the last take, oldest first, removed (empty
    /// when there is none, or no such session).
    pub fn take_posted(&self, id: &str) -> Vec<Value> {
        self.with(id, |s| s.inbox.take()).unwrap_or_default()
    }

    /// Take the message `post` back from session `id`'s inbox while it still waits; `None` once
    /// the loop has taken it.
    pub fn unpost(&self, id: &str, post: PostId) -> Option<Value> {
        self.with(id, |s| s.inbox.unpost(post)).flatten()
    }

    /// What a front end waits on to learn that something was posted to session `id` (notified
    /// once per post; a post while nobody waits leaves a permit). A session whose prompt is
    /// [`PromptState::Idle`] takes nothing by itself: the front end that wants posted messages to
    /// wake it starts a turn when this fires. `None` when there is no such session.
    pub fn posted_notify(&self, id: &str) -> Option<Arc<tokio::sync::Notify>> {
        self.with(id, |s| s.inbox.notify())
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
fn lock<T>(m: &Mutex<T>) -> parking_lot::MutexGuard<'_, T> {
    m.lock()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_prompt_at_a_time_and_an_armed_token_is_kept() {
        let sessions = Sessions::default();
        let id = sessions.create(PathBuf::from("/"), None);
        let state = || sessions.prompt_state(&id);
        assert_eq!(state(), Some(PromptState::Idle));
        sessions.with(&id, Session::arm);
        assert_eq!(state(), Some(PromptState::Armed));
        // A cancel between the arm and the start reaches the prompt.
        let armed = sessions.with(&id, |s| s.cancel.clone()).expect("a session");
        armed.cancel();
        sessions.with(&id, Session::arm);
        assert_eq!(sessions.with(&id, Session::begin_prompt), Some(true));
        assert_eq!(state(), Some(PromptState::Running));
        assert_eq!(sessions.only_running(), Some(id.clone()));
        let running = sessions.with(&id, |s| s.cancel.is_cancelled());
        assert_eq!(running, Some(true), "the armed token is the prompt's");
        // While it runs, arming does nothing and a second prompt is refused.
        sessions.with(&id, Session::arm);
        assert_eq!(sessions.with(&id, Session::begin_prompt), Some(false));
        sessions.with(&id, Session::end_prompt);
        assert_eq!(state(), Some(PromptState::Idle));
        assert_eq!(sessions.only_running(), None);
        // Unarmed, a prompt gets a fresh token.
        assert_eq!(sessions.with(&id, Session::begin_prompt), Some(true));
        let fresh = sessions.with(&id, |s| s.cancel.is_cancelled());
        assert_eq!(fresh, Some(false));
    }
}
