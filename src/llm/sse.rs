//! A pure decoder for the `text/event-stream` bodies of chat completions: bytes in, `data:`
//! payloads out.
//!
//! Feed it network reads of any size with [`SseDecoder::push`] and drain complete payloads with
//! [`SseDecoder::next_payload`]. The rules are the ones OpenAI-compatible servers need, taken
//! from the Clojure original:
//! - only `data:` lines count, and their payload is trimmed; a blank payload is skipped;
//! - `data: [DONE]` ends the stream and everything after it is ignored;
//! - comments (`: keep-alive`), blank lines and other fields (`event:`, `id:`, `retry:`) are
//!   skipped;
//! - lines end with LF, CRLF or CR, and a CRLF split across two reads is one line end;
//! - a line (and a multi-byte UTF-8 character) split across reads is reassembled, because text
//!   is decoded only once its line is complete; invalid UTF-8 becomes U+FFFD;
//! - a leading byte-order mark is dropped.
//!
//! Each `data:` line is its own payload. This differs from the SSE specification, which joins the
//! `data:` lines of one event with newlines: chat completion servers send one JSON object per
//! line, and some omit the blank line between events, which joining would turn into invalid
//! JSON.
//!
//! Why our own parser rather than a crate such as `eventsource-stream`: the rules above are not
//! the specification's (per-line payloads, trimming, `[DONE]`), the whole parser is a few dozen
//! lines, it does no allocation per payload unless the text is not valid UTF-8, and it stays a
//! pure function that is property-tested. It does no I/O and knows nothing of JSON.
//!
//! Compare with pi: the OpenAI SDK's stream decoder does this framing inside the SDK.
//! Compare with oml.clj: `oml.llm/sse-events`, a line-seq over the body with the same rules.

use std::borrow::Cow;

/// The longest line the decoder waits for; a longer one fails the stream. A single chunk can be
/// large (a whole tool call with a file's content in one event), so the cap only guards memory
/// against a server that never sends a newline. Nothing of an over-long line is kept.
pub const MAX_SSE_LINE_BYTES: usize = 64 * 1024 * 1024;

const DONE: &str = "[DONE]";
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Incremental decoder state. One per response body.
#[derive(Debug, Default)]
pub struct SseDecoder {
    /// Bytes received and not yet consumed start at `start`.
    buf: Vec<u8>,
    start: usize,
    /// How many bytes after `start` were already searched for a line end without finding one,
    /// so a long line split over many reads is scanned once.
    scanned: usize,
    /// The last line ended with CR: an LF right after it belongs to the same line end.
    after_cr: bool,
    /// Bytes have arrived (the BOM check is done).
    started: bool,
    /// `[DONE]` was seen.
    done: bool,
}

/// `bytes` as text, invalid UTF-8 as U+FFFD. Valid text (nearly every payload) is checked by
/// `str::from_utf8`, whose word-at-a-time ASCII path is several times cheaper per byte than
/// `String::from_utf8_lossy`'s chunk walk: the lossy walk was 6% of oml's instructions while a
/// reply streamed (callgrind, 20,000 one-character deltas).
fn text(bytes: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// Why decoding stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    #[error("an event-stream line grew past {limit} bytes without ending")]
    LineTooLong { limit: usize },
}

impl SseDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Append one network read. Ignored once `[DONE]` was seen.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.done {
            return;
        }
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
        // Wait until a byte-order mark can be told apart from a prefix of one.
        if !self.started && (self.buf.len() >= BOM.len() || !BOM.starts_with(&self.buf)) {
            self.started = true;
            if self.buf.starts_with(BOM) {
                self.start = BOM.len();
            }
        }
    }

    /// The next complete `data:` payload, or `None` when more bytes are needed or the stream is
    /// done. Call it until it returns `None` after every [`push`](Self::push).
    pub fn next_payload(&mut self) -> Result<Option<Cow<'_, str>>, SseError> {
        loop {
            if self.done || !self.started {
                return Ok(None);
            }
            if self.after_cr && self.start < self.buf.len() {
                if self.buf[self.start] == b'\n' {
                    self.start += 1;
                }
                self.after_cr = false;
            }
            let search_from = self.start + self.scanned;
            let Some(offset) = memchr::memchr2(b'\n', b'\r', &self.buf[search_from..]) else {
                self.scanned = self.buf.len() - self.start;
                if self.scanned > MAX_SSE_LINE_BYTES {
                    self.buf = Vec::new();
                    self.start = 0;
                    self.scanned = 0;
                    return Err(SseError::LineTooLong {
                        limit: MAX_SSE_LINE_BYTES,
                    });
                }
                return Ok(None);
            };
            let line_start = self.start;
            let line_end = search_from + offset;
            self.after_cr = self.buf[line_end] == b'\r';
            self.start = line_end + 1;
            self.scanned = 0;
            if let Some((from, to)) = data_range(&self.buf[line_start..line_end]) {
                let payload = line_start + from..line_start + to;
                if &self.buf[payload.clone()] == DONE.as_bytes() {
                    self.finish_done();
                    return Ok(None);
                }
                return Ok(Some(text(&self.buf[payload])));
            }
        }
    }

    /// The body ended: a last line without a line end still counts. Returns its payload, if it
    /// is a `data:` line other than `[DONE]`. Further calls return `None`.
    pub fn finish(&mut self) -> Option<Cow<'_, str>> {
        if self.done {
            return None;
        }
        self.started = true;
        if self.after_cr && self.buf.get(self.start) == Some(&b'\n') {
            self.start += 1;
        }
        let line_start = self.start;
        self.start = self.buf.len();
        self.scanned = 0;
        let (from, to) = data_range(&self.buf[line_start..])?;
        let payload = line_start + from..line_start + to;
        if &self.buf[payload.clone()] == DONE.as_bytes() {
            self.finish_done();
            return None;
        }
        Some(text(&self.buf[payload]))
    }

    /// Whether `data: [DONE]` was seen.
    pub fn is_done(&self) -> bool {
        self.done
    }

    fn finish_done(&mut self) {
        self.done = true;
        self.buf = Vec::new();
        self.start = 0;
        self.scanned = 0;
    }
}

// --- private helpers

/// The byte range of a `data:` line's trimmed, non-empty payload within `line`.
fn data_range(line: &[u8]) -> Option<(usize, usize)> {
    let rest = line.strip_prefix(b"data")?;
    // `data` alone is a data field with an empty value; `dataX:` is another field.
    let value = rest.strip_prefix(b":")?;
    let value_start = line.len() - value.len();
    let leading = value.len() - value.trim_ascii_start().len();
    let trimmed = value.trim_ascii();
    if trimmed.is_empty() {
        return None;
    }
    let start = value_start + leading;
    Some((start, start + trimmed.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes `reads` in order and returns every payload, then `[DONE]` if it was seen.
    fn decode(reads: &[&[u8]]) -> Vec<String> {
        let mut decoder = SseDecoder::new();
        let mut out = Vec::new();
        for read in reads {
            decoder.push(read);
            while let Some(payload) = decoder.next_payload().expect("no error") {
                out.push(payload.into_owned());
            }
        }
        if let Some(last) = decoder.finish() {
            out.push(last.into_owned());
        }
        if decoder.is_done() {
            out.push("[DONE]".into());
        }
        out
    }

    #[test]
    fn payloads_by_rule() {
        /// (rule, network reads, payloads expected).
        type Case = (
            &'static str,
            &'static [&'static [u8]],
            &'static [&'static str],
        );
        let cases: &[Case] = &[
            (
                "comments, blank lines and other fields are skipped",
                &[b": keep-alive\n\nevent: message\nid: 7\nretry: 10\ndata: {\"a\":1}\n\n"],
                &["{\"a\":1}"],
            ),
            (
                "[DONE] ends the stream and later data is ignored",
                &[b"data: 1\n\ndata: [DONE]\n\ndata: 2\n\n", b"data: 3\n\n"],
                &["1", "[DONE]"],
            ),
            (
                "payloads are trimmed and blank payloads skipped",
                &[b"data:   x  \ndata:\ndata:    \ndata\n"],
                &["x"],
            ),
            (
                "CRLF, CR and LF all end lines",
                &[b"data: a\r\ndata: b\rdata: c\n"],
                &["a", "b", "c"],
            ),
            (
                "a CRLF split across reads is one line end",
                &[b"data: a\r", b"\ndata: b\n"],
                &["a", "b"],
            ),
            (
                "lines split across reads are reassembled",
                &[b"da", b"ta: hel", b"lo\n", b"\n"],
                &["hello"],
            ),
            (
                "a multi-byte character split across reads survives",
                &[b"data: \xC3", b"\xA9t\xC3\xA9\n"],
                &["été"],
            ),
            (
                "invalid UTF-8 becomes the replacement character",
                &[b"data: a\xFFb\n"],
                &["a\u{FFFD}b"],
            ),
            (
                "a last line without a line end still counts",
                &[b"data: a\ndata: b"],
                &["a", "b"],
            ),
            (
                "an unterminated [DONE] ends the stream",
                &[b"data: [DONE]"],
                &["[DONE]"],
            ),
            (
                "a byte-order mark is dropped, also when split",
                &[b"\xEF\xBB", b"\xBFdata: a\n"],
                &["a"],
            ),
            (
                "fields that merely start with data are not data",
                &[b"datum: x\ndata2: y\n"],
                &[],
            ),
        ];
        for (name, reads, expected) in cases {
            assert_eq!(decode(reads), *expected, "{name}");
        }
    }

    #[test]
    fn an_endless_line_is_an_error_not_unbounded_memory() {
        let mut decoder = SseDecoder::new();
        let piece = vec![b'x'; 1024 * 1024];
        let mut failed = None;
        for _ in 0..(MAX_SSE_LINE_BYTES / piece.len() + 2) {
            decoder.push(&piece);
            if let Err(error) = decoder.next_payload() {
                failed = Some(error);
                break;
            }
        }
        assert_eq!(
            failed,
            Some(SseError::LineTooLong {
                limit: MAX_SSE_LINE_BYTES
            })
        );
    }
}
