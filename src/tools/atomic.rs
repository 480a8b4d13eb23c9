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
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use super::ToolError;

/// Mode of a folder `write` creates, before the umask (what `mkdir -p` uses).
const NEW_DIR_MODE: libc::mode_t = 0o777;

/// Mode of the temporary file, before the umask, for a new target (what `fs::write` uses).
const NEW_FILE_MODE: libc::c_uint = 0o666;

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
        #[allow(clippy::useless_conversion)] // `mode_t` is u16 on macOS, u32 on Linux
        let mode = Permissions::from_mode(u32::from(st.st_mode) & 0o7777);
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
    let root = CString::new("/").unwrap_or_default();
    // SAFETY: `root` is a valid NUL-terminated string; the flags ask for a new descriptor.
    let fd = unsafe { libc::open(root.as_ptr(), dir_flags()) };
    let mut fd = owned(fd).map_err(|e| ToolError::io("open folder", "/", e))?;
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
        Some(st) if st.st_mode & libc::S_IFMT == libc::S_IFLNK => ToolError::LinkInPath {
            path: target.to_path_buf(),
            link: walked.to_path_buf(),
        },
        _ => ToolError::io("open folder", walked, e),
    }
}

/// Flags of every folder opened on the way: read-only, a folder, no link, not inherited.
fn dir_flags() -> libc::c_int {
    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC
}

fn open_at_dir(dir: &OwnedFd, name: &CString) -> io::Result<OwnedFd> {
    // SAFETY: `dir` is an open descriptor and `name` a valid NUL-terminated string.
    owned(unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), dir_flags()) })
}

fn make_dir_at(dir: &OwnedFd, name: &CString) -> io::Result<()> {
    // SAFETY: `dir` is an open descriptor and `name` a valid NUL-terminated string.
    let rc = unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), NEW_DIR_MODE) };
    match rc {
        0 => Ok(()),
        _ => match io::Error::last_os_error() {
            // Another writer made it first: it is opened (without following) next.
            e if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
            e => Err(e),
        },
    }
}

/// `lstat` of `name` in `dir`; `None` when there is nothing (or nothing readable) there.
fn stat_at(dir: &OwnedFd, name: &CString) -> Option<libc::stat> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `dir` is open, `name` NUL-terminated, and `st` points to writable memory of the
    // right size, which `fstatat` fills when it returns 0.
    let rc = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            st.as_mut_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    // SAFETY: `fstatat` returned 0, so it initialised `st`.
    (rc == 0).then(|| unsafe { st.assume_init() })
}

fn is_regular(mode: libc::mode_t) -> bool {
    mode & libc::S_IFMT == libc::S_IFREG
}

fn rename_at(dir: &OwnedFd, from: &CString, to: &CString) -> io::Result<()> {
    let fd = dir.as_raw_fd();
    // SAFETY: `fd` is open and both names are valid NUL-terminated strings.
    match unsafe { libc::renameat(fd, from.as_ptr(), fd, to.as_ptr()) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// A descriptor returned by a system call, or its error.
fn owned(fd: libc::c_int) -> io::Result<OwnedFd> {
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned open by the kernel and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
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
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
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
        // SAFETY: `dir_fd` is open and `temp` a valid NUL-terminated string.
        let fd = unsafe { libc::openat(dir_fd.as_raw_fd(), temp.as_ptr(), flags, NEW_FILE_MODE) };
        match owned(fd) {
            Ok(fd) => return Ok((File::from(fd), temp)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last_error = Some(e),
            Err(e) => return Err(ToolError::io("create a temporary file in", dir, e)),
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
            // SAFETY: the folder's descriptor is open and `name` NUL-terminated.
            let _ = unsafe { libc::unlinkat(self.dir.as_raw_fd(), name.as_ptr(), 0) };
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
