//! Print mode's JSON stream (`oml -p --json`), version [`SCHEMA`]: one JSON object per line on
//! stdout, each with a `type`. The first line is `init`; then every loop event as it happens
//! (`text-delta`, `thought-delta`, `tool-start`, `tool-end`, `usage`); then, when the turn failed,
//! `error`; the last line is always `result`. docs/src/print-mode.md documents every field; a
//! change to a field's meaning or a removal raises [`SCHEMA`], an added field does not.
//!
//! This module only encodes; it knows nothing of how the turn ran.

use std::io::Write as _;

use serde_json::{Value, json};

use crate::agent::AgentEvent;

/// The version of the JSON stream, in every `init` and `result` line.
pub const SCHEMA: u32 = 1;

/// The first line: which session, where, with which model and permission mode.
pub(super) fn init(session: &str, cwd: &str, model: Option<&str>, mode: &str) {
    line(&json!({
        "type": "init", "schema": SCHEMA, "session": session, "cwd": cwd,
        "model": model, "permission-mode": mode,
    }));
}

/// One loop event, as the agent reported it.
pub(super) fn event(event: &AgentEvent) {
    if let Ok(value) = serde_json::to_value(event) {
        line(&value);
    }
}

/// Why the turn failed: a category (`model`, `lisp`, `session`, `interrupted`) and the message.
pub(super) fn error(category: &str, message: &str) {
    line(&json!({"type": "error", "category": category, "message": message}));
}

/// What the last line reports.
pub(super) struct Summary<'a> {
    pub session: &'a str,
    /// `end-turn`, `max-turns`, `max-tokens`, `cancelled`, `error`, or a user loop's reason.
    pub stop_reason: &'a str,
    /// The slash command that handled the prompt, if one did.
    pub command: Option<&'a str>,
    /// The text the turn ended with (after its last tool call).
    pub text: &'a str,
    /// `{:calls :prompt_tokens :completion_tokens}` of the session, when any call was made.
    pub usage: Option<&'a Value>,
    pub duration_ms: u128,
    /// The exit status oml ends with.
    pub status: i32,
    /// What of the session the disk refused, if anything.
    pub unsaved: Option<&'a crate::session::store::Unsaved>,
}

/// The last line.
pub(super) fn result(s: &Summary<'_>) {
    let count = |key: &str| {
        s.usage
            .and_then(|u| u.get(key))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    line(&json!({
        "type": "result", "schema": SCHEMA, "session": s.session,
        "stop-reason": s.stop_reason, "command": s.command, "text": s.text,
        "usage": {"prompt-tokens": count("prompt_tokens"),
                  "completion-tokens": count("completion_tokens")},
        "model-calls": count("calls"), "duration-ms": s.duration_ms as u64,
        "status": s.status,
        "unsaved": s.unsaved.map(|u| json!({"entries": u.entries, "bytes": u.bytes, "error": u.error})),
    }));
}

fn line(value: &Value) {
    let mut out = std::io::stdout().lock();
    // A closed stdout (piped into `head`) stops the run (`super::wrote`), quietly.
    super::wrote(writeln!(out, "{value}").and_then(|()| out.flush()));
}
