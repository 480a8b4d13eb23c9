//! One process at a time writes a session file: an advisory `flock` on the file, held for as
//! long as this process has the session open, so a second `oml -p --continue` (or an editor's
//! `session/load` in another oml) gets a clear error instead of interleaving its turns with the
//! first one's.
//!
//! Within one process the lock is shared: opening a session that is already open here (a
//! reloaded ACP session) takes the same lock again. It knows nothing of what is written.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The session files this process holds, with how many open sessions use each.
static HELD: Mutex<BTreeMap<PathBuf, Held>> = Mutex::new(BTreeMap::new());

struct Held {
    /// The descriptor the lock is on; closing it releases the lock.
    _file: File,
    users: usize,
}

/// This process's hold on one session file; released when the last holder is dropped.
#[derive(Debug)]
pub struct SessionLock {
    path: PathBuf,
}

impl SessionLock {
    /// Take the lock on the session file `path` for session `id`, or say that another process
    /// holds it.
    pub fn acquire(path: &Path, id: &str) -> io::Result<SessionLock> {
        let mut held = HELD.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(h) = held.get_mut(path) {
            h.users += 1;
            return Ok(SessionLock {
                path: path.to_owned(),
            });
        }
        let file = File::open(path)?;
        // SAFETY: flock acts on the descriptor we own and touches no memory of ours.
        let taken = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
        if !taken {
            let error = io::Error::last_os_error();
            if error.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Err(io::Error::new(
                    io::ErrorKind::ResourceBusy,
                    format!(
                        "session {id} is open in another oml process; finish there, or start \
                         a new session"
                    ),
                ));
            }
            return Err(error);
        }
        held.insert(
            path.to_owned(),
            Held {
                _file: file,
                users: 1,
            },
        );
        Ok(SessionLock {
            path: path.to_owned(),
        })
    }
}

impl Drop for SessionLock {
    fn drop(&mut self) {
        let mut held = HELD.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(h) = held.get_mut(&self.path) {
            h.users -= 1;
            if h.users == 0 {
                held.remove(&self.path);
            }
        }
    }
}
