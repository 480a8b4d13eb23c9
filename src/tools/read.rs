//! The `read` tool: a window of a text file's lines, numbered, with a footer saying how to
//! continue.
//!
//! The contract is the original's: lines split on `\n` or `\r\n`, trailing empty lines dropped;
//! each line shown as a 6-wide right-aligned number, a TAB and the text; the window starts at
//! `max(1, offset)` and spans `limit` lines (default [`READ_DEFAULT_LIMIT`]); the body is
//! head-capped at `max_chars` characters; a footer `[lines S-E of N; use offset=E+1 to
//! continue]` follows when lines remain.
//!
//! Beyond the original:
//! - **Memory follows the window, not the file.** The file is streamed once: lines before and
//!   after the window are only counted (for the `N` in the footer), never stored, and even a
//!   single huge line inside the window is stored only up to the character cap.
//! - **Binary files are refused**: a NUL byte, or bytes that are not UTF-8, in the first
//!   [`BINARY_SNIFF_BYTES`] bytes. Invalid UTF-8 further on (rare in text files) is shown as
//!   U+FFFD; the count in a truncation notice is then approximate.
//! - **Only regular files are read**, so a FIFO or a device cannot hang the call.
//! - A UTF-8 byte-order mark is not shown (`edit` ignores it too when matching).
//!
//! It deliberately does not know about images, encodings other than UTF-8, or tokens.
//!
//! Compare with pi: `packages/coding-agent/src/core/tools/read.ts`.
//! Compare with oml.clj: `oml.tools/read`.

use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

use super::truncate::HeadBuffer;
use super::{READ_DEFAULT_LIMIT, READ_MAX_CHARS, ToolError, ToolOutput};

/// How many bytes at the start of a file are examined to decide whether it is text.
pub const BINARY_SNIFF_BYTES: usize = 8 * 1024;

/// The settings that shape `read`'s output (the Lisp layer passes its settings here).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadLimits {
    /// Characters of numbered text kept; the head is kept. Default [`READ_MAX_CHARS`].
    pub max_chars: usize,
    /// Lines shown when no `limit` is given. Default [`READ_DEFAULT_LIMIT`].
    pub default_limit: usize,
}

impl Default for ReadLimits {
    fn default() -> Self {
        Self {
            max_chars: READ_MAX_CHARS,
            default_limit: READ_DEFAULT_LIMIT,
        }
    }
}

/// Read lines `offset ..` (1-based, at most `limit` of them) of the file at `path` (already
/// resolved).
///
/// Never panics; "File not found", "Is a directory", binary files, an offset past the end, and
/// I/O failures are error [`ToolOutput`]s with the original's messages.
pub fn read(
    path: &Path,
    offset: Option<i64>,
    limit: Option<i64>,
    limits: &ReadLimits,
) -> ToolOutput {
    match try_read(path, offset, limit, limits) {
        Ok(text) => ToolOutput::ok(text),
        Err(error) => error.into(),
    }
}

// --- private helpers

/// The UTF-8 byte-order mark.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Read buffer size: large enough that a 50 MB file is a few hundred reads.
const READ_BUFFER_BYTES: usize = 64 * 1024;

fn try_read(
    path: &Path,
    offset: Option<i64>,
    limit: Option<i64>,
    limits: &ReadLimits,
) -> Result<String, ToolError> {
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(ToolError::NotFound(path.to_path_buf()));
        }
        Err(e) => return Err(ToolError::io("read", path, e)),
    };
    if meta.is_dir() {
        return Err(ToolError::IsDirectory(path.to_path_buf()));
    }
    if !meta.is_file() {
        return Err(ToolError::io(
            "read",
            path,
            io::Error::other("not a regular file"),
        ));
    }
    let file = crate::regular::open_regular(path).map_err(|e| ToolError::io("read", path, e))?;
    read_from(path, file, offset, limit, limits)
}

/// [`read`] of `text` given for the file at `path` (the unsaved buffer an editor holds): the
/// same numbering, window, limits, binary check and messages, without touching the disk.
pub fn read_text(
    path: &Path,
    text: &str,
    offset: Option<i64>,
    limit: Option<i64>,
    limits: &ReadLimits,
) -> ToolOutput {
    match read_from(
        path,
        io::Cursor::new(text.as_bytes()),
        offset,
        limit,
        limits,
    ) {
        Ok(text) => ToolOutput::ok(text),
        Err(error) => error.into(),
    }
}

/// The lines `offset ..` of what `file` holds, `path` naming it in messages.
fn read_from(
    path: &Path,
    mut file: impl Read,
    offset: Option<i64>,
    limit: Option<i64>,
    limits: &ReadLimits,
) -> Result<String, ToolError> {
    let mut head = Vec::with_capacity(BINARY_SNIFF_BYTES);
    (&mut file)
        .take(BINARY_SNIFF_BYTES as u64)
        .read_to_end(&mut head)
        .map_err(|e| ToolError::io("read", path, e))?;
    if let Some(reason) = binary_reason(&head, head.len() < BINARY_SNIFF_BYTES) {
        return Err(ToolError::Binary {
            path: path.to_path_buf(),
            reason,
        });
    }
    if head.starts_with(BOM) {
        head.drain(..BOM.len());
    }
    let reader = io::Cursor::new(head).chain(file);
    let mut reader = BufReader::with_capacity(READ_BUFFER_BYTES, reader);

    if let Some(limit) = limit.filter(|l| *l < 1) {
        return Err(ToolError::LimitTooSmall(limit));
    }
    let start = offset.unwrap_or(1).max(1);
    let limit = limit.unwrap_or_else(|| i64::try_from(limits.default_limit).unwrap_or(i64::MAX));
    let window = Window::new(start, limit);
    let scan =
        scan(&mut reader, window, limits.max_chars).map_err(|e| ToolError::io("read", path, e))?;

    let lines = scan.lines;
    if lines == 0 {
        return Ok(String::new());
    }
    let Some(last) = window.last.filter(|_| start as u64 <= lines) else {
        return Err(ToolError::OffsetPastEnd {
            offset: start,
            lines,
        });
    };
    let end = last.min(lines);
    let mut text = scan.body.finish();
    if end < lines {
        let next = end + 1;
        text.push_str(&format!(
            "\n[lines {start}-{end} of {lines}; use offset={next} to continue]"
        ));
    }
    Ok(text)
}

/// Why `head` (the first bytes of a file) does not look like text, if it does not.
/// `complete` says whether `head` is the whole file, so a character cut at its end is an error.
fn binary_reason(head: &[u8], complete: bool) -> Option<String> {
    if let Some(at) = memchr::memchr(0, head) {
        return Some(format!("a NUL byte at byte {at}"));
    }
    match std::str::from_utf8(head) {
        Ok(_) => None,
        Err(error) if error.error_len().is_none() && !complete => None,
        Err(error) => Some(format!("invalid UTF-8 at byte {}", error.valid_up_to())),
    }
}

/// The lines to show: `first ..= last` (1-based); `last` is `None` for an empty window.
#[derive(Clone, Copy, Debug)]
struct Window {
    first: u64,
    last: Option<u64>,
}

impl Window {
    fn new(start: i64, limit: i64) -> Self {
        let first = start.max(1) as u64;
        let last = (limit > 0).then(|| first.saturating_add(limit as u64 - 1));
        Self { first, last }
    }

    fn contains(&self, line: u64) -> bool {
        self.last
            .is_some_and(|last| (self.first..=last).contains(&line))
    }
}

/// What one pass over the file found.
struct Scan {
    /// The number of lines, not counting trailing empty lines.
    lines: u64,
    /// The numbered window lines that lie within `lines`, capped.
    body: HeadBuffer,
}

/// Stream the whole file once: count its lines and format the window's lines into a capped body.
///
/// Empty lines inside the window are held back as a count until a non-empty line follows
/// (anywhere in the file), because trailing empty lines are not lines.
fn scan(reader: &mut impl BufRead, window: Window, max_chars: usize) -> io::Result<Scan> {
    let mut body = HeadBuffer::new(max_chars);
    let mut shown = 0u64; // window lines written to `body`
    let mut held_empty: Option<(u64, u64)> = None; // (first line number, count)
    let mut last_nonempty = 0u64;
    let mut number = 0u64;
    let mut text = Vec::new();

    loop {
        number += 1;
        let store = window.contains(number);
        // A character is at most four bytes, so this fills what is left of the cap. A character
        // cut at the end becomes one U+FFFD past the cap, and its other bytes count as nothing,
        // so the character count stays right.
        let keep = if store {
            body.room().saturating_mul(4)
        } else {
            0
        };
        text.clear();
        let Some(line) = read_line(reader, &mut text, keep, store)? else {
            break;
        };
        if line.empty {
            if store {
                let (first, count) = held_empty.unwrap_or((number, 0));
                held_empty = Some((first, count + 1));
            }
            continue;
        }
        last_nonempty = number;
        if let Some((first, count)) = held_empty.take() {
            for empty in first..first + count {
                push_line(&mut body, &mut shown, empty, "", 0);
            }
        }
        if store {
            push_line(
                &mut body,
                &mut shown,
                number,
                &String::from_utf8_lossy(&text),
                line.dropped_chars,
            );
        }
    }
    Ok(Scan {
        lines: last_nonempty,
        body,
    })
}

/// Append one numbered line (`     7\ttext`), after a newline unless it is the first.
fn push_line(body: &mut HeadBuffer, shown: &mut u64, number: u64, text: &str, dropped: u64) {
    if *shown > 0 {
        body.push_str("\n");
    }
    *shown += 1;
    body.push_str(&format!("{number:>6}\t"));
    body.push_str(text);
    body.skip_chars(dropped);
}

/// One line as [`read_line`] saw it.
struct Line {
    /// No text (the line terminator does not count).
    empty: bool,
    /// Characters of the line not stored because they lie past `keep` bytes (counted only when
    /// storing).
    dropped_chars: u64,
}

/// Read the next line (through `\n`, or to the end of the file), storing at most `keep` bytes
/// of its text in `text`, without the `\n` or a `\r` right before it. `None` at the end of the
/// file.
fn read_line(
    reader: &mut impl BufRead,
    text: &mut Vec<u8>,
    keep: usize,
    count: bool,
) -> io::Result<Option<Line>> {
    let mut len = 0u64; // bytes of text, terminator excluded
    let mut last = None; // the last text byte
    let mut dropped_chars = 0u64;
    let mut any = false;
    loop {
        let available = reader.fill_buf()?;
        if available.is_empty() {
            break;
        }
        any = true;
        let newline = memchr::memchr(b'\n', available);
        let segment = &available[..newline.unwrap_or(available.len())];
        if let Some(&byte) = segment.last() {
            last = Some(byte);
        }
        len += segment.len() as u64;
        let room = keep.saturating_sub(text.len()).min(segment.len());
        text.extend_from_slice(&segment[..room]);
        if count {
            dropped_chars += chars_in(&segment[room..]);
        }
        let used = newline.map_or(segment.len(), |at| at + 1);
        reader.consume(used);
        if newline.is_some() {
            if last == Some(b'\r') {
                // `\r\n` ends the line; the `\r` is not text.
                len -= 1;
                if text.len() as u64 > len {
                    text.pop();
                } else if count {
                    dropped_chars -= 1;
                }
            }
            break;
        }
    }
    Ok(any.then_some(Line {
        empty: len == 0,
        dropped_chars,
    }))
}

/// Characters in UTF-8 `bytes`: every byte that does not continue a multi-byte character.
fn chars_in(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|&&b| (b & 0xC0) != 0x80).count() as u64
}
