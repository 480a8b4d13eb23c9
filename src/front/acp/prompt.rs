//! `session/prompt`: one prompt per session at a time, run through the agent, answered after
//! every update of its turn, with the turn's stop reason and usage.
//!
//! It turns ACP content blocks into the loop's text and the loop's stop reasons into ACP's; it
//! does not render updates (see [`super::render`]).

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::Ctx;
use super::config::{advertise_commands, config_update};
use super::params::PromptParams;
use super::render::update;
use crate::agent::AgentError;
use crate::jsonrpc::{self, RpcError};

pub(super) async fn prompt(ctx: &Arc<Ctx>, params: &PromptParams) -> Result<Value, RpcError> {
    let sid = params.session_id.0.as_str();
    let session = ctx
        .hub
        .get(sid)
        .ok_or_else(|| RpcError::invalid_params(format!("Unknown session: {sid}")))?;
    // Claimed until this handler returns, so a second prompt is refused until this one has
    // answered; the token is the one armed when the line was read. A prompt refused below
    // releases the claim (and so the armed token) when `turn` drops, so a later cancel cannot
    // reach the next prompt.
    let turn = ctx.agent.begin(sid).map_err(|e| match e {
        AgentError::Busy(_) => {
            RpcError::invalid_params("A prompt is already running in this session")
        }
        other => RpcError::new(jsonrpc::INTERNAL_ERROR, other.to_string()),
    })?;
    let text = prompt_text(&params.prompt.0);
    if text.trim().is_empty() {
        return Err(RpcError::invalid_params(
            "the prompt has no text, resource link or embedded text resource",
        ));
    }
    // A prompt sent right after session/new waits for the session's setup to finish.
    let mut ready = session.ready.clone();
    let _ = ready.wait_for(|r| *r).await;

    let before = session_state(ctx, sid);
    let result = ctx.agent.run(&turn, &text, &ctx.shutdown).await;
    ctx.hub.barrier(sid).await;
    let after = session_state(ctx, sid);
    let cancelled = after.cancelled || ctx.shutdown.is_cancelled();
    match result {
        Ok(outcome) => {
            if outcome.command.is_some() {
                advertise_commands(ctx, sid).await;
            }
            if before.mode != after.mode {
                update(
                    ctx,
                    sid,
                    json!({"sessionUpdate": "current_mode_update", "currentModeId": after.mode}),
                )
                .await;
            }
            if before.mode != after.mode || before.model != after.model {
                config_update(ctx, sid).await;
            }
            let stop = if cancelled {
                "cancelled"
            } else {
                stop_reason(&outcome.stop_reason)
            };
            Ok(json!({
                "stopReason": stop,
                "_meta": {"oml": {"usage": usage_delta(&before.usage, &after.usage)}},
            }))
        }
        Err(_) if cancelled => Ok(json!({"stopReason": "cancelled"})),
        Err(e) => Err(RpcError::new(jsonrpc::INTERNAL_ERROR, e.to_string())),
    }
}

/// The prompt's content blocks as the text the loop gets: text as it is, a resource link as
/// `@uri`, an embedded text resource as its text (`@uri` without one); images and audio, which we
/// do not advertise, are left out. Pieces are joined with newlines.
pub fn prompt_text(blocks: &[Value]) -> String {
    let mut pieces = Vec::new();
    for block in blocks {
        let uri = |v: &Value| {
            v.get("uri")
                .and_then(Value::as_str)
                .map(|u| format!("@{u}"))
        };
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(t) = block.get("text").and_then(Value::as_str) {
                    pieces.push(t.to_owned());
                }
            }
            Some("resource_link") => pieces.extend(uri(block)),
            Some("resource") => {
                let res = block.get("resource").unwrap_or(&Value::Null);
                match res.get("text").and_then(Value::as_str) {
                    Some(t) => pieces.push(t.to_owned()),
                    None => pieces.extend(uri(res)),
                }
            }
            _ => {}
        }
    }
    pieces.join("\n")
}

/// ACP's stop reason for the loop's.
pub fn stop_reason(loop_reason: &str) -> &'static str {
    match loop_reason {
        "cancelled" => "cancelled",
        "max-turns" => "max_turn_requests",
        "max-tokens" => "max_tokens",
        "refusal" => "refusal",
        _ => "end_turn",
    }
}

pub(super) struct SessionState {
    mode: Option<Value>,
    model: Option<Value>,
    usage: Option<Value>,
    cancelled: bool,
}

pub(super) fn session_state(ctx: &Ctx, sid: &str) -> SessionState {
    ctx.agent
        .sessions()
        .with(sid, |s| SessionState {
            mode: s.data.get("permission-mode").cloned(),
            model: s.data.get("model").cloned(),
            usage: s.data.get("usage").cloned(),
            cancelled: s.cancel.is_cancelled(),
        })
        .unwrap_or(SessionState {
            mode: None,
            model: None,
            usage: None,
            cancelled: false,
        })
}

/// The turn's usage: the session totals after minus before.
pub(super) fn usage_delta(before: &Option<Value>, after: &Option<Value>) -> Value {
    let get = |v: &Option<Value>, k: &str| {
        v.as_ref()
            .and_then(|v| v.get(k))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    let mut out = Map::new();
    for k in ["calls", "prompt_tokens", "completion_tokens"] {
        out.insert(
            k.to_owned(),
            json!(get(after, k).saturating_sub(get(before, k))),
        );
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_blocks_flatten_to_text() {
        let blocks = vec![
            json!({"type": "text", "text": "look at"}),
            json!({"type": "resource_link", "uri": "file:///a.rs", "name": "a.rs"}),
            json!({"type": "resource", "resource": {"uri": "file:///b", "text": "B"}}),
            json!({"type": "resource", "resource": {"uri": "file:///c", "blob": "AA=="}}),
            json!({"type": "image", "data": "AA==", "mimeType": "image/png"}),
        ];
        assert_eq!(
            prompt_text(&blocks),
            "look at\n@file:///a.rs\nB\n@file:///c"
        );
    }

    #[test]
    fn loop_stop_reasons_map_to_acp() {
        assert_eq!(stop_reason("end-turn"), "end_turn");
        assert_eq!(stop_reason("max-turns"), "max_turn_requests");
        assert_eq!(stop_reason("max-tokens"), "max_tokens");
        assert_eq!(stop_reason("cancelled"), "cancelled");
    }
}
