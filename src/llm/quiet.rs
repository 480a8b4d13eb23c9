//! A watchdog for a stream that must not go quiet for longer than a limit: it is told of
//! activity with a flag, and looks at the flag on a tick of a quarter of the limit, so a chunk
//! costs a store instead of a timer reset (a clock read and the timer wheel, a few percent of
//! oml's CPU per delta at a model's rate).
//!
//! It fires between 1 and 1.25 times `limit` after the last activity, never sooner. It knows
//! nothing of what the stream carries.

use std::time::Duration;

use tokio::time::{Instant, Interval, MissedTickBehavior};

/// Ticks per limit: the watchdog fires after this many quiet ticks in a row.
pub const TICKS_PER_LIMIT: u32 = 4;

/// The watchdog of one limit.
pub struct Quiet {
    tick: Interval,
    active: bool,
    quiet_ticks: u32,
}

impl Quiet {
    /// A watchdog for `limit`, counting from now.
    pub fn new(limit: Duration) -> Quiet {
        let period = (limit / TICKS_PER_LIMIT).max(Duration::from_millis(1));
        let mut tick = tokio::time::interval_at(Instant::now() + period, period);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Quiet {
            tick,
            active: false,
            quiet_ticks: 0,
        }
    }

    /// Something came: the quiet time starts again.
    pub fn touch(&mut self) {
        self.active = true;
    }

    /// Resolves once the stream has been quiet for the limit (see the module doc).
    pub async fn expired(&mut self) {
        loop {
            self.tick.tick().await;
            if self.on_tick() {
                return;
            }
        }
    }

    /// One tick: whether the limit has now passed without activity.
    fn on_tick(&mut self) -> bool {
        if std::mem::take(&mut self.active) {
            self.quiet_ticks = 0;
        } else {
            self.quiet_ticks += 1;
        }
        self.quiet_ticks >= TICKS_PER_LIMIT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn it_expires_after_a_limit_of_quiet_ticks_and_never_while_touched() {
        let mut quiet = Quiet::new(Duration::from_secs(8));
        for _ in 0..100 {
            quiet.touch();
            assert!(!quiet.on_tick(), "fired while touched");
        }
        // The tick after the last touch still counts it; then TICKS_PER_LIMIT quiet ones.
        quiet.touch();
        assert!(!quiet.on_tick());
        let quiet_ticks = (1..=10).find(|_| quiet.on_tick());
        assert_eq!(quiet_ticks, Some(TICKS_PER_LIMIT));
    }
}
