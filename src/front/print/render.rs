//! Print mode's text rendering: the answer streamed as it comes, one `> name: title` line per
//! tool call and `  ok:`/`  failed:` with the first line of its result, reasoning only when asked,
//! and a spinner on stderr while nothing arrives (only when stderr is a terminal). With `json`,
//! each event is one line of the JSON stream instead (`super::json`). Returns the final text.
//!
//! The text format is for a person, and what it shows was written by others (the model, a
//! repository's skill and command descriptions, a tool's output): it goes through
//! [`crate::printable`], so no escape sequence or control character but `\n` and `\t` reaches
//! the terminal, whether stdout is one or a pipe into `tee` or `less -R`. The JSON stream keeps
//! every character (escaped by JSON).

use std::io::Write as _;

use tokio::sync::mpsc;

use super::json;
use super::{SPINNER_DELAY, TOOL_LINE_MAX_CHARS};
use crate::agent::AgentEvent;

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

/// The plan as print mode lists it: `plan:` and a line per step, `[x]` done, `[>]` in progress,
/// `[ ]` pending.
fn plan_lines(entries: &serde_json::Value) -> String {
    let mut out = String::from("plan:");
    for e in entries.as_array().into_iter().flatten() {
        let mark = match e.get("status").and_then(|s| s.as_str()) {
            Some("completed") => "[x]",
            Some("in_progress") => "[>]",
            _ => "[ ]",
        };
        let step = e.get("content").and_then(|s| s.as_str()).unwrap_or("");
        out.push_str(&format!("\n  {mark} {step}"));
    }
    out
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
        let text = crate::printable::printable(text);
        self.clear_spinner();
        let mut out = std::io::stdout().lock();
        // A closed stdout (piped into `head`) stops the run (`super::wrote`), quietly.
        super::wrote(out.write_all(text.as_bytes()).and_then(|()| out.flush()));
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

    /// One event as text: the answer as it streams, a line per tool call and per result, the
    /// plan, notices on stderr.
    fn show(&mut self, event: AgentEvent, show_thinking: bool) {
        match event {
            AgentEvent::TextDelta { text } => self.write(&text),
            AgentEvent::ThoughtDelta { text } => {
                if show_thinking {
                    self.write(&text);
                }
            }
            AgentEvent::ToolStart { name, title, .. } => {
                self.line(&format!("> {name}: {title}"));
            }
            AgentEvent::ToolEnd {
                content, is_error, ..
            } => {
                let status = if is_error { "failed" } else { "ok" };
                self.line(&format!("  {status}: {}", first_line(&content)));
            }
            AgentEvent::Plan { entries } => self.line(&plan_lines(&entries)),
            AgentEvent::Notice { text } => {
                self.clear_spinner();
                crate::front::stdio::err!("[{}]", crate::printable::printable(&text));
            }
            AgentEvent::UserMessage { text, .. } => {
                let text = crate::printable::printable(&text);
                self.line(&format!("> user: {}", first_line(&text)));
            }
            AgentEvent::Usage { .. } | AgentEvent::ToolOutput { .. } => {}
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

/// Render the events of `rx` until the session's sink is dropped: as text on stdout (reasoning
/// only when `show_thinking`, a spinner on stderr while idle when `spinner`), or with `json` as
/// the JSON stream. Returns the text since the last tool call: the answer the turn ends with.
pub(super) async fn render(
    mut rx: mpsc::UnboundedReceiver<AgentEvent>,
    json: bool,
    show_thinking: bool,
    spinner: bool,
) -> String {
    let mut screen = Screen {
        at_line_start: true,
        spinner_shown: false,
    };
    let mut frame = 0usize;
    // The text since the last tool call: the answer the turn ends with.
    let mut last_text = String::new();
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
        if matches!(event, AgentEvent::ToolOutput { .. }) {
            // The live output of a running command is the chat's; print mode shows the result.
            continue;
        }
        match &event {
            AgentEvent::TextDelta { text } => last_text.push_str(text),
            AgentEvent::ToolStart { .. }
            | AgentEvent::ToolEnd { .. }
            | AgentEvent::UserMessage { .. } => last_text.clear(),
            AgentEvent::ThoughtDelta { .. }
            | AgentEvent::Usage { .. }
            | AgentEvent::ToolOutput { .. }
            | AgentEvent::Plan { .. }
            | AgentEvent::Notice { .. } => {}
        }
        if json {
            json::event(&event);
        } else {
            screen.show(event, show_thinking);
        }
    }
    screen.clear_spinner();
    if !json && !screen.at_line_start {
        screen.write("\n");
    }
    last_text
}
