//! `Turn`: one running prompt of a `Client`, consumed update batch by update batch until its stop
//! reason. Dropping an unfinished turn cancels it.

use std::sync::Arc;

use super::Client;
use super::router::{self, TurnEvent};

/// A running prompt. Dropping it before it is done sends `session/cancel` and stops waiting.
pub struct Turn {
    pub(super) shared: Arc<router::TurnShared>,
    pub(super) client: Client,
    pub(super) task: tokio::task::AbortHandle,
    pub(super) done: bool,
}

impl Turn {
    /// The turn's number in its session (1, 2, ...).
    pub fn number(&self) -> u64 {
        self.shared.number
    }

    /// The next batch of updates, or the stop reason once every update before the answer is
    /// out. After `Done`, later updates of this turn come out of the out-of-turn channel.
    pub async fn next(&mut self) -> TurnEvent {
        let event = self.shared.next().await;
        if matches!(event, TurnEvent::Done(_)) {
            self.done = true;
        }
        event
    }
}

impl Turn {
    /// The updates that have arrived since the last call, without waiting: what a permission
    /// handler's caller shows before the question, which came after them.
    pub fn arrived(&mut self) -> Vec<crate::acp_client::Update> {
        self.shared.arrived()
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.shared.finish();
        self.task.abort();
        let client = self.client.clone();
        let session_id = self.shared.session_id.clone();
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let _ = client.cancel(&session_id).await;
            });
        }
    }
}
