//! ACP's `messageId` (stabilized in 2026) on `agent_message_chunk`, `agent_thought_chunk` and
//! `user_message_chunk`: the chunks of one message share an opaque id, so a client can tell two
//! messages in a row apart and merge a message's chunks. A thought has an id of its own, apart
//! from the text it precedes.
//!
//! Live, a message runs while its kind of delta keeps coming: any other event ends it (a tool
//! call, the usage, a plan), and a notice is a message of its own; a barrier ends it too (the end
//! of a turn, a cancelled one included, so the next turn's answer is a new message). Ids are the forwarder's
//! start time and a counter, so a session reopened by another process does not reuse them. A
//! replay numbers its runs of chunks of one kind (`h1`, `h2`, …). This module knows the update
//! shapes, not how they are rendered.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use serde_json::Value;

use crate::acp::answers::{UpdateKind, has_message_id};
use crate::agent::AgentEvent;

/// A fresh id for a user message a v2 prompt inserts: unique in the process and across
/// processes that start in different milliseconds.
pub(super) fn user_message_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let start = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let n = NEXT.fetch_add(1, Ordering::Relaxed) + 1;
    format!("u{start:x}-{n}")
}

/// The ids of one session's live messages.
pub(super) struct MessageIds {
    prefix: String,
    next: AtomicU64,
    text: Mutex<Option<String>>,
    thought: Mutex<Option<String>>,
}

impl MessageIds {
    pub(super) fn new() -> MessageIds {
        let start = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        MessageIds {
            prefix: format!("m{start:x}"),
            next: AtomicU64::new(0),
            text: Mutex::new(None),
            thought: Mutex::new(None),
        }
    }

    fn fresh(&self) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        format!("{}-{n}", self.prefix)
    }

    /// The id the chunk `event` renders to carries (a new message or the running one), or
    /// `None` for an event that is no chunk, which ends the running messages.
    pub(super) fn for_event(&self, event: &AgentEvent) -> Option<String> {
        let (mine, other) = match event {
            AgentEvent::TextDelta { .. } => (&self.text, &self.thought),
            AgentEvent::ThoughtDelta { .. } => (&self.thought, &self.text),
            AgentEvent::Notice { .. } => {
                *self.text.lock() = None;
                *self.thought.lock() = None;
                return Some(self.fresh());
            }
            _ => {
                *self.text.lock() = None;
                *self.thought.lock() = None;
                return None;
            }
        };
        *other.lock() = None;
        let mut mine = mine.lock();
        Some(mine.get_or_insert_with(|| self.fresh()).clone())
    }

    /// Ends the running messages: what comes next is a new message. Called at each barrier
    /// (the end of a turn, a cancelled one too, or an update sent apart from the loop's events).
    pub(super) fn end(&self) {
        *self.text.lock() = None;
        *self.thought.lock() = None;
    }

    /// Puts `id` (or a fresh one) on a rendered chunk that has none; other updates are left.
    pub(super) fn stamp(&self, update: &mut Value, id: Option<String>) {
        if is_chunk(update)
            && !has_message_id(update)
            && let Some(update) = update.as_object_mut()
        {
            let id = id.unwrap_or_else(|| self.fresh());
            update.insert("messageId".into(), id.into());
        }
    }
}

fn is_chunk(update: &Value) -> bool {
    UpdateKind::of(update).is_chunk()
}

/// Numbers a replay's messages: each run of chunks of one kind is one message.
pub(super) fn number_replay(updates: &mut [Value]) {
    let mut n = 0;
    let mut last: Option<UpdateKind> = None;
    for u in updates.iter_mut() {
        if !is_chunk(u) {
            last = None;
            continue;
        }
        let kind = UpdateKind::of(u);
        if last.as_ref() != Some(&kind) {
            n += 1;
            last = Some(kind);
        }
        if !has_message_id(u)
            && let Some(u) = u.as_object_mut()
        {
            u.insert("messageId".into(), format!("h{n}").into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text() -> AgentEvent {
        AgentEvent::TextDelta { text: "a".into() }
    }
    fn thought() -> AgentEvent {
        AgentEvent::ThoughtDelta { text: "t".into() }
    }

    #[test]
    fn a_message_runs_while_its_deltas_come_and_a_thought_has_its_own_id() {
        let ids = MessageIds::new();
        let t1 = ids.for_event(&thought());
        let a1 = ids.for_event(&text());
        let a2 = ids.for_event(&text());
        assert_eq!(a1, a2);
        assert_ne!(t1, a1);
        assert_eq!(
            ids.for_event(&AgentEvent::Plan {
                entries: serde_json::json!([])
            }),
            None
        );
        let a3 = ids.for_event(&text());
        assert_ne!(a3, a1, "a new message after another event");
        let n = ids.for_event(&AgentEvent::Notice {
            text: "retrying".into(),
        });
        assert_ne!(n, a3);
        assert_ne!(ids.for_event(&text()), n);
    }

    #[test]
    fn a_replay_numbers_its_runs_of_one_kind() {
        let mut out = vec![
            json!({"sessionUpdate": "user_message_chunk"}),
            json!({"sessionUpdate": "user_message_chunk"}),
            json!({"sessionUpdate": "agent_thought_chunk"}),
            json!({"sessionUpdate": "agent_message_chunk"}),
            json!({"sessionUpdate": "tool_call"}),
            json!({"sessionUpdate": "agent_message_chunk"}),
        ];
        number_replay(&mut out);
        let ids: Vec<&str> = out
            .iter()
            .map(|u| u["messageId"].as_str().unwrap_or("-"))
            .collect();
        assert_eq!(ids, ["h1", "h1", "h2", "h3", "-", "h4"]);
    }
}
