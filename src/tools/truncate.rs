//! Character-counted truncation for tool output: keep the head (`read`) or the tail (`bash`),
//! never splitting a UTF-8 character, and say how much was dropped.
//!
//! Two shapes: pure functions over a whole `&str` ([`truncate_head`], [`truncate_tail`]), and two
//! bounded accumulators for output that arrives in pieces ([`HeadBuffer`] for `read`, which
//! streams a file line by line, and [`TailBuffer`] for `bash`, which streams a pipe). The
//! accumulators hold O(limit) characters however much text passes through them, and produce
//! exactly what the pure functions would produce on the whole text.
//!
//! Limits count Unicode scalar values (Rust `char`s), not bytes, tokens or graphemes. This module
//! does no I/O and knows nothing of files or processes.
//!
//! Compare with pi: `packages/coding-agent/src/core/tools/truncate.ts` (which counts bytes and
//! lines and never cuts a line; we count characters, like the original).
//! Compare with oml.clj: the `read-max-chars` / `bash-max-chars` caps in `src/oml/tools.clj`.

/// A truncated view of a text: the kept part and how many characters were dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Truncated<'a> {
    /// The part kept, at most `max_chars` characters.
    pub kept: &'a str,
    /// How many characters were cut off.
    pub dropped: usize,
}

/// Keep the first `max_chars` characters of `text`.
pub fn truncate_head(text: &str, max_chars: usize) -> Truncated<'_> {
    let end = text
        .char_indices()
        .nth(max_chars)
        .map_or(text.len(), |(i, _)| i);
    let kept = &text[..end];
    Truncated {
        kept,
        dropped: text[end..].chars().count(),
    }
}

/// Keep the last `max_chars` characters of `text`.
pub fn truncate_tail(text: &str, max_chars: usize) -> Truncated<'_> {
    let start = if max_chars == 0 {
        text.len()
    } else {
        text.char_indices()
            .nth_back(max_chars - 1)
            .map_or(0, |(i, _)| i)
    };
    Truncated {
        kept: &text[start..],
        dropped: text[..start].chars().count(),
    }
}

/// `text` capped to its first `max_chars` characters, followed by
/// `\n[output truncated: K more characters]` when anything was cut (the `read` format).
pub fn cap_head(text: &str, max_chars: usize) -> String {
    let truncated = truncate_head(text, max_chars);
    head_notice(truncated.kept, truncated.dropped as u64)
}

/// `text` capped to its last `max_chars` characters, preceded by
/// `[output truncated: first K characters dropped]\n` when anything was cut (the `bash` format).
pub fn cap_tail(text: &str, max_chars: usize) -> String {
    let truncated = truncate_tail(text, max_chars);
    tail_notice(truncated.kept, truncated.dropped as u64)
}

/// Accumulates text pushed in pieces and keeps only the first `max_chars` characters, while
/// counting all of them. [`HeadBuffer::finish`] equals [`cap_head`] of the concatenation.
#[derive(Debug)]
pub struct HeadBuffer {
    max_chars: usize,
    kept: String,
    kept_chars: usize,
    total_chars: u64,
}

impl HeadBuffer {
    /// An empty buffer keeping at most `max_chars` characters.
    pub fn new(max_chars: usize) -> Self {
        Self {
            max_chars,
            kept: String::new(),
            kept_chars: 0,
            total_chars: 0,
        }
    }

    /// Append `text`.
    pub fn push_str(&mut self, text: &str) {
        let room = self.max_chars - self.kept_chars;
        if room == 0 {
            self.total_chars += text.chars().count() as u64;
            return;
        }
        let truncated = truncate_head(text, room);
        self.kept.push_str(truncated.kept);
        let kept_chars = truncated.kept.chars().count();
        self.kept_chars += kept_chars;
        self.total_chars += (kept_chars + truncated.dropped) as u64;
    }

    /// Count `chars` more characters that the caller knows lie past the cap, without their text.
    pub fn skip_chars(&mut self, chars: u64) {
        self.total_chars += chars;
    }

    /// Characters that can still be kept.
    pub fn room(&self) -> usize {
        self.max_chars - self.kept_chars
    }

    /// The kept text, followed by the truncation notice when anything was dropped.
    pub fn finish(self) -> String {
        let dropped = self.total_chars - self.kept_chars as u64;
        head_notice(&self.kept, dropped)
    }
}

/// Accumulates a byte stream (decoded as UTF-8, invalid bytes as U+FFFD) and keeps only what is
/// needed for the `bash` result: the last `max_chars` characters of the output **after**
/// trailing whitespace is trimmed. [`TailBuffer::finish`] equals
/// `cap_tail(String::from_utf8_lossy(all).trim_end(), max_chars)`.
///
/// Memory: at most about `2 * max_chars` characters of output plus a trailing-whitespace run of
/// the same bound, whatever the size of the stream.
#[derive(Debug)]
pub struct TailBuffer {
    max_chars: usize,
    /// The tail of the text up to and including the last non-whitespace character seen.
    committed: String,
    committed_chars: usize,
    /// Characters dropped from the front of `committed`.
    committed_dropped: u64,
    /// The run of whitespace after the last non-whitespace character (its tail, bounded).
    spaces: String,
    spaces_chars: usize,
    /// Characters dropped from the front of `spaces`.
    spaces_dropped: u64,
    /// An incomplete UTF-8 sequence at the end of the last push (at most 3 bytes).
    pending: Vec<u8>,
}

impl TailBuffer {
    /// An empty buffer keeping the last `max_chars` characters.
    pub fn new(max_chars: usize) -> Self {
        Self {
            max_chars,
            committed: String::new(),
            committed_chars: 0,
            committed_dropped: 0,
            spaces: String::new(),
            spaces_chars: 0,
            spaces_dropped: 0,
            pending: Vec::new(),
        }
    }

    /// Append raw output bytes; a UTF-8 character may be split across pushes.
    pub fn push_bytes(&mut self, bytes: &[u8]) {
        if self.pending.is_empty() {
            self.decode(bytes);
            return;
        }
        // Complete the pending sequence with as few bytes as it needs (at most 3), then go on.
        let take = bytes.len().min(4 - self.pending.len());
        let mut joined = std::mem::take(&mut self.pending);
        joined.extend_from_slice(&bytes[..take]);
        match std::str::from_utf8(&joined) {
            Ok(text) => {
                self.push_str(text);
                self.decode(&bytes[take..]);
            }
            Err(error) if error.valid_up_to() > 0 => {
                // The pending bytes formed a character; the rest of `joined` came from `bytes`.
                let used = error.valid_up_to();
                if let Ok(text) = std::str::from_utf8(&joined[..used]) {
                    self.push_str(text);
                }
                let consumed_from_bytes = used - (joined.len() - take);
                self.decode(&bytes[consumed_from_bytes..]);
            }
            Err(error) => match error.error_len() {
                // Still incomplete: wait for more bytes.
                None => self.pending = joined,
                Some(bad) => {
                    self.push_str(char::REPLACEMENT_CHARACTER.encode_utf8(&mut [0; 4]));
                    let consumed_from_bytes = bad.saturating_sub(joined.len() - take);
                    self.decode(&bytes[consumed_from_bytes..]);
                }
            },
        }
    }

    /// Append text.
    pub fn push_str(&mut self, text: &str) {
        let body = text.trim_end();
        if body.is_empty() {
            self.push_spaces(text);
            return;
        }
        self.commit_spaces();
        self.commit(body);
        self.push_spaces(&text[body.len()..]);
    }

    /// Bytes of text held right now (a bound check for tests and benchmarks).
    pub fn held_bytes(&self) -> usize {
        self.committed.len() + self.spaces.len() + self.pending.len()
    }

    /// The right-trimmed tail, preceded by the truncation notice when anything was dropped.
    pub fn finish(mut self) -> String {
        // An incomplete sequence at the very end is invalid; `from_utf8_lossy` would make it one
        // replacement character.
        if !self.pending.is_empty() {
            self.pending.clear();
            self.push_str(char::REPLACEMENT_CHARACTER.encode_utf8(&mut [0; 4]));
        }
        let truncated = truncate_tail(&self.committed, self.max_chars);
        tail_notice(
            truncated.kept,
            self.committed_dropped + truncated.dropped as u64,
        )
    }

    // --- private

    /// Decode `bytes` (no pending prefix), pushing text and replacement characters.
    fn decode(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            match std::str::from_utf8(bytes) {
                Ok(text) => {
                    self.push_str(text);
                    return;
                }
                Err(error) => {
                    let (valid, rest) = bytes.split_at(error.valid_up_to());
                    if let Ok(text) = std::str::from_utf8(valid) {
                        self.push_str(text);
                    }
                    match error.error_len() {
                        None => {
                            self.pending = rest.to_vec();
                            return;
                        }
                        Some(bad) => {
                            self.push_str(char::REPLACEMENT_CHARACTER.encode_utf8(&mut [0; 4]));
                            bytes = &rest[bad..];
                        }
                    }
                }
            }
        }
    }

    fn push_spaces(&mut self, spaces: &str) {
        if spaces.is_empty() {
            return;
        }
        let chars = spaces.chars().count();
        self.spaces.push_str(spaces);
        self.spaces_chars += chars;
        if self.spaces_chars > self.bound() {
            let drop = self.spaces_chars - self.max_chars;
            let at = byte_index_of_char(&self.spaces, drop);
            self.spaces.drain(..at);
            self.spaces_chars -= drop;
            self.spaces_dropped += drop as u64;
        }
    }

    /// Whitespace followed by more text is part of the output after all.
    fn commit_spaces(&mut self) {
        if self.spaces_dropped > 0 {
            // The run alone is longer than the cap: everything committed before it is dropped.
            self.committed_dropped += self.committed_chars as u64 + self.spaces_dropped;
            self.committed.clear();
            self.committed_chars = 0;
        }
        let spaces = std::mem::take(&mut self.spaces);
        self.spaces_chars = 0;
        self.spaces_dropped = 0;
        self.commit(&spaces);
        self.spaces = spaces;
        self.spaces.clear();
    }

    fn commit(&mut self, text: &str) {
        let chars = text.chars().count();
        if chars >= self.max_chars {
            // The new text alone fills the cap: keep only its tail.
            let truncated = truncate_tail(text, self.max_chars);
            self.committed_dropped += (self.committed_chars + truncated.dropped) as u64;
            self.committed.clear();
            self.committed.push_str(truncated.kept);
            self.committed_chars = self.max_chars;
            return;
        }
        self.committed.push_str(text);
        self.committed_chars += chars;
        if self.committed_chars > self.bound() {
            let drop = self.committed_chars - self.max_chars;
            let at = byte_index_of_char(&self.committed, drop);
            self.committed.drain(..at);
            self.committed_chars -= drop;
            self.committed_dropped += drop as u64;
        }
    }

    /// How many characters a part may grow to before its front is dropped; twice the cap, so the
    /// copying is amortised.
    fn bound(&self) -> usize {
        self.max_chars.saturating_mul(2).max(1024)
    }
}

// --- private helpers

fn head_notice(kept: &str, dropped: u64) -> String {
    if dropped == 0 {
        kept.to_owned()
    } else {
        format!("{kept}\n[output truncated: {dropped} more characters]")
    }
}

fn tail_notice(kept: &str, dropped: u64) -> String {
    if dropped == 0 {
        kept.to_owned()
    } else {
        format!("[output truncated: first {dropped} characters dropped]\n{kept}")
    }
}

/// The byte index where the character numbered `n` (0-based) starts, or the length.
fn byte_index_of_char(text: &str, n: usize) -> usize {
    text.char_indices().nth(n).map_or(text.len(), |(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn caps_add_the_original_notices() {
        assert_eq!(cap_head("héllo", 10), "héllo");
        assert_eq!(
            cap_head("héllo", 2),
            "hé\n[output truncated: 3 more characters]"
        );
        assert_eq!(cap_tail("héllo", 10), "héllo");
        assert_eq!(
            cap_tail("héllo", 2),
            "[output truncated: first 3 characters dropped]\nlo"
        );
        assert_eq!(
            cap_tail("abc", 0),
            "[output truncated: first 3 characters dropped]\n"
        );
    }

    #[test]
    fn a_tail_buffer_stays_bounded_over_ten_megabytes() {
        let mut buffer = TailBuffer::new(50_000);
        let line = "0123456789abcdefghijklmnopqrstuvwxyzé€😀\n".repeat(1000);
        let mut pushed = 0;
        while pushed < 10_000_000 {
            // Push in odd-sized pieces so characters are split between pushes.
            for piece in line.as_bytes().chunks(4093) {
                buffer.push_bytes(piece);
                assert!(buffer.held_bytes() <= 2 * 4 * 50_000 + 4 * 4096);
            }
            pushed += line.len();
        }
        let out = buffer.finish();
        assert!(out.starts_with("[output truncated: first "));
        assert!(out.ends_with("é€😀"));
    }

    /// Arbitrary text mixing ASCII, whitespace and multi-byte characters.
    fn text() -> impl Strategy<Value = String> {
        const CHARS: [char; 9] = ['a', 'z', ' ', '\n', '\t', 'é', '€', '😀', '\u{3000}'];
        proptest::collection::vec(0..CHARS.len(), 0..200)
            .prop_map(|picks| picks.into_iter().map(|i| CHARS[i]).collect())
    }

    proptest! {
        #[test]
        fn head_keeps_a_prefix_and_counts_the_rest(text in text(), max in 0usize..320) {
            let t = truncate_head(&text, max);
            prop_assert!(text.starts_with(t.kept));
            prop_assert_eq!(t.kept.chars().count(), max.min(text.chars().count()));
            prop_assert_eq!(t.kept.chars().count() + t.dropped, text.chars().count());
        }

        #[test]
        fn tail_keeps_a_suffix_and_counts_the_rest(text in text(), max in 0usize..320) {
            let t = truncate_tail(&text, max);
            prop_assert!(text.ends_with(t.kept));
            prop_assert_eq!(t.kept.chars().count(), max.min(text.chars().count()));
            prop_assert_eq!(t.kept.chars().count() + t.dropped, text.chars().count());
        }

        #[test]
        fn a_head_buffer_equals_capping_the_whole_text(
            pieces in proptest::collection::vec(text(), 0..8),
            max in 0usize..400,
        ) {
            let mut buffer = HeadBuffer::new(max);
            for piece in &pieces {
                buffer.push_str(piece);
            }
            prop_assert_eq!(buffer.finish(), cap_head(&pieces.concat(), max));
        }

        #[test]
        fn a_tail_buffer_equals_trimming_then_capping_the_whole_stream(
            bytes in proptest::collection::vec(0usize..512, 0..600).prop_map(|picks| {
                // Half arbitrary bytes, half spaces, newlines and the bytes of '€' (E2 82 AC).
                const COMMON: [u8; 5] = [b' ', b'\n', 0xE2, 0x82, 0xAC];
                picks
                    .into_iter()
                    .map(|p| u8::try_from(p).unwrap_or(COMMON[p % COMMON.len()]))
                    .collect::<Vec<u8>>()
            }),
            cuts in proptest::collection::vec(0usize..600, 0..12),
            max in 0usize..200,
        ) {
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(bytes.len())).collect();
            cuts.sort_unstable();
            let mut buffer = TailBuffer::new(max);
            let mut from = 0;
            for cut in cuts.into_iter().chain([bytes.len()]) {
                buffer.push_bytes(&bytes[from..cut]);
                from = cut;
            }
            let whole = String::from_utf8_lossy(&bytes);
            prop_assert_eq!(buffer.finish(), cap_tail(whole.trim_end(), max));
        }

        #[test]
        fn a_tail_buffer_handles_long_text_and_whitespace_runs(
            runs in proptest::collection::vec((text(), 0usize..3000), 0..6),
            max in 0usize..100,
        ) {
            let mut whole = String::new();
            let mut buffer = TailBuffer::new(max);
            for (text, spaces) in &runs {
                let spaces = " ".repeat(*spaces);
                buffer.push_str(text);
                buffer.push_str(&spaces);
                whole.push_str(text);
                whole.push_str(&spaces);
            }
            prop_assert_eq!(buffer.finish(), cap_tail(whole.trim_end(), max));
        }
    }
}
