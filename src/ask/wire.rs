//! The messages between an asking process and a session owner: one JSON object per line over
//! the owner's Unix socket, parsed once into these types on each side.
//!
//! An asker sends one [`Request`] per connection (a prompt's connection then carries its
//! permission answers too) and reads [`Event`]s until the one that ends its request. Unknown
//! fields are ignored, so an owner and an asker of neighbouring versions still understand each
//! other; an unknown `op` gets a `failed` event.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::acp::{PermissionOption, StopReason};
use crate::acp_client::PermissionDecision;

/// The longest line either side reads; a longer one is an error, not a bigger buffer.
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// What an asker asks of an owner.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Request {
    /// Queue a prompt (ACP content blocks). With `wait`, the connection gets the prompt's
    /// events and answers its permission questions; without, only `queued`.
    Prompt {
        prompt: Value,
        #[serde(default)]
        wait: bool,
        policy: Policy,
        /// Seconds the owner stays after its last prompt.
        ttl: u64,
        #[serde(default)]
        config: Config,
    },
    /// The answer to the `permission` event `id`, on the prompt's connection.
    Answer { id: u64, decision: Decision },
    /// `session/cancel` for the running prompt; queued prompts stay queued.
    Cancel,
    /// How the owner is: a `status` event.
    Status,
    /// After the prompts queued before it: a new session replaces the kept one.
    NewSession,
    /// After the prompts queued before it: close the session, forget it, and end the owner.
    Close,
}

/// How the owner answers the agent's permission requests for one prompt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// Allow tool calls of kind `read` and `search`, reject the rest.
    ApproveReads,
    ApproveAll,
    DenyAll,
    /// Ask the prompt's connection (a `permission` event); with none left, reject.
    Ask,
}

/// A session's settings to apply before a prompt.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Config {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// `--set KEY=VALUE`: `session/set_config_option` each, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub set: Vec<(String, String)>,
}

/// A permission answer as the asker decided it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Decision {
    Allow,
    Reject,
    Cancel,
    /// One of the offered `optionId`s.
    Option(String),
}

impl From<Decision> for PermissionDecision {
    fn from(d: Decision) -> PermissionDecision {
        match d {
            Decision::Allow => PermissionDecision::Allow,
            Decision::Reject => PermissionDecision::Reject,
            Decision::Cancel => PermissionDecision::Cancel,
            Decision::Option(id) => PermissionDecision::Option(id),
        }
    }
}

impl From<PermissionDecision> for Decision {
    fn from(d: PermissionDecision) -> Decision {
        match d {
            PermissionDecision::Allow => Decision::Allow,
            PermissionDecision::Reject => Decision::Reject,
            PermissionDecision::Cancel => Decision::Cancel,
            PermissionDecision::Option(id) => Decision::Option(id),
        }
    }
}

/// What an owner tells an asker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Event {
    /// The prompt is queued; `ahead` prompts run before it (0: it is next).
    Queued { ahead: usize },
    /// The prompt went to the agent as turn `turn` of `session_id`.
    Started { session_id: String, turn: u64 },
    /// One `session/update`'s `update` object, as the agent sent it.
    Update { session_id: String, update: Value },
    /// The agent asks; answer with [`Request::Answer`] and this `id`.
    Permission {
        id: u64,
        session_id: String,
        tool_call: Value,
        options: Vec<PermissionOption>,
    },
    /// The turn ended: the stop reason as on the wire (`end_turn`, `cancelled`, …) and the
    /// agent's final message (its text after its last tool call).
    Done {
        stop_reason: StopReason,
        text: String,
    },
    /// The request failed; `category` is the ACP client's (`connection`, `agent`, …) or
    /// `owner`.
    Failed { category: String, message: String },
    /// The answer to `status`.
    Status(Status),
    /// The answer to `cancel`, `new-session` and `close`: what was done.
    Ack { what: String },
}

/// How an owner is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// `running` (a prompt is with the agent) or `idle`.
    pub state: String,
    pub owner_pid: u32,
    /// The agent's pid, when it is running.
    pub agent_pid: Option<i32>,
    pub uptime_secs: u64,
    pub session_id: Option<String>,
    /// The first line of the prompt running now, or else of the last one.
    pub last_prompt: Option<String>,
    pub queued: usize,
    /// Seconds until the owner ends if nothing comes (when idle).
    pub ends_in_secs: Option<u64>,
}

/// One line's bytes, without its newline (or `\r\n`); `None` at the end. A line longer than
/// `max` bytes is an error, not a bigger buffer.
pub async fn read_line_bytes(
    read: &mut (impl tokio::io::AsyncBufRead + Unpin),
    max: usize,
) -> std::io::Result<Option<Vec<u8>>> {
    use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _};
    let mut bytes = Vec::new();
    let n = read
        .take(max as u64 + 1)
        .read_until(b'\n', &mut bytes)
        .await?;
    if n == 0 {
        return Ok(None);
    }
    if bytes.last() != Some(&b'\n') && bytes.len() > max {
        return Err(std::io::Error::other(format!(
            "a line longer than {max} bytes"
        )));
    }
    while bytes.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        bytes.pop();
    }
    Ok(Some(bytes))
}

/// One line of JSON for the socket, newline included.
pub fn line<T: Serialize>(message: &T) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(message).unwrap_or_else(|e| {
        serde_json::to_vec(&Event::Failed {
            category: "owner".into(),
            message: format!("cannot encode a message: {e}"),
        })
        .unwrap_or_default()
    });
    bytes.push(b'\n');
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn requests_and_events_read_back_as_written() {
        let requests = [
            Request::Prompt {
                prompt: json!([{"type": "text", "text": "hi"}]),
                wait: true,
                policy: Policy::ApproveReads,
                ttl: 300,
                config: Config {
                    model: Some("m".into()),
                    mode: None,
                    set: vec![("k".into(), "v".into())],
                },
            },
            Request::Answer {
                id: 3,
                decision: Decision::Option("allow-1".into()),
            },
            Request::Cancel,
            Request::Close,
        ];
        for r in requests {
            let back: Request = serde_json::from_slice(&line(&r)).unwrap();
            assert_eq!(back, r);
        }
        let e: Event = serde_json::from_str(
            r#"{"event":"done","stop_reason":"end_turn","text":"x","later":1}"#,
        )
        .unwrap();
        assert_eq!(
            e,
            Event::Done {
                stop_reason: "end_turn".into(),
                text: "x".into()
            }
        );
        assert!(serde_json::from_str::<Request>(r#"{"op":"dance"}"#).is_err());
    }
}
