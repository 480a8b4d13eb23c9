//! The agent: the model loop as named Lisp steps, the tools the model calls, the slash commands,
//! and the sessions they run in.
//!
//! The idea: the loop itself is Fennel (`agent.fnl`, compiled to bytecode at build time), written
//! as named steps in the `agent` table — `agent.prompt` → `agent.parse-prompt` →
//! `agent.run-command` or `agent.run` → `agent.build-request` → `agent.call-model` →
//! `agent.run-tool-call` → `agent.execute-tool` → `agent.tool-result-message` →
//! `agent.stop-reason` — each called by name at call time, so a redefinition or an advice from an
//! init file, `/eval` or the live REPL changes the next call. Rust provides the primitives those
//! steps stand on (`crate::session`: the registry; `crate::bind`: `session.*` and the tool implementations) and
//! the entry point [`Agent::prompt`], which runs `agent.prompt` in a coroutine mapped to its
//! session.
//!
//! The agent reports progress only as [`AgentEvent`]s sent to the session's sink; it knows
//! nothing of ACP, the CLI or print mode.
//!
//! Compare with pi: `packages/agent/src/agent-loop.ts` (one loop function with hooks).
//! Compare with oml.clj: `src/oml/agent.clj` (the same steps as vars).

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

use crate::cancel::CancelToken;
use crate::lisp::{Lisp, LispError, from_lua};
use crate::session::store::{Flushed, Unsaved};

mod delegate;
mod subagent;
pub use crate::session::{AgentEvent, EventSink, PromptState, Session, Sessions};

/// One entry of [`AGENT_FILES`] for `src/agent/NAME.fnl`, whose bytecode build.rs writes as
/// `prelude_agent_NAME.luac` (or the name given).
macro_rules! agent_file {
    ($name:literal) => {
        agent_file!($name, concat!("prelude_agent_", $name))
    };
    ($name:literal, $luac:expr) => {
        (
            concat!("src/agent/", $name, ".fnl"),
            include_bytes!(concat!(env!("OUT_DIR"), "/", $luac, ".luac")),
            include_str!(concat!($name, ".fnl")),
        )
    };
}

/// The agent's Fennel files in load order: (file, bytecode compiled by build.rs, source for
/// `source` and `describe`).
const AGENT_FILES: &[(&str, &[u8], &str)] = &[
    agent_file!("agent", "prelude_agent"),
    agent_file!("discovery"),
    agent_file!("tools"),
    agent_file!("permission"),
    agent_file!("setup_rules"),
    agent_file!("plan"),
    agent_file!("ask"),
    agent_file!("delegate"),
    agent_file!("task"),
    agent_file!("images"),
    agent_file!("usage"),
    agent_file!("protocol"),
    agent_file!("commands"),
    agent_file!("rewind"),
    agent_file!("skills"),
    agent_file!("agents"),
    agent_file!("compact"),
    agent_file!("worktrees"),
    agent_file!("inbox"),
    agent_file!("hooks"),
    agent_file!("hook_steps"),
    agent_file!("setup"),
];

/// Errors at the agent's boundary.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("no session {0}")]
    NoSession(String),
    #[error("a prompt is already running in session {0}")]
    Busy(String),
    #[error("agent.prompt is not a function")]
    NoPromptFunction,
    #[error("agent.resume is not a function")]
    NoResumeFunction,
    #[error(transparent)]
    Lisp(#[from] LispError),
}

/// How a prompt ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PromptOutcome {
    /// `end-turn`, `max-turns`, `max-tokens`, `cancelled`, or whatever a user loop returns.
    pub stop_reason: String,
    /// The slash command that handled the prompt, if one did.
    pub command: Option<String>,
    /// What of the session the disk refused, kept in memory (see [`crate::session::writer`]);
    /// the user has been told with a notice.
    pub unsaved: Option<Unsaved>,
}

/// The agent installed in a Lisp host: a cheap, cloneable handle.
#[derive(Clone)]
pub struct Agent {
    lisp: Lisp,
    sessions: Arc<Sessions>,
}

impl Agent {
    /// Install the `session.*` primitives (`crate::bind::session`), the tool implementations and
    /// their settings (`crate::bind::tools`), and load the loop, tools and commands (`agent.fnl`). Call it before the
    /// init files load, so that they can redefine and advise everything.
    pub fn install(lisp: &Lisp) -> Result<Agent, LispError> {
        let sessions = Arc::new(Sessions::default());
        lisp.lua().set_app_data(sessions.clone());
        // The `session.*` primitives; the tools' host functions and the `tools.*` settings.
        crate::bind::session::install(lisp, sessions.clone())?;
        crate::bind::tools::install(lisp)?;
        crate::bind::project::install(lisp)?;
        crate::bind::hooks::install(lisp)?;
        subagent::install(lisp)?;
        // `llm.chat` (installed by `lisp::bind::llm`) cancels with the prompt's session.
        let s = sessions.clone();
        crate::bind::llm::set_cancel_lookup(
            lisp,
            Arc::new(move |lua: &mlua::Lua| {
                let thread = lua.current_thread().to_pointer() as usize;
                let id = s.of_thread(thread)?;
                s.with(&id, |session| session.cancel.clone())
            }),
        );
        for (file, bytecode, source) in AGENT_FILES {
            lisp.lua()
                .load(*bytecode)
                .set_name(format!("@{file}"))
                .set_mode(mlua::chunk::ChunkMode::Binary)
                .exec()?;
            lisp.register_source(file, source);
        }
        // MCP servers' tools join `agent.tools`; `mcp.fnl` needs the agent's tables.
        crate::bind::mcp::install(lisp)?;
        delegate::close_with_sessions(lisp, &sessions);
        Ok(Agent {
            lisp: lisp.clone(),
            sessions,
        })
    }

    /// The agent installed in `lisp`, if [`Agent::install`] ran.
    pub fn of(lisp: &Lisp) -> Option<Agent> {
        let sessions = lisp.lua().app_data_ref::<Arc<Sessions>>()?.clone();
        Some(Agent {
            lisp: lisp.clone(),
            sessions,
        })
    }

    /// The Lisp host this agent runs in.
    pub fn lisp(&self) -> &Lisp {
        &self.lisp
    }

    /// The session registry.
    pub fn sessions(&self) -> &Arc<Sessions> {
        &self.sessions
    }

    /// Start a session in `cwd` whose events go to `sink`; an error when it should be stored
    /// and cannot be (the front end tells the user rather than lose the conversation).
    pub fn try_new_session(
        &self,
        cwd: PathBuf,
        sink: Option<EventSink>,
    ) -> std::io::Result<String> {
        self.sessions.try_create(cwd, sink)
    }

    /// Start a session in `cwd` whose events go to `sink`, in memory only when it cannot be
    /// stored (logged).
    pub fn new_session(&self, cwd: PathBuf, sink: Option<EventSink>) -> String {
        self.sessions.create(cwd, sink)
    }

    /// Cancel the running prompt of session `id` (its model stream, tools and loop), cleanly:
    /// the prompt still returns, with stop reason `cancelled`.
    pub fn cancel(&self, id: &str) {
        self.sessions.with(id, |s| s.cancel.cancel());
    }

    /// Give session `id` the cancel token of the prompt that has just been accepted and will
    /// start soon, so that a [`Agent::cancel`] between now and its start stops it instead of
    /// being overwritten. Call it in the order the frontend receives messages. Does nothing while
    /// a prompt runs or another is already armed.
    pub fn arm(&self, id: &str) {
        self.sessions.with(id, Session::arm);
    }

    /// Claim session `id` for one prompt ([`PromptState::Running`] until the returned turn is
    /// dropped), keeping the token [`Agent::arm`] gave it. [`AgentError::Busy`] while another
    /// prompt runs.
    pub fn begin(&self, id: &str) -> Result<Turn, AgentError> {
        match self.sessions.with(id, Session::begin_prompt) {
            None => Err(AgentError::NoSession(id.to_owned())),
            Some(false) => Err(AgentError::Busy(id.to_owned())),
            Some(true) => Ok(Turn {
                sessions: self.sessions.clone(),
                id: id.to_owned(),
            }),
        }
    }

    /// Run one prompt through `agent.prompt` (looked up now), in a coroutine mapped to session
    /// `id`: [`Agent::begin`], then [`Agent::run`].
    pub async fn prompt(
        &self,
        id: &str,
        text: &str,
        interrupt: &CancelToken,
    ) -> Result<PromptOutcome, AgentError> {
        let turn = self.begin(id)?;
        self.run(&turn, text, interrupt).await
    }

    /// Run the prompt of `turn` through `agent.prompt` (looked up now), in a coroutine mapped to
    /// its session. `interrupt` is the hard stop: it aborts the Lisp code itself, where
    /// [`Agent::cancel`] lets the loop finish the turn properly.
    pub async fn run(
        &self,
        turn: &Turn,
        text: &str,
        interrupt: &CancelToken,
    ) -> Result<PromptOutcome, AgentError> {
        self.run_with_parts(turn, text, &[], interrupt).await
    }

    /// [`Agent::run`] with `parts`, OpenAI content parts (`image_url` with a data URL) that go
    /// into the user message beside the text, passed to `agent.prompt` as its second argument
    /// (nothing when there are none).
    pub async fn run_with_parts(
        &self,
        turn: &Turn,
        text: &str,
        parts: &[Value],
        interrupt: &CancelToken,
    ) -> Result<PromptOutcome, AgentError> {
        let f = self
            .lisp
            .function("agent.prompt")?
            .ok_or(AgentError::NoPromptFunction)?;
        let parts = match parts {
            [] => mlua::Value::Nil,
            parts => crate::lisp::to_lua(self.lisp.lua(), &Value::Array(parts.to_vec()))
                .map_err(LispError::from)?,
        };
        self.run_turn(turn, f, (text, parts), interrupt).await
    }

    /// Run a turn of `turn`'s session that starts with no prompt of its own, through
    /// `agent.resume` (looked up now): what was posted to the session (a background task's
    /// result) is what the model answers. Print mode calls it when background tasks end.
    pub async fn resume(
        &self,
        turn: &Turn,
        interrupt: &CancelToken,
    ) -> Result<PromptOutcome, AgentError> {
        let f = self
            .lisp
            .function("agent.resume")?
            .ok_or(AgentError::NoResumeFunction)?;
        self.run_turn(turn, f, (), interrupt).await
    }

    /// Run `f` with `args` as the turn of `turn`, in a coroutine mapped to its session; record
    /// a failure, settle and flush what it stored, and read its `{stop-reason command}`.
    async fn run_turn(
        &self,
        turn: &Turn,
        f: mlua::Function,
        args: impl mlua::IntoLuaMulti,
        interrupt: &CancelToken,
    ) -> Result<PromptOutcome, AgentError> {
        let id = turn.id.as_str();
        let mut key = 0usize;
        let result: Result<mlua::Value, LispError> = self
            .lisp
            .run_with(f, args, interrupt, |thread| {
                key = thread.to_pointer() as usize;
                self.sessions.bind_thread(key, Some(id.to_owned()));
            })
            .await;
        self.sessions.bind_thread(key, None);
        if let Err(e) = &result {
            self.record_failure(id, e, interrupt);
        }
        self.record_cancel(id, &result, interrupt);
        // The end of a turn: everything it recorded is on disk before the frontend answers,
        // or the user is told what is not (the checkpoints of its last command included).
        crate::bind::session::settle_checkpoints(id).await;
        let flushed = self.sessions.flush(id).await;
        if let Some(text) = storage_notice(&flushed) {
            self.sessions.emit(id, AgentEvent::Notice { text });
        }
        let value = from_lua(self.lisp.lua(), result?).map_err(LispError::from)?;
        let stop_reason = match value.get("stop-reason") {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => crate::acp::StopReason::EndTurn.loop_name(),
        };
        let command = value
            .get("command")
            .and_then(Value::as_str)
            .map(str::to_owned);
        Ok(PromptOutcome {
            stop_reason,
            command,
            unsaved: flushed.unsaved,
        })
    }
}

impl Agent {
    /// Keep the error that ended a prompt in the session's file, as a `failure` entry
    /// ([`FAILURE_KIND`], `{message}`): a replay shows it as the turn's answer, as the front
    /// end showed it live. A cancelled or interrupted prompt, or an exit, failed nothing.
    fn record_failure(&self, id: &str, e: &LispError, interrupt: &CancelToken) {
        let stopped = matches!(
            e,
            LispError::Interrupted | LispError::Exit(_) | LispError::Cancelled { .. }
        );
        if stopped || self.was_cancelled(id, interrupt) {
            return;
        }
        self.record(
            id,
            FAILURE_KIND,
            serde_json::json!({ "message": e.to_string() }),
        );
    }

    /// Keep in the session's file that a prompt's turn ended cancelled (a [`CANCEL_KIND`]
    /// entry), which nothing else there says: the trajectory export shows it.
    fn record_cancel(
        &self,
        id: &str,
        result: &Result<mlua::Value, LispError>,
        interrupt: &CancelToken,
    ) {
        let cancelled = match result {
            Ok(mlua::Value::Table(t)) => {
                t.get::<Option<String>>("stop-reason")
                    .ok()
                    .flatten()
                    .as_deref()
                    == Some("cancelled")
            }
            Ok(_) => false,
            Err(LispError::Cancelled { .. } | LispError::Interrupted) => true,
            Err(LispError::Exit(_)) => false,
            Err(_) => self.was_cancelled(id, interrupt),
        };
        if cancelled {
            self.record(id, CANCEL_KIND, serde_json::json!({}));
        }
    }

    /// Whether the prompt of session `id` was cancelled or interrupted.
    fn was_cancelled(&self, id: &str, interrupt: &CancelToken) -> bool {
        interrupt.is_cancelled()
            || self.sessions.with(id, |s| s.cancel.is_cancelled()) == Some(true)
    }

    /// Record a custom entry `kind` with `data` in session `id` through `session.record!`
    /// (looked up now, so secrets are taken out as from any entry).
    fn record(&self, id: &str, kind: &str, data: Value) {
        let recorded = self.lisp.function("session.record!").and_then(|f| {
            let Some(f) = f else { return Ok(()) };
            let data = crate::lisp::to_lua(self.lisp.lua(), &data)?;
            f.call::<()>((kind, data, id)).map_err(LispError::from)
        });
        if let Err(e) = recorded {
            tracing::warn!("cannot record {kind} in session {id}: {e}");
        }
    }
}

pub use crate::session::entry::{CANCEL_KIND, FAILURE_KIND};

/// What the user is told at the end of a turn about the session's file: that some of it is
/// only in memory, or that what was is on disk again.
fn storage_notice(flushed: &Flushed) -> Option<String> {
    match &flushed.unsaved {
        Some(u) => Some(format!(
            "This session could not be saved: {}. {} entries ({} KB) are kept in memory and \
             written when the disk takes them again; they are lost if oml ends first.",
            u.error,
            u.entries,
            u.bytes.div_ceil(1024)
        )),
        None if flushed.recovered > 0 => Some(format!(
            "The session is saved again ({} entries kept in memory are written).",
            flushed.recovered
        )),
        None => None,
    }
}

/// A session claimed for one prompt by [`Agent::begin`]; dropping it ends the prompt.
pub struct Turn {
    sessions: Arc<Sessions>,
    id: String,
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.sessions.with(&self.id, Session::end_prompt);
    }
}
