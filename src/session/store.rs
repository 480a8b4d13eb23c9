//! The session store: each session is an append-only JSONL file `<id>.jsonl` in one directory
//! (`$XDG_STATE_HOME/oml/sessions/`).
//!
//! The first line is a header `{"type":"session","id","cwd","created","version"}`; every later
//! line is an entry: `message`, `transcript`, `data` or `custom` (see [`Entry`], which is the
//! only place the line format is spelled out).
//!
//! Every entry carries `"at"` (seconds since the epoch). One writer thread per session owns the
//! file ([`super::writer`]): [`SessionLog::append`] queues a line (the thread writes it at once,
//! so a killed process loses at most what was still queued), [`SessionLog::flush`] fsyncs and
//! answers when done (the agent calls it at the end of every turn), and what the disk refuses
//! waits in memory. A torn last line (the process died mid-write) is skipped with a warning on
//! load, and the next writer starts on a fresh line. Loading and opening a session write
//! nothing.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use super::checkpoint::CheckpointStore;
use super::entry::{Entry, Header};
use super::writer;

pub use super::writer::{Flushed, SessionLog, Unsaved};

/// Seconds since the epoch, as entries carry them in `at`.
pub(super) fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| (d.as_millis() as f64) / 1000.0)
        .unwrap_or(0.0)
}

/// A new session id: time-ordered and unique across processes (`s<millis hex>-<pid hex><n>`).
pub fn new_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    format!("s{ms:011x}-{:x}{n:x}", std::process::id())
}

/// Whether `id` is safe as a file name (no separators, no dots at the start).
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && !id.starts_with('.')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// A session read back from its file.
#[derive(Debug, Default)]
pub struct Loaded {
    pub header: Header,
    /// Every entry after the header, in order (torn or unparsable lines left out).
    pub entries: Vec<Entry>,
    /// What was skipped and why.
    pub warnings: Vec<String>,
}

impl Loaded {
    /// The session's working directory from the header.
    pub fn cwd(&self) -> Option<PathBuf> {
        self.header.cwd.as_ref().map(PathBuf::from)
    }

    /// The transcript the entries rebuild: messages appended, replaced by `transcript` entries.
    pub fn transcript(&self) -> Vec<Value> {
        let mut t = Vec::new();
        for e in &self.entries {
            match e {
                Entry::Message { message } => t.push(message.clone()),
                Entry::Transcript { messages } => t.clone_from(messages),
                Entry::Session(_) | Entry::Data { .. } | Entry::Custom { .. } | Entry::Unknown => {}
            }
        }
        t
    }

    /// The session values the `data` entries leave (the last value of each key; null removes).
    pub fn data(&self) -> serde_json::Map<String, Value> {
        let mut data = serde_json::Map::new();
        for e in &self.entries {
            if let Entry::Data { key, value } = e {
                match value {
                    Value::Null => {
                        data.remove(key);
                    }
                    v => {
                        data.insert(key.clone(), v.clone());
                    }
                }
            }
        }
        data
    }
}

/// One line of `session/list` / `oml sessions`.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionSummary {
    pub id: String,
    pub cwd: PathBuf,
    /// The header's title (a fork's), else the first user message; on one line, cut to
    /// [`TITLE_CHARS`] characters.
    pub title: Option<String>,
    /// When the file was last written (RFC 3339, UTC).
    pub updated_at: String,
    /// The same as seconds since the epoch, for sorting.
    pub updated: SystemTime,
    /// The session it was forked from, and before which of its prompts (`None`: all of it).
    pub parent: Option<String>,
    pub fork_prompt: Option<usize>,
}

/// The directory of session files.
#[derive(Clone, Debug)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    pub fn new(dir: impl Into<PathBuf>) -> Store {
        Store { dir: dir.into() }
    }

    /// The folder the session files are in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of session `id`.
    pub fn path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.jsonl"))
    }

    pub fn exists(&self, id: &str) -> bool {
        valid_id(id) && self.path(id).is_file()
    }

    /// The title a listing shows for session `id` (see [`SessionSummary::title`]).
    pub fn title(&self, id: &str) -> Option<String> {
        summarize(&self.path(id)).and_then(|s| s.title)
    }

    /// Create the file of a new session (its header written) and start its writer. The header
    /// is fsynced with the first flush (or when the writer ends), not here: a session is created
    /// on the way to a prompt (`oml` opening its chat), where an fsync costs milliseconds, and
    /// a session that never got further has nothing worth keeping through a crash.
    pub fn create(&self, id: &str, cwd: &Path) -> std::io::Result<SessionLog> {
        if !valid_id(id) {
            return Err(std::io::Error::other(format!("bad session id {id:?}")));
        }
        crate::paths::ensure_private_dir(&self.dir)?;
        let mut file = OpenOptions::new()
            .create_new(true)
            .read(true)
            .append(true)
            .open(self.path(id))?;
        let header = Entry::Session(Header {
            id: id.to_owned(),
            cwd: Some(cwd.display().to_string()),
            created: now(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            ..Header::default()
        });
        let mut line = serde_json::to_string(&header)?.into_bytes();
        line.push(b'\n');
        file.write_all(&line)?;
        let (lock, file) = super::lock::SessionLock::acquire(&self.path(id), id, file)?;
        let start = writer::Start {
            len: line.len() as u64,
            torn: false,
            unsynced: vec![line],
        };
        Ok(writer::spawn(file, id, start, lock))
    }

    /// Open an existing session's file for appending (the first entry goes after a newline if
    /// its last line is torn). Nothing is written, so a session opens on a full disk.
    pub fn open(&self, id: &str) -> std::io::Result<SessionLog> {
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(self.path(id))?;
        let (lock, file) = super::lock::SessionLock::acquire(&self.path(id), id, file)?;
        let len = (&*file).seek(SeekFrom::End(0))?;
        let mut torn = false;
        if len > 0 {
            // The descriptor may be shared with a writer of this session opened earlier, which
            // appends whatever its offset: moving it here does not disturb that writer.
            (&*file).seek(SeekFrom::Start(len - 1))?;
            let mut last = [0u8; 1];
            (&*file).read_exact(&mut last)?;
            torn = last[0] != b'\n';
        }
        let start = writer::Start {
            len,
            torn,
            unsynced: Vec::new(),
        };
        Ok(writer::spawn(file, id, start, lock))
    }

    /// Read session `id`.
    pub fn load(&self, id: &str) -> std::io::Result<Loaded> {
        if !valid_id(id) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("no session {id}"),
            ));
        }
        load_file(&self.path(id))
    }

    /// The checkpoint store of session `id`: `<state>/checkpoints/<id>/`, beside the folder of
    /// session files.
    pub fn checkpoints(&self, id: &str) -> CheckpointStore {
        let state = self.dir.parent().unwrap_or(&self.dir);
        CheckpointStore::new(state.join("checkpoints").join(id))
    }

    /// Delete session `id`'s file and its checkpoints; a missing file is not an error.
    pub fn delete(&self, id: &str) -> std::io::Result<()> {
        if !valid_id(id) {
            return Ok(());
        }
        self.checkpoints(id).delete()?;
        match std::fs::remove_file(self.path(id)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Every session (in `cwd` when given), most recently updated first.
    pub fn list(&self, cwd: Option<&Path>) -> Vec<SessionSummary> {
        let Ok(dir) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for entry in dir.flatten() {
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
                continue;
            }
            let Some(summary) = summarize(&path) else {
                continue;
            };
            // A renamed or copied file names another session than its header does; `load`
            // finds sessions by file name, so listing it would offer what cannot be loaded.
            if path.file_stem().and_then(|s| s.to_str()) != Some(summary.id.as_str()) {
                tracing::debug!(
                    "not listing {}: its header names {}",
                    path.display(),
                    summary.id
                );
                continue;
            }
            if cwd.is_some_and(|c| c != summary.cwd) {
                continue;
            }
            out.push(summary);
        }
        out.sort_by(|a, b| b.updated.cmp(&a.updated).then_with(|| b.id.cmp(&a.id)));
        out
    }
}

/// Read a session file: the header, then entries; unparsable lines are skipped with a warning.
pub fn load_file(path: &Path) -> std::io::Result<Loaded> {
    let file = File::open(path)?;
    let mut loaded = Loaded::default();
    let mut first = true;
    for (n, line) in BufReader::new(file).split(b'\n').enumerate() {
        let line = line?;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match Entry::parse(&line) {
            Some(Entry::Session(header)) if first => {
                loaded.header = header;
                first = false;
            }
            Some(_) if first => return Err(no_header(path)),
            None if first && serde_json::from_slice::<Value>(&line).is_ok() => {
                return Err(no_header(path));
            }
            Some(entry) => loaded.entries.push(entry),
            None => {
                let w = format!(
                    "{}: line {} is not a complete entry; skipped",
                    path.display(),
                    n + 1
                );
                tracing::warn!("{w}");
                loaded.warnings.push(w);
            }
        }
    }
    if first {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{}: empty session file", path.display()),
        ));
    }
    Ok(loaded)
}

fn no_header(path: &Path) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("{}: no session header", path.display()),
    )
}

/// How many entries after the header a listing reads looking for the first user message (the
/// title); a session whose first one comes later is listed without a title.
pub const TITLE_SEARCH_LINES: usize = 200;

/// The custom entry `kind` a sub-agent's session starts with (`{session, agent, call}`, its
/// parent's): such a session is not listed (`task.fnl` records it).
pub const SUBAGENT_KIND: &str = "subagent-of";

/// The longest title a listing shows, in characters, `…` included.
pub const TITLE_CHARS: usize = 80;

/// The list line of one session file: the header, the first user message, the mtime.
fn summarize(path: &Path) -> Option<SessionSummary> {
    let file = File::open(path).ok()?;
    let updated = file.metadata().ok()?.modified().ok()?;
    let mut lines = BufReader::new(file).split(b'\n').peekable();
    let Some(Entry::Session(header)) = Entry::parse(&lines.next()?.ok()?) else {
        return None;
    };
    // A sub-agent's session says so first: it belongs to its parent's, not to the list.
    if let Some(Ok(line)) = lines.peek()
        && let Some(Entry::Custom { kind, .. }) = Entry::parse(line)
        && kind == SUBAGENT_KIND
    {
        return None;
    }
    let (parent, fork_prompt) = (header.parent, header.fork_prompt);
    let id = Some(header.id).filter(|id| !id.is_empty())?;
    let cwd = PathBuf::from(header.cwd?);
    let mut title = header
        .title
        .filter(|t| !t.trim().is_empty())
        .map(|t| make_title(&t));
    let search = if title.is_some() {
        0
    } else {
        TITLE_SEARCH_LINES
    };
    for line in lines.take(search) {
        let Ok(line) = line else { break };
        if let Some(Entry::Message { message }) = Entry::parse(&line)
            && message["role"] == "user"
        {
            // A prompt with images is a list of parts: its text part names it.
            let content = &message["content"];
            let text = content
                .as_str()
                .or_else(|| content.as_array()?.iter().find_map(|p| p["text"].as_str()));
            title = text.map(make_title);
            break;
        }
    }
    Some(SessionSummary {
        id,
        cwd,
        title,
        updated_at: rfc3339(updated),
        updated,
        parent,
        fork_prompt,
    })
}

/// `text` on one line, cut to [`TITLE_CHARS`] characters: a session's title.
pub fn make_title(text: &str) -> String {
    let one: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() > TITLE_CHARS {
        let cut: String = one.chars().take(TITLE_CHARS - 1).collect();
        format!("{cut}…")
    } else {
        one
    }
}

/// `t` as `YYYY-MM-DDTHH:MM:SSZ` (UTC).
pub fn rfc3339(t: SystemTime) -> String {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn append_load_and_a_torn_line() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("sessions"));
        let log = store.create("s1", Path::new("/p")).unwrap();
        log.message(&json!({"role": "user", "content": "hello\nthere"}));
        log.message(&json!({"role": "assistant", "content": "hi"}));
        log.append(&Entry::Data {
            key: "model".into(),
            value: json!("m"),
        });
        log.flush_blocking();
        drop(log);
        // A torn last line, as a kill -9 mid-write leaves it.
        let mut f = OpenOptions::new()
            .append(true)
            .open(store.path("s1"))
            .unwrap();
        f.write_all(br#"{"type":"message","message":{"ro"#).unwrap();
        drop(f);
        let loaded = store.load("s1").unwrap();
        assert_eq!(loaded.entries.len(), 3);
        assert_eq!(loaded.warnings.len(), 1);
        assert_eq!(loaded.transcript().len(), 2);
        assert_eq!(loaded.data()["model"], "m");
        // Appending after a torn line starts on a fresh line.
        let log = store.open("s1").unwrap();
        log.append(&Entry::Transcript {
            messages: vec![json!({"role": "user", "content": "x"})],
        });
        log.flush_blocking();
        let loaded = store.load("s1").unwrap();
        assert_eq!(loaded.entries.len(), 4);
        assert_eq!(
            loaded.transcript(),
            vec![json!({"role": "user", "content": "x"})]
        );
        let list = store.list(Some(Path::new("/p")));
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].title.as_deref(), Some("hello there"));
        assert!(store.list(Some(Path::new("/q"))).is_empty());
        store.delete("s1").unwrap();
        store.delete("s1").unwrap();
        assert!(store.list(None).is_empty());
    }

    /// A file as older oml wrote it, with a line of a type a newer oml might write: it loads,
    /// the unknown line is kept in place and ignored, and no warning is raised for it.
    #[test]
    fn old_files_and_unknown_entries_load() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let lines = [
            r#"{"type":"session","id":"s2","cwd":"/p","created":0,"version":"0"}"#,
            r#"{"type":"message","message":{"role":"user","content":"hi"},"at":1.5}"#,
            r#"{"type":"bookmark","name":"later","at":2}"#,
            r#"{"type":"data","key":"model","value":"m","at":3}"#,
            r#"{"type":"data","key":"model","value":null,"at":4}"#,
        ];
        std::fs::write(store.path("s2"), lines.join("\n") + "\n").unwrap();
        let loaded = store.load("s2").unwrap();
        assert_eq!(loaded.cwd(), Some(PathBuf::from("/p")));
        assert_eq!(loaded.entries.len(), 4);
        assert_eq!(loaded.entries[1], Entry::Unknown);
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        assert_eq!(
            loaded.transcript(),
            vec![json!({"role": "user", "content": "hi"})]
        );
        assert!(loaded.data().is_empty());
        assert_eq!(store.list(None)[0].title.as_deref(), Some("hi"));
    }

    #[test]
    fn ids_are_unique_and_safe() {
        let a = new_id();
        let b = new_id();
        assert_ne!(a, b);
        assert!(valid_id(&a));
        assert!(!valid_id("../x"));
        assert!(!valid_id(".x"));
    }

    #[test]
    fn dates() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + std::time::Duration::from_secs(1_796_064_000);
        assert_eq!(rfc3339(t), "2026-11-30T18:40:00Z");
    }
}
