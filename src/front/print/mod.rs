//! Print mode (`oml -p PROMPT…`, `oml prompt PROMPT…`): one prompt in a session of the
//! current directory, its events rendered to stdout as they arrive (`render`: text; `json`: the
//! versioned JSON stream), and an exit status that says how the turn ended ([`exit`]).
//!
//! Ctrl-C cancels the turn cleanly (the stream stops, tools are killed, the partial text stays);
//! a second Ctrl-C stops the Lisp code outright. Notices (`[stopped: …]`, errors) go to stderr.
//! It never exits the process: it returns the status.
//!
//! Compare with pi: `pi -p` (print mode) and `--mode json`; with Claude Code: `claude -p` and
//! `--output-format stream-json`.
//! Compare with oml.clj: `oml.print-mode`.

mod json;
mod render;

pub use json::SCHEMA;
pub use render::first_line;

use std::io::IsTerminal as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use serde_json::json;
use tokio::sync::mpsc;

use crate::acp::StopReason;
use crate::agent::{Agent, AgentError, EventSink, PromptOutcome};
use crate::cancel::CancelToken;
use crate::front::signals::{self, Shutdown};
use crate::front::stdio::err;

/// Print mode's exit statuses, one per way a turn can end (docs/src/print-mode.md).
pub mod exit {
    /// The turn finished (the model answered, or a slash command ran).
    pub const OK: i32 = 0;
    /// Another error: a Lisp error, a session that cannot be loaded.
    pub const ERROR: i32 = 1;
    /// The command line was wrong (also given by clap and `cli`).
    pub const USAGE: i32 = 2;
    /// The model call failed (no model configured, HTTP error, broken stream, ...).
    pub const MODEL: i32 = 3;
    /// The turn stopped at `agent.max-turns` (`--max-turns`).
    pub const MAX_TURNS: i32 = 4;
    /// The model stopped at its output limit.
    pub const MAX_TOKENS: i32 = 5;
    /// The turn finished but the session could not be saved (a full disk, an I/O error); what
    /// was not written is lost when oml ends.
    pub const UNSAVED: i32 = 6;
    /// Interrupted with Ctrl-C (128 + SIGINT).
    pub const INTERRUPTED: i32 = 130;
}

/// Exit status of a prompt interrupted with Ctrl-C (128 + SIGINT).
pub const INTERRUPTED: i32 = exit::INTERRUPTED;

/// How many characters of a tool result's first line are shown; longer lines get `...`.
pub const TOOL_LINE_MAX_CHARS: usize = 120;

/// How long the output must be idle before the spinner shows.
const SPINNER_DELAY: Duration = Duration::from_millis(250);

/// What `oml -p` was asked to do.
#[derive(Clone, Debug, Default)]
pub struct PrintOptions {
    pub text: String,
    /// One JSON event per line instead of text.
    pub json: bool,
    /// The permission mode; `None` means the setting `agent.print-mode-permission`.
    pub mode: Option<String>,
    /// The model of this prompt's session (`--model`); `None` keeps `agent.current-model`.
    pub model: Option<String>,
    /// Show the model's reasoning too.
    pub show_thinking: bool,
    /// Which session the prompt runs in.
    pub session: SessionChoice,
}

/// Which session `oml -p` runs in.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum SessionChoice {
    /// A new one, stored when the agent has a store.
    #[default]
    New,
    /// The latest stored session of the current directory (`--continue`), else a new one.
    Continue,
    /// The stored session with this id (`--session ID`).
    Id(String),
    /// A new one that is not stored (`--no-session`).
    None,
}

/// Run one prompt and render it; returns the exit status.
pub async fn run(agent: &Agent, options: PrintOptions) -> i32 {
    let started = std::time::Instant::now();
    // From here on SIGTERM and SIGHUP end the run as Ctrl-C does, MCP servers included.
    let shutdown = Shutdown::listen();
    let (tx, rx) = mpsc::unbounded_channel();
    let id = match open_session(agent, &options, tx) {
        Ok(id) => id,
        Err(message) => return no_session(options.json, &message, started),
    };
    let cwd = agent
        .sessions()
        .with(&id, |s| s.cwd.clone())
        .unwrap_or_default();
    crate::bind::mcp::start_session(agent.lisp(), &id, &cwd, Vec::new()).await;
    if options.json {
        json_init(agent, &id).await;
    }
    let spinner = !options.json && std::io::stderr().is_terminal();
    let renderer = tokio::spawn(render::render(
        rx,
        options.json,
        options.show_thinking,
        spinner,
    ));

    let interrupt = CancelToken::new();
    let interrupted = Arc::new(AtomicI32::new(0));
    // A signal that comes before the prompt has begun must still cancel it.
    agent.arm(&id);
    let signals = tokio::spawn(watch_signals(
        agent.clone(),
        id.clone(),
        interrupt.clone(),
        interrupted.clone(),
        shutdown,
    ));
    let mut result = agent.prompt(&id, &options.text, &interrupt).await;
    // Background tasks the turn started: wait for them, and run the turn their results wake;
    // at most MAX_WOKEN_TURNS, so that a model starting a task in each cannot run on forever.
    let mut woken_turns = 0;
    while result.is_ok() && !interrupt.is_cancelled() && woken(agent, &id, &interrupt).await {
        if woken_turns == MAX_WOKEN_TURNS {
            err!(
                "oml: stopped after {MAX_WOKEN_TURNS} turns woken by background tasks; what the last ones posted was not answered"
            );
            break;
        }
        woken_turns += 1;
        result = match agent.begin(&id) {
            Ok(turn) => agent.resume(&turn, &interrupt).await,
            Err(e) => Err(e),
        };
    }
    signals.abort();
    let (usage, model_error) = close(agent, &id).await;
    let text = renderer.await.unwrap_or_default();
    let ended = Ended {
        id: &id,
        text: &text,
        usage: usage.as_ref(),
        model_error,
        interrupted: Some(interrupted.load(Ordering::SeqCst)).filter(|&signal| signal != 0),
        duration_ms: started.elapsed().as_millis(),
    };
    report(result, &options, &ended)
}

/// End session `id`: what it used and whether a model call failed, read before its SessionEnd
/// hooks run and it is removed. The hooks run here, not in the task the registry starts on
/// removal, which oml's exit would cut short; a failure is theirs to report. Dropping the
/// session drops its sink, which ends the renderer once it has shown everything.
async fn close(agent: &Agent, id: &str) -> (Option<serde_json::Value>, bool) {
    let used = agent
        .sessions()
        .with(id, |s| {
            (
                s.data.get("usage").cloned(),
                s.data.contains_key(MODEL_ERROR_KEY),
            )
        })
        .unwrap_or_default();
    let _ = agent
        .lisp()
        .call_json("agent.session-end-hooks", &[json!(id)], &CancelToken::new())
        .await;
    agent.sessions().remove(id);
    used
}

/// Turns that background tasks' results may wake after the prompt's own, at most: each may
/// start new background tasks, and `oml -p` must end.
pub const MAX_WOKEN_TURNS: usize = 8;

/// Whether session `id` has something for a turn to answer once its background tasks have
/// ended (`agent.await-background` waits for them): what they posted and no turn took yet.
async fn woken(agent: &Agent, id: &str, interrupt: &CancelToken) -> bool {
    let waited = agent
        .lisp()
        .call_json("agent.await-background", &[json!(id)], interrupt)
        .await;
    waited.is_ok()
        && agent
            .sessions()
            .with(id, |s| !s.inbox.is_empty())
            .unwrap_or(false)
}

/// The session could not be opened: say why, and with `json` keep the stream's shape (an
/// error, then the result, even with no turn). Returns the exit status.
fn no_session(json: bool, message: &str, started: std::time::Instant) -> i32 {
    err!("error: {message}");
    if json {
        json::error("session", message);
        json::result(&json::Summary {
            session: "",
            stop_reason: "error",
            command: None,
            text: "",
            usage: None,
            duration_ms: started.elapsed().as_millis(),
            status: exit::ERROR,
            unsaved: None,
        });
    }
    exit::ERROR
}

/// The JSON stream's `init` line for session `id`: its model and permission mode as
/// `agent.current-model` and `agent.current-permission-mode` give them.
async fn json_init(agent: &Agent, id: &str) {
    let cwd = agent
        .sessions()
        .with(id, |s| s.cwd.display().to_string())
        .unwrap_or_default();
    let ask = |name: &'static str| async move {
        let value = agent
            .lisp()
            .call_json(name, &[json!(id)], &CancelToken::new())
            .await;
        value.ok().and_then(|v| v.as_str().map(str::to_owned))
    };
    let model = ask("agent.current-model").await;
    let mode = ask("agent.current-permission-mode").await;
    json::init(id, &cwd, model.as_deref(), mode.as_deref().unwrap_or(""));
}

/// The session value `llm.chat` sets (to the error's kind) when a model call fails.
const MODEL_ERROR_KEY: &str = "last-model-error";

/// What the end of a run reports besides the outcome.
struct Ended<'a> {
    id: &'a str,
    text: &'a str,
    usage: Option<&'a serde_json::Value>,
    model_error: bool,
    /// The signal that interrupted the run, if one did.
    interrupted: Option<i32>,
    duration_ms: u128,
}

impl Ended<'_> {
    /// The exit status of a run a signal interrupted: 128 + the signal (130 for Ctrl-C).
    fn interrupted_status(&self) -> i32 {
        self.interrupted
            .map_or(exit::INTERRUPTED, signals::status_for)
    }
}

/// The session the prompt runs in (new, continued, or named), with print mode's permission
/// mode; an error is reported here and its status returned.
fn open_session(agent: &Agent, options: &PrintOptions, tx: EventSink) -> Result<String, String> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| "/".into());
    let store = agent.sessions().store();
    let existing = match (&options.session, &store) {
        (SessionChoice::Continue, Some(store)) => {
            store.list(Some(&cwd)).first().map(|s| s.id.clone())
        }
        (SessionChoice::Id(id), Some(store)) => {
            if !store.exists(id) {
                return Err(format!("no stored session {id}"));
            }
            Some(id.clone())
        }
        (SessionChoice::Id(id), None) => {
            return Err(format!("no stored session {id} (sessions are not stored)"));
        }
        _ => None,
    };
    let id = match existing {
        Some(id) => match agent.sessions().load(&id, Some(tx)) {
            Ok(_) => {
                // Relative paths resolve where oml runs now.
                agent.sessions().with(&id, |s| s.cwd = cwd.clone());
                id
            }
            Err(e) => return Err(format!("cannot load session {id}: {e}")),
        },
        None => agent
            .try_new_session(cwd, Some(tx))
            .map_err(|e| e.to_string())?,
    };
    let mode = options.mode.clone().unwrap_or_else(|| {
        agent
            .lisp()
            .setting::<String>("agent.print-mode-permission")
            .unwrap_or_else(|_| "yolo".to_owned())
    });
    agent.sessions().with(&id, |s| {
        // A failure of an earlier prompt of this session is not this one's.
        s.data.remove(MODEL_ERROR_KEY);
        s.data.insert("permission-mode".into(), json!(mode));
        if let Some(model) = &options.model {
            s.data.insert("model".into(), json!(model));
        }
    });
    Ok(id)
}

/// The first Ctrl-C, SIGTERM or SIGHUP cancels the turn (it ends properly, partial answer kept)
/// and stops the MCP servers, and the run then shuts down as it always does; a second signal
/// interrupts the Lisp code itself. `interrupted` gets the first signal's number.
async fn watch_signals(
    agent: Agent,
    id: String,
    interrupt: CancelToken,
    interrupted: Arc<AtomicI32>,
    mut shutdown: Shutdown,
) {
    let first = next_signal(&mut shutdown).await;
    interrupted.store(first, Ordering::SeqCst);
    agent.cancel(&id);
    // The run ends after this turn: its MCP servers stop now, which also ends a turn that
    // waits for one still starting.
    let stopping = crate::bind::mcp::stop_all(agent.lisp());
    tokio::select! {
        () = stopping => {}
        _ = next_signal(&mut shutdown) => {
            interrupt.cancel();
            return;
        }
    }
    next_signal(&mut shutdown).await;
    interrupt.cancel();
}

/// The next Ctrl-C, SIGTERM or SIGHUP: its number; a closed stdout counts as SIGPIPE.
async fn next_signal(shutdown: &mut Shutdown) -> i32 {
    tokio::select! {
        Ok(()) = tokio::signal::ctrl_c() => libc::SIGINT,
        signal = shutdown.recv() => signal,
        () = stdout_gone().cancelled() => libc::SIGPIPE,
    }
}

/// Cancelled once a write to stdout finds it closed (`oml -p … | head -c 1`): the run then stops
/// as a shell pipeline's writer does on SIGPIPE — the turn cancelled at once, status 141 — instead
/// of running the whole turn for nobody.
fn stdout_gone() -> &'static CancelToken {
    static GONE: std::sync::OnceLock<CancelToken> = std::sync::OnceLock::new();
    GONE.get_or_init(CancelToken::new)
}

/// Note the outcome of a write to stdout: a closed pipe cancels [`stdout_gone`].
pub(super) fn wrote(result: std::io::Result<()>) {
    if let Err(e) = result
        && e.kind() == std::io::ErrorKind::BrokenPipe
    {
        stdout_gone().cancel();
    }
}

/// The end of the run: the JSON `error` and `result` lines, the stop notice on stderr, and the
/// exit status.
fn report(
    result: Result<PromptOutcome, AgentError>,
    options: &PrintOptions,
    ended: &Ended<'_>,
) -> i32 {
    let (stop_reason, command, status) = match &result {
        Ok(outcome) => {
            if StopReason::from_loop(&outcome.stop_reason) != StopReason::EndTurn {
                err!("[stopped: {}]", outcome.stop_reason);
            }
            let status = match StopReason::from_loop(&outcome.stop_reason) {
                _ if ended.interrupted.is_some() => ended.interrupted_status(),
                StopReason::Cancelled => exit::INTERRUPTED,
                StopReason::MaxTurnRequests => exit::MAX_TURNS,
                StopReason::MaxTokens => exit::MAX_TOKENS,
                _ if outcome.unsaved.is_some() => exit::UNSAVED,
                _ => exit::OK,
            };
            (
                outcome.stop_reason.as_str(),
                outcome.command.as_deref(),
                status,
            )
        }
        Err(e) if ended.interrupted.is_some() => {
            tracing::debug!("interrupted: {e}");
            err!("[stopped: interrupted]");
            if options.json {
                json::error("interrupted", &e.to_string());
            }
            ("cancelled", None, ended.interrupted_status())
        }
        Err(e) => {
            let message = e.to_string();
            let (category, status) = if ended.model_error {
                ("model", exit::MODEL)
            } else {
                ("lisp", exit::ERROR)
            };
            if options.json {
                json::error(category, &message);
            }
            err!("error: {message}");
            ("error", None, status)
        }
    };
    if options.json {
        json::result(&json::Summary {
            session: ended.id,
            stop_reason,
            command,
            text: ended.text,
            usage: ended.usage,
            duration_ms: ended.duration_ms,
            status,
            unsaved: result.as_ref().ok().and_then(|o| o.unsaved.as_ref()),
        });
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_first_line_is_cut_with_dots() {
        assert_eq!(first_line("a\nb"), "a");
        let long = "x".repeat(130);
        assert_eq!(first_line(&long), format!("{}...", "x".repeat(120)));
    }
}
