//! ACP's v2 draft (2026-07-15) beside v1 on the same agent: which version a connection speaks
//! and the v2 `initialize` answer; the encoder is `acp::v2::encode`, the mapping the client
//! decodes with.
//!
//! One internal event model, two encoders: the loop's events are rendered once, by
//! `acp.render-event` (so a user's redefinition or advice shows in both versions), into v1
//! payloads; on a v2 connection each payload is re-encoded here on its way out. A client asking
//! for version 2 gets it when `acp.protocol-versions` holds 2 (default `[1]`: the draft may
//! still change); its `initialize` waits for the image, which holds that setting, while a v1
//! client's is answered before the image is built, as always.
//!
//! The v2 lifecycle: `session/prompt` answers as soon as the prompt is accepted, with its
//! message id; the turn's end is a `state_update` (`idle` with the stop reason), after every
//! update of the turn; a permission question or elicitation is framed by `requires_action` and
//! `running`. `session/resume` replays the history when asked to (`replayFrom`) and reports the
//! state before it answers. There is no `session/load`, no modes and no client file system or
//! terminal in v2: a v2 client's capabilities have neither, so the tools use the disk and oml's
//! own sandboxed `bash`.
//!
//! It knows the versions' shapes, not sessions or the loop.

use serde_json::Value;

pub(crate) use crate::acp::v2::encode;

/// The versions of ACP a connection may speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Dialect {
    #[default]
    V1,
    V2,
}

/// The setting that lists the versions offered (1 is always spoken).
pub(crate) const VERSIONS_SETTING: &str = "acp.protocol-versions";

/// The version to answer a client asking for `asked` when we offer `offered`: the highest we
/// offer at or below it, else 1 (a client asking for 0 still gets our oldest).
pub(crate) fn negotiate(asked: u64, offered: &[u64]) -> Dialect {
    if asked >= 2 && offered.contains(&2) {
        Dialect::V2
    } else {
        Dialect::V1
    }
}

/// Whether a v2 `session/resume` replays the history: with `replayFrom: {type: start}`; absent
/// or null, no replay; another cursor is refused (`-32602`), as the draft says. A v1 client's
/// resume never replays.
pub(crate) fn replay(
    dialect: Dialect,
    from: Option<&Value>,
) -> Result<bool, crate::jsonrpc::RpcError> {
    match (dialect, from) {
        (Dialect::V1, _) | (_, None | Some(Value::Null)) => Ok(false),
        (Dialect::V2, Some(cursor)) if crate::acp::v2::from_start(cursor) => Ok(true),
        (Dialect::V2, Some(cursor)) => Err(crate::jsonrpc::RpcError::invalid_params(format!(
            "replayFrom {cursor} is not a cursor this agent knows (only {{\"type\": \"start\"}})"
        ))),
    }
}

/// The `initialize` answer to a v2 client.
pub(crate) fn initialize_answer() -> Value {
    crate::acp::v2::initialize_answer(super::early::agent_info())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn version_two_only_when_asked_and_offered() {
        assert_eq!(negotiate(2, &[1, 2]), Dialect::V2);
        assert_eq!(negotiate(3, &[1, 2]), Dialect::V2);
        assert_eq!(negotiate(2, &[1]), Dialect::V1);
        assert_eq!(negotiate(1, &[1, 2]), Dialect::V1);
        assert_eq!(negotiate(0, &[1, 2]), Dialect::V1);
    }

    #[test]
    fn only_the_start_cursor_replays() {
        let start = json!({"type": "start"});
        assert_eq!(replay(Dialect::V2, Some(&start)).ok(), Some(true));
        assert_eq!(replay(Dialect::V2, None).ok(), Some(false));
        assert_eq!(replay(Dialect::V2, Some(&Value::Null)).ok(), Some(false));
        assert_eq!(replay(Dialect::V1, Some(&start)).ok(), Some(false));
        let other = json!({"type": "message", "messageId": "m"});
        assert_eq!(
            replay(Dialect::V2, Some(&other)).map_err(|e| e.code),
            Err(-32602)
        );
    }
}
