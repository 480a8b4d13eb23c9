//! Print mode's JSON stream (`oml -p --json`), version [`SCHEMA`]: one JSON object per line on
//! stdout, each with a `type`. The first line is `init`; then every loop event as it happens
//! (`text_delta`, `thought_delta`, `tool_start`, `tool_end`, `plan`, `notice`, `usage`); then,
//! when the turn failed, `error`; the last line is always `result`. docs/src/print-mode.md
//! documents every field; a change to a field's meaning or a removal raises [`SCHEMA`], an added
//! field does not.
//!
//! The stream speaks JSON's conventions, as `claude -p --output-format json` and `codex exec
//! --json` do: keys and oml's own values are snake_case (`stop_reason`, `tool_start`), and a stop
//! reason is ACP's (`end_turn`). The loop's events are kebab-case Lisp tables, so each is renamed
//! here ([`snake`]); what came from outside oml (a tool call's `args`, the provider's `usage`)
//! stays as it came.
//!
//! This module only encodes; it knows nothing of how the turn ran.

use std::io::Write as _;

use serde_json::{Map, Value, json};

use crate::agent::AgentEvent;

/// The version of the JSON stream, in every `init` and `result` line. Version 2 renamed every
/// key and value of oml's own to snake_case and the stop reasons to ACP's.
pub const SCHEMA: u32 = 2;

/// Keys of an event whose values are someone else's and keep their own spelling: the arguments
/// as the model sent them, the usage as the provider reported it.
const FOREIGN_KEYS: &[&str] = &["args", "usage"];

/// The stream's spelling of one of oml's names (a key, an event type, a stop reason):
/// kebab-case becomes snake_case, and a Lisp predicate's `name?` becomes `is_name`.
fn snake(name: &str) -> String {
    let name = name.replace('-', "_");
    match name.strip_suffix('?') {
        Some(stem) => format!("is_{stem}"),
        None => name,
    }
}

/// The stream's stop reason for the loop's: ACP's names (`end_turn`, `max_turn_requests`,
/// `max_tokens`, `cancelled`, `refusal`), else the loop's own in snake_case (`error`, a user
/// loop's reason).
fn stop_reason(loop_reason: &str) -> crate::acp::StopReason {
    crate::acp::StopReason::from_loop(loop_reason)
}

/// `value` with every object key of oml's own in snake_case, at every depth; the values of
/// [`FOREIGN_KEYS`] are left as they are.
fn snake_keys(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| {
                    let v = if FOREIGN_KEYS.contains(&k.as_str()) {
                        v
                    } else {
                        snake_keys(v)
                    };
                    (snake(&k), v)
                })
                .collect::<Map<_, _>>(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(snake_keys).collect()),
        other => other,
    }
}

/// The first line: which session, where, with which model and permission mode.
pub(super) fn init(session: &str, cwd: &str, model: Option<&str>, mode: &str) {
    line(&json!({
        "type": "init", "schema": SCHEMA, "session": session, "cwd": cwd,
        "model": model, "permission_mode": mode,
    }));
}

/// One loop event, as the agent reported it, in the stream's spelling.
pub(super) fn event(event: &AgentEvent) {
    if let Ok(value) = serde_json::to_value(event) {
        line(&event_value(value));
    }
}

/// A loop event's JSON (`{"type": "tool-end", "error?": …}`) as the stream writes it
/// (`{"type": "tool_end", "is_error": …}`).
fn event_value(value: Value) -> Value {
    let mut value = snake_keys(value);
    if let Some(kind) = value.get("type").and_then(Value::as_str) {
        value["type"] = json!(snake(kind));
    }
    value
}

/// Why the turn failed: a category (`model`, `lisp`, `session`, `interrupted`) and the message.
pub(super) fn error(category: &str, message: &str) {
    line(&json!({"type": "error", "category": category, "message": message}));
}

/// What the last line reports.
pub(super) struct Summary<'a> {
    pub session: &'a str,
    /// The loop's reason (`end-turn`, `max-turns`, `max-tokens`, `cancelled`, `error`, or a user
    /// loop's), written as [`stop_reason`] spells it.
    pub stop_reason: &'a str,
    /// The slash command that handled the prompt, if one did.
    pub command: Option<&'a str>,
    /// The text the turn ended with (after its last tool call).
    pub text: &'a str,
    /// `{:calls :prompt_tokens :completion_tokens}` of the session (with the cache counts and
    /// `:cost` when known), when any call was made.
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
        "stop_reason": stop_reason(s.stop_reason), "command": s.command, "text": s.text,
        "usage": {"input_tokens": count("prompt_tokens"),
                  "output_tokens": count("completion_tokens"),
                  "cache_read_tokens": count("cache_read_tokens"),
                  "cache_write_tokens": count("cache_write_tokens")},
        "cost": s.usage.and_then(|u| u.get("cost")).and_then(Value::as_f64),
        "model_calls": count("calls"), "duration_ms": s.duration_ms as u64,
        "status": s.status,
        "unsaved": s.unsaved.map(|u| json!({"entries": u.entries, "bytes": u.bytes, "error": u.error})),
    }));
}

fn line(value: &Value) {
    let mut out = std::io::stdout().lock();
    // A closed stdout (piped into `head`) stops the run (`super::wrote`), quietly.
    super::wrote(writeln!(out, "{value}").and_then(|()| out.flush()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oml_names_are_spelled_as_json_and_acp_spell_them() {
        assert_eq!(snake("stop-reason"), "stop_reason");
        assert_eq!(snake("error?"), "is_error");
        assert_eq!(snake("text"), "text");
        assert_eq!(stop_reason("end-turn"), "end_turn");
        assert_eq!(stop_reason("max-turns"), "max_turn_requests");
        assert_eq!(stop_reason("my-own-reason"), "my_own_reason");
    }

    #[test]
    fn what_came_from_outside_keeps_its_spelling() {
        let event = AgentEvent::ToolStart {
            id: "c".into(),
            name: "x".into(),
            args: json!({"old-text": 1}),
            kind: "edit".into(),
            title: String::new(),
            locations: json!([{"path": "/p"}]),
            status: None,
        };
        let value = event_value(serde_json::to_value(&event).unwrap());
        assert_eq!(value["type"], "tool_start");
        assert_eq!(value["args"], json!({"old-text": 1}));
    }
}
