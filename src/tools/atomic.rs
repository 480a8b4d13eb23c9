//! Atomic file replacement for `write` and `edit`: the new content goes to a temporary file in
//! the same directory, is flushed to disk, and is renamed over the target, so a reader (or a
//! crash) sees either the old file or the new one, never half of it.
//!
//! No symbolic link is followed on the way: the target's folder is opened one name at a time
//! from the root with `O_NOFOLLOW` (what `openat2`'s `RESOLVE_NO_SYMLINKS` does in one call, on
//! every Unix), and the temporary file is created, and renamed over the target, relative to that
//! folder's descriptor (`openat`, `renameat`). The caller gives the resolved path (links
//! followed, then checked: `path.rs`), so a link swapped into it after the check makes the write
//! fail ([`ToolError::LinkInPath`]) instead of leading it elsewhere; a link swapped in as the
//! target itself is replaced, not written through.
//!
//! What it keeps: the target's permission bits and, where allowed, its owner. What it does not
//! keep: hard links (the other names keep the old content), extended attributes, ACLs. It knows
//! nothing of text, diffs, tools or which paths are allowed.
//!
//! Compare with pi: `write.ts` writes in place (no atomicity).
//! Compare with oml.clj: `spit`, also in place.

use std::ffi::{CString, OsStr};
use std::fs::{File, Permissions};
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use rustix::fs::{self, AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use super::ToolError;

/// Mode of a folder `write` creates, before the umask (what `mkdir -p` uses).
const NEW_DIR_MODE: u32 = 0o777;

/// Mode of the temporary file, before the umask, for a new target (what `fs::write` uses).
const NEW_FILE_MODE: u32 = 0o666;

/// Temporary names tried before giving up when each is taken.
const TEMP_NAME_TRIES: usize = 16;

/// Characters of the target's name kept in the temporary name, so the whole stays well under
/// the 255-byte file-name limit.
const TEMP_NAME_KEEP_CHARS: usize = 100;

/// Replace (or create) `path`, an absolute path without symbolic links, with the concatenation
/// of `parts` atomically. Its folders must exist, unless `create_dirs`, which creates them (also
/// one name at a time, following no link).
///
/// On failure the target is untouched and the temporary file is removed.
pub(crate) fn write_atomic(
    path: &Path,
    parts: &[&[u8]],
    create_dirs: bool,
) -> Result<(), ToolError> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(ToolError::IsDirectory(path.to_path_buf()));
    };
    let dir_fd = open_dir(path, dir, create_dirs)?;
    let target = c_name(name, path)?;
    let existing = stat_at(&dir_fd, &target).filter(|st| is_regular(st.st_mode));
    let (mut file, temp) = create_temp(&dir_fd, name, dir)?;
    let guard = RemoveOnDrop {
        dir: &dir_fd,
        name: Some(temp.clone()),
    };
    let temp_path = dir.join(OsStr::from_bytes(temp.as_bytes()));

    for part in parts {
        file.write_all(part)
            .map_err(|e| ToolError::io("write", &temp_path, e))?;
    }
    if let Some(st) = &existing {
        let mode = Permissions::from_mode(st.st_mode & 0o7777);
        file.set_permissions(mode)
            .map_err(|e| ToolError::io("set permissions on", &temp_path, e))?;
        // Keeping the owner only works as root or for our own files; elsewhere it is a no-op.
        let _ = std::os::unix::fs::fchown(&file, Some(st.st_uid), Some(st.st_gid));
    }
    file.sync_all()
        .map_err(|e| ToolError::io("flush", &temp_path, e))?;
    drop(file);
    rename_at(&dir_fd, &temp, &target).map_err(|e| ToolError::io("replace", path, e))?;
    guard.disarm();
    // Make the rename itself durable; a failure here leaves a correct file, so it is ignored.
    let _ = File::from(dir_fd).sync_all();
    Ok(())
}

/// Remove the file `path` (absolute, without symbolic links in its folders: a link there is
/// [`ToolError::LinkInPath`]); a link at `path` itself is removed, never followed. A missing
/// file is not an error. What a rewind does to a file a turn created.
pub(crate) fn remove_file(path: &Path) -> Result<(), ToolError> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(ToolError::IsDirectory(path.to_path_buf()));
    };
    let dir_fd = match open_dir(path, dir, false) {
        Err(ToolError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
            return Ok(());
        }
        other => other?,
    };
    let target = c_name(name, path)?;
    match fs::unlinkat(&dir_fd, target.as_c_str(), AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(ToolError::io("remove", path, e.into())),
    }
}

/// Serialises read-modify-write cycles of `write` and `edit` within this process, so two
/// sessions editing one file cannot lose each other's change. Other processes are not covered.
pub(crate) fn file_lock() -> parking_lot::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock()
}

// --- private helpers

/// The folder `dir` (absolute) of `target`, opened from the root one name at a time, each with
/// `O_NOFOLLOW`: a name that is a symbolic link is [`ToolError::LinkInPath`]. A missing name is
/// created first when `create`.
fn open_dir(target: &Path, dir: &Path, create: bool) -> Result<OwnedFd, ToolError> {
    if !dir.is_absolute() {
        let error = io::Error::other("the path is not absolute");
        return Err(ToolError::io("write", target, error));
    }
    let mut fd = fs::open("/", dir_flags(), Mode::empty())
        .map_err(|e| ToolError::io("open folder", "/", e.into()))?;
    let mut walked = PathBuf::from("/");
    for component in dir.components() {
        let name = match component {
            Component::Normal(name) => name,
            Component::RootDir => continue,
            // A resolved path has neither; refuse rather than guess.
            _ => {
                let error = io::Error::other("the path is not resolved");
                return Err(ToolError::io("write", target, error));
            }
        };
        walked.push(name);
        let c = c_name(name, target)?;
        fd = match open_at_dir(&fd, &c) {
            Err(e) if e.kind() == io::ErrorKind::NotFound && create => {
                make_dir_at(&fd, &c).map_err(|e| ToolError::io("create directory", &walked, e))?;
                open_at_dir(&fd, &c)
            }
            other => other,
        }
        .map_err(|e| link_or_io(&fd, &c, target, &walked, e))?;
    }
    Ok(fd)
}

/// A failed open of `walked` as [`ToolError::LinkInPath`] when it is a symbolic link, else as
/// the I/O error it is.
fn link_or_io(
    parent: &OwnedFd,
    name: &CString,
    target: &Path,
    walked: &Path,
    e: io::Error,
) -> ToolError {
    match stat_at(parent, name) {
        Some(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
            ToolError::LinkInPath {
                path: target.to_path_buf(),
                link: walked.to_path_buf(),
            }
        }
        _ => ToolError::io("open folder", walked, e),
    }
}

/// Flags of every folder opened on the way: read-only, a folder, no link, not inherited.
fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

fn open_at_dir(dir: &OwnedFd, name: &CString) -> io::Result<OwnedFd> {
    Ok(fs::openat(
        dir,
        name.as_c_str(),
        dir_flags(),
        Mode::empty(),
    )?)
}

fn make_dir_at(dir: &OwnedFd, name: &CString) -> io::Result<()> {
    match fs::mkdirat(dir, name.as_c_str(), Mode::from_raw_mode(NEW_DIR_MODE)) {
        // Another writer made it first: it is opened (without following) next.
        Ok(()) | Err(Errno::EXIST) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// `lstat` of `name` in `dir`; `None` when there is nothing (or nothing readable) there.
fn stat_at(dir: &OwnedFd, name: &CString) -> Option<fs::Stat> {
    fs::statat(dir, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW).ok()
}

fn is_regular(mode: u32) -> bool {
    FileType::from_raw_mode(mode) == FileType::RegularFile
}

fn rename_at(dir: &OwnedFd, from: &CString, to: &CString) -> io::Result<()> {
    Ok(fs::renameat(dir, from.as_c_str(), dir, to.as_c_str())?)
}

fn c_name(name: &OsStr, path: &Path) -> Result<CString, ToolError> {
    CString::new(name.as_bytes()).map_err(|_| {
        let error = io::Error::other("the name holds a NUL byte");
        ToolError::io("write", path, error)
    })
}

/// A new, uniquely named file in `dir_fd` next to `name`: `.<name>.<pid>.<n>.oml-tmp`, with
/// the name cut to [`TEMP_NAME_KEEP_CHARS`].
fn create_temp(dir_fd: &OwnedFd, name: &OsStr, dir: &Path) -> Result<(File, CString), ToolError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let short: String = name
        .to_string_lossy()
        .chars()
        .take(TEMP_NAME_KEEP_CHARS)
        .collect();
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut last_error = None;
    for _ in 0..TEMP_NAME_TRIES {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let temp = format!(".{short}.{}.{n}.oml-tmp", std::process::id());
        let temp = CString::new(temp).map_err(|_| {
            ToolError::io(
                "create a temporary file in",
                dir,
                io::Error::other("NUL in name"),
            )
        })?;
        match fs::openat(
            dir_fd,
            temp.as_c_str(),
            flags,
            Mode::from_raw_mode(NEW_FILE_MODE),
        ) {
            Ok(fd) => return Ok((File::from(fd), temp)),
            Err(Errno::EXIST) => last_error = Some(Errno::EXIST.into()),
            Err(e) => return Err(ToolError::io("create a temporary file in", dir, e.into())),
        }
    }
    let error = last_error.unwrap_or_else(|| io::Error::other("no free temporary name"));
    Err(ToolError::io("create a temporary file in", dir, error))
}

/// Removes the temporary file unless the rename succeeded.
struct RemoveOnDrop<'a> {
    dir: &'a OwnedFd,
    name: Option<CString>,
}

impl RemoveOnDrop<'_> {
    fn disarm(mut self) {
        self.name = None;
    }
}

impl Drop for RemoveOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(name) = self.name.take() {
            let _ = fs::unlinkat(self.dir, name.as_c_str(), AtFlags::empty());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

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

        let result = write_atomic(&target, &[b"new"], false);

        let message = result.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(message.starts_with("Cannot replace "), "{message}");
        assert_eq!(fs::read_to_string(target.join("inside")).unwrap(), "kept");
        assert_eq!(entries(dir.path()), ["target"]);
    }

    #[test]
    fn permissions_are_kept() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.sh");
        fs::write(&real, "old").unwrap();
        fs::set_permissions(&real, Permissions::from_mode(0o751)).unwrap();

        write_atomic(&real, &[b"new"], false).unwrap();

        assert_eq!(fs::read_to_string(&real).unwrap(), "new");
        let mode = fs::metadata(&real).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o751);
        assert_eq!(entries(dir.path()), ["real.sh"]);
    }

    #[test]
    fn a_link_as_the_target_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret");
        fs::write(&secret, "kept").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&secret, &link).unwrap();

        write_atomic(&link, &[b"new"], false).unwrap();

        assert!(fs::symlink_metadata(&link).unwrap().is_file());
        assert_eq!(fs::read_to_string(&link).unwrap(), "new");
        assert_eq!(fs::read_to_string(&secret).unwrap(), "kept");
    }

    /// The race a checked path loses: the folder was real when the path was resolved and
    /// checked, and is a link to elsewhere when the write opens it.
    #[test]
    fn a_folder_swapped_for_a_link_after_resolving_makes_the_write_fail() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let sub = dir.path().join("sub");
        fs::create_dir(&sub).unwrap();
        let resolved = crate::tools::real_path(&sub.join("x")).unwrap();
        fs::remove_dir(&sub).unwrap();
        std::os::unix::fs::symlink(outside.path(), &sub).unwrap();

        for create_dirs in [false, true] {
            let error = write_atomic(&resolved, &[b"new"], create_dirs).err();
            assert!(
                matches!(&error, Some(ToolError::LinkInPath { link, .. }) if link.ends_with("sub")),
                "{error:?}"
            );
        }
        assert!(entries(outside.path()).is_empty());
    }

    #[test]
    fn missing_folders_are_created_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let target = crate::tools::real_path(&dir.path().join("a/b/c.txt")).unwrap();
        assert!(write_atomic(&target, &[b"x"], false).is_err());
        write_atomic(&target, &[b"x"], true).unwrap();
        assert_eq!(fs::read_to_string(&target).unwrap(), "x");
    }

    #[test]
    fn a_name_near_the_limit_still_gets_a_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("n".repeat(250));
        fs::write(&target, "old").unwrap();
        write_atomic(&target, &[b"new"], false).unwrap();
        assert_eq!(fs::read_to_string(&target).unwrap(), "new");
    }
}
