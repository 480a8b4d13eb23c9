//! The limits that shape how a connection reads and writes: line length, buffer sizes, the
//! writer queue and batch, and how many abandoned request ids are remembered.
//!
//! Only numbers live here; the reader, writer and pending table that obey them are elsewhere.

#[cfg(doc)]
use super::{Malformed, MalformedKind};

/// The longest line the reader accepts by default, counted in bytes before its `\n` (a `\r`
/// before the `\n` counts). ACP carries whole files and images in one message, so this is
/// generous: Python's 64 KiB default crashed several ACP clients, and the Python SDK now allows
/// 50 MB. A longer line is discarded as it streams in (never buffered whole) and reported as
/// [`MalformedKind::TooLong`]; only its head is kept, as the excerpt, and reading goes on with the
/// next line.
pub const DEFAULT_MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// How much of a bad line is kept in [`Malformed::excerpt`] and in logs: the head, cut on a
/// character boundary.
pub const MALFORMED_EXCERPT_BYTES: usize = 200;

/// Size of the reader's buffer, which is how many bytes are asked of the OS per read.
pub const READ_BUFFER_BYTES: usize = 64 * 1024;

/// After a line longer than this has been read, the line buffer's memory is released instead
/// of kept for the next line, so one huge message does not hold its size for the connection's
/// life.
pub const RETAINED_LINE_BUFFER_BYTES: usize = 1024 * 1024;

/// How many messages may wait in the writer queue by default before senders wait for room. The
/// bound gives backpressure when the peer reads slowly; it cannot stall our reading, because the
/// reader never sends through the writer.
pub const DEFAULT_WRITE_QUEUE: usize = 1024;

/// The writer joins queued lines into one write until the batch reaches this many bytes (a single
/// longer line is written alone), then flushes.
pub const WRITE_BATCH_BYTES: usize = 256 * 1024;

/// How many ids of requests given up on (timed out, cancelled or dropped) are remembered, newest
/// kept, so that their late answers are logged quietly rather than warned about as unknown.
pub const ABANDONED_IDS_KEPT: usize = 1024;
