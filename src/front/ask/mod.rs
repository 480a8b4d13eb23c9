//! `oml ask`: one prompt to an external agent from the shell, through the persistent session's
//! owner (`ask`), or one-shot (`exec`); and the owner's management words (`status`, `cancel`,
//! `sessions …`). The command line is parsed by `cli`, which also resolves the agent's name
//! (that needs the Lisp image) and builds a `--policy` handler; this front end prints.
//!
//! Exit statuses ([`status`]): 0 `end_turn`, 1 the agent or its owner failed, 2 a usage error,
//! 3 `refusal`, 4 `max_turn_requests`, 5 `max_tokens`, 130 `cancelled`.

mod render;
mod sessions;

use crate::acp_client::{PermissionDecision, PermissionHandler, PermissionRequest};
use crate::ask::asker::{self, AskError, Conversation};
use crate::ask::wire::Event;
use crate::cancel::CancelToken;

pub use render::Output;
pub use sessions::{
    cancel, sessions_close, sessions_history, sessions_list, sessions_show, show_status,
};

/// `oml ask`'s exit statuses.
pub mod status {
    use crate::acp::StopReason;

    pub const END_TURN: i32 = 0;
    pub const FAILED: i32 = 1;
    pub const USAGE: i32 = 2;
    pub const REFUSED: i32 = 3;
    pub const MAX_TURN_REQUESTS: i32 = 4;
    pub const MAX_TOKENS: i32 = 5;
    pub const CANCELLED: i32 = 130;

    /// The status for a stop reason.
    pub fn of(stop_reason: &StopReason) -> i32 {
        match stop_reason {
            StopReason::EndTurn => END_TURN,
            StopReason::Refusal => REFUSED,
            StopReason::MaxTurnRequests => MAX_TURN_REQUESTS,
            StopReason::MaxTokens => MAX_TOKENS,
            StopReason::Cancelled => CANCELLED,
            StopReason::Other(_) => FAILED,
        }
    }
}

/// Reads a prompt's events to its end, printing them and answering its permission questions
/// with `decide` (asked only under the `ask` policy). Ctrl-C cancels the prompt (the owner sees
/// the connection close) and waits for its end. Returns the exit status.
pub async fn follow(
    mut conversation: Conversation,
    output: Output,
    decide: Option<PermissionHandler>,
) -> i32 {
    let mut render = render::Render::new(output);
    let mut session_id: Option<String> = None;
    let interrupted = CancelToken::new();
    let watcher = {
        let interrupted = interrupted.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                interrupted.cancel();
            }
        })
    };
    let mut cancel_sent = false;
    let code = loop {
        let event = tokio::select! {
            e = conversation.next() => e,
            () = interrupted.cancelled(), if !cancel_sent => {
                cancel_sent = true;
                // The owner cancels a prompt whose asker left; a local one is told.
                conversation.cancel();
                if matches!(conversation, Conversation::Socket { .. }) {
                    render.failed("cancelled", "interrupted: the prompt was cancelled", status::CANCELLED);
                    break status::CANCELLED;
                }
                continue;
            }
        };
        let event = match event {
            Ok(Some(e)) => e,
            Ok(None) => {
                render.failed(
                    "owner",
                    "the session's owner ended before the prompt did",
                    status::FAILED,
                );
                break status::FAILED;
            }
            Err(e) => {
                render.failed("owner", &e.to_string(), status::FAILED);
                break status::FAILED;
            }
        };
        if let Some(code) = on_event(
            event,
            &mut render,
            &mut conversation,
            decide.as_ref(),
            &mut session_id,
        )
        .await
        {
            break code;
        }
    };
    watcher.abort();
    code
}

/// One event of the prompt: shown, and a permission question answered; the exit status when
/// it ends the prompt.
async fn on_event(
    event: Event,
    render: &mut render::Render,
    conversation: &mut Conversation,
    decide: Option<&PermissionHandler>,
    session_id: &mut Option<String>,
) -> Option<i32> {
    match event {
        Event::Queued { .. } | Event::Ack { .. } | Event::Status(_) => None,
        Event::Started { session_id: id, .. } => {
            *session_id = Some(id);
            None
        }
        Event::Update { session_id, update } => {
            render.update(&session_id, &update);
            None
        }
        Event::Permission {
            id,
            session_id,
            tool_call,
            options,
        } => {
            let decision = asker::decide(decide, &session_id, &tool_call, &options).await;
            let answer = crate::acp_client::choose(&options, &decision.clone().into());
            render.permission(&session_id, &tool_call, &options, &answer);
            let answered = conversation.answer(id, decision).await;
            answered.err().map(|e| {
                render.failed("owner", &e.to_string(), status::FAILED);
                status::FAILED
            })
        }
        Event::Done { stop_reason, text } => {
            let code = status::of(&stop_reason);
            render.done(session_id.as_deref(), &stop_reason, &text, code);
            Some(code)
        }
        Event::Failed { category, message } => {
            render.failed(&category, &message, status::FAILED);
            Some(status::FAILED)
        }
    }
}

/// `--no-wait`: reads the `queued` event only.
pub async fn queued(mut conversation: Conversation, output: Output) -> i32 {
    let mut render = render::Render::new(output);
    match conversation.next().await {
        Ok(Some(Event::Queued { ahead })) => {
            render.queued(ahead);
            status::END_TURN
        }
        Ok(Some(Event::Failed { category, message })) => {
            render.failed(&category, &message, status::FAILED);
            status::FAILED
        }
        other => {
            let why = match other {
                Err(e) => e.to_string(),
                _ => "the owner did not queue the prompt".to_owned(),
            };
            render.failed("owner", &why, status::FAILED);
            status::FAILED
        }
    }
}

/// A failure before any event, reported the way `follow` reports one.
pub fn failed_to_ask(e: &AskError, output: Output) -> i32 {
    render::Render::new(output).failed("owner", &e.to_string(), status::FAILED);
    status::FAILED
}

/// The default policy on a terminal: reads and searches are allowed here, anything else is
/// asked on the terminal by `ask`.
pub fn reads_or(ask: PermissionHandler) -> PermissionHandler {
    std::sync::Arc::new(move |request: PermissionRequest| {
        let kind = crate::acp::answers::tool_kind(&request.tool_call);
        if kind.is_some_and(|k| crate::ask::worker::READ_KINDS.contains(&k)) {
            return Box::pin(async { Ok(PermissionDecision::Allow) });
        }
        ask(request)
    })
}
