//! Print mode (`oml -p TEXT`, `oml prompt TEXT`): one prompt in a fresh session in the current
//! directory, its events rendered to stdout as they arrive.
//!
//! Text mode streams the answer's text, shows each tool call as `> name: title` followed by
//! `  ok: <first line>` or `  failed: <first line>`, hides reasoning unless asked, and reports a
//! stop other than the end of the turn as `[stopped: reason]` on stderr. JSON mode writes each
//! [`AgentEvent`] as one JSON line, then a `result` (or `error`) line. Ctrl-C cancels the turn
//! cleanly (the stream stops, tools are killed, the partial text stays); a second Ctrl-C stops
//! the Lisp code outright. A spinner runs on stderr only when stderr is a terminal.
//!
//! With `agent` and `acp`, this is the only module that writes to stdout. It never exits the
//! process: it returns the status (0 done, 1 error, 130 interrupted).
//!
//! Compare with pi: `pi -p` (print mode) and `--mode json`.
//! Compare with oml.clj: `oml.print-mode`.

use std::io::{IsTerminal as _, Write as _};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::json;
use tokio::sync::mpsc;

use crate::agent::{Agent, AgentError, AgentEvent, EventSink, PromptOutcome};
use crate::cancel::CancelToken;
use crate::front::stdio::err;

/// Exit status of a prompt interrupted with Ctrl-C (128 + SIGINT).
pub const INTERRUPTED: i32 = 130;

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
    let (tx, rx) = mpsc::unbounded_channel();
    let id = match open_session(agent, &options, tx) {
        Ok(id) => id,
        Err(status) => return status,
    };
    let spinner = !options.json && std::io::stderr().is_terminal();
    let renderer = tokio::spawn(render(rx, options.json, options.show_thinking, spinner));

    let interrupt = CancelToken::new();
    let interrupted = Arc::new(AtomicBool::new(false));
    let signals = tokio::spawn(watch_ctrl_c(
        agent.clone(),
        id.clone(),
        interrupt.clone(),
        interrupted.clone(),
    ));
    let result = agent.prompt(&id, &options.text, &interrupt).await;
    signals.abort();
    // Dropping the session drops its sink, which ends the renderer once it has shown everything.
    agent.sessions().remove(&id);
    let _ = renderer.await;
    report(result, &options, &id, interrupted.load(Ordering::SeqCst))
}

/// The session the prompt runs in (new, continued, or named), with print mode's permission
/// mode; an error is reported here and its status returned.
fn open_session(agent: &Agent, options: &PrintOptions, tx: EventSink) -> Result<String, i32> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| "/".into());
    let store = agent.sessions().store();
    let existing = match (&options.session, &store) {
        (SessionChoice::Continue, Some(store)) => {
            store.list(Some(&cwd)).first().map(|s| s.id.clone())
        }
        (SessionChoice::Id(id), Some(store)) => {
            if !store.exists(id) {
                err!("error: no stored session {id}");
                return Err(1);
            }
            Some(id.clone())
        }
        (SessionChoice::Id(id), None) => {
            err!("error: no stored session {id} (sessions are not stored)");
            return Err(1);
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
            Err(e) => {
                err!("error: cannot load session {id}: {e}");
                return Err(1);
            }
        },
        None => agent.new_session(cwd, Some(tx)),
    };
    let mode = options.mode.clone().unwrap_or_else(|| {
        agent
            .lisp()
            .setting::<String>("agent.print-mode-permission")
            .unwrap_or_else(|_| "yolo".to_owned())
    });
    agent.sessions().with(&id, |s| {
        s.data.insert("permission-mode".into(), json!(mode));
    });
    Ok(id)
}

/// The first Ctrl-C cancels the turn (it ends properly, partial answer kept); a second one
/// interrupts the Lisp code itself.
async fn watch_ctrl_c(
    agent: Agent,
    id: String,
    interrupt: CancelToken,
    interrupted: Arc<AtomicBool>,
) {
    if tokio::signal::ctrl_c().await.is_err() {
        return;
    }
    interrupted.store(true, Ordering::SeqCst);
    agent.cancel(&id);
    if tokio::signal::ctrl_c().await.is_ok() {
        interrupt.cancel();
    }
}

/// The end of the run: the JSON result line, the stop notice on stderr, and the exit status.
fn report(
    result: Result<PromptOutcome, AgentError>,
    options: &PrintOptions,
    id: &str,
    was_interrupted: bool,
) -> i32 {
    match result {
        Ok(outcome) => {
            if options.json {
                write_line(&json!({
                    "type": "result",
                    "stop-reason": outcome.stop_reason,
                    "command": outcome.command,
                    "session": id,
                }));
            }
            if outcome.stop_reason != "end-turn" {
                err!("[stopped: {}]", outcome.stop_reason);
            }
            if was_interrupted || outcome.stop_reason == "cancelled" {
                INTERRUPTED
            } else {
                0
            }
        }
        Err(e) if was_interrupted => {
            tracing::debug!("interrupted: {e}");
            err!("[stopped: interrupted]");
            INTERRUPTED
        }
        Err(e) => {
            let message = e.to_string();
            if options.json {
                write_line(&json!({"type": "error", "message": message}));
            }
            err!("error: {message}");
            1
        }
    }
}

/// The first line of `text`, cut to [`TOOL_LINE_MAX_CHARS`] characters plus `...`.
pub fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or("");
    if line.chars().count() > TOOL_LINE_MAX_CHARS {
        let cut: String = line.chars().take(TOOL_LINE_MAX_CHARS).collect();
        format!("{cut}...")
    } else {
        line.to_owned()
    }
}

// --- private helpers

struct Screen {
    at_line_start: bool,
    spinner_shown: bool,
}

impl Screen {
    fn write(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.clear_spinner();
        let mut out = std::io::stdout().lock();
        // A closed stdout (piped into `head`) is not an error worth reporting.
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
        self.at_line_start = text.ends_with('\n');
    }

    fn line(&mut self, text: &str) {
        if !self.at_line_start {
            self.write("\n");
        }
        self.write(text);
        self.write("\n");
    }

    fn clear_spinner(&mut self) {
        if self.spinner_shown {
            let _ = std::io::stderr().write_all(b"\r\x1b[K");
            self.spinner_shown = false;
        }
    }

    fn draw_spinner(&mut self, frame: usize) {
        const FRAMES: [&str; 4] = ["|", "/", "-", "\\"];
        let _ = write!(
            std::io::stderr(),
            "\r{} working",
            FRAMES[frame % FRAMES.len()]
        );
        self.spinner_shown = true;
    }
}

async fn render(
    mut rx: mpsc::UnboundedReceiver<AgentEvent>,
    json: bool,
    show_thinking: bool,
    spinner: bool,
) {
    let mut screen = Screen {
        at_line_start: true,
        spinner_shown: false,
    };
    let mut frame = 0usize;
    loop {
        let event = if spinner {
            match tokio::time::timeout(SPINNER_DELAY, rx.recv()).await {
                Ok(event) => event,
                Err(_) => {
                    if screen.at_line_start {
                        screen.draw_spinner(frame);
                        frame += 1;
                    }
                    continue;
                }
            }
        } else {
            rx.recv().await
        };
        let Some(event) = event else { break };
        if json {
            if let Ok(value) = serde_json::to_value(&event) {
                write_line(&value);
            }
            continue;
        }
        match event {
            AgentEvent::TextDelta { text } => screen.write(&text),
            AgentEvent::ThoughtDelta { text } => {
                if show_thinking {
                    screen.write(&text);
                }
            }
            AgentEvent::ToolStart { name, title, .. } => {
                screen.line(&format!("> {name}: {title}"));
            }
            AgentEvent::ToolEnd {
                content, is_error, ..
            } => {
                let status = if is_error { "failed" } else { "ok" };
                screen.line(&format!("  {status}: {}", first_line(&content)));
            }
            AgentEvent::Usage { .. } => {}
        }
    }
    screen.clear_spinner();
    if !json && !screen.at_line_start {
        screen.write("\n");
    }
}

fn write_line(value: &serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{value}");
    let _ = out.flush();
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
