//! Atomic file replacement for `write` and `edit`: the new content goes to a temporary file in
//! the same directory, is flushed to disk, and is renamed over the target, so a reader (or a
//! crash) sees either the old file or the new one, never half of it.
//!
//! What it keeps: the target's permission bits and, where allowed, its owner; a symlink target is
//! written through (the link stays a link). What it does not keep: hard links (the other names
//! keep the old content), extended attributes, ACLs. It knows nothing of text, diffs or tools.
//!
//! Compare with pi: `write.ts` writes in place (no atomicity).
//! Compare with oml.clj: `spit`, also in place.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::ToolError;

/// Replace (or create) `path` with the concatenation of `parts` atomically. The parent
/// directory must exist.
///
/// On failure the target is untouched and the temporary file is removed.
pub(crate) fn write_atomic(path: &Path, parts: &[&[u8]]) -> Result<(), ToolError> {
    let target = write_target(path);
    let dir = target
        .parent()
        .filter(|dir| !dir.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let existing = fs::metadata(&target).ok();
    let (mut file, temp) = create_temp(dir, &target)?;
    let guard = RemoveOnDrop(Some(temp.clone()));

    for part in parts {
        file.write_all(part)
            .map_err(|e| ToolError::io("write", &temp, e))?;
    }
    if let Some(meta) = &existing {
        file.set_permissions(meta.permissions())
            .map_err(|e| ToolError::io("set permissions on", &temp, e))?;
        // Keeping the owner only works as root or for our own files; elsewhere it is a no-op.
        let _ = std::os::unix::fs::fchown(&file, Some(meta.uid()), Some(meta.gid()));
    }
    file.sync_all()
        .map_err(|e| ToolError::io("flush", &temp, e))?;
    drop(file);
    fs::rename(&temp, &target).map_err(|e| ToolError::io("replace", &target, e))?;
    guard.disarm();
    // Make the rename itself durable; a failure here leaves a correct file, so it is ignored.
    if let Ok(dir) = File::open(dir) {
        let _ = dir.sync_all();
    }
    Ok(())
}

/// Serialises read-modify-write cycles of `write` and `edit` within this process, so two
/// sessions editing one file cannot lose each other's change. Other processes are not covered.
pub(crate) fn file_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

// --- private helpers

/// The file to replace: a symlink's final target, so the link is not replaced by a file.
fn write_target(path: &Path) -> PathBuf {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
        }
        _ => path.to_path_buf(),
    }
}

/// A new, uniquely named file next to `target`: `.<name>.<pid>.<n>.oml-tmp`, with the name cut
/// so the whole stays well under the 255-byte file-name limit.
fn create_temp(dir: &Path, target: &Path) -> Result<(File, PathBuf), ToolError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = target
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let short: String = name.chars().take(100).collect();
    let mut last_error = None;
    for _ in 0..16 {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let temp = dir.join(format!(".{short}.{}.{n}.oml-tmp", std::process::id()));
        match OpenOptions::new().write(true).create_new(true).open(&temp) {
            Ok(file) => return Ok((file, temp)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last_error = Some(e),
            Err(e) => return Err(ToolError::io("create a temporary file in", dir, e)),
        }
    }
    let error = last_error.unwrap_or_else(|| io::Error::other("no free temporary name"));
    Err(ToolError::io("create a temporary file in", dir, error))
}

/// Removes the temporary file unless the rename succeeded.
struct RemoveOnDrop(Option<PathBuf>);

impl RemoveOnDrop {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    #[test]
    fn a_failed_rename_leaves_the_target_and_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        fs::create_dir(&target).unwrap();
        fs::write(target.join("inside"), "kept").unwrap();

        let result = write_atomic(&target, &[b"new"]);

        let message = result.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(message.starts_with("Cannot replace "), "{message}");
        assert_eq!(fs::read_to_string(target.join("inside")).unwrap(), "kept");
        assert_eq!(entries(dir.path()), ["target"]);
    }

    #[test]
    fn permissions_are_kept_and_symlinks_written_through() {
        use std::fs::Permissions;
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.sh");
        fs::write(&real, "old").unwrap();
        fs::set_permissions(&real, Permissions::from_mode(0o751)).unwrap();
        let link = dir.path().join("link.sh");
        std::os::unix::fs::symlink(&real, &link).unwrap();

        write_atomic(&link, &[b"new"]).unwrap();

        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read_to_string(&real).unwrap(), "new");
        let mode = fs::metadata(&real).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o751);
        assert_eq!(entries(dir.path()), ["link.sh", "real.sh"]);
    }

    #[test]
    fn a_name_near_the_limit_still_gets_a_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("n".repeat(250));
        fs::write(&target, "old").unwrap();
        write_atomic(&target, &[b"new"]).unwrap();
        assert_eq!(fs::read_to_string(&target).unwrap(), "new");
    }
}
