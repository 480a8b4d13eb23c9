//! Room for a command's descriptors. A `bash` command starts only when the process has room,
//! under its soft `RLIMIT_NOFILE`, for what a running command holds, on top of the commands
//! already running and a reserve for everything else (model connections, session files, MCP
//! servers' pipes); otherwise it waits until a running command ends. So many sessions running
//! commands at once under a low limit take turns rather than fail with "Too many open files".
//! Under the limit oml raises itself to at start, nothing ever waits here.
//!
//! It counts descriptors (`/proc/self/fd`) and running commands; it knows nothing of what a
//! command runs or why.

use std::time::Duration;

use parking_lot::{Mutex, MutexGuard};
use tokio::sync::Notify;

use crate::cancel::CancelToken;

/// The descriptors one running command holds in oml at most: the pidfd its child is reaped
/// through, the read end of its output pipe, and while it starts the pipe that reports a failed
/// exec and a copy of the Landlock ruleset.
pub const PER_COMMAND: usize = 4;
/// Descriptors kept free for what is not a command: the next model connection of each running
/// turn, a session file, an MCP server's pipes, the REPL.
pub const RESERVE: usize = 16;
/// How often a waiting command looks again when no command has ended: descriptors are also
/// freed by closed sessions and finished model streams, which do not knock.
const RECHECK: Duration = Duration::from_millis(20);

/// The commands that have room (started, or about to).
static RUNNING: Mutex<usize> = Mutex::new(0);
/// Told when a command ends.
static ENDED: Notify = Notify::const_new();

/// A running command's room, given back when dropped.
#[derive(Debug)]
pub struct Room(());

impl Drop for Room {
    fn drop(&mut self) {
        *running() -= 1;
        ENDED.notify_waiters();
    }
}

/// Wait until a command may start (see the module doc); `None` when `cancel` fires first.
pub async fn room(cancel: &CancelToken) -> Option<Room> {
    loop {
        // Made before looking, so that a command ending in between is not missed.
        let ended = ENDED.notified();
        if let Some(room) = try_room() {
            return Some(room);
        }
        tokio::select! {
            () = ended => {}
            () = tokio::time::sleep(RECHECK) => {}
            () = cancel.cancelled() => return None,
        }
    }
}

/// Room now, if there is: always for the first command, since nothing would free any.
fn try_room() -> Option<Room> {
    let mut running = running();
    let fits = *running == 0
        || match (soft_limit(), open_descriptors()) {
            (Some(limit), Some(open)) => open + (*running + 1) * PER_COMMAND + RESERVE <= limit,
            // Where the numbers cannot be known, commands are not held back.
            _ => true,
        };
    fits.then(|| {
        *running += 1;
        Room(())
    })
}

fn running() -> MutexGuard<'static, usize> {
    RUNNING.lock()
}

/// The soft `RLIMIT_NOFILE`, where it is finite.
fn soft_limit() -> Option<usize> {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    limit.current.and_then(|soft| usize::try_from(soft).ok())
}

/// The descriptors this process has open (Linux; `None` elsewhere or when unreadable). The
/// directory's own descriptor, open while it is read, is not counted.
fn open_descriptors() -> Option<usize> {
    let entries = std::fs::read_dir("/proc/self/fd").ok()?;
    Some(entries.count().saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_descriptors_and_limit_are_read() {
        assert!(open_descriptors().is_some_and(|n| n >= 3));
        assert!(soft_limit().is_some_and(|n| n > 0));
    }
}
