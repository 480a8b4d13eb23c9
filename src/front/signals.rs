//! The signals that end a front end the way the end of its input does: SIGTERM (a service
//! manager, `kill`, an editor stopping its agent) and SIGHUP (the terminal or the editor's pipe
//! went away). Each front end listens for them from its start and runs its ordinary shutdown,
//! so MCP servers, sub-agents, editor terminals and commands are ended and the session flushed,
//! instead of the default action killing oml and leaving them behind.
//!
//! The handlers are installed when [`Shutdown::listen`] is called; a signal that comes before
//! still has its default action. This module knows nothing of what shutting down means.

use tokio::signal::unix::{Signal, SignalKind, signal};

/// The exit status of a process ended by `signal`, by the shells' convention (128 + the number).
pub fn status_for(signal: i32) -> i32 {
    128 + signal
}

/// SIGTERM and SIGHUP, listened for from [`Shutdown::listen`] on.
pub struct Shutdown {
    term: Option<Signal>,
    hup: Option<Signal>,
}

impl Shutdown {
    /// Install the handlers (a stream that cannot be made is never ready).
    pub fn listen() -> Shutdown {
        Shutdown {
            term: signal(SignalKind::terminate()).ok(),
            hup: signal(SignalKind::hangup()).ok(),
        }
    }

    /// The next SIGTERM or SIGHUP: its number.
    pub async fn recv(&mut self) -> i32 {
        tokio::select! {
            Some(()) = next(&mut self.term) => libc::SIGTERM,
            Some(()) = next(&mut self.hup) => libc::SIGHUP,
            else => std::future::pending().await,
        }
    }
}

async fn next(stream: &mut Option<Signal>) -> Option<()> {
    match stream {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}
