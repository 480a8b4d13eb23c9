//! When an oml session ends, its delegated sub-agents and its tasks end with it: a hook on the
//! session registry calls the Lisp functions [`ON_CLOSE`] (`agent.close-delegates`, and
//! `agent.close-tasks` for its background commands and sub-agents, `agent.session-end-hooks` for
//! its SessionEnd hooks; looked up by name at that
//! moment) with the session's id, in a task of its own, so the front end that removed the session does
//! not wait for the agents' bounded shutdown. An agent still running when oml exits is killed
//! with its process group by `acp_client::process::kill_remaining_groups`.
//!
//! The delegation itself is Lisp (`delegate.fnl`) over the `client` namespace; this module knows
//! nothing of connections or of what a delegate is.

use std::sync::Arc;

use crate::cancel::CancelToken;
use crate::lisp::Lisp;
use crate::session::Sessions;

/// The Lisp functions called with the id of a session removed from the registry.
const ON_CLOSE: [&str; 3] = [
    "agent.close-delegates",
    "agent.close-tasks",
    "agent.session-end-hooks",
];

/// Registers the hook that closes a removed session's sub-agents.
pub(super) fn close_with_sessions(lisp: &Lisp, sessions: &Arc<Sessions>) {
    let lisp = lisp.clone();
    sessions.on_remove(Box::new(move |id: &str| {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let lisp = lisp.clone();
        let id = id.to_owned();
        handle.spawn(async move {
            for name in ON_CLOSE {
                let f = match lisp.function(name) {
                    Ok(Some(f)) => f,
                    Ok(None) => continue,
                    Err(e) => {
                        tracing::warn!("{name}: {e}");
                        continue;
                    }
                };
                if let Err(e) = lisp.run::<()>(f, id.clone(), &CancelToken::new()).await {
                    tracing::warn!("{name} on a closed session failed: {e}");
                }
            }
        });
    }));
}
