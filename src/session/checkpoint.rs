//! File checkpoints: the content a file had before oml changed it, kept so that a rewind can put
//! it back.
//!
//! Each session has a folder of objects (`<state>/checkpoints/<session id>/`), each named by the
//! SHA-256 of its bytes, so a content kept twice is stored once. What was changed, when, and
//! from which object to which content is not here: the session file records it as a
//! `checkpoint` entry ([`Checkpoint`]), in its place among the prompts, so a rewind survives a
//! crash and a fork copies it with the history. A fork links its parent's objects into its own
//! folder ([`CheckpointStore::adopt`]), so each session's folder holds every object its history
//! names and can be deleted with it.
//!
//! The folder holds file contents unredacted (a rewind must restore them exactly): it is
//! created private (0700, each object 0600), inside oml's state folder, which no confined command
//! may write. It knows nothing of Lisp, tools or which paths are allowed.

use std::io::{self, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::entry::Entry;

/// The custom entry `kind` of a file change.
pub const CHECKPOINT_KIND: &str = "checkpoint";

/// One file change as the session file records it:
/// `{"type":"custom","kind":"checkpoint","data":{"path","before","after","kept"}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The absolute path that was changed.
    pub path: String,
    /// The digest of the content before the change; `None` when the file did not exist.
    pub before: Option<String>,
    /// The digest of the content after the change; `None` when the change removed the file.
    pub after: Option<String>,
    /// Whether the content before is in the store (false: over the cap, or not a regular file).
    pub kept: bool,
}

impl Checkpoint {
    /// The entry that records this change.
    pub fn entry(&self) -> Entry {
        Entry::Custom {
            kind: CHECKPOINT_KIND.to_owned(),
            data: serde_json::to_value(self).unwrap_or(Value::Null),
        }
    }

    /// The change an entry records, when it records one.
    pub fn of(entry: &Entry) -> Option<Checkpoint> {
        match entry {
            Entry::Custom { kind, data } if kind == CHECKPOINT_KIND => {
                Checkpoint::deserialize(data).ok()
            }
            _ => None,
        }
    }
}

/// The hex SHA-256 of `bytes`, the name of their object.
pub fn digest(bytes: &[u8]) -> String {
    use sha2::{Digest as _, Sha256};
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What a file was when [`CheckpointStore::snapshot`] looked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Snapshot {
    /// No file there.
    Missing,
    /// A regular file with this content digest, kept in the store or not (over the cap).
    File { digest: String, kept: bool },
    /// Something else: a symbolic link, a folder, a device. Its content is not kept.
    Other,
}

impl Snapshot {
    /// The digest of the content, `None` for a missing file (or one that is not a file).
    pub fn digest(&self) -> Option<String> {
        match self {
            Snapshot::File { digest, .. } => Some(digest.clone()),
            _ => None,
        }
    }

    /// Whether a rewind could put this back.
    pub fn kept(&self) -> bool {
        match self {
            Snapshot::Missing => true,
            Snapshot::File { kept, .. } => *kept,
            Snapshot::Other => false,
        }
    }
}

/// Bytes read at a time while a file is hashed and copied.
const CHUNK: usize = 64 * 1024;

/// One session's objects.
#[derive(Clone, Debug)]
pub struct CheckpointStore {
    dir: PathBuf,
}

impl CheckpointStore {
    pub fn new(dir: impl Into<PathBuf>) -> CheckpointStore {
        CheckpointStore { dir: dir.into() }
    }

    /// The folder of the objects.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn object(&self, digest: &str) -> Option<PathBuf> {
        let hex = digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit());
        hex.then(|| self.dir.join(digest))
    }

    /// Bytes the objects take now.
    pub fn size(&self) -> u64 {
        let Ok(dir) = std::fs::read_dir(&self.dir) else {
            return 0;
        };
        dir.flatten()
            .filter_map(|e| e.metadata().ok())
            .filter(|m| m.is_file())
            .map(|m| m.len())
            .sum()
    }

    /// What the file at `path` is now (its final name not followed if a link), its content
    /// copied into the store when `keep` and the store would then hold at most `cap` bytes
    /// (`used` is what it holds now, as the caller counts it). The file is read once, hashed as
    /// it is copied, never whole in memory; an object is written to a temporary name and
    /// renamed, so it is whole or absent.
    pub fn snapshot(&self, path: &Path, keep: bool, used: u64, cap: u64) -> io::Result<Snapshot> {
        use sha2::{Digest as _, Sha256};
        let file = match open_no_follow(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Snapshot::Missing),
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Ok(Snapshot::Other),
            other => other?,
        };
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Ok(Snapshot::Other);
        }
        let keep = keep && used.saturating_add(meta.len()) <= cap;
        let mut copy = if keep {
            crate::paths::ensure_private_dir(&self.dir)?;
            Some(Temp::create(&self.dir)?)
        } else {
            None
        };
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; CHUNK];
        let mut reader = &file;
        loop {
            let n = io::Read::read(&mut reader, &mut buf)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            if let Some(t) = copy.as_mut() {
                t.file.write_all(&buf[..n])?;
            }
        }
        let digest = hex(&hasher.finalize());
        if let Some(t) = copy {
            t.finish(&self.dir.join(&digest))?;
        }
        Ok(Snapshot::File { digest, kept: keep })
    }

    /// `bytes` (a content read elsewhere, such as a file at git's `HEAD`) as a snapshot, kept
    /// under the same cap as [`CheckpointStore::snapshot`].
    pub fn snapshot_bytes(&self, bytes: &[u8], used: u64, cap: u64) -> io::Result<Snapshot> {
        let digest = digest(bytes);
        let keep = used.saturating_add(bytes.len() as u64) <= cap;
        let path = self.dir.join(&digest);
        if keep && !path.is_file() {
            crate::paths::ensure_private_dir(&self.dir)?;
            let mut t = Temp::create(&self.dir)?;
            t.file.write_all(bytes)?;
            t.finish(&path)?;
        }
        Ok(Snapshot::File { digest, kept: keep })
    }

    /// The content kept under `digest`, checked against it.
    pub fn get(&self, digest: &str) -> io::Result<Vec<u8>> {
        let path = self
            .object(digest)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a digest"))?;
        let bytes = std::fs::read(path)?;
        if self::digest(&bytes) != digest {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("checkpoint {digest} is damaged"),
            ));
        }
        Ok(bytes)
    }

    /// Make every object of `parent` one of this store's too (a hard link, else a copy): what
    /// a fork does, so that the history it copied can be rewound from its own folder.
    pub fn adopt(&self, parent: &CheckpointStore) -> io::Result<usize> {
        let Ok(dir) = std::fs::read_dir(&parent.dir) else {
            return Ok(0);
        };
        crate::paths::ensure_private_dir(&self.dir)?;
        let mut n = 0;
        for entry in dir.flatten() {
            let name = entry.file_name();
            let Some(digest) = name.to_str() else {
                continue;
            };
            let (Some(from), Some(to)) = (parent.object(digest), self.object(digest)) else {
                continue;
            };
            if to.exists() {
                continue;
            }
            if std::fs::hard_link(&from, &to).is_err() {
                std::fs::copy(&from, &to)?;
            }
            n += 1;
        }
        Ok(n)
    }

    /// Delete the store (its session was deleted); a missing folder is not an error.
    pub fn delete(&self) -> io::Result<()> {
        match std::fs::remove_dir_all(&self.dir) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

/// `path` opened for reading, its final name not followed when it is a symbolic link (`ELOOP`)
/// and without blocking on a FIFO.
fn open_no_follow(path: &Path) -> io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

/// An object being written: a private temporary file in the store, removed unless finished.
struct Temp {
    path: PathBuf,
    file: std::fs::File,
}

impl Temp {
    fn create(dir: &Path) -> io::Result<Temp> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!(".tmp-{}-{n}", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)?;
        Ok(Temp { path, file })
    }

    /// Renamed to `to` (an object already there is the same content: kept). Not synced: an
    /// object lost to a power cut is refused by [`CheckpointStore::get`] (its digest does not
    /// match), and the write it guards syncs its own file.
    fn finish(self, to: &Path) -> io::Result<()> {
        if to.is_file() {
            return Ok(());
        }
        std::fs::rename(&self.path, to)
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        // After a rename the name is gone and this fails harmlessly.
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).expect("write");
        p
    }

    #[test]
    fn contents_are_kept_once_under_their_digest_and_the_cap_holds() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = CheckpointStore::new(dir.path().join("s1"));
        let hello = file(dir.path(), "a", "hello");
        let snap = store.snapshot(&hello, true, 0, 100).expect("snapshot");
        let d = digest(b"hello");
        assert_eq!(
            snap,
            Snapshot::File {
                digest: d.clone(),
                kept: true
            }
        );
        assert_eq!(store.get(&d).ok(), Some(b"hello".to_vec()));
        assert_eq!(store.size(), 5);
        let world = file(dir.path(), "b", "world!");
        let over = store.snapshot(&world, true, 5, 10).expect("snapshot");
        assert_eq!(
            over,
            Snapshot::File {
                digest: digest(b"world!"),
                kept: false
            }
        );
        assert_eq!(store.size(), 5, "nothing left behind");
        let missing = store.snapshot(&dir.path().join("none"), true, 0, 100);
        assert_eq!(missing.ok(), Some(Snapshot::Missing));
        std::os::unix::fs::symlink(&hello, dir.path().join("link")).expect("link");
        let link = store.snapshot(&dir.path().join("link"), true, 0, 100);
        assert_eq!(link.ok(), Some(Snapshot::Other));
        assert!(store.get("../../etc/passwd").is_err());
        std::fs::write(store.dir().join(&d), b"tampered").expect("write");
        assert!(store.get(&d).is_err());
        let mode = std::fs::metadata(store.dir()).map(|m| {
            use std::os::unix::fs::PermissionsExt as _;
            m.permissions().mode() & 0o777
        });
        assert_eq!(mode.ok(), Some(0o700));
    }

    #[test]
    fn a_fork_adopts_its_parents_objects() {
        let dir = tempfile::tempdir().expect("temp dir");
        let parent = CheckpointStore::new(dir.path().join("p"));
        let old = file(dir.path(), "a", "old");
        let d = parent
            .snapshot(&old, true, 0, 100)
            .expect("snapshot")
            .digest();
        let d = d.expect("a digest");
        let child = CheckpointStore::new(dir.path().join("c"));
        assert_eq!(child.adopt(&parent).ok(), Some(1));
        assert_eq!(child.get(&d).ok(), Some(b"old".to_vec()));
        parent.delete().expect("delete");
        assert_eq!(child.get(&d).ok(), Some(b"old".to_vec()));
        let entry = Checkpoint {
            path: "/p/a".into(),
            before: Some(d),
            after: None,
            kept: true,
        };
        assert_eq!(Checkpoint::of(&entry.entry()), Some(entry));
    }
}
