//! The body of an SSE stream: each line the gateway routes to it as one `data:` event, and a
//! comment every [`KEEPALIVE`] so that proxies and idle timers keep the stream open. It ends
//! when the gateway lets go of its sender (the connection ended, or another reader took the
//! stream); dropping it (the client went away) is what the gateway sees as a closed reader. It knows the event-stream framing, not what the lines say.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame};
use tokio::sync::mpsc;

/// How often an idle stream sends a comment.
pub const KEEPALIVE: Duration = Duration::from_secs(15);

/// An SSE body fed by a channel of JSON lines.
pub(super) struct Events {
    lines: mpsc::UnboundedReceiver<Bytes>,
    keepalive: tokio::time::Interval,
    /// The gateway's count of bytes not read yet: lowered as each line goes out.
    unread: Arc<AtomicUsize>,
}

impl Events {
    pub(super) fn new(lines: mpsc::UnboundedReceiver<Bytes>, unread: Arc<AtomicUsize>) -> Events {
        let mut keepalive = tokio::time::interval(KEEPALIVE);
        keepalive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        keepalive.reset();
        Events {
            lines,
            keepalive,
            unread,
        }
    }
}

/// One line as an event: `data: <line>` and a blank line.
pub(super) fn event(line: &[u8]) -> Bytes {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let mut out = Vec::with_capacity(line.len() + 8);
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(line);
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

impl Body for Events {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.lines.poll_recv(cx) {
            Poll::Ready(Some(line)) => {
                self.unread.fetch_sub(line.len(), Ordering::Relaxed);
                self.keepalive.reset();
                return Poll::Ready(Some(Ok(Frame::data(event(&line)))));
            }
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => {}
        }
        match self.keepalive.poll_tick(cx) {
            Poll::Ready(_) => Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b":\n\n"))))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for Events {
    /// What the client never read of this stream no longer counts against the connection (the
    /// stream was replaced by a new reader, or the client went away).
    fn drop(&mut self) {
        self.lines.close();
        while let Ok(line) = self.lines.try_recv() {
            self.unread.fetch_sub(line.len(), Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_one_data_event() {
        assert_eq!(&event(b"{\"a\":1}\n")[..], b"data: {\"a\":1}\n\n");
        assert_eq!(&event(b"{}")[..], b"data: {}\n\n");
    }
}
