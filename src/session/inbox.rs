//! A session's inbox: messages posted to a session from anywhere (a steered prompt, the result
//! of a background task) that join its transcript before the loop's next model call.
//!
//! The idea: whoever has something for a session posts it ([`super::Sessions::post`],
//! `session.post!` in Lisp) and goes on; the loop takes everything posted at the start of each
//! model call (`agent.take-posted!`). A session with nothing running takes nothing, so a front
//! end that wants posted messages to start a turn of their own waits on the session's
//! [`Inbox::notify`] (notified once per post; a post while nobody waits leaves a permit, so it is
//! not missed) and runs a turn when its session is idle.
//!
//! Each post gets a [`PostId`], so the one who posted can take its message back while it is still
//! waiting ([`Inbox::unpost`]): a steered prompt whose turn ended before it was taken runs as a
//! turn of its own instead. The inbox knows nothing of the loop, Lisp or front ends.

use std::collections::VecDeque;
use std::sync::Arc;

use serde_json::Value;

/// A posted message's handle, unique within its session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PostId(u64);

/// The messages waiting for a session's next model call, oldest first.
#[derive(Debug, Default)]
pub struct Inbox {
    waiting: VecDeque<(PostId, Value)>,
    next: u64,
    /// Notified once per post (see the module's doc).
    notify: Arc<tokio::sync::Notify>,
}

impl Inbox {
    /// Queue `message` (an OpenAI message, `{"role": "user", "content": "…"}`); its handle.
    pub fn post(&mut self, message: Value) -> PostId {
        self.next += 1;
        let id = PostId(self.next);
        self.waiting.push_back((id, message));
        self.notify.notify_one();
        id
    }

    /// Every message posted since the last take, oldest first, removed from the inbox.
    pub fn take(&mut self) -> Vec<Value> {
        self.waiting.drain(..).map(|(_, m)| m).collect()
    }

    /// Take the message `id` back if it is still waiting (`None` once the loop has taken it).
    pub fn unpost(&mut self, id: PostId) -> Option<Value> {
        let at = self.waiting.iter().position(|(p, _)| *p == id)?;
        self.waiting.remove(at).map(|(_, m)| m)
    }

    /// Whether the message `id` is still waiting.
    pub fn holds(&self, id: PostId) -> bool {
        self.waiting.iter().any(|(p, _)| *p == id)
    }

    /// How many messages wait.
    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// How many messages were ever posted: a front end that woke the session for what waits,
    /// and saw the turn take none of it (it failed or was cancelled first), waits for a new post
    /// before it wakes again.
    pub fn posts(&self) -> u64 {
        self.next
    }

    /// Notified once per post: what a front end waits on to wake an idle session.
    pub fn notify(&self) -> Arc<tokio::sync::Notify> {
        self.notify.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn posts_are_taken_in_order_once_and_can_be_taken_back_until_then() {
        let mut inbox = Inbox::default();
        let a = inbox.post(json!({"role": "user", "content": "a"}));
        let b = inbox.post(json!({"role": "user", "content": "b"}));
        let c = inbox.post(json!({"role": "user", "content": "c"}));
        assert!(inbox.holds(b));
        assert_eq!(
            inbox.unpost(b),
            Some(json!({"role": "user", "content": "b"}))
        );
        assert_eq!(inbox.unpost(b), None, "taken back once");
        let taken = inbox.take();
        assert_eq!(taken.len(), 2);
        assert_eq!(taken[0]["content"], "a");
        assert_eq!(taken[1]["content"], "c");
        assert!(inbox.is_empty() && inbox.take().is_empty());
        assert_eq!(
            inbox.unpost(a),
            None,
            "a taken message cannot be taken back"
        );
        assert!(!inbox.holds(c));
    }

    #[tokio::test]
    async fn a_post_while_nobody_waits_is_not_missed() {
        let mut inbox = Inbox::default();
        let notify = inbox.notify();
        inbox.post(json!({"role": "user", "content": "x"}));
        tokio::time::timeout(std::time::Duration::from_secs(1), notify.notified())
            .await
            .expect("the permit the post left");
    }
}
