//! One process at a time writes a session file: an advisory `flock` on the file, held for as
//! long as this process has the session open, so a second `oml -p --continue` (or an editor's
//! `session/load` in another oml) gets a clear error instead of interleaving its turns with the
//! first one's.
//!
//! Within one process the lock is shared: opening a session that is already open here (a
//! reloaded ACP session) takes the same lock again. The lock is on the descriptor the session's
//! writer appends through, and a session opened again here writes through that same descriptor,
//! so an open session holds one descriptor however often it is opened (the many sessions of an
//! editor fit a low `RLIMIT_NOFILE`). It knows nothing of what is written.
//!
//! A refusal is a [`Busy`] inside the `io::Error`, naming the process that holds the lock when
//! the kernel says (`/proc/locks`), so a front end can tell the user which one.

use std::collections::BTreeMap;
use std::fs::File;
use std::fs::TryLockError;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// How long a lock that this process took, on a file it no longer has open, is waited for
/// before it counts as busy: a child forked at the moment the session was closed holds a copy
/// of the old descriptor, and so the lock, until it execs.
const OWN_LOCK_WAIT: Duration = Duration::from_millis(200);
/// How often it is tried again meanwhile.
const OWN_LOCK_POLL: Duration = Duration::from_millis(2);

/// The session files this process holds, with how many open sessions use each.
static HELD: Mutex<BTreeMap<PathBuf, Held>> = Mutex::new(BTreeMap::new());

struct Held {
    /// The descriptor the lock is on, shared with the writers; closing its last copy releases
    /// the lock.
    file: Arc<File>,
    users: usize,
}

/// This process's hold on one session file; released when the last holder is dropped.
#[derive(Debug)]
pub struct SessionLock {
    path: PathBuf,
}

impl SessionLock {
    /// Take the lock on the session file `path` for session `id`, or say that another process
    /// holds it. `file` is a fresh read and append descriptor of it; the answer holds the
    /// descriptor to write through: `file` itself, or, when this process has the session open
    /// already, the one the lock is on (and `file` is closed).
    pub fn acquire(path: &Path, id: &str, file: File) -> io::Result<(SessionLock, Arc<File>)> {
        let mut held = HELD.lock();
        // Made only once the lock is ours: dropping one gives a hold back (and takes `HELD`).
        let lock = || SessionLock {
            path: path.to_owned(),
        };
        if let Some(h) = held.get_mut(path) {
            h.users += 1;
            return Ok((lock(), Arc::clone(&h.file)));
        }
        take(&file, id)?;
        let file = Arc::new(file);
        held.insert(
            path.to_owned(),
            Held {
                file: Arc::clone(&file),
                users: 1,
            },
        );
        Ok((lock(), file))
    }
}

/// `flock(2)` on Linux, exclusive, without waiting on another process; a lock this process
/// took itself, which a forked child may hold for a moment, is waited for ([`OWN_LOCK_WAIT`]).
fn take(file: &File, id: &str) -> io::Result<()> {
    let start = Instant::now();
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(TryLockError::WouldBlock) => {
                let pid = holder(file);
                if pid == Some(std::process::id()) && start.elapsed() < OWN_LOCK_WAIT {
                    std::thread::sleep(OWN_LOCK_POLL);
                    continue;
                }
                let busy = Busy {
                    id: id.to_owned(),
                    pid,
                };
                return Err(io::Error::new(io::ErrorKind::ResourceBusy, busy));
            }
            Err(TryLockError::Error(error)) => return Err(error),
        }
    }
}

/// The session is open in another process: the one its lock is held by.
#[derive(Debug, thiserror::Error)]
#[error(
    "session {id} is open in another oml process{}; finish there, or start a new session",
    pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
)]
pub struct Busy {
    pub id: String,
    /// The process holding the lock, when `/proc/locks` names it.
    pub pid: Option<u32>,
}

impl Busy {
    /// The [`Busy`] an error of [`SessionLock::acquire`] carries, if it is one.
    pub fn of(error: &io::Error) -> Option<&Busy> {
        error.get_ref()?.downcast_ref::<Busy>()
    }
}

/// The process holding the `flock` on `file`: the line of `/proc/locks` (`N: FLOCK ADVISORY
/// WRITE PID MAJ:MIN:INODE 0 EOF`, the device in hex) whose file is this one. `None` when the
/// kernel does not say (no `/proc`, another kind of file system).
fn holder(file: &File) -> Option<u32> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = file.metadata().ok()?;
    let (dev, ino) = (meta.dev(), meta.ino());
    let want = (
        u64::from(rustix::fs::major(dev)),
        u64::from(rustix::fs::minor(dev)),
        ino,
    );
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    locks.lines().find_map(|line| {
        // A waiter's line reads `N: -> FLOCK …`; the holder's has the type second.
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [_, "FLOCK", _, _, pid, file, ..] = fields.as_slice() else {
            return None;
        };
        let mut parts = file.split(':');
        let major = u64::from_str_radix(parts.next()?, 16).ok()?;
        let minor = u64::from_str_radix(parts.next()?, 16).ok()?;
        let inode = parts.next()?.parse::<u64>().ok()?;
        ((major, minor, inode) == want).then(|| pid.parse().ok())?
    })
}

impl Drop for SessionLock {
    fn drop(&mut self) {
        let mut held = HELD.lock();
        if let Some(h) = held.get_mut(&self.path) {
            h.users -= 1;
            if h.users == 0 {
                held.remove(&self.path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::OpenOptions;

    /// How long a descriptor another test's fork copied may keep a closed lock held.
    const FORK_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

    #[test]
    fn a_second_open_shares_the_descriptor_and_a_lock_held_elsewhere_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, "").unwrap();
        let open = || {
            OpenOptions::new()
                .read(true)
                .append(true)
                .open(&path)
                .unwrap()
        };
        let (first, a) = SessionLock::acquire(&path, "s", open()).unwrap();
        let (second, b) = SessionLock::acquire(&path, "s", open()).unwrap();
        assert!(Arc::ptr_eq(&a, &b), "one descriptor for both");
        drop((first, second, a, b));
        // Another open file description holds the lock, as another process would. Closing the
        // last descriptor released ours, but a process another test forks at that moment holds
        // a copy until it execs, so the lock may come free a moment later.
        let other = open();
        let deadline = std::time::Instant::now() + FORK_GRACE;
        while other.try_lock().is_err() {
            assert!(std::time::Instant::now() < deadline, "the lock stays held");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        for _ in 0..2 {
            let e = SessionLock::acquire(&path, "s", open()).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::ResourceBusy, "{e}");
            let busy = Busy::of(&e).expect("a Busy");
            // The holder is this very process here (another description of the file).
            assert_eq!(busy.pid, Some(std::process::id()), "{e}");
        }
        // Unlocked explicitly: a forked copy of `other`'s descriptor cannot keep it held.
        other.unlock().unwrap();
        drop(other);
        assert!(SessionLock::acquire(&path, "s", open()).is_ok());
    }
}
