//! The writer of one session file: a thread that owns the file, appends each line as it is
//! queued, fsyncs on [`SessionLog::flush`], and keeps what the disk refused.
//!
//! A line the disk refuses (`ENOSPC`, `EIO`, a size limit) is not lost: the file is cut back to
//! its last complete line, and the line waits in memory, with every later one behind it, in
//! order. Each later append or flush tries them again first, so once space returns the file
//! catches up and no line is missing or torn. The same holds for a failed fsync: the lines
//! written since the last fsync that succeeded are written again, since the kernel may have
//! dropped them. A flush answers what is still not saved ([`Unsaved`]), which the agent turns
//! into a notice the user sees.
//!
//! It knows nothing of what the lines mean; [`super::store`] makes and reads them.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Write as _};
use std::sync::{Arc, mpsc};

use serde_json::Value;

use super::entry::Entry;
use super::lock::SessionLock;
use super::redact::Redactions;

/// What a session's file is missing: entries written to memory only, because the disk refused
/// them (they are written when it takes them again).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{entries} session entries ({bytes} bytes) are not saved yet: {error}")]
pub struct Unsaved {
    /// How many entries wait in memory.
    pub entries: usize,
    /// Their size in bytes.
    pub bytes: usize,
    /// The last error the disk gave.
    pub error: String,
}

/// What a flush found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Flushed {
    /// What is still only in memory, if anything.
    pub unsaved: Option<Unsaved>,
    /// How many entries kept in memory at an earlier flush reached the disk since.
    pub recovered: usize,
}

/// What the writer thread is asked to do.
enum Command {
    Append(Vec<u8>),
    /// Append, then say so: the caller waits until the line is written (or kept, refused).
    AppendThenTell(Vec<u8>, mpsc::Sender<()>),
    Flush(tokio::sync::oneshot::Sender<Flushed>),
}

/// The handle of one session's writer thread; dropping the last clone ends the thread after it
/// has written (and fsynced) everything it can.
#[derive(Clone)]
pub struct SessionLog {
    tx: mpsc::Sender<Command>,
    /// Held while the session is open here (dropped after the writer has been told to stop).
    _lock: Arc<SessionLock>,
}

impl SessionLog {
    /// Queue one entry; `at` is added.
    pub fn append(&self, entry: &Entry) {
        self.append_redacted(entry, &Redactions::default());
    }

    /// Queue one entry with the secrets of `redactions` replaced by their names.
    pub fn append_redacted(&self, entry: &Entry, redactions: &Redactions) {
        match entry.to_line(super::store::now()) {
            Ok(line) => {
                let _ = self.tx.send(Command::Append(redactions.apply(line)));
            }
            Err(e) => tracing::warn!("session log: cannot encode an entry: {e}"),
        }
    }

    /// Append a message entry for `message`, serialized straight into its line (see
    /// [`super::entry::message_line`]) with the secrets of `redactions` replaced, and wait until
    /// it is written: see [`SessionLog::append_line_and_wait`].
    /// A message that does not serialize is an error, and nothing is written.
    pub fn append_message_and_wait<M: serde::Serialize>(
        &self,
        message: &M,
        redactions: &Redactions,
    ) -> serde_json::Result<()> {
        let line = super::entry::message_line(message, super::store::now())?;
        self.append_line_and_wait(redactions.apply(line));
        Ok(())
    }

    /// Append `line` (a whole line, secrets already taken out) and wait until the writer has written it,
    /// or kept it because the disk refused it. A line over [`UNSYNCED_MAX_BYTES`] is fsynced and
    /// let go before the answer: a caller about to make another copy of a large entry (the
    /// transcript's) waits so that the two are never in memory at once.
    fn append_line_and_wait(&self, line: Vec<u8>) {
        let (tx, rx) = mpsc::channel();
        if self.tx.send(Command::AppendThenTell(line, tx)).is_ok() {
            let _ = rx.recv();
        }
    }

    /// Queue a message entry.
    pub fn message(&self, message: &Value) {
        self.append(&Entry::Message {
            message: message.clone(),
        });
    }

    /// Wait until everything queued is written and fsynced, or kept in memory because the disk
    /// refused it (then the answer says so).
    pub async fn flush(&self) -> Flushed {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if self.tx.send(Command::Flush(tx)).is_ok() {
            return rx.await.unwrap_or_default();
        }
        Flushed::default()
    }

    /// [`SessionLog::flush`] for callers outside an async runtime.
    pub fn flush_blocking(&self) -> Flushed {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if self.tx.send(Command::Flush(tx)).is_ok() {
            return rx.blocking_recv().unwrap_or_default();
        }
        Flushed::default()
    }
}

/// Where a new writer starts.
pub(super) struct Start {
    /// The file's length.
    pub len: u64,
    /// The file ends in an incomplete line (a process died writing it).
    pub torn: bool,
    /// Lines already in the file but not fsynced (a new file's header), at its start.
    pub unsynced: Vec<Vec<u8>>,
}

/// Start the writer of `file`, holding `lock`. Starting writes nothing: a torn end gets its
/// newline with the first line written, so a session opens on a full disk.
pub(super) fn spawn(file: Arc<File>, id: &str, start: Start, lock: SessionLock) -> SessionLog {
    let (tx, rx) = mpsc::channel::<Command>();
    let name = format!("session-log-{id}");
    let held: u64 = start.unsynced.iter().map(|l| l.len() as u64).sum();
    let mut writer = Writer {
        file,
        written: start.len,
        synced: start.len - held.min(start.len),
        dirty: held > 0,
        torn: start.torn,
        torn_newline_at: None,
        unsynced_bytes: start.unsynced.iter().map(Vec::len).sum(),
        unsynced: start.unsynced,
        pending: VecDeque::new(),
        error: None,
        backlog: 0,
        recovered: 0,
    };
    let lock = Arc::new(lock);
    // The thread holds the lock too, until it has closed its copy of the descriptor: opening
    // the session again meanwhile shares that descriptor rather than finding it locked.
    let thread_lock = Arc::clone(&lock);
    let spawn = std::thread::Builder::new().name(name).spawn(move || {
        while let Ok(cmd) = rx.recv() {
            match cmd {
                Command::Append(line) => writer.append(line),
                Command::AppendThenTell(line, done) => {
                    writer.append(line);
                    let _ = done.send(());
                }
                Command::Flush(done) => {
                    let _ = done.send(writer.flush());
                }
            }
        }
        if let Some(lost) = writer.flush().unsaved {
            tracing::warn!(
                "session log: closed with {} entries ({} bytes) not saved ({}); they are lost",
                lost.entries,
                lost.bytes,
                lost.error
            );
        }
        drop(writer);
        drop(thread_lock);
    });
    if let Err(e) = spawn {
        tracing::warn!("session log: cannot start the writer: {e}");
    }
    SessionLog { tx, _lock: lock }
}

/// Bytes of lines written but not yet fsynced above which the writer fsyncs at once instead of
/// at the end of the turn. Until its fsync a line stays in memory, to be written again if the
/// fsync fails; a turn that wrote a large file would otherwise hold it to the end.
pub const UNSYNCED_MAX_BYTES: usize = 4 << 20;

/// The writer thread's state.
struct Writer {
    /// Shared with the session's lock, and with another writer of the same session in this
    /// process; every write appends (`O_APPEND`), so a shared offset does not matter.
    file: Arc<File>,
    /// The file's length up to its last complete line: where a failed write is cut back to.
    written: u64,
    /// The length the last fsync that succeeded covered.
    synced: u64,
    /// Whether bytes were written since the last fsync.
    dirty: bool,
    /// The file ends in an incomplete line: the next line starts with a newline.
    torn: bool,
    /// Where the newline that ended a torn line was written, until an fsync covers it: a cut
    /// back to before it makes the end torn again.
    torn_newline_at: Option<u64>,
    /// The lines written since the last fsync that succeeded, written again if an fsync fails.
    unsynced: Vec<Vec<u8>>,
    /// Their bytes.
    unsynced_bytes: usize,
    /// The lines the disk refused, oldest first; no later line is written before them.
    pending: VecDeque<Vec<u8>>,
    /// The last error the disk gave, while lines are pending.
    error: Option<io::Error>,
    /// How many of the pending lines, from the front, have waited through a refusal.
    backlog: usize,
    /// Lines of the backlog written since the last flush answer.
    recovered: usize,
}

impl Writer {
    fn append(&mut self, line: Vec<u8>) {
        self.pending.push_back(line);
        self.drain();
    }

    /// Write the pending lines in order, stopping at the first the disk refuses.
    fn drain(&mut self) {
        while let Some(line) = self.pending.pop_front() {
            match self.write_line(&line) {
                Ok(()) => {
                    if self.backlog > 0 {
                        self.backlog -= 1;
                        self.recovered += 1;
                    }
                    self.unsynced_bytes += line.len();
                    self.unsynced.push(line);
                    // Past the limit, fsync now (this thread only waits for it) so the lines
                    // need not stay in memory until the end of the turn. Not while refused
                    // lines are being written again: the flush that ends the turn accounts
                    // for those.
                    let healthy = self.error.is_none() && self.backlog == 0 && self.recovered == 0;
                    if healthy && self.unsynced_bytes > UNSYNCED_MAX_BYTES && !self.sync() {
                        return;
                    }
                }
                Err(e) => {
                    self.pending.push_front(line);
                    self.refused(e);
                    return;
                }
            }
        }
        self.error = None;
    }

    /// One line in one write, after the newline a torn end needs.
    fn write_line(&mut self, line: &[u8]) -> io::Result<()> {
        if self.torn {
            (&*self.file).write_all(b"\n")?;
            self.torn_newline_at = Some(self.written);
            self.written += 1;
            self.torn = false;
        }
        self.dirty = true;
        (&*self.file).write_all(line)?;
        self.written += line.len() as u64;
        Ok(())
    }

    /// The disk refused a write: cut off what part of the line reached the file, so the next
    /// attempt starts on a line of its own (or mark the end torn when even that fails).
    fn refused(&mut self, error: io::Error) {
        if self.error.is_none() {
            tracing::warn!("session log: {error}; keeping the entries in memory");
        }
        self.backlog = self.pending.len();
        if let Err(e) = self.file.set_len(self.written) {
            tracing::warn!("session log: cannot cut a partial line off: {e}");
            // The partial line stays, as a torn line the loader skips; the next line starts
            // after it, on a line of its own.
            if let Ok(meta) = self.file.metadata() {
                self.written = meta.len();
            }
            self.torn = true;
        }
        self.error = Some(error);
    }

    /// Write what is pending, fsync, and say what is still not saved.
    fn flush(&mut self) -> Flushed {
        self.drain();
        if self.dirty && self.pending.is_empty() {
            self.sync();
        }
        let unsaved = self.error.as_ref().map(|e| Unsaved {
            entries: self.pending.len(),
            bytes: self.pending.iter().map(Vec::len).sum(),
            error: e.to_string(),
        });
        Flushed {
            unsaved,
            recovered: std::mem::take(&mut self.recovered),
        }
    }

    /// fsync what was written; `false` when that failed (the lines are queued again).
    fn sync(&mut self) -> bool {
        match self.file.sync_data() {
            Ok(()) => {
                self.synced = self.written;
                self.dirty = false;
                self.unsynced.clear();
                self.unsynced_bytes = 0;
                self.torn_newline_at = None;
                true
            }
            Err(e) => {
                self.sync_failed(e);
                false
            }
        }
    }

    /// An fsync failed: what it covered may not be on disk, so the lines written since the last
    /// good one go back to the front of the queue, and the file is cut back to that point.
    fn sync_failed(&mut self, error: io::Error) {
        tracing::warn!("session log: fsync failed: {error}; writing the turn again");
        match self.file.set_len(self.synced) {
            Ok(()) => {
                self.written = self.synced;
                // The cut took the newline that ended a torn line with it.
                if self.torn_newline_at.is_some_and(|at| at >= self.synced) {
                    self.torn = true;
                    self.torn_newline_at = None;
                }
                self.unsynced_bytes = 0;
                for line in self.unsynced.drain(..).rev() {
                    self.pending.push_front(line);
                }
                self.backlog = self.pending.len();
                self.recovered = 0;
            }
            Err(e) => tracing::warn!("session log: cannot cut the file back: {e}"),
        }
        self.error = Some(error);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writer(file: File) -> Writer {
        Writer {
            file: Arc::new(file),
            written: 0,
            synced: 0,
            dirty: false,
            torn: false,
            torn_newline_at: None,
            unsynced: Vec::new(),
            unsynced_bytes: 0,
            pending: VecDeque::new(),
            error: None,
            backlog: 0,
            recovered: 0,
        }
    }

    #[test]
    fn lines_past_the_limit_are_fsynced_at_once_and_let_go() {
        let dir = tempfile::tempdir().unwrap();
        let file = File::create(dir.path().join("s.jsonl")).unwrap();
        let mut w = writer(file);
        w.append(b"{\"small\":1}\n".to_vec());
        assert_eq!(
            w.unsynced.len(),
            1,
            "a small line waits for the turn's fsync"
        );
        let mut big = vec![b'y'; UNSYNCED_MAX_BYTES];
        big.push(b'\n');
        w.append(big);
        assert!(
            w.unsynced.is_empty(),
            "past the limit the lines are fsynced"
        );
        assert_eq!((w.unsynced_bytes, w.synced), (0, w.written));
        assert_eq!(w.written, 12 + UNSYNCED_MAX_BYTES as u64 + 1);
        assert!(!w.dirty);
    }
}
