//! `session/prompt`: one turn per session at a time, the prompts sent meanwhile queued or
//! steered in their session's line (`super::queue`), run through the agent, answered after
//! every update of its turn, with the turn's stop reason and usage.
//!
//! It hands the prompt's content blocks to the loop as text and image parts
//! ([`super::content`]) and turns the loop's stop reasons into ACP's; it does not render updates
//! (see [`super::render`]).

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::config::{advertise_commands, config_update};
use super::content::{PromptContent, prompt_content};
use super::ctx::Ctx;
use super::ctx::update;
use super::queue::{Go, Held, Ticket};
use crate::acp::StopReason;
use crate::acp::params::PromptParams;
use crate::acp::updates::{self, SessionUpdate};
use crate::acp::v2::State;
use crate::agent::AgentError;
use crate::jsonrpc::{self, RequestId, RpcError};
use tokio::sync::oneshot;

/// A v2 prompt's handshake with the turn: the turn says it is taken, then waits for the go.
pub(super) struct Accepted {
    taken: oneshot::Sender<()>,
    go: oneshot::Receiver<()>,
}

/// Run the prompt once its turn in the session's line comes (`ticket`, taken as it was read);
/// with `accepted`, the turn says when it is taken (its turn come, the session ready) and waits
/// for the go before anything of it is sent: a v2 client is told the prompt and `running` in
/// between ([`prompt_v2`]). A steered prompt (see [`super::queue`]) whose text the running turn
/// took answers with that turn's answer. The session, held for the turn, is left in `keep`:
/// the caller finishes it ([`Held::finish`]) once it has answered, so that the next prompt in
/// line (and a steered prompt's answer) comes after this one's.
pub(super) async fn prompt(
    ctx: &Arc<Ctx>,
    key: &str,
    params: &PromptParams,
    ticket: Ticket,
    accepted: Option<Accepted>,
    keep: &Keep,
) -> Result<Value, RpcError> {
    let sid = params.session_id.0.as_str();
    let session = ctx
        .hub
        .get(sid)
        .ok_or_else(|| RpcError::invalid_params(format!("Unknown session: {sid}")))?;
    let images = ctx.lisp.setting::<bool>("llm.images?").unwrap_or(false);
    let PromptContent { text, images } = checked_content(&params.prompt.0, images)?;
    if ticket.waits() && steers(ctx, params, &text) {
        ctx.queues.steer(sid, key, user_message(&text, &images));
    }
    let held = match ticket.wait().await {
        Ok(held) => held,
        Err(Go::Answered(answer)) => {
            *keep.waited.lock() = Some(Waited::Steered);
            return answer;
        }
        Err(Go::Cancelled | Go::Run) => {
            *keep.waited.lock() = Some(Waited::Cancelled);
            let usage = usage_delta(&None, &None);
            return Ok(answer(StopReason::Cancelled, usage, None));
        }
    };
    // The session is this prompt's until `held` is finished; the token is the one armed when
    // its turn came, so a cancel sent meanwhile reached it.
    let turn = ctx.agent.begin(sid).map_err(|e| match e {
        AgentError::Busy(_) => {
            RpcError::invalid_params("A prompt is already running in this session")
        }
        other => RpcError::new(jsonrpc::INTERNAL_ERROR, other.to_string()),
    })?;
    // A prompt sent right after session/new waits for the session's setup to finish.
    let mut ready = session.ready.clone();
    let _ = ready.wait_for(|r| *r).await;
    if let Some(Accepted { taken, go }) = accepted {
        let _ = taken.send(());
        let _ = go.await;
    }
    let answer = run_turn(ctx, sid, turn, Some((&text, &images))).await;
    *keep.held.lock() = Some(held);
    answer
}

/// What [`prompt`] leaves its caller: the session it held, to finish once answered, or how it
/// ended without a turn of its own.
#[derive(Default)]
pub(super) struct Keep {
    held: parking_lot::Mutex<Option<Held>>,
    waited: parking_lot::Mutex<Option<Waited>>,
}

/// How a prompt that waited in line ended without a turn of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Waited {
    /// Steered: the turn it joined has answered.
    Steered,
    /// Cancelled before its turn came.
    Cancelled,
}

/// The prompt has been answered (`answer`): the next in line may go.
pub(super) fn finish(keep: &Keep, answer: &Result<Value, RpcError>) {
    if let Some(held) = keep.held.lock().take() {
        held.finish(answer);
    }
}

/// Whether the prompt `text` joins the running turn rather than waiting for its end:
/// `_meta.oml.steer`, else `agent.prompt-while-busy`; never a slash command, which is no text
/// for the model.
fn steers(ctx: &Ctx, params: &PromptParams, text: &str) -> bool {
    if text.trim_start().starts_with('/') {
        return false;
    }
    params.steer().unwrap_or_else(|| {
        ctx.lisp
            .setting::<String>("agent.prompt-while-busy")
            .is_ok_and(|v| v == "steer")
    })
}

/// The user message a steered prompt posts: its text, and its images as content parts.
fn user_message(text: &str, images: &[Value]) -> Value {
    if images.is_empty() {
        return json!({"role": "user", "content": text});
    }
    let mut parts = vec![json!({"type": "text", "text": text})];
    parts.extend(images.iter().cloned());
    json!({"role": "user", "content": parts})
}

/// Run the turn claimed by `turn` with the prompt `input` (its text and images), or with none
/// (`agent.resume`: a turn woken by what was posted to the session), and answer it after every
/// update it sent.
pub(super) async fn run_turn(
    ctx: &Arc<Ctx>,
    sid: &str,
    turn: crate::agent::Turn,
    input: Option<(&str, &[Value])>,
) -> Result<Value, RpcError> {
    let before = session_state(ctx, sid);
    if let Some((text, _)) = input
        && before.user_messages == 0
        && !text.starts_with('/')
    {
        announce_title(ctx, sid, text).await;
    }
    let result = match input {
        Some((text, images)) => {
            ctx.agent
                .run_with_parts(&turn, text, images, &ctx.shutdown)
                .await
        }
        None => ctx.agent.resume(&turn, &ctx.shutdown).await,
    };
    // The session is free again before the next in line is given it.
    drop(turn);
    ctx.hub.barrier(sid).await;
    let after = session_state(ctx, sid);
    let cancelled = after.cancelled || ctx.shutdown.is_cancelled();
    // The calls this turn made, also when it was cancelled before its end.
    let usage = usage_delta(&before.usage, &after.usage);
    match result {
        Ok(outcome) => {
            what_changed(ctx, sid, outcome.command.is_some(), &before, &after).await;
            let stop = if cancelled {
                StopReason::Cancelled
            } else {
                stop_reason(&outcome.stop_reason)
            };
            Ok(answer(stop, usage, outcome.unsaved.as_ref()))
        }
        Err(_) if cancelled => Ok(answer(StopReason::Cancelled, usage, None)),
        Err(e) => {
            // Clients show `data.details` (Toad shows nothing else).
            let category = if after.model_error { "model" } else { "lisp" };
            let message = e.to_string();
            Err(RpcError::new(jsonrpc::INTERNAL_ERROR, message.clone())
                .with_data(json!({"details": message, "category": category})))
        }
    }
}

/// What a turn changed besides its messages, told to the client: the commands after a slash
/// command (`command`), the mode, and the config options when the mode or model moved.
async fn what_changed(
    ctx: &Arc<Ctx>,
    sid: &str,
    command: bool,
    before: &SessionState,
    after: &SessionState,
) {
    if command {
        advertise_commands(ctx, sid).await;
    }
    if before.mode != after.mode {
        let mode = after.mode.clone().unwrap_or(Value::Null);
        let mode = SessionUpdate::CurrentModeUpdate {
            current_mode_id: &mode,
        };
        update(ctx, sid, mode.to_value()).await;
    }
    if before.mode != after.mode || before.model != after.model {
        config_update(ctx, sid).await;
    }
}

/// `session/prompt` from a v2 client: answered with the user message's id as soon as the prompt
/// is taken, then the message and `running` are reported; the turn's end is the `idle` state
/// update with its stop reason (`error` and the error when it failed), after all its updates.
pub(super) async fn prompt_v2(
    ctx: &Arc<Ctx>,
    id: &RequestId,
    params: &PromptParams,
    ticket: Ticket,
) {
    let sid = params.session_id.0.as_str();
    let (accepted, taken) = oneshot::channel();
    let (go_tx, go) = oneshot::channel();
    let handshake = Accepted {
        taken: accepted,
        go,
    };
    let key = id.to_string();
    let keep = Keep::default();
    let mut run = std::pin::pin!(prompt(ctx, &key, params, ticket, Some(handshake), &keep));
    let mut taken = std::pin::pin!(taken);
    let finished = tokio::select! {
        biased;
        t = &mut taken => if t.is_ok() { None } else { Some(run.as_mut().await) },
        r = run.as_mut() => Some(r),
    };
    let finished = match finished {
        Some(result) if taken.try_recv().is_err() => {
            // Never taken: steered into another turn (acknowledged with a message id of its
            // own), cancelled while it waited (the request cancelled), or refused (its error).
            let waited = *keep.waited.lock();
            let _ = match (result, waited) {
                (Ok(_), Some(Waited::Steered)) => {
                    let message_id = super::message_ids::user_message_id();
                    ctx.conn
                        .respond(id, updates::prompt_taken(&message_id))
                        .await
                }
                (Ok(_), Some(Waited::Cancelled)) => {
                    ctx.conn
                        .respond_error(id, RpcError::request_cancelled())
                        .await
                }
                (Ok(v), None) => ctx.conn.respond(id, v).await,
                (Err(e), _) => ctx.conn.respond_error(id, e).await,
            };
            return;
        }
        other => other,
    };
    let message_id = super::message_ids::user_message_id();
    let _ = ctx
        .conn
        .respond(id, updates::prompt_taken(&message_id))
        .await;
    let user = SessionUpdate::UserMessage {
        message_id: &message_id,
        content: &params.prompt.0,
    };
    update(ctx, sid, user.to_value()).await;
    update(ctx, sid, State::Running.update()).await;
    let _ = go_tx.send(());
    let result = match finished {
        Some(result) => result,
        None => run.await,
    };
    let idle = match &result {
        Ok(answer) => State::Idle(crate::acp::answers::stop_reason(answer)).update(),
        Err(e) => State::Failed(serde_json::to_value(e).unwrap_or_default()).update(),
    };
    ctx.hub.forget_asking(sid);
    update(ctx, sid, idle).await;
    finish(&keep, &result);
}

/// The prompt's answer: the stop reason, the turn's `usage` (see [`usage_delta`]) as ACP's and
/// in `_meta.oml.usage`, and what of the turn the disk refused, if anything.
fn answer(
    stop: StopReason,
    usage: Value,
    unsaved: Option<&crate::session::store::Unsaved>,
) -> Value {
    let acp = acp_usage(&usage);
    let mut meta = Map::new();
    meta.insert("usage".into(), usage);
    // The turn is not (all) on disk: the notice update said so, and this says so to the
    // program.
    if let Some(u) = unsaved {
        let unsaved = json!({"entries": u.entries, "bytes": u.bytes, "error": u.error});
        meta.insert("unsaved".into(), unsaved);
    }
    updates::prompt_answer(&stop, &acp, &Value::Object(meta))
}

/// What the loop gets of the prompt `blocks` (see [`prompt_content`]); an error when it is empty.
fn checked_content(blocks: &[Value], images: bool) -> Result<PromptContent, RpcError> {
    let content = prompt_content(blocks, images);
    if content.text.trim().is_empty() && content.images.is_empty() {
        return Err(RpcError::invalid_params(
            "the prompt has no text, image, resource link or embedded resource",
        ));
    }
    Ok(content)
}

/// The session's first prompt names it, as `session/list` and `oml sessions` do; sent before
/// the turn's updates, so that its last update stays its usage.
async fn announce_title(ctx: &Ctx, sid: &str, text: &str) {
    let title = crate::session::store::make_title(text);
    let now = crate::session::store::rfc3339(std::time::SystemTime::now());
    let info = SessionUpdate::SessionInfoUpdate {
        title: &title,
        updated_at: &now,
    };
    update(ctx, sid, info.to_value()).await;
}

/// ACP's stop reason for the loop's: a reason of the program's own ends the turn normally.
pub fn stop_reason(loop_reason: &str) -> StopReason {
    StopReason::from_loop(loop_reason).or_end_turn()
}

pub(super) struct SessionState {
    mode: Option<Value>,
    model: Option<Value>,
    usage: Option<Value>,
    cancelled: bool,
    /// User messages in the transcript.
    user_messages: usize,
    /// The last model call failed (`llm.chat` set `last-model-error`).
    model_error: bool,
}

pub(super) fn session_state(ctx: &Ctx, sid: &str) -> SessionState {
    ctx.agent
        .sessions()
        .with(sid, |s| SessionState {
            mode: s.data.get("permission-mode").cloned(),
            model: s.data.get("model").cloned(),
            usage: s.data.get("usage").cloned(),
            cancelled: s.cancel.is_cancelled(),
            user_messages: s
                .transcript
                .iter()
                .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
                .count(),
            model_error: s.data.contains_key("last-model-error"),
        })
        .unwrap_or(SessionState {
            mode: None,
            model: None,
            usage: None,
            cancelled: false,
            user_messages: 0,
            model_error: false,
        })
}

/// The prompt response's `usage` (ACP's `inputTokens`, `outputTokens`, `totalTokens`, which
/// agent-shell counts; unstable in the schema, ignored by clients that do not know it) from the
/// turn's [`usage_delta`].
pub(super) fn acp_usage(turn: &Value) -> Value {
    let n = |k: &str| turn.get(k).and_then(Value::as_u64).unwrap_or(0);
    let (input, output) = (n("prompt_tokens"), n("completion_tokens"));
    updates::usage(input, output)
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
    fn loop_stop_reasons_map_to_acp() {
        assert_eq!(stop_reason("end-turn"), "end_turn");
        assert_eq!(stop_reason("max-turns"), "max_turn_requests");
        assert_eq!(stop_reason("max-tokens"), "max_tokens");
        assert_eq!(stop_reason("cancelled"), "cancelled");
    }
}
