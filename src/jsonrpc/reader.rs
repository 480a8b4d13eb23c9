//! The reader task of a connection: reads messages off the [`FrameReader`], routes responses to
//! their waiters and hands everything else to the owner, in line order.
//!
//! It never runs owner code other than the synchronous handler the owner installed (which may
//! stop it at a line) and the answer hooks of requests, and never writes.

use std::sync::Arc;

use tokio::io::AsyncRead;
use tokio::sync::mpsc;

use super::connection::{Flow, IncomingHandler};
use super::frame::FrameReader;
use super::message::{Incoming, Message};
use super::state::{Gone, Shared};

/// Where the reader hands what is not a response.
pub(super) enum Deliver {
    Channel(mpsc::UnboundedSender<Incoming>),
    Handler(IncomingHandler),
}

pub(super) async fn read_loop<R: AsyncRead + Unpin>(
    mut frames: FrameReader<R>,
    shared: Arc<Shared>,
    deliver: Deliver,
) {
    let mut consecutive: u32 = 0;
    let gone = loop {
        let message = match frames.next_message().await {
            Ok(Some(message)) => message,
            Ok(None) => break Gone::Eof,
            Err(e) => break Gone::Io(format!("reading from {} failed: {e}", shared.peer)),
        };
        let delivered = match message {
            Message::Response(response) => {
                consecutive = 0;
                shared.route(response);
                continue;
            }
            Message::Request(request) => {
                consecutive = 0;
                Incoming::Request(request)
            }
            Message::Notification(notification) => {
                consecutive = 0;
                Incoming::Notification(notification)
            }
            Message::Malformed(malformed) => {
                consecutive = consecutive.saturating_add(1);
                tracing::warn!(
                    kind = ?malformed.kind,
                    consecutive,
                    excerpt = %malformed.excerpt,
                    "unusable line from {}: {}",
                    shared.peer,
                    malformed.detail,
                );
                Incoming::Malformed {
                    malformed,
                    consecutive,
                }
            }
        };
        match &deliver {
            Deliver::Channel(incoming) => {
                if incoming.send(delivered).is_err() {
                    tracing::debug!("nobody takes incoming messages any more; dropped one");
                }
            }
            // Called before the next line is read, so before any later response is routed.
            Deliver::Handler(handler) => {
                if let Flow::Stop(reason) = handler(delivered) {
                    break Gone::Io(reason);
                }
            }
        }
    };
    tracing::debug!("reader stopped: {gone:?}");
    shared.reader_stopped(gone);
}
