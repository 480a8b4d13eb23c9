//! The v2 encoder, v1 → v2: what an agent renders as a v1 `session/update` (oml's
//! `acp.render-event`, replay, or a Lisp `acp.update!`), its permission questions and its setup
//! answers, in the shapes of the v2 draft of 2026-07-15; and the client's requests, for a v2
//! agent. [`super::decode`] is the other direction.
//!
//! Updates are upserts by id in v2: a tool card's first appearance and its later changes are
//! both `tool_call_update`; a plan is `plan_update` with one plan id per session; a config option
//! carries `configId`; a command `type: "command"`; a diff is a list of file changes with a git
//! patch. Modes are config options in v2, so `current_mode_update` is dropped (oml sends the
//! `config_option_update` that goes with it). Everything else, including `_`-prefixed extension
//! updates, passes unchanged. The full table is in `docs/src/conformance.md`.
//!
//! It knows update and payload shapes only: not sessions, the connection, or when to send.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{PLAN_ID, Plan, Subject, V1_CONFIG_ID, V2_CONFIG_ID, kind_of, rename_config_ids};

/// The v2 update for one v1 update (none when v2 has no such update).
pub fn update(v1: Value) -> Option<Value> {
    let kind = kind_of(&v1);
    let Value::Object(mut u) = v1 else {
        return Some(v1);
    };
    match kind.as_str() {
        "tool_call" | "tool_call_update" => {
            let mut call = tool_call(u);
            call.insert("sessionUpdate".into(), "tool_call_update".into());
            Some(Value::Object(call))
        }
        "plan" => {
            let plan = Plan {
                kind: "items".to_owned(),
                plan_id: PLAN_ID.to_owned(),
                entries: u.remove("entries").unwrap_or_else(super::no_entries),
            };
            let mut out = Map::new();
            out.insert("sessionUpdate".into(), "plan_update".into());
            out.insert("plan".into(), serde_json::to_value(plan).ok()?);
            Some(Value::Object(out))
        }
        "config_option_update" => {
            if let Some(options) = u.remove("configOptions") {
                u.insert("configOptions".into(), config_options(options));
            }
            Some(Value::Object(u))
        }
        "available_commands_update" => {
            if let Some(commands) = u.remove("availableCommands") {
                u.insert("availableCommands".into(), available_commands(commands));
            }
            Some(Value::Object(u))
        }
        "current_mode_update" => None,
        _ => Some(Value::Object(u)),
    }
}

/// A v1 tool call (card or update, or a permission request's `toolCall`) as a v2
/// `ToolCallUpdate`: the same fields, with its content's diffs in v2's shape.
pub fn tool_call(mut call: Map<String, Value>) -> Map<String, Value> {
    if let Some(Value::Array(items)) = call.remove("content") {
        let items = items.into_iter().map(content_item).collect();
        call.insert("content".into(), Value::Array(items));
    }
    call
}

/// A v1 diff: the file's path, its text before (none: a new file) and after.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct V1Diff<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    #[serde(default)]
    path: Option<&'a str>,
    #[serde(default)]
    old_text: Option<&'a str>,
    #[serde(default)]
    new_text: Option<&'a str>,
    /// A diff already in v2's shape has these.
    #[serde(default)]
    changes: Option<Value>,
}

/// One tool call content item: a v1 diff (`path`, `oldText`, `newText`) becomes a v2 diff (one
/// file change and its git patch); content and terminals are the same in both.
fn content_item(item: Value) -> Value {
    let diff = match V1Diff::deserialize(&item) {
        Ok(d) if d.kind == "diff" && d.changes.is_none() => d,
        _ => return item,
    };
    let path = diff.path.unwrap_or_default();
    let old = diff.old_text;
    let new = diff.new_text.unwrap_or_default();
    let operation = if old.is_none() { "add" } else { "modify" };
    serde_json::json!({
        "type": "diff",
        "changes": [{"operation": operation, "path": path, "fileType": "text"}],
        "patch": {"format": "git_patch", "text": git_patch(path, old, new)},
    })
}

/// The git patch of one text file going from `old` (none: a new file) to `new`.
pub fn git_patch(path: &str, old: Option<&str>, new: &str) -> String {
    let name = path.trim_start_matches('/');
    let before = if old.is_some() {
        format!("a/{name}")
    } else {
        "/dev/null".to_owned()
    };
    let diff = similar::TextDiff::from_lines(old.unwrap_or_default(), new);
    let body = diff
        .unified_diff()
        .context_radius(3)
        .header(&before, &format!("b/{name}"))
        .to_string();
    let mode = if old.is_none() {
        "new file mode 100644\n"
    } else {
        ""
    };
    format!("diff --git a/{name} b/{name}\n{mode}{body}")
}

/// v1 config options (`id`) as v2's (`configId`).
pub fn config_options(options: Value) -> Value {
    rename_config_ids(options, V1_CONFIG_ID, V2_CONFIG_ID)
}

/// v1 available commands as v2's: `type: "command"`, and a hint as a text input.
fn available_commands(commands: Value) -> Value {
    let Value::Array(commands) = commands else {
        return commands;
    };
    let commands = commands
        .into_iter()
        .map(|c| match c {
            Value::Object(mut c) => {
                c.insert("type".into(), "command".into());
                if let Some(Value::Object(input)) = c.get_mut("input") {
                    input.entry("type").or_insert_with(|| "text".into());
                }
                Value::Object(c)
            }
            other => other,
        })
        .collect();
    Value::Array(commands)
}

/// The v2 `session/request_permission` params for v1's: the tool call becomes the `tool_call`
/// subject, and its title the question's.
pub fn permission_request(v1: Value) -> Value {
    let Value::Object(mut p) = v1 else { return v1 };
    if let Some(Value::Object(call)) = p.remove("toolCall") {
        let head = Value::Object(call);
        let title = crate::acp::answers::tool_title(&head)
            .unwrap_or("Allow this tool call?")
            .to_owned();
        let Value::Object(call) = head else {
            return Value::Object(p);
        };
        p.insert("title".into(), title.into());
        // Moved, not serialized: the call can hold a whole file.
        let subject = Subject::tool_call(Value::Object(tool_call(call)));
        p.insert("subject".into(), subject);
    }
    Value::Object(p)
}

/// The answer to `session/new`, `session/resume` (and fork) in v2: the session id (for new), the
/// config options in v2's shape; modes and models are config options there.
pub fn setup_answer(v1: Value) -> Value {
    let Value::Object(mut v1) = v1 else {
        return Value::Object(Map::new());
    };
    let mut out = Map::new();
    if let Some(id) = v1.remove("sessionId") {
        out.insert("sessionId".into(), id);
    }
    if let Some(options) = v1.remove("configOptions") {
        out.insert("configOptions".into(), config_options(options));
    }
    if let Some(meta) = v1.remove("_meta") {
        out.insert("_meta".into(), meta);
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Each v1 update and what v2 gets for it (`null`: nothing).
    #[test]
    fn updates_map_as_the_table_says() {
        let cases = [
            (
                json!({"sessionUpdate": "agent_message_chunk", "messageId": "m1",
                       "content": {"type": "text", "text": "hi"}}),
                json!({"sessionUpdate": "agent_message_chunk", "messageId": "m1",
                       "content": {"type": "text", "text": "hi"}}),
            ),
            (
                json!({"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "Run ls",
                       "kind": "execute", "status": "pending"}),
                json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "title": "Run ls",
                       "kind": "execute", "status": "pending"}),
            ),
            (
                json!({"sessionUpdate": "plan", "entries": [
                    {"content": "a", "priority": "high", "status": "pending"}]}),
                json!({"sessionUpdate": "plan_update", "plan": {"type": "items", "planId": "plan",
                       "entries": [{"content": "a", "priority": "high", "status": "pending"}]}}),
            ),
            (
                json!({"sessionUpdate": "config_option_update", "configOptions": [
                    {"id": "network", "name": "Network", "type": "boolean", "currentValue": false}]}),
                json!({"sessionUpdate": "config_option_update", "configOptions": [
                    {"name": "Network", "type": "boolean", "currentValue": false,
                     "configId": "network"}]}),
            ),
            (
                json!({"sessionUpdate": "available_commands_update", "availableCommands": [
                    {"name": "init", "description": "d", "input": {"hint": "h"}}]}),
                json!({"sessionUpdate": "available_commands_update", "availableCommands": [
                    {"name": "init", "description": "d", "input": {"hint": "h", "type": "text"},
                     "type": "command"}]}),
            ),
            (
                json!({"sessionUpdate": "current_mode_update", "currentModeId": "ask"}),
                Value::Null,
            ),
            (
                json!({"sessionUpdate": "_oml/custom", "x": 1}),
                json!({"sessionUpdate": "_oml/custom", "x": 1}),
            ),
        ];
        for (v1, v2) in cases {
            let got = update(v1.clone()).unwrap_or(Value::Null);
            assert_eq!(got, v2, "for {v1}");
        }
    }

    #[test]
    fn diffs_become_file_changes_with_a_git_patch() {
        let v1 = json!({"sessionUpdate": "tool_call_update", "toolCallId": "c",
            "content": [{"type": "diff", "path": "/w/a.txt", "oldText": "one\n", "newText": "two\n"},
                        {"type": "diff", "path": "/w/b.txt", "oldText": null, "newText": "new\n"},
                        {"type": "terminal", "terminalId": "t"}]});
        let v2 = update(v1).unwrap();
        let content = v2["content"].as_array().unwrap();
        assert_eq!(
            content[0]["changes"][0],
            json!({"operation": "modify", "path": "/w/a.txt",
                                                     "fileType": "text"})
        );
        let patch = content[0]["patch"]["text"].as_str().unwrap();
        assert!(
            patch.starts_with("diff --git a/w/a.txt b/w/a.txt\n--- a/w/a.txt\n+++ b/w/a.txt\n"),
            "{patch}"
        );
        assert!(patch.contains("-one\n+two\n"), "{patch}");
        assert_eq!(content[1]["changes"][0]["operation"], "add");
        let patch = content[1]["patch"]["text"].as_str().unwrap();
        assert!(
            patch.contains("new file mode 100644\n--- /dev/null\n+++ b/w/b.txt\n"),
            "{patch}"
        );
        assert_eq!(content[2], json!({"type": "terminal", "terminalId": "t"}));
    }

    #[test]
    fn a_permission_request_asks_about_its_tool_call_subject() {
        let v1 = json!({"sessionId": "s", "toolCall": {"toolCallId": "c", "title": "Run make"},
                        "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"}]});
        let v2 = permission_request(v1);
        assert_eq!(v2["title"], "Run make");
        assert_eq!(
            v2["subject"],
            json!({"type": "tool_call",
                                         "toolCall": {"toolCallId": "c", "title": "Run make"}})
        );
        assert!(v2.get("toolCall").is_none());
        assert_eq!(v2["options"][0]["optionId"], "allow");
    }

    #[test]
    fn setup_answers_keep_the_id_and_the_options_only() {
        let v1 = json!({"sessionId": "s", "modes": {"currentModeId": "ask"},
                        "configOptions": [{"id": "mode", "name": "Mode"}]});
        assert_eq!(
            setup_answer(v1),
            json!({"sessionId": "s",
            "configOptions": [{"name": "Mode", "configId": "mode"}]})
        );
        assert_eq!(
            crate::acp::v2::State::Idle(Some(crate::acp::StopReason::EndTurn)).update(),
            json!({"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"})
        );
    }
}
