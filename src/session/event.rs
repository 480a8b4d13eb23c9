//! The closed set of events one session's loop reports to its front end, in order.
//!
//! Lisp emits them as tables with a `:type` through `session.emit!`; the front ends (ACP, print
//! mode) render them. This module knows nothing of how they are rendered.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What the loop reports to the frontend, in order. Lisp emits these as tables with a `:type`
/// (`{:type :text-delta :text "…"}`) through `session.emit!`; an unknown type is an error there.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum AgentEvent {
    /// A piece of the answer's text (also what `session.say` and commands show).
    TextDelta { text: String },
    /// A piece of the model's reasoning.
    ThoughtDelta { text: String },
    /// A tool call is about to run (the ACP tool card).
    ToolStart {
        id: String,
        name: String,
        #[serde(default)]
        args: Value,
        #[serde(default = "other_kind")]
        kind: String,
        #[serde(default)]
        title: String,
        /// `[{path}]` for tools that touch a file.
        #[serde(default)]
        locations: Value,
        /// The status the card starts with when it is not in progress (`pending` for a call the
        /// permission policy may ask about, `agent.tool-card-status`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<String>,
    },
    /// A tool call finished.
    ToolEnd {
        id: String,
        #[serde(default)]
        content: String,
        #[serde(rename = "error?", default)]
        is_error: bool,
        /// `{path, old-text, new-text}` for `write` and `edit`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        diff: Option<Value>,
        /// How a command ended (`bash`): `{code}`, `{signal}`, `{timed-out}` or `{cancelled}`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit: Option<Value>,
        /// The ACP client's terminal the command ran in (`acp.terminal-bash`), which the card
        /// keeps showing.
        #[serde(
            rename = "terminal-id",
            default,
            skip_serializing_if = "Option::is_none"
        )]
        terminal_id: Option<String>,
        /// What the card carries in ACP's `_meta` (a `task` card: the sub-agent's session,
        /// `{oml: {subagent: {sessionId, parentSessionId, agent}}}`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        meta: Option<Value>,
    },
    /// A piece of the output of the tool call that is running (what `bash` writes as it
    /// writes it), for a live view; the result in `ToolEnd` is what counts. With `replace`, the
    /// text is the whole live view so far (what `delegate` shows of its sub-agent), not a piece.
    ToolOutput {
        id: String,
        text: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        replace: bool,
    },
    /// The token usage one model call reported.
    Usage { usage: Value },
    /// The model's plan changed (`update_plan`): the whole list, as ACP PlanEntry objects
    /// `{content, priority, status}`.
    Plan { entries: Value },
    /// A message that joined the running turn from the session's inbox (`agent.take-posted!`:
    /// a steered prompt, a background task's result), shown as the user's when `role` is
    /// `user`.
    UserMessage {
        #[serde(default = "user_role")]
        role: String,
        text: String,
    },
    /// A one-line notice about the turn that is not the model's text, such as a model request
    /// being retried ("model request failed (HTTP 429), retrying in 4 s").
    Notice { text: String },
}

fn user_role() -> String {
    "user".to_owned()
}

fn other_kind() -> String {
    "other".to_owned()
}
