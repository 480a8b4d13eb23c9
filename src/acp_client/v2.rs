//! The client's side of ACP's v2 draft (2026-07-15) on the wire: the stream between the agent
//! and the JSON-RPC layer, with `acp::v2::Codec` translating each line, so that the rest of the
//! client (and the Lisp program) keeps seeing the v1 shapes it knows. The mapping itself is
//! `acp::v2`'s, the same one the agent (`front::acp`) encodes with; this file only moves lines.

use std::sync::Arc;

use parking_lot::Mutex;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};

use crate::acp::v2::Codec;

/// The size of the in-memory pipe between the JSON-RPC layer and the codec.
const PIPE_BYTES: usize = 1 << 16;

/// The longest line read from either side: the JSON-RPC layer's own cap.
const MAX_LINE_BYTES: usize = crate::jsonrpc::DEFAULT_MAX_LINE_BYTES;

/// Put the codec between the agent's stream (`reader`, `writer`) and the JSON-RPC layer: the
/// layer's side of the pipe is returned. Each direction runs in a task of its own, so an agent
/// that writes while it is being written to never waits on the codec.
pub(crate) fn wrap<R, W>(reader: R, writer: W) -> DuplexStream
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (ours, theirs) = tokio::io::duplex(PIPE_BYTES);
    let codec = Arc::new(Mutex::new(Codec::new()));
    let (from_client, to_client) = tokio::io::split(ours);
    tokio::spawn(to_agent(Arc::clone(&codec), from_client, writer));
    tokio::spawn(from_agent(codec, reader, to_client));
    theirs
}

/// The client's lines, encoded, to the agent.
async fn to_agent<R, W>(codec: Arc<Mutex<Codec>>, from_client: R, mut writer: W)
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send,
{
    let mut lines = BufReader::new(from_client);
    let mut line = Vec::new();
    while matches!(read_line_capped(&mut lines, &mut line, MAX_LINE_BYTES).await, Ok(n) if n > 0) {
        let out = match serde_json::from_slice::<Value>(&line) {
            Ok(m) if !codec.lock().passes() => {
                let m = codec.lock().outgoing(m);
                format!("{m}\n").into_bytes()
            }
            _ => std::mem::take(&mut line),
        };
        line.clear();
        if writer.write_all(&out).await.is_err() || writer.flush().await.is_err() {
            break;
        }
    }
    let _ = writer.shutdown().await;
}

/// The agent's lines, decoded, to the client. A line past [`MAX_LINE_BYTES`] ends the stream
/// (the JSON-RPC layer reports the connection closed).
async fn from_agent<R, W>(codec: Arc<Mutex<Codec>>, reader: R, mut to_client: W)
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send,
{
    let mut lines = BufReader::new(reader);
    let mut line = Vec::new();
    while matches!(read_line_capped(&mut lines, &mut line, MAX_LINE_BYTES).await, Ok(n) if n > 0) {
        let decoded: Vec<Vec<u8>> = match serde_json::from_slice::<Value>(&line) {
            Ok(m) if !codec.lock().passes() => {
                let ms = codec.lock().incoming(m);
                ms.into_iter()
                    .map(|m| format!("{m}\n").into_bytes())
                    .collect()
            }
            _ => vec![std::mem::take(&mut line)],
        };
        line.clear();
        for out in decoded {
            if to_client.write_all(&out).await.is_err() {
                return;
            }
        }
    }
    // The other half of the pipe is the other task's: only shutting this one down tells the
    // JSON-RPC layer that the agent is gone.
    let _ = to_client.shutdown().await;
}

/// Read one line (through its `\n`) into `buf`, at most `cap` bytes: an error past that, and
/// 0 at the end of the input.
pub(crate) async fn read_line_capped<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    buf: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<usize> {
    let start = buf.len();
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(buf.len() - start);
        }
        let (take, done) = match memchr::memchr(b'\n', available) {
            Some(at) => (at + 1, true),
            None => (available.len(), false),
        };
        buf.extend_from_slice(&available[..take]);
        reader.consume(take);
        if buf.len() - start > cap {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("a line longer than {cap} bytes"),
            ));
        }
        if done {
            return Ok(buf.len() - start);
        }
    }
}
