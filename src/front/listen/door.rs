//! The door of `oml acp --listen`: TCP connections that have not yet shown the token. Anyone who
//! can reach the port may open one, so they are bounded apart from the rest: each for
//! [`UNAUTHENTICATED_TIMEOUT`] from its opening at most, and at most
//! [`MAX_UNAUTHENTICATED_CONNECTIONS`] at once, a new one past that ending the oldest. An HTTP/2
//! client that answers pings without ever sending a request with the token would otherwise hold
//! its slot for good. A connection leaves the door for good with its first request that carries
//! the token. This module knows connections' standing, not HTTP.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use crate::cancel::CancelToken;

/// How long a connection may stay open without a request that carries the token.
pub const UNAUTHENTICATED_TIMEOUT: Duration = Duration::from_secs(10);

/// The most connections without the token open at once; the next one ends the oldest.
pub const MAX_UNAUTHENTICATED_CONNECTIONS: usize = 64;

/// One connection's standing: at the door until it shows the token.
#[derive(Debug)]
pub(in crate::front) struct Standing {
    opened: Instant,
    authenticated: CancelToken,
    evicted: CancelToken,
    closed: AtomicBool,
}

impl Standing {
    /// The connection showed the token: neither the timeout nor the cap reaches it any more.
    pub(in crate::front) fn authenticate(&self) {
        self.authenticated.cancel();
    }

    /// Resolves when the connection must end for want of the token (its time is up, or newer
    /// ones pushed it out); never, once it has shown it.
    pub(super) async fn expired(&self) {
        tokio::select! {
            () = self.authenticated.cancelled() => {}
            () = self.evicted.cancelled() => {}
            () = tokio::time::sleep_until(self.opened + UNAUTHENTICATED_TIMEOUT) => {}
        }
        if self.authenticated.is_cancelled() {
            std::future::pending::<()>().await;
        }
    }

    /// The connection has ended.
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }

    fn waiting(&self) -> bool {
        !self.authenticated.is_cancelled()
            && !self.evicted.is_cancelled()
            && !self.closed.load(Ordering::SeqCst)
    }
}

/// The connections at the door, oldest first.
#[derive(Default)]
pub(super) struct Door {
    waiting: Mutex<VecDeque<Arc<Standing>>>,
}

impl Door {
    /// A connection just accepted: at the door, ending the oldest one there when it is full.
    pub(super) fn admit(&self) -> Arc<Standing> {
        let standing = Arc::new(Standing {
            opened: Instant::now(),
            authenticated: CancelToken::new(),
            evicted: CancelToken::new(),
            closed: AtomicBool::new(false),
        });
        let mut waiting = self.waiting.lock();
        waiting.retain(|s| s.waiting());
        waiting.push_back(Arc::clone(&standing));
        while waiting.len() > MAX_UNAUTHENTICATED_CONNECTIONS {
            if let Some(oldest) = waiting.pop_front() {
                tracing::debug!("the door is full: ending a connection without the token");
                oldest.evicted.cancel();
            }
        }
        standing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_oldest_waiting_connection_goes_first_and_a_shown_token_leaves_the_door() {
        let door = Door::default();
        let first = door.admit();
        let shown = door.admit();
        shown.authenticate();
        let rest: Vec<_> = (1..MAX_UNAUTHENTICATED_CONNECTIONS)
            .map(|_| door.admit())
            .collect();
        assert!(!first.evicted.is_cancelled(), "the door is not full yet");
        let last = door.admit();
        assert!(first.evicted.is_cancelled(), "the oldest went");
        first.expired().await;
        assert!(!rest[0].evicted.is_cancelled() && !last.evicted.is_cancelled());
        assert!(!shown.evicted.is_cancelled());
        let never = tokio::time::timeout(Duration::from_millis(50), shown.expired()).await;
        assert!(
            never.is_err(),
            "a connection that showed the token does not expire"
        );
    }
}
