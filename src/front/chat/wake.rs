//! The chat wakes for what is posted to its session while it waits at its prompt (a background
//! task's result, `session.post!`): a turn with no prompt of its own answers it at once.
//!
//! While the chat reads a line it also waits on the session's inbox; when something is posted,
//! the read is woken ([`super::editor::Reader::wake`]: what was typed comes back at the next
//! prompt) and the chat runs the woken turn. Something posted and not taken while a turn ran (it
//! ended first) or while a form was evaluated is answered before the next line is read. With
//! stdin piped, a read cannot be woken: what was posted waits for the end of that read.
//!
//! It decides when to wake, not how a turn runs (`super::turn`).

use std::time::Duration;

use tokio::sync::mpsc;

use super::Chat;
use super::editor::{Read, Reader};
use super::surface::Ask;
use crate::agent::AgentEvent;
use crate::front::signals::Shutdown;

/// How soon a wake that found no read to end yet (rustyline had not drawn its line) is tried
/// again.
const WAKE_RETRY: Duration = Duration::from_millis(50);

impl Chat {
    /// Whether something posted to the session waits for a turn to take it, and is new since
    /// a woken turn last ended without taking what waited (it failed, or was cancelled first).
    pub(super) fn has_posted(&self) -> bool {
        self.posts()
            .is_some_and(|(n, waiting)| waiting && n > self.left_posts)
    }

    /// How many messages were ever posted to the session, and whether some wait.
    fn posts(&self) -> Option<(u64, bool)> {
        self.agent
            .sessions()
            .with(&self.session, |s| (s.inbox.posts(), !s.inbox.is_empty()))
    }

    /// Run the turn what was posted to the session wakes (see [`Chat::has_posted`]), saying
    /// so, and that the line being typed (`kept`) is not sent but comes back; the signal's
    /// number when SIGTERM or SIGHUP ends it.
    pub(super) async fn woken_turn(
        &mut self,
        kept: bool,
        events: &mut mpsc::UnboundedReceiver<AgentEvent>,
        asks: &mut mpsc::UnboundedReceiver<Ask>,
        shutdown: &mut Shutdown,
    ) -> Option<i32> {
        self.note(if kept {
            "(woken: a result was posted to the session; the line above is not sent, it comes back after)"
        } else {
            "(woken: a result was posted to the session)"
        });
        let before = self.posts().map_or(0, |(n, _)| n);
        let signal = self.turn(None, events, asks, shutdown).await;
        // Still waiting and nothing new: the turn took none of it; wait for a new post.
        if self.posts() == Some((before, true)) {
            self.left_posts = before;
        }
        signal
    }

    /// The next input at `prompt`, or [`Read::Woken`] as soon as something is posted to the
    /// session (on a terminal); `Err` with the signal's number when SIGTERM or SIGHUP comes.
    pub(super) async fn read_or_wake(
        &self,
        reader: &Reader,
        prompt: &str,
        shutdown: &mut Shutdown,
    ) -> Result<Read, i32> {
        let notify = self
            .agent
            .sessions()
            .posted_notify(&self.session)
            .filter(|_| reader.wakes());
        let read = reader.read(prompt);
        tokio::pin!(read);
        // Something was posted: wake the read until it is woken.
        let mut waking = false;
        loop {
            tokio::select! {
                read = &mut read => return Ok(read),
                signal = shutdown.recv() => return Err(signal),
                () = async {
                    match &notify {
                        Some(n) => n.notified().await,
                        None => std::future::pending().await,
                    }
                }, if !waking => waking = self.has_posted(),
                () = tokio::time::sleep(WAKE_RETRY), if waking => {}
            }
            if waking && reader.wake() {
                // The read ends now, as `Woken` (or as the line, if Enter came first).
                return Ok(read.await);
            }
        }
    }
}
