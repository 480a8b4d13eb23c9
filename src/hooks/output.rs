//! What a hook may answer on stdout (or in an HTTP hook's body): Claude Code's JSON output,
//! parsed once into [`HookOutput`]. Output that is not a JSON object is plain text, which
//! `UserPromptSubmit` and `SessionStart` hooks add as context.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A hook's JSON answer. Every field is optional; unknown ones are ignored.
#[derive(Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HookOutput {
    /// `false` stops the agent after this hook, with `stop_reason` shown to the user.
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    pub keep_going: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// A message shown to the user.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_message: Option<String>,
    /// Keep the hook's stdout out of the transcript view.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suppress_output: Option<bool>,
    /// `"block"` (for `Stop`, `UserPromptSubmit`, `PostToolUse`); `"approve"` is the old
    /// spelling of a pre-tool allow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hook_specific_output: Option<Specific>,
}

/// The top-level `decision`.
#[derive(Debug, Deserialize, Serialize, PartialEq, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Block,
    Approve,
}

/// `hookSpecificOutput`: what only some events read.
#[derive(Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Specific {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hook_event_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permission_decision: Option<PermissionDecision>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permission_decision_reason: Option<String>,
    /// The tool's arguments replaced (`PreToolUse`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_input: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_context: Option<String>,
    /// `PermissionRequest`'s answer: `{"behavior": "allow"|"deny", "message"?, "updatedInput"?}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<Value>,
}

/// `permissionDecision` of a `PreToolUse` hook.
#[derive(Debug, Deserialize, Serialize, PartialEq, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub enum PermissionDecision {
    Allow,
    Deny,
    Ask,
    Defer,
}

/// How a hook's stdout reads: its JSON answer, plain text, or JSON that does not fit.
#[derive(Debug, PartialEq)]
pub enum Parsed {
    Json(Box<HookOutput>),
    Text,
    /// It looks like a JSON object but is not one oml can read: why.
    Invalid(String),
}

/// Parse `stdout`: a JSON object (after whitespace) is the hook's answer; anything else is
/// text.
pub fn parse(stdout: &str) -> Parsed {
    let trimmed = stdout.trim();
    if !trimmed.starts_with('{') {
        return Parsed::Text;
    }
    match serde_json::from_str::<HookOutput>(trimmed) {
        Ok(out) => Parsed::Json(Box::new(out)),
        Err(e) => Parsed::Invalid(format!("its JSON output cannot be read: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_codes_answer_is_read_field_by_field() {
        let out = r#"{"continue": true, "systemMessage": "hi", "hookSpecificOutput": {
            "hookEventName": "PreToolUse", "permissionDecision": "deny",
            "permissionDecisionReason": "no", "updatedInput": {"command": "ls"},
            "additionalContext": "ctx"}, "extra": 1}"#;
        let Parsed::Json(out) = parse(out) else {
            panic!("not JSON")
        };
        let s = out.hook_specific_output.as_ref().unwrap();
        assert_eq!(s.permission_decision, Some(PermissionDecision::Deny));
        assert_eq!(s.updated_input, Some(serde_json::json!({"command": "ls"})));
        assert_eq!(out.system_message.as_deref(), Some("hi"));
        assert_eq!(parse("plain text\n"), Parsed::Text);
        assert!(matches!(
            parse(r#"{"decision": "maybe"}"#),
            Parsed::Invalid(_)
        ));
    }
}
