//! The lines of a session file as one tagged enum, [`Entry`]: the header, and every kind of entry
//! the agent records. The writer, the loader and the ACP replay all read and write these, never
//! `"type"` members by hand.
//!
//! The format is the one on disk since sessions were first stored, and must not change: the tag
//! is `"type"`, fields keep their order, and the writer adds `"at"` after them ([`Stamped`]). A
//! line of a type this oml does not know (a newer oml wrote it), or of a known type in a shape it
//! cannot read, is [`Entry::Unknown`]: kept in its place and ignored, never an error.
//!
//! It knows nothing of files, Lisp or ACP; what a message says is the model's format (OpenAI
//! messages as JSON values).

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// One line of a session file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Entry {
    /// The first line: `{"type":"session","id","cwd","created","version"}`.
    Session(Header),
    /// One OpenAI message (user, assistant, tool), as appended to the transcript.
    Message { message: Value },
    /// `session.set-transcript!` replaced the transcript (history is never rewritten; the model's
    /// view restarts from these messages). Anything but a list reads as no messages.
    Transcript {
        #[serde(default, deserialize_with = "lenient")]
        messages: Vec<Value>,
    },
    /// A session value changed (the model, the permission mode); null removes it.
    Data {
        key: String,
        #[serde(default)]
        value: Value,
    },
    /// Written from Lisp with `session.record!`: the loop's `tool` records (see
    /// [`Entry::tool_record`]), `compaction`, or anything an init file records.
    Custom {
        kind: String,
        #[serde(default)]
        data: Value,
    },
    /// A line this oml cannot read as any of the above. Never written.
    #[serde(other, skip_serializing)]
    Unknown,
}

/// The header of a session file. Its fields read leniently (a missing or odd one is its
/// default), so any line tagged `session` is a header, as it always was.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Header {
    #[serde(default, deserialize_with = "lenient")]
    pub id: String,
    /// The session's working directory, as written (lossily, for a path that is not UTF-8).
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub cwd: Option<String>,
    /// Seconds since the epoch.
    #[serde(default, deserialize_with = "lenient")]
    pub created: f64,
    /// The oml version that created the file.
    #[serde(default, deserialize_with = "lenient")]
    pub version: String,
    /// The session this one was forked from.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub parent: Option<String>,
    /// The parent's prompt the fork was made before (its history up to that prompt); `None`
    /// with a parent: the whole history.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub fork_prompt: Option<usize>,
    /// The title a listing shows instead of the first user message: a fork's, which would
    /// otherwise be its parent's.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub title: Option<String>,
}

/// What the loop records for each tool call (`{"type":"custom","kind":"tool","data":{…}}`), for
/// the replay's card and status. Fields read leniently, like the rest of the file.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct ToolRecord {
    #[serde(default, deserialize_with = "lenient")]
    pub id: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub name: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub title: Option<String>,
    /// The ACP tool kind the tool declared.
    #[serde(default, deserialize_with = "lenient")]
    pub kind: Option<String>,
    /// Whether the call failed.
    #[serde(rename = "error?", default, deserialize_with = "lenient")]
    pub error: bool,
    /// The change a write or edit made, `{path, old-text, new-text}`, when it was small enough to
    /// keep.
    #[serde(default)]
    pub diff: Option<Value>,
}

/// The custom entry `kind` that records a tool call.
pub const TOOL_KIND: &str = "tool";
/// The custom entry `kind` of the reasoning of a response whose message does not keep it
/// (`{text}`, `agent.fnl`).
pub const THOUGHT_KIND: &str = "thought";
/// The custom entry `kind` of a slash command run as a prompt (`{name, input, output,
/// expanded}`, `agent.fnl`).
pub const COMMAND_KIND: &str = "command";
/// The custom entry `kind` of a compaction (`{replaced, summary}`, `compact.fnl`).
pub const COMPACTION_KIND: &str = "compaction";
/// The custom entry `kind` a parent records for a sub-agent it ran (`{session, agent, call}`,
/// `task.fnl`).
pub const SUBAGENT_RUN_KIND: &str = "subagent";
/// The custom entry `kind` that names the model (and the currency of its price) the model
/// calls counted after it used (`{model, currency}`, `usage.fnl`), written when it changes.
pub const MODEL_CALL_KIND: &str = "model-call";
/// The custom entry `kind` written before a turn's messages when its tools returned images
/// (`{count}`, `agent.fnl`): the user message right after the tool results carries them.
pub const TOOL_IMAGES_KIND: &str = "tool-images";
/// The custom entry `kind` that keeps the error a prompt ended with (`{message}`; see
/// `crate::agent::Agent`).
pub const FAILURE_KIND: &str = "failure";
/// The custom entry `kind` recorded when a prompt's turn ended cancelled (`{}`; see
/// `crate::agent::Agent`).
pub const CANCEL_KIND: &str = "cancelled";

impl Entry {
    /// A line of a session file; `None` when it is not a JSON object (a torn line). Any object
    /// is an entry: [`Entry::Unknown`] when it is none this oml can read.
    pub fn parse(line: &[u8]) -> Option<Entry> {
        match serde_json::from_slice::<Entry>(line) {
            Ok(entry) => Some(entry),
            Err(_) => match serde_json::from_slice::<Value>(line) {
                Ok(Value::Object(_)) => Some(Entry::Unknown),
                _ => None,
            },
        }
    }

    /// The tool record of a `tool` custom entry.
    pub fn tool_record(&self) -> Option<ToolRecord> {
        match self {
            Entry::Custom { kind, data } if kind == TOOL_KIND => {
                Some(ToolRecord::deserialize(data).unwrap_or_default())
            }
            _ => None,
        }
    }

    /// The line as written: the entry, then `"at"` (seconds since the epoch), then `\n`, in a
    /// buffer of exactly its size (see [`crate::sized`]): the writer holds the line until its
    /// fsync.
    pub fn to_line(&self, at: f64) -> serde_json::Result<Vec<u8>> {
        let mut line = crate::sized::to_vec_exact(&Stamped { entry: self, at }, 1)?;
        line.push(b'\n');
        Ok(line)
    }
}

/// The line of a message entry for a message given as anything that serializes (a Lisp table
/// written directly, see `crate::lisp::encode`): the line [`Entry::to_line`] writes for an
/// [`Entry::Message`] holding the same message, with no JSON value made in between.
pub fn message_line<M: Serialize>(message: &M, at: f64) -> serde_json::Result<Vec<u8>> {
    /// `{"type":"message","message":…,"at":…}`.
    #[derive(Serialize)]
    struct MessageLine<'a, M> {
        #[serde(rename = "type")]
        kind: &'static str,
        message: &'a M,
        at: f64,
    }
    let stamped = MessageLine {
        kind: "message",
        message,
        at,
    };
    let mut line = crate::sized::to_vec_exact(&stamped, 1)?;
    line.push(b'\n');
    Ok(line)
}

/// An entry as the writer stores it: its fields, then the time it was recorded.
#[derive(Serialize)]
pub struct Stamped<'a> {
    #[serde(flatten)]
    pub entry: &'a Entry,
    pub at: f64,
}

/// A field that never fails its entry: a value of the wrong type reads as the default. For
/// `#[serde(default, deserialize_with = "lenient")]`; readers of stored messages use it too.
pub fn lenient<'de, D: Deserializer<'de>, T: Default + serde::de::DeserializeOwned>(
    d: D,
) -> Result<T, D::Error> {
    let value = Value::deserialize(d)?;
    Ok(T::deserialize(value).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The writer's bytes are those of the `json!` forms oml wrote before entries were typed,
    /// with `at` last.
    #[test]
    fn entries_are_written_as_they_always_were() {
        let message = json!({"role": "assistant", "content": "hi", "tool_calls": [{"id": "c1"}]});
        let cases = [
            (
                Entry::Message {
                    message: message.clone(),
                },
                json!({"type": "message", "message": message, "at": 1.5}),
            ),
            (
                Entry::Transcript {
                    messages: vec![json!({"role": "user", "content": "x"})],
                },
                json!({"type": "transcript", "messages": [{"role": "user", "content": "x"}], "at": 1.5}),
            ),
            (
                Entry::Data {
                    key: "model".into(),
                    value: Value::Null,
                },
                json!({"type": "data", "key": "model", "value": null, "at": 1.5}),
            ),
            (
                Entry::Custom {
                    kind: "tool".into(),
                    data: json!({"id": "c1", "error?": false}),
                },
                json!({"type": "custom", "kind": "tool", "data": {"id": "c1", "error?": false}, "at": 1.5}),
            ),
        ];
        for (entry, old) in cases {
            assert_eq!(
                entry.to_line(1.5).ok(),
                Some(format!("{old}\n").into_bytes())
            );
            assert_eq!(Entry::parse(old.to_string().as_bytes()), Some(entry));
        }
        let header = Entry::Session(Header {
            id: "s1".into(),
            cwd: Some("/p".into()),
            created: 1764576000.123,
            version: "0.1.0".into(),
            ..Header::default()
        });
        let old = json!({"type": "session", "id": "s1", "cwd": "/p", "created": 1764576000.123, "version": "0.1.0"});
        assert_eq!(serde_json::to_string(&header).ok(), Some(old.to_string()));
        // A message written straight from what serializes it is the same line.
        assert_eq!(
            message_line(&message, 1.5).ok(),
            Entry::Message { message }.to_line(1.5).ok()
        );
    }

    #[test]
    fn unknown_and_odd_lines_are_kept_as_unknown_and_torn_ones_dropped() {
        for line in [
            r#"{"type":"bookmark","at":1}"#,
            r#"{"no":"type"}"#,
            r#"{"type":"data","key":5,"value":1}"#,
            r#"{"type":"message"}"#,
        ] {
            assert_eq!(
                Entry::parse(line.as_bytes()),
                Some(Entry::Unknown),
                "{line}"
            );
        }
        assert_eq!(Entry::parse(br#"{"type":"message","mess"#), None);
        assert_eq!(Entry::parse(b"[1]"), None);
        let odd = Entry::parse(br#"{"type":"transcript","messages":5}"#);
        assert_eq!(odd, Some(Entry::Transcript { messages: vec![] }));
        let header = Entry::parse(br#"{"type":"session","id":"x","created":0}"#);
        let expected = Header {
            id: "x".into(),
            ..Header::default()
        };
        assert_eq!(header, Some(Entry::Session(expected)));
    }

    #[test]
    fn tool_records_read_leniently() {
        let entry = Entry::Custom {
            kind: "tool".into(),
            data: json!({"id": "c1", "name": "read", "title": 7, "error?": true}),
        };
        let record = entry.tool_record().expect("a tool record");
        assert_eq!(record.id.as_deref(), Some("c1"));
        assert_eq!(record.title, None);
        assert!(record.error);
        let other = Entry::Custom {
            kind: "compaction".into(),
            data: json!({}),
        };
        assert_eq!(other.tool_record(), None);
    }
}
