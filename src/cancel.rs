//! The cancellation token shared by everything one prompt starts: the model stream, the loop,
//! `bash`, and requests to the client.
//!
//! It is a thin wrapper over `tokio_util`'s `CancellationToken` so that the rest of the crate
//! names one type and one vocabulary (`cancel`, `is_cancelled`, `cancelled().await`). Cancelling
//! is idempotent; children are cancelled with their parent. This module knows nothing about what
//! is being cancelled.

use tokio_util::sync::CancellationToken;

/// A cheap, cloneable handle; all clones observe the same cancellation.
#[derive(Clone, Debug, Default)]
pub struct CancelToken(CancellationToken);

impl CancelToken {
    /// A fresh token that is not cancelled.
    pub fn new() -> Self {
        Self(CancellationToken::new())
    }

    /// A token cancelled together with `self` (but not the other way round).
    pub fn child(&self) -> Self {
        Self(self.0.child_token())
    }

    /// Cancel this token and its children. Calling it again does nothing.
    pub fn cancel(&self) {
        self.0.cancel();
    }

    /// Whether `cancel` has been called on this token or a parent.
    pub fn is_cancelled(&self) -> bool {
        self.0.is_cancelled()
    }

    /// Resolves once the token is cancelled; immediately if it already is.
    pub async fn cancelled(&self) {
        self.0.cancelled().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn cancelling_a_parent_cancels_its_children_and_is_idempotent() {
        let parent = CancelToken::new();
        let child = parent.child();
        assert!(!child.is_cancelled());
        parent.cancel();
        parent.cancel();
        child.cancelled().await;
        assert!(child.is_cancelled());
    }

    #[test]
    fn cancelling_a_child_leaves_the_parent_alone() {
        let parent = CancelToken::new();
        parent.child().cancel();
        assert!(!parent.is_cancelled());
    }
}
