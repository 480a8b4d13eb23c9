//! Line framing: [`FrameReader`] cuts a byte stream into lines at byte level, under a cap, and
//! classifies each complete line.
//!
//! It knows nothing of connections, pending requests or writers; an oversize line is discarded as
//! it streams in and reported as a [`MalformedKind::TooLong`] message.

use std::io;

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

use super::limits::{MALFORMED_EXCERPT_BYTES, READ_BUFFER_BYTES, RETAINED_LINE_BUFFER_BYTES};
use super::message::{MalformedKind, Message, classify, malformed};

/// Turns a byte stream into classified messages, one per non-blank line.
///
/// Lines end at `\n`; a `\r` before it is dropped; a final line without `\n` is read at EOF;
/// blank lines are skipped. UTF-8 is decoded per complete line, so characters split across reads
/// are fine. Bad lines come out as [`Message::Malformed`] and reading goes on.
pub struct FrameReader<R> {
    inner: BufReader<R>,
    max_line_bytes: usize,
    /// The start of a line whose end has not arrived yet.
    line: Vec<u8>,
    /// Set while the rest of an oversize line is being discarded.
    skipping: Option<Skipping>,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// A reader over `reader` that rejects lines longer than `max_line_bytes`.
    pub fn new(reader: R, max_line_bytes: usize) -> Self {
        Self {
            inner: BufReader::with_capacity(READ_BUFFER_BYTES, reader),
            max_line_bytes,
            line: Vec::new(),
            skipping: None,
        }
    }

    /// The next message, or `None` at EOF. An `Err` is an I/O error of the underlying stream.
    pub async fn next_message(&mut self) -> io::Result<Option<Message>> {
        loop {
            let chunk = match self.inner.fill_buf().await {
                Ok(chunk) => chunk,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if chunk.is_empty() {
                if let Some(skipping) = self.skipping.take() {
                    return Ok(Some(skipping.finish(self.max_line_bytes)));
                }
                if self.line.is_empty() {
                    return Ok(None);
                }
                let line = std::mem::take(&mut self.line);
                match line_message(&line) {
                    Some(message) => return Ok(Some(message)),
                    None => continue,
                }
            }
            let taken = chunk.len();
            let Some(end) = memchr::memchr(b'\n', chunk) else {
                // No line end yet: keep the bytes, or count them if the line is already too long.
                if let Some(skipping) = &mut self.skipping {
                    skipping.len += taken;
                } else if self.line.len() + taken > self.max_line_bytes {
                    self.skipping = Some(Skipping::start(&self.line, chunk));
                    self.line = Vec::new();
                } else {
                    self.line.extend_from_slice(chunk);
                }
                self.inner.consume(taken);
                continue;
            };
            let message = if let Some(mut skipping) = self.skipping.take() {
                skipping.len += end;
                Some(skipping.finish(self.max_line_bytes))
            } else if self.line.len() + end > self.max_line_bytes {
                let skipping = Skipping::start(&self.line, &chunk[..end]);
                self.line = Vec::new();
                Some(skipping.finish(self.max_line_bytes))
            } else if self.line.is_empty() {
                // The whole line is in the read buffer: classify it in place, without a copy.
                line_message(&chunk[..end])
            } else {
                self.line.extend_from_slice(&chunk[..end]);
                let message = line_message(&self.line);
                self.line.clear();
                if self.line.capacity() > RETAINED_LINE_BUFFER_BYTES {
                    self.line = Vec::new();
                }
                message
            };
            self.inner.consume(end + 1);
            if let Some(message) = message {
                return Ok(Some(message));
            }
        }
    }
}

/// A line that is being discarded because it is too long: how long it is so far, and its head.
struct Skipping {
    /// Bytes of the line seen so far.
    len: usize,
    /// The line's head, for the excerpt.
    head: Vec<u8>,
}

impl Skipping {
    fn start(held: &[u8], more: &[u8]) -> Self {
        let mut head = Vec::with_capacity(MALFORMED_EXCERPT_BYTES);
        head.extend_from_slice(&held[..held.len().min(MALFORMED_EXCERPT_BYTES)]);
        let room = MALFORMED_EXCERPT_BYTES - head.len();
        head.extend_from_slice(&more[..more.len().min(room)]);
        Self {
            len: held.len() + more.len(),
            head,
        }
    }

    fn finish(self, max_line_bytes: usize) -> Message {
        let len = self.len;
        malformed(
            MalformedKind::TooLong { len },
            None,
            format!("line of {len} bytes is longer than the limit of {max_line_bytes} bytes"),
            &self.head,
        )
    }
}

/// Classifies a line without its `\n`: drops a trailing `\r`, skips blank lines.
fn line_message(line: &[u8]) -> Option<Message> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    Some(classify(line))
}
