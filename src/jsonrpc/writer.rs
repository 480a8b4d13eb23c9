//! The writer task of a connection: the queue items, the outgoing message shapes, and the loop
//! that writes queued lines in order, batched, and acknowledges flushes and closes.
//!
//! It never reads; when writing fails it records why in the shared state and fails the requests
//! that will never be written.

use std::io;
use std::sync::Arc;

use serde::Serialize;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use super::connection::SendError;
use super::error::RpcError;
use super::limits::WRITE_BATCH_BYTES;
use super::message::RequestId;
use super::state::{Shared, WriterStop};

pub(super) enum WriteItem {
    /// One encoded message with its `\n`; `request` is the id when it is one of our requests.
    Line {
        bytes: Vec<u8>,
        request: Option<u64>,
    },
    /// Acknowledge once everything before has been written and flushed.
    Flush(oneshot::Sender<()>),
    /// Write everything before, shut the stream down, stop.
    Close(oneshot::Sender<()>),
}

#[derive(Serialize)]
pub(super) struct OutRequest<'a, P> {
    pub(super) jsonrpc: &'static str,
    pub(super) id: u64,
    pub(super) method: &'a str,
    pub(super) params: &'a P,
}

#[derive(Serialize)]
pub(super) struct OutNotification<'a, P> {
    pub(super) jsonrpc: &'static str,
    pub(super) method: &'a str,
    pub(super) params: &'a P,
}

#[derive(Serialize)]
pub(super) struct OutResult<'a, T> {
    pub(super) jsonrpc: &'static str,
    pub(super) id: &'a RequestId,
    pub(super) result: &'a T,
}

#[derive(Serialize)]
pub(super) struct OutError<'a> {
    pub(super) jsonrpc: &'static str,
    pub(super) id: Option<&'a RequestId>,
    pub(super) error: &'a RpcError,
}

/// One message as one line. serde_json escapes newlines inside strings, so the only `\n` is ours.
pub(super) fn encode(message: &impl Serialize) -> Result<Vec<u8>, SendError> {
    let mut bytes = serde_json::to_vec(message).map_err(|e| SendError::Encode {
        reason: e.to_string(),
    })?;
    bytes.push(b'\n');
    Ok(bytes)
}

pub(super) async fn write_loop<W: AsyncWrite + Unpin>(
    mut writer: W,
    mut queue: mpsc::Receiver<WriteItem>,
    shared: Arc<Shared>,
) {
    let mut batch: Vec<u8> = Vec::new();
    let mut requests: Vec<u64> = Vec::new();
    let mut acks: Vec<oneshot::Sender<()>> = Vec::new();
    while let Some(first) = queue.recv().await {
        let mut close = None;
        let mut next = Some(first);
        while let Some(item) = next.take() {
            match item {
                WriteItem::Line { bytes, request } => {
                    // A line that would not fit the buffer kept from earlier batches becomes the
                    // buffer, so a large message is never copied.
                    if batch.is_empty() && bytes.len() > batch.capacity() {
                        batch = bytes;
                    } else {
                        batch.extend_from_slice(&bytes);
                    }
                    requests.extend(request);
                }
                WriteItem::Flush(ack) => acks.push(ack),
                WriteItem::Close(ack) => {
                    close = Some(ack);
                    break;
                }
            }
            if batch.len() < WRITE_BATCH_BYTES {
                next = queue.try_recv().ok();
            }
        }
        if let Err(e) = write_batch(&mut writer, &batch).await {
            let reason = format!("writing to {} failed: {e}", shared.peer);
            tracing::warn!("{reason}; the connection can no longer send");
            stop_writer(&shared, &mut queue, WriterStop::Failed(reason), requests).await;
            return;
        }
        for ack in acks.drain(..) {
            let _ = ack.send(());
        }
        requests.clear();
        batch.clear();
        if batch.capacity() > WRITE_BATCH_BYTES {
            batch = Vec::new();
        }
        if let Some(ack) = close {
            if let Err(e) = writer.shutdown().await {
                tracing::debug!("shutting the stream to {} down failed: {e}", shared.peer);
            }
            stop_writer(&shared, &mut queue, WriterStop::ClosedHere, Vec::new()).await;
            let _ = ack.send(());
            return;
        }
    }
    // Every handle is gone, so nothing more can be sent: let the peer see EOF.
    if let Err(e) = writer.shutdown().await {
        tracing::debug!("shutting the stream to {} down failed: {e}", shared.peer);
    }
}

pub(super) async fn write_batch<W: AsyncWrite + Unpin>(
    writer: &mut W,
    batch: &[u8],
) -> io::Result<()> {
    if !batch.is_empty() {
        writer.write_all(batch).await?;
    }
    writer.flush().await
}

/// Refuses further sends and fails the requests that will never be written: `unwritten`, and
/// those still queued.
pub(super) async fn stop_writer(
    shared: &Shared,
    queue: &mut mpsc::Receiver<WriteItem>,
    stop: WriterStop,
    mut unwritten: Vec<u64>,
) {
    // Record why before closing the queue, so a sender refused by the closed queue can say why.
    shared.writer_stopped(stop.clone(), &[]);
    queue.close();
    while let Some(item) = queue.recv().await {
        // Dropping a flush or close acknowledgement tells its waiter the writer is gone.
        if let WriteItem::Line {
            request: Some(n), ..
        } = item
        {
            unwritten.push(n);
        }
    }
    shared.writer_stopped(stop, &unwritten);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn encoded_messages_are_one_line_even_with_newlines_in_strings() {
        let params = json!({"text": "a\nb\r\n"});
        let message = OutNotification {
            jsonrpc: "2.0",
            method: "m",
            params: &params,
        };
        let line = encode(&message).map(String::from_utf8);
        let expected =
            "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":{\"text\":\"a\\nb\\r\\n\"}}\n";
        assert_eq!(line, Ok(Ok(expected.to_owned())));
    }
}
