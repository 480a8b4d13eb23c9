//! What is kept of a persistent `oml ask` session after its owner ends: the agent's session id,
//! to load or resume it, and the prompts it ran, for `sessions history`. One JSON file per key
//! in `<state>/ask/`, written whole to a temporary name and renamed over the old one.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{HISTORY_KEEP, Key};

/// How many characters of a prompt or an answer the history keeps.
pub const HISTORY_TEXT_CHARS: usize = 2000;

/// One key's record.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Record {
    pub key: Option<Key>,
    /// The agent's session id, once there is one.
    pub session_id: Option<String>,
    /// Unix seconds of the last change.
    pub updated: u64,
    #[serde(default)]
    pub history: Vec<Entry>,
}

/// One prompt and how it ended.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Entry {
    /// Unix seconds when it started.
    pub at: u64,
    pub session_id: String,
    pub prompt: String,
    /// The wire's stop reason, or `failed`.
    pub stop_reason: String,
    pub text: String,
}

impl Record {
    /// The record at `path`; a missing or unreadable one is empty (a broken record loses the
    /// history, never the next prompt).
    pub fn read(path: &Path) -> Record {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                tracing::warn!("ignoring the broken record {}: {e}", path.display());
                Record::default()
            }),
            Err(_) => Record::default(),
        }
    }

    /// Writes the record (0600) through a temporary file in the same folder.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        if let Some(dir) = path.parent() {
            crate::paths::ensure_private_dir(dir)?;
        }
        let tmp = temp_name(path);
        let bytes = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(&bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    }

    /// Adds a finished prompt, keeping the last [`HISTORY_KEEP`].
    pub fn push(&mut self, entry: Entry) {
        self.history.push(entry);
        let extra = self.history.len().saturating_sub(HISTORY_KEEP);
        self.history.drain(..extra);
        self.updated = now();
    }
}

fn temp_name(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{}.tmp", std::process::id()));
    PathBuf::from(name)
}

/// Unix seconds now.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// At most [`HISTORY_TEXT_CHARS`] characters of `text`, with `…` when cut.
pub fn clip(text: &str) -> String {
    match text.char_indices().nth(HISTORY_TEXT_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// Every record in `dir` with its file, newest first.
pub fn all(dir: &Path) -> Vec<(PathBuf, Record)> {
    let mut found: Vec<(PathBuf, Record)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let r = Record::read(&p);
            (p, r)
        })
        .filter(|(_, r)| r.key.is_some())
        .collect();
    found.sort_by_key(|(_, r)| std::cmp::Reverse(r.updated));
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_keeps_the_newest_and_survives_a_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        let mut r = Record::default();
        for i in 0..(HISTORY_KEEP + 3) {
            r.push(Entry {
                at: i as u64,
                session_id: "s".into(),
                prompt: format!("p{i}"),
                stop_reason: "end_turn".into(),
                text: String::new(),
            });
        }
        r.write(&path).unwrap();
        let back = Record::read(&path);
        assert_eq!(back.history.len(), HISTORY_KEEP);
        assert_eq!(back.history[0].prompt, "p3");
        std::fs::write(&path, "{not json").unwrap();
        assert!(Record::read(&path).history.is_empty());
        assert_eq!(
            clip(&"é".repeat(HISTORY_TEXT_CHARS + 1)).chars().count(),
            HISTORY_TEXT_CHARS + 1
        );
    }
}
