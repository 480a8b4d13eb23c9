//! A session's history read for rewinds and forks: its user prompts, the transcript as it was
//! before one of them, and the file changes made since.
//!
//! Pure: it reads the entries of a session file ([`Entry`]) and answers; it neither reads nor
//! writes files. The loop records a `prompt` entry as each user prompt starts ([`PROMPT_KIND`]),
//! the file tools a `checkpoint` entry per change ([`Checkpoint`]) and a rewind a `rewind` entry
//! ([`Rewind`]), after the `checkpoint` entries of the files it put back. A rewind of the
//! conversation drops the prompts from its point on: the next prompt takes the number of the
//! first one dropped, as in the transcript the model sees.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::checkpoint::Checkpoint;
use super::entry::{Entry, lenient};

/// The custom entry `kind` recorded as a user prompt starts.
pub const PROMPT_KIND: &str = "prompt";
/// The custom entry `kind` of a rewind.
pub const REWIND_KIND: &str = "rewind";
/// Characters of a prompt kept in its `prompt` entry, for the list `/rewind` shows.
pub const PROMPT_PREVIEW_CHARS: usize = 200;

/// The `prompt` entry of a prompt whose text is `text`.
pub fn prompt_entry(text: &str) -> Entry {
    let preview: String = text.chars().take(PROMPT_PREVIEW_CHARS).collect();
    Entry::Custom {
        kind: PROMPT_KIND.to_owned(),
        data: serde_json::json!({ "text": preview }),
    }
}

/// A rewind as the session file records it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rewind {
    /// The prompt rewound to (1-based): the state is that of just before it.
    pub prompt: usize,
    pub conversation: bool,
    pub files: bool,
}

impl Rewind {
    pub fn entry(&self) -> Entry {
        Entry::Custom {
            kind: REWIND_KIND.to_owned(),
            data: serde_json::to_value(self).unwrap_or(Value::Null),
        }
    }

    pub fn of(entry: &Entry) -> Option<Rewind> {
        match entry {
            Entry::Custom { kind, data } if kind == REWIND_KIND => Rewind::deserialize(data).ok(),
            _ => None,
        }
    }
}

/// One user prompt of the current history.
#[derive(Clone, Debug, PartialEq)]
pub struct Prompt {
    /// Where its `prompt` entry is among the entries.
    pub index: usize,
    /// The start of its text.
    pub text: String,
}

#[derive(Deserialize)]
struct PromptData {
    #[serde(default, deserialize_with = "lenient")]
    text: String,
}

/// The user prompts of the history as it stands: every `prompt` entry, less those a rewind of
/// the conversation dropped.
pub fn prompts(entries: &[Entry]) -> Vec<Prompt> {
    let mut out = Vec::new();
    for (index, e) in entries.iter().enumerate() {
        match e {
            Entry::Custom { kind, data } if kind == PROMPT_KIND => {
                let text = PromptData::deserialize(data)
                    .map(|d| d.text)
                    .unwrap_or_default();
                out.push(Prompt { index, text });
            }
            _ => {
                if let Some(r) = Rewind::of(e).filter(|r| r.conversation) {
                    out.truncate(r.prompt.saturating_sub(1));
                }
            }
        }
    }
    out
}

/// The transcript the entries before `end` make: messages appended, replaced by `transcript`
/// entries, as the loader reads a whole file.
pub fn transcript_until(entries: &[Entry], end: usize) -> Vec<Value> {
    let mut t = Vec::new();
    for e in &entries[..end.min(entries.len())] {
        match e {
            Entry::Message { message } => t.push(message.clone()),
            Entry::Transcript { messages } => t.clone_from(messages),
            _ => {}
        }
    }
    t
}

/// What the `data` entries before `end` leave under `key` (`Null` for nothing), in the history
/// as it stands: a rewind of the conversation takes the value back to what it was when the
/// prompt it went back to started.
pub fn data_until(entries: &[Entry], end: usize, key: &str) -> Value {
    let mut value = Value::Null;
    // The value as each prompt of the history as it stands started.
    let mut at_prompts: Vec<Value> = Vec::new();
    for e in &entries[..end.min(entries.len())] {
        match e {
            Entry::Data { key: k, value: v } if k == key => value = v.clone(),
            Entry::Custom { kind, .. } if kind == PROMPT_KIND => at_prompts.push(value.clone()),
            _ => {
                if let Some(r) = Rewind::of(e).filter(|r| r.conversation) {
                    let keep = r.prompt.saturating_sub(1);
                    if let Some(then) = at_prompts.get(keep) {
                        value = then.clone();
                    }
                    at_prompts.truncate(keep);
                }
            }
        }
    }
    value
}

/// What a rewind of the files does to one path: put back the content before the first change
/// made after the point, provided the file is still what the last change left.
#[derive(Clone, Debug, PartialEq)]
pub struct Restore {
    pub path: String,
    /// The digest of the content to put back; `None`: the file did not exist, remove it.
    pub content: Option<String>,
    /// Whether that content is in the store.
    pub kept: bool,
    /// The digest of what the last change left (`None`: it removed the file); the file as it
    /// is now must match, or someone else changed it since.
    pub expect: Option<String>,
}

/// The restores that take every file changed after entry `start` back to its content then, in
/// the order each path was first changed.
pub fn restores(entries: &[Entry], start: usize) -> Vec<Restore> {
    let mut order: Vec<String> = Vec::new();
    let mut by_path: HashMap<String, Restore> = HashMap::new();
    for e in entries.iter().skip(start) {
        let Some(c) = Checkpoint::of(e) else {
            continue;
        };
        match by_path.get_mut(&c.path) {
            Some(r) => r.expect = c.after,
            None => {
                order.push(c.path.clone());
                let restore = Restore {
                    path: c.path.clone(),
                    content: c.before,
                    kept: c.kept,
                    expect: c.after,
                };
                by_path.insert(c.path, restore);
            }
        }
    }
    order
        .into_iter()
        .filter_map(|p| by_path.remove(&p))
        // A file the changes left as it was needs nothing.
        .filter(|r| r.content != r.expect)
        .collect()
}

/// How many distinct files the prompt whose `prompt` entry is at `start` changed, among the
/// entries before `end`: its changes stop at the next `prompt` entry (one a rewind dropped
/// too), and what a rewind put back is no prompt's change. A rewind records its changes just
/// before its `rewind` entry, so the `checkpoint` entries right before one are its own.
pub fn files_changed(entries: &[Entry], start: usize, end: usize) -> usize {
    let end = end.min(entries.len());
    let after = entries.get(start + 1..end).unwrap_or_default();
    let own = after
        .iter()
        .position(|e| matches!(e, Entry::Custom { kind, .. } if kind == PROMPT_KIND))
        .map_or(after, |next| &after[..next]);
    let mut paths = std::collections::HashSet::new();
    let mut rewinds = false;
    for e in own.iter().rev() {
        match Checkpoint::of(e) {
            Some(_) if rewinds => {}
            Some(c) => {
                paths.insert(c.path);
            }
            None => rewinds = Rewind::of(e).is_some(),
        }
    }
    paths.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msg(role: &str, text: &str) -> Entry {
        Entry::Message {
            message: json!({"role": role, "content": text}),
        }
    }

    fn change(path: &str, before: Option<&str>, after: Option<&str>) -> Entry {
        Checkpoint {
            path: path.into(),
            before: before.map(str::to_owned),
            after: after.map(str::to_owned),
            kept: true,
        }
        .entry()
    }

    #[test]
    fn a_value_goes_back_with_the_conversation() {
        let plan = |v: &str| Entry::Data {
            key: "plan".into(),
            value: json!([v]),
        };
        let mut entries = vec![
            prompt_entry("one"),
            plan("a"),
            prompt_entry("two"),
            plan("b"),
            prompt_entry("three"),
        ];
        assert_eq!(data_until(&entries, 4, "plan"), json!(["b"]));
        assert_eq!(data_until(&entries, 2, "plan"), json!(["a"]));
        assert_eq!(data_until(&entries, 0, "plan"), Value::Null);
        // A session file from before rewinds recorded the plan: the rewind to prompt 2 takes
        // it back to "a" all the same.
        entries.push(
            Rewind {
                prompt: 2,
                conversation: true,
                files: false,
            }
            .entry(),
        );
        assert_eq!(data_until(&entries, entries.len(), "plan"), json!(["a"]));
    }

    #[test]
    fn what_a_rewind_put_back_is_counted_under_no_prompt() {
        let entries = vec![
            prompt_entry("one"),
            change("/a", Some("a0"), Some("a1")),
            prompt_entry("two"),
            msg("user", "two"),
            change("/b", None, Some("b1")),
            // `/rewind 2`: /b removed, then the rewind.
            change("/b", Some("b1"), None),
            Rewind {
                prompt: 2,
                conversation: true,
                files: true,
            }
            .entry(),
        ];
        let p = prompts(&entries);
        assert_eq!(p.len(), 1);
        assert_eq!(files_changed(&entries, p[0].index, entries.len()), 1);
        // `/rewind 1 files` from prompt 2 puts /a back too: prompt 2 still changed only /b.
        let mut entries = entries[..5].to_vec();
        entries.push(msg("assistant", "did two"));
        entries.push(change("/b", Some("b1"), None));
        entries.push(change("/a", Some("a1"), Some("a0")));
        entries.push(
            Rewind {
                prompt: 1,
                conversation: false,
                files: true,
            }
            .entry(),
        );
        let p = prompts(&entries);
        assert_eq!(files_changed(&entries, p[1].index, entries.len()), 1);
    }

    #[test]
    fn prompts_transcripts_and_restores_follow_the_history() {
        let mut entries = vec![
            prompt_entry("one"),
            msg("user", "one"),
            change("/a", None, Some("a1")),
            msg("assistant", "did one"),
            prompt_entry("two"),
            msg("user", "two"),
            change("/a", Some("a1"), Some("a2")),
            change("/b", Some("b0"), Some("b1")),
            change("/c", Some("c0"), Some("c1")),
            change("/c", Some("c1"), Some("c0")),
            msg("assistant", "did two"),
        ];
        let p = prompts(&entries);
        assert_eq!(
            p.iter().map(|p| p.text.as_str()).collect::<Vec<_>>(),
            ["one", "two"]
        );
        assert_eq!(transcript_until(&entries, p[1].index).len(), 2);
        let r = restores(&entries, p[1].index);
        // /c was changed and changed back: nothing to do.
        assert_eq!(
            r.iter()
                .map(|r| (r.path.as_str(), r.content.as_deref(), r.expect.as_deref()))
                .collect::<Vec<_>>(),
            [
                ("/a", Some("a1"), Some("a2")),
                ("/b", Some("b0"), Some("b1"))
            ]
        );
        let r = restores(&entries, p[0].index);
        assert_eq!(r[0].content, None);
        assert_eq!(files_changed(&entries, p[1].index, entries.len()), 3);
        // A rewind of the conversation to prompt 2 drops it; the next prompt is 2 again.
        entries.push(
            Rewind {
                prompt: 2,
                conversation: true,
                files: false,
            }
            .entry(),
        );
        entries.push(Entry::Transcript {
            messages: transcript_until(&entries, p[1].index),
        });
        entries.push(prompt_entry("two again"));
        let p = prompts(&entries);
        assert_eq!(p.len(), 2);
        assert_eq!(p[1].text, "two again");
        assert_eq!(transcript_until(&entries, p[1].index).len(), 2);
        // A files-only rewind keeps the prompts.
        entries.push(
            Rewind {
                prompt: 1,
                conversation: false,
                files: true,
            }
            .entry(),
        );
        assert_eq!(prompts(&entries).len(), 2);
        let long = "x".repeat(PROMPT_PREVIEW_CHARS + 50);
        let Entry::Custom { data, .. } = prompt_entry(&long) else {
            panic!("not custom")
        };
        assert_eq!(
            data["text"].as_str().map(str::len),
            Some(PROMPT_PREVIEW_CHARS)
        );
    }
}
