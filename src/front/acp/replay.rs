//! The replay of a stored session: the `session/update` payloads that show its history to a
//! client that loads it.
//!
//! Pure: it reads the entries of a session file and returns payloads; sending them, and which
//! session they belong to, is the caller's business.

use serde_json::Value;

use super::hub::stable_order;
use crate::acp::updates::{Block, PlanEntry, SessionUpdate, ToolCallContent};
use crate::session::entry::{COMMAND_KIND, Entry, THOUGHT_KIND};
use crate::session::history::{self, Rewind};
use crate::session::stored::{StoredMessage, ToolRecords, images, message_text};

/// The tool kinds ACP knows.
pub(super) const TOOL_KINDS: &[&str] = &[
    "read",
    "edit",
    "delete",
    "move",
    "search",
    "execute",
    "think",
    "fetch",
    "switch_mode",
    "other",
];

/// The tool kind ACP shows for a built-in tool's name, for replays of sessions stored before
/// tool entries were recorded.
pub(super) fn replay_tool_kind(name: &str) -> &'static str {
    match name {
        "read" => "read",
        "write" | "edit" => "edit",
        "bash" => "execute",
        _ => "other",
    }
}

/// The `session/update` payloads that replay a stored session's history: user messages as
/// user_message_chunk, reasoning as agent_thought_chunk (kept in the message, or recorded as a
/// `thought` entry), answers as agent_message_chunk, each tool call as a tool_call card and its
/// result as a tool_call_update, completed or failed, with the diff of a write or edit, and a
/// slash command (a `command` entry) as the prompt and what it showed (a markdown command as
/// typed, its expansion left out), the error a prompt failed with (a `failure` entry) as its
/// answer; a rewind of the
/// conversation takes back what was shown from the prompt it went back to. The session's latest plan
/// (its last `plan` data entry, unless empty) follows the history as one `plan` update. Each
/// message's chunks carry one `messageId` (`message_ids::number_replay`).
///
/// A card's title, kind, failure and diff come from the `tool` entries the loop records before
/// the assistant message they belong to ([`Entry::tool_record`]), matched to that message's
/// calls, so an id a provider uses again in a later turn gets its own record; without one, the
/// card is titled by the tool's name and the result shows as completed. Other entries are not
/// shown.
pub fn replay_updates(entries: &[Entry]) -> Vec<Value> {
    let mut replay = Replay::default();
    for e in entries {
        replay.entry(e);
    }
    if let Some(plan) = replay.plan.take().and_then(|p| plan_update(&p)) {
        replay.out.push(plan);
    }
    super::message_ids::number_replay(&mut replay.out);
    replay
        .out
        .into_iter()
        .map(|u| stable_order(u, "sessionUpdate"))
        .collect()
}

/// The walk over a session's entries.
#[derive(Default)]
struct Replay {
    out: Vec<Value>,
    /// The tool records, by the assistant message they belong to.
    records: ToolRecords,
    /// A recorded thought waiting for its assistant message.
    thought: Option<String>,
    /// The latest plan (`session.put! :plan`): `[{step, status}]`.
    plan: Option<Value>,
    /// Where in `out` each user prompt of the history as it stands starts (its `prompt`
    /// entry), for a rewind of the conversation.
    prompts: Vec<usize>,
    /// A markdown command was shown as typed: the next user message, its expansion, is not.
    expanded: bool,
}

impl Replay {
    fn entry(&mut self, e: &Entry) {
        if self.records.take(e) {
            return;
        }
        match e {
            Entry::Custom { kind, data } if kind == THOUGHT_KIND => {
                self.thought = data.get("text").and_then(Value::as_str).map(str::to_owned);
            }
            Entry::Custom { kind, data } if kind == COMMAND_KIND => self.command(data),
            Entry::Custom { kind, data } if kind == crate::agent::FAILURE_KIND => {
                let message = data.get("message").and_then(Value::as_str).unwrap_or("");
                self.out.push(agent_text(message));
            }
            Entry::Custom { kind, .. } if kind == history::PROMPT_KIND => {
                self.prompts.push(self.out.len());
            }
            Entry::Custom { .. } => {
                if let Some(r) = Rewind::of(e).filter(|r| r.conversation) {
                    self.rewind(r.prompt);
                }
            }
            Entry::Message { message } => self.message(message),
            Entry::Data { key, value } if key == PLAN_KEY => {
                self.plan = Some(value.clone()).filter(|v| !v.is_null());
            }
            _ => {}
        }
    }

    /// The conversation went back to just before prompt `n`: what was shown from it on goes.
    fn rewind(&mut self, n: usize) {
        let keep = n.saturating_sub(1);
        if let Some(&start) = self.prompts.get(keep) {
            self.out.truncate(start);
        }
        self.prompts.truncate(keep);
        self.records.clear();
        self.thought = None;
        // A command whose expansion was rewound away does not hide the next prompt's text.
        self.expanded = false;
    }

    fn command(&mut self, data: &Value) {
        let field = |k: &str| data.get(k).and_then(Value::as_str).unwrap_or("");
        let input = field("input");
        let prompt = format!(
            "/{}{}{input}",
            field("name"),
            if input.is_empty() { "" } else { " " }
        );
        self.out.push(user_text(&prompt));
        self.expanded = data.get("expanded").and_then(Value::as_bool) == Some(true);
        if !field("output").is_empty() {
            self.out.push(agent_text(field("output")));
        }
    }

    fn message(&mut self, message: &Value) {
        let m = StoredMessage::of(message);
        let content = message_text(&m.content);
        match m.role.as_deref() {
            Some("user") => {
                if !std::mem::take(&mut self.expanded) {
                    self.out.push(user_text(&content));
                }
                for (mime_type, data) in images(&m.content) {
                    let image = Block::Image { mime_type, data };
                    let chunk = SessionUpdate::UserMessageChunk { content: image };
                    self.out.push(chunk.to_value());
                }
            }
            Some("assistant") => {
                self.records.answer();
                let thought = self.thought.take();
                assistant_updates(&m, &content, thought, &self.records, &mut self.out);
            }
            Some("tool") => {
                let id = m.tool_call_id.as_deref().unwrap_or_default();
                let record = self.records.of(id);
                let failed = record.is_some_and(|t| t.error);
                let diff = record
                    .and_then(|t| t.diff.as_ref())
                    .filter(|d| d.is_object());
                // As the live card: with the diff, the text keeps its first line ("Edited
                // path"), so the change shows once.
                let shown = match diff {
                    Some(_) => content.lines().next().unwrap_or_default(),
                    None => content.as_str(),
                };
                let mut blocks = vec![ToolCallContent::Content {
                    content: Block::Text { text: shown },
                }];
                if let Some(d) = diff {
                    blocks.push(ToolCallContent::Diff {
                        path: d.get("path"),
                        old_text: d.get("old-text"),
                        new_text: d.get("new-text"),
                    });
                }
                let card = SessionUpdate::ToolCallUpdate {
                    tool_call_id: id,
                    status: Some(if failed { "failed" } else { "completed" }),
                    content: blocks,
                };
                self.out.push(card.to_value());
            }
            _ => {}
        }
    }
}

/// An assistant message's updates: its reasoning (kept in it, else the recorded `thought`),
/// its text, then a card per tool call.
fn assistant_updates(
    m: &StoredMessage,
    content: &str,
    thought: Option<String>,
    tools: &ToolRecords,
    out: &mut Vec<Value>,
) {
    let reasoning = m.reasoning().map(str::to_owned).or(thought);
    if let Some(r) = reasoning {
        let thought = SessionUpdate::AgentThoughtChunk {
            content: Block::Text { text: &r },
        };
        out.push(thought.to_value());
    }
    if !content.is_empty() {
        out.push(agent_text(content));
    }
    for call in m.calls() {
        let id = call.id.as_deref().unwrap_or_default();
        let name = call.function.name.as_deref().unwrap_or("tool");
        let args = call
            .arguments()
            .unwrap_or_else(crate::acp::rpc::empty_result);
        let recorded = tools.of(id);
        let title = recorded
            .and_then(|t| t.title.as_deref())
            .filter(|t| !t.trim().is_empty())
            .unwrap_or(name);
        let kind = recorded
            .and_then(|t| t.kind.as_deref())
            .filter(|k| TOOL_KINDS.contains(k))
            .unwrap_or_else(|| replay_tool_kind(name));
        let card = SessionUpdate::ToolCall {
            tool_call_id: id,
            title,
            kind,
            status: "pending",
            raw_input: &args,
        };
        out.push(card.to_value());
    }
}

/// The session data key of the plan (`agent.plan`).
const PLAN_KEY: &str = "plan";

/// The `plan` update of a stored plan `[{step, status}]`, as `agent.plan-entries` makes its
/// entries; `None` for an empty plan or one that is not a list.
fn plan_update(plan: &Value) -> Option<Value> {
    let entries: Vec<PlanEntry<'_>> = plan
        .as_array()?
        .iter()
        .map(|s| PlanEntry {
            content: s.get("step"),
            priority: "medium",
            status: s.get("status"),
        })
        .collect();
    (!entries.is_empty()).then(|| SessionUpdate::Plan { entries }.to_value())
}

/// The agent's text as a chunk of its message.
fn agent_text(text: &str) -> Value {
    let content = Block::Text { text };
    SessionUpdate::AgentMessageChunk { content }.to_value()
}

/// The user's text as a chunk of their message.
fn user_text(text: &str) -> Value {
    let content = Block::Text { text };
    SessionUpdate::UserMessageChunk { content }.to_value()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message(message: Value) -> Entry {
        Entry::Message { message }
    }

    fn custom(kind: &str, data: Value) -> Entry {
        Entry::Custom {
            kind: kind.into(),
            data,
        }
    }

    fn call(id: &str, name: &str) -> Value {
        json!({"id": id, "type": "function",
               "function": {"name": name, "arguments": "{\"path\":\"a\"}"}})
    }

    /// Entries in the order the loop writes them: a turn's tool records, then its assistant
    /// message and tool results together.
    #[test]
    fn replays_take_titles_kinds_and_failures_from_tool_entries() {
        let entries = vec![
            message(json!({"role": "user", "content": "go"})),
            custom(
                "tool",
                json!({"id": "c1", "name": "read", "title": "Read a", "kind": "read", "error?": true}),
            ),
            custom(
                "tool",
                json!({"id": "c3", "name": "mine", "title": "Mine a", "kind": "bogus", "error?": false}),
            ),
            message(json!({"role": "assistant", "content": null,
                           "tool_calls": [call("c1", "read"), call("c2", "edit"), call("c3", "mine")]})),
            message(json!({"role": "tool", "tool_call_id": "c1", "content": "no such file"})),
            message(json!({"role": "tool", "tool_call_id": "c2", "content": "edited"})),
            message(json!({"role": "tool", "tool_call_id": "c3", "content": "ok"})),
        ];
        let updates = replay_updates(&entries);
        let cards: Vec<(&str, &str)> = updates
            .iter()
            .filter(|u| u["sessionUpdate"] == "tool_call")
            .map(|u| (u["title"].as_str().unwrap(), u["kind"].as_str().unwrap()))
            .collect();
        // c2 has no entry (a session stored before they were recorded): named by the tool.
        assert_eq!(
            cards,
            [("Read a", "read"), ("edit", "edit"), ("Mine a", "other")]
        );
        assert_eq!(statuses(&updates), ["failed", "completed", "completed"]);
    }

    fn statuses(updates: &[Value]) -> Vec<&str> {
        updates
            .iter()
            .filter(|u| u["sessionUpdate"] == "tool_call_update")
            .map(|u| u["status"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn an_id_used_again_in_a_later_turn_gets_its_own_record() {
        let turn = |error: bool, title: &str| {
            vec![
                custom(
                    "tool",
                    json!({"id": "call_1", "name": "write", "title": title, "kind": "edit",
                           "error?": error,
                           "diff": {"path": "/p/a", "old-text": null, "new-text": "x"}}),
                ),
                message(json!({"role": "assistant", "content": null,
                               "tool_calls": [call("call_1", "write")]})),
                message(json!({"role": "tool", "tool_call_id": "call_1", "content": "r"})),
            ]
        };
        let mut entries = turn(true, "Write first");
        entries.extend(turn(false, "Write second"));
        let updates = replay_updates(&entries);
        assert_eq!(statuses(&updates), ["failed", "completed"]);
        let titles: Vec<&str> = updates
            .iter()
            .filter(|u| u["sessionUpdate"] == "tool_call")
            .map(|u| u["title"].as_str().unwrap())
            .collect();
        assert_eq!(titles, ["Write first", "Write second"]);
        let last = updates.last().unwrap();
        assert_eq!(
            last["content"][1],
            json!({"type": "diff", "path": "/p/a", "oldText": null, "newText": "x"})
        );
    }

    /// A markdown command's expansion is not shown twice; rewound away before its expansion
    /// was recorded, it does not hide the next prompt's own text.
    #[test]
    fn a_rewound_command_does_not_hide_the_next_prompt() {
        let prompt = |text: &str| crate::session::history::prompt_entry(text);
        let rewind = crate::session::history::Rewind {
            prompt: 1,
            conversation: true,
            files: false,
        };
        let entries = vec![
            prompt("/greet Ada"),
            custom(
                "command",
                json!({"name": "greet", "input": "Ada", "expanded": true}),
            ),
            rewind.entry(),
            prompt("hello"),
            message(json!({"role": "user", "content": "hello"})),
        ];
        let shown: Vec<String> = replay_updates(&entries)
            .iter()
            .filter(|u| u["sessionUpdate"] == "user_message_chunk")
            .map(|u| u["content"]["text"].as_str().unwrap_or("").to_owned())
            .collect();
        assert_eq!(shown, ["hello"]);
    }

    #[test]
    fn thoughts_and_slash_commands_are_replayed() {
        let entries = vec![
            custom(
                "command",
                json!({"name": "model", "input": "x", "output": "Model set"}),
            ),
            message(json!({"role": "user", "content": "why"})),
            custom("thought", json!({"text": "let me think"})),
            message(json!({"role": "assistant", "content": "because"})),
        ];
        let kinds: Vec<(String, String)> = replay_updates(&entries)
            .iter()
            .map(|u| {
                (
                    u["sessionUpdate"].as_str().unwrap().to_owned(),
                    u["content"]["text"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect();
        let want = [
            ("user_message_chunk", "/model x"),
            ("agent_message_chunk", "Model set"),
            ("user_message_chunk", "why"),
            ("agent_thought_chunk", "let me think"),
            ("agent_message_chunk", "because"),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        assert_eq!(kinds, want);
    }
}
