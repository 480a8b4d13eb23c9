//! Turns nobody prompted, over v2: when something is posted to an idle session (a background
//! task's result, `session.post!`), the session wakes and runs a turn of its own with it.
//!
//! Each session of a v2 connection has a waker task ([`watch`]) waiting on its inbox's notify.
//! When it fires, the turn takes the session's line like a prompt ([`super::queue::Queues::wake`]:
//! only when nothing holds or waits for it), so a cancel reaches it and a prompt sent meanwhile
//! waits behind it. The client sees `running`, the turn's updates (the posted message first, as
//! a user message, which `agent.take-posted!` emits) and `idle` with the stop reason. A v1
//! client gets no waker: an agent cannot start a turn there, so what was posted waits for the
//! next prompt. It knows neither who posted nor what.

use std::sync::Arc;

use super::ctx::{Ctx, update};
use super::prompt::run_turn;
use super::queue::Held;
use crate::acp::v2::State;

/// Wake session `sid` whenever something is posted to it and it is idle, until the task is
/// aborted (the session closed) or the session is gone.
pub(super) async fn watch(ctx: Arc<Ctx>, sid: String) {
    let Some(notify) = ctx.agent.sessions().posted_notify(&sid) else {
        return;
    };
    // The posts counted when a woken turn ended without taking what waits (it failed, or was
    // cancelled first): no new turn for those until something new is posted.
    let mut left = 0;
    loop {
        notify.notified().await;
        if ctx.hub.get(&sid).is_none() || ctx.shutdown.is_cancelled() {
            return;
        }
        if posts(&ctx, &sid).is_some_and(|(n, _)| n <= left) {
            continue;
        }
        if let Some(held) = ctx.queues.wake(&sid) {
            let before = posts(&ctx, &sid).map_or(0, |(n, _)| n);
            woken_turn(&ctx, &sid, held).await;
            // Still waiting and nothing new: the turn took none of it.
            if posts(&ctx, &sid) == Some((before, true)) {
                left = before;
            }
        }
    }
}

/// How many messages were ever posted to `sid`, and whether some still wait.
fn posts(ctx: &Ctx, sid: &str) -> Option<(u64, bool)> {
    ctx.agent
        .sessions()
        .with(sid, |s| (s.inbox.posts(), !s.inbox.is_empty()))
}

/// Run the turn that what was posted to `sid` woke, in the session `held` for it: `running`,
/// its updates, then `idle` with its stop reason (or the error it failed with).
async fn woken_turn(ctx: &Arc<Ctx>, sid: &str, held: Held) {
    let Some(session) = ctx.hub.get(sid) else {
        return;
    };
    let mut ready = session.ready.clone();
    let _ = ready.wait_for(|r| *r).await;
    let Ok(turn) = ctx.agent.begin(sid) else {
        return;
    };
    update(ctx, sid, State::Running.update()).await;
    let result = run_turn(ctx, sid, turn, None).await;
    let idle = match &result {
        Ok(answer) => State::Idle(crate::acp::answers::stop_reason(answer)).update(),
        Err(e) => State::Failed(serde_json::to_value(e).unwrap_or_default()).update(),
    };
    ctx.hub.forget_asking(sid);
    update(ctx, sid, idle).await;
    held.finish(&result);
}
