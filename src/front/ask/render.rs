//! How `oml ask` shows a prompt's events: on a terminal (the agent's text as it streams, a line
//! per tool call and plan, `[done] <stop reason>`), as NDJSON (`--json`: each ACP message as
//! the agent sent it, then one result line), or quietly (`--quiet`: the final text only).
//!
//! What the agent sends is its own text, and through it a repository's: the text format, made
//! for a person, goes through [`crate::printable`] (no escape sequence or control character but
//! `\n` and `\t` reaches the terminal, whether stdout is one or a pipe into `tee`); `--quiet`
//! does so when stdout is a terminal and keeps every character for a script; `--json` keeps
//! them all, escaped by JSON.

use std::collections::HashMap;
use std::io::Write as _;

use serde_json::{Value, json};

use crate::acp::answers::{UpdateKind, chunk_text, tool_title};
use crate::acp::{PermissionOption, PermissionOutcome, StopReason};

/// Which of the three.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    Text,
    Json,
    Quiet,
}

/// The printer of one prompt's events.
pub struct Render {
    output: Output,
    out: std::io::Stdout,
    /// What is written goes through [`crate::printable`] first.
    printable: bool,
    /// The last byte written ends a line (or nothing was written).
    at_line_start: bool,
    /// Tool call titles by id, for their updates.
    titles: HashMap<String, String>,
}

impl Render {
    pub fn new(output: Output) -> Render {
        use std::io::IsTerminal as _;
        let out = std::io::stdout();
        let printable = match output {
            Output::Text => true,
            Output::Quiet => out.is_terminal(),
            Output::Json => false,
        };
        Render {
            output,
            out,
            printable,
            at_line_start: true,
            titles: HashMap::new(),
        }
    }

    /// One `session/update`.
    pub fn update(&mut self, session_id: &str, update: &Value) {
        match self.output {
            Output::Quiet => {}
            Output::Json => self.json(&json!({"jsonrpc": "2.0", "method": "session/update",
                "params": {"sessionId": session_id, "update": update}})),
            Output::Text => self.text_update(update),
        }
    }

    /// A permission question the agent asked, and what was answered.
    pub fn permission(
        &mut self,
        session_id: &str,
        tool_call: &Value,
        options: &[PermissionOption],
        answer: &PermissionOutcome,
    ) {
        match self.output {
            Output::Quiet => {}
            Output::Json => self.json(
                &json!({"jsonrpc": "2.0", "method": "session/request_permission",
                "params": {"sessionId": session_id, "toolCall": tool_call, "options": options},
                "answer": answer}),
            ),
            Output::Text => {
                let title = tool_title(tool_call).unwrap_or("a tool call");
                let outcome = answer.option_id().unwrap_or("cancelled");
                self.line(&format!("[permission] {title}: {outcome}"));
            }
        }
    }

    /// The end: the stop reason (as on the wire) and the final text; `status` is the exit status.
    pub fn done(
        &mut self,
        session_id: Option<&str>,
        stop_reason: &StopReason,
        text: &str,
        status: i32,
    ) {
        let stop_reason = stop_reason.wire();
        match self.output {
            Output::Quiet => {
                self.write(text);
                if !text.ends_with('\n') {
                    self.write("\n");
                }
            }
            Output::Json => self.json(&json!({"type": "result", "sessionId": session_id,
                "stopReason": stop_reason, "text": text, "status": status})),
            Output::Text => self.line(&format!("[done] {stop_reason}")),
        }
    }

    /// The request failed: on stderr, and as the result line with `--json`.
    pub fn failed(&mut self, category: &str, message: &str, status: i32) {
        if self.output == Output::Json {
            self.json(&json!({"type": "result", "stopReason": null,
                "error": {"category": category, "message": message}, "status": status}));
        } else if !self.at_line_start {
            self.write("\n");
        }
        crate::front::stdio::err!("oml ask: {}", crate::printable::printable(message));
    }

    /// `--no-wait`: the prompt is queued.
    pub fn queued(&mut self, ahead: usize) {
        match self.output {
            Output::Json => self.json(&json!({"type": "queued", "ahead": ahead})),
            _ => self.line(&format!("[queued] {ahead} ahead")),
        }
    }

    fn text_update(&mut self, update: &Value) {
        match UpdateKind::of(update) {
            UpdateKind::AgentMessageChunk => {
                if let Some(text) = chunk_text(update) {
                    self.write(text);
                }
            }
            UpdateKind::ToolCall => {
                let id = update["toolCallId"].as_str().unwrap_or("").to_owned();
                let title = update["title"].as_str().unwrap_or("a tool").to_owned();
                let kind = update["kind"].as_str().unwrap_or("other");
                self.line(&format!("[tool] {title} ({kind})"));
                self.titles.insert(id, title);
            }
            UpdateKind::ToolCallUpdate => {
                let status = update["status"].as_str();
                if let Some(status @ ("completed" | "failed")) = status {
                    let id = update["toolCallId"].as_str().unwrap_or("");
                    let title = update["title"]
                        .as_str()
                        .or(self.titles.get(id).map(String::as_str))
                        .unwrap_or("a tool")
                        .to_owned();
                    self.line(&format!("[tool] {title}: {status}"));
                }
            }
            UpdateKind::Plan => {
                let entries = update["entries"].as_array().cloned().unwrap_or_default();
                for e in entries {
                    let status = e["status"].as_str().unwrap_or("pending");
                    let content = e["content"].as_str().unwrap_or("");
                    self.line(&format!("[plan] {status}: {content}"));
                }
            }
            _ => {}
        }
    }

    /// `text` on a line of its own.
    fn line(&mut self, text: &str) {
        if !self.at_line_start {
            self.write("\n");
        }
        self.write(text);
        self.write("\n");
    }

    fn json(&mut self, value: &Value) {
        let mut line = value.to_string();
        line.push('\n');
        self.write(&line);
    }

    fn write(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        let text = if self.printable {
            crate::printable::printable(text)
        } else {
            std::borrow::Cow::Borrowed(text)
        };
        // A closed pipe (`| head`) ends the output, not the prompt.
        let mut out = self.out.lock();
        let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
        self.at_line_start = text.ends_with('\n');
    }
}
