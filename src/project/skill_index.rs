//! What discovering skills and markdown commands read before, kept while each file is unchanged:
//! in memory, and in an index file (in oml's cache folder, given by the caller) so that a new
//! process does not read and parse every `SKILL.md` again. A file's stamp (modification time,
//! size, inode, from the `lstat` the discovery makes anyway) decides whether what was read still
//! holds. The index is a cache: a missing, unreadable or damaged one is ignored and written
//! anew. It knows nothing of what a skill means.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use super::skills::{Problem, PromptCommand, Skill};

/// What identifies a file's content cheaply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    modified_ns: i128,
    len: u64,
    ino: u64,
}

impl Stamp {
    pub fn of(m: &std::fs::Metadata) -> Stamp {
        use std::os::unix::fs::MetadataExt as _;
        Stamp {
            modified_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
            len: m.len(),
            ino: m.ino(),
        }
    }
}

/// One answer read before: its folder, its file, the file's stamp then, and the answer.
type Memo<T> = Mutex<HashMap<(PathBuf, PathBuf), (Stamp, Result<T, Problem>)>>;

/// Everything read before, in this process or (through the index) an earlier one.
#[derive(Default)]
pub struct ReadBefore {
    pub skills: Memo<Skill>,
    pub commands: Memo<PromptCommand>,
}

static READ: LazyLock<ReadBefore> = LazyLock::new(ReadBefore::default);
/// Something was read since the index was loaded or saved.
static CHANGED: AtomicBool = AtomicBool::new(false);

pub fn read_before() -> &'static ReadBefore {
    &READ
}

/// `read()`'s answer for `file` of `folder`, from `memo` while the file's stamp is what it was;
/// `seen` is the stamp when the caller has it (else it is taken now, links followed).
pub fn memo<T: Clone>(
    memo: &Memo<T>,
    folder: &Path,
    file: &Path,
    seen: Option<Stamp>,
    read: impl FnOnce() -> Result<T, Problem>,
) -> Result<T, Problem> {
    let now = seen.or_else(|| std::fs::metadata(file).ok().map(|m| Stamp::of(&m)));
    let Some(now) = now else {
        return read();
    };
    let key = (folder.to_path_buf(), file.to_path_buf());
    if let Some((then, answer)) = memo.lock().get(&key)
        && *then == now
    {
        return answer.clone();
    }
    let answer = read();
    memo.lock().insert(key, (now, answer.clone()));
    CHANGED.store(true, Ordering::Relaxed);
    answer
}

/// The index file's content.
#[derive(Serialize, Deserialize, Default)]
struct Index {
    version: u32,
    skills: Vec<(PathBuf, PathBuf, Stamp, Result<Skill, Problem>)>,
    commands: Vec<(PathBuf, PathBuf, Stamp, Result<PromptCommand, Problem>)>,
}

/// The index format; another is ignored.
const VERSION: u32 = 1;

/// Add what the index at `path` holds to what was read before (once per process is enough).
pub fn load(path: &Path) {
    let Ok(bytes) = std::fs::read(path) else {
        return;
    };
    let Ok(index) = serde_json::from_slice::<Index>(&bytes) else {
        return;
    };
    if index.version != VERSION {
        return;
    }
    let mut skills = READ.skills.lock();
    for (folder, file, stamp, answer) in index.skills {
        skills.entry((folder, file)).or_insert((stamp, answer));
    }
    let mut commands = READ.commands.lock();
    for (folder, file, stamp, answer) in index.commands {
        commands.entry((folder, file)).or_insert((stamp, answer));
    }
}

/// Write what was read before to the index at `path` when something was read since the last
/// time (a temporary file renamed over it); a failure leaves the old index.
pub fn save(path: &Path) {
    if !CHANGED.swap(false, Ordering::Relaxed) {
        return;
    }
    let index = Index {
        version: VERSION,
        skills: entries(&READ.skills),
        commands: entries(&READ.commands),
    };
    let Ok(bytes) = serde_json::to_vec(&index) else {
        return;
    };
    let Some(dir) = path.parent() else {
        return;
    };
    if crate::paths::ensure_private_dir(dir).is_err() {
        return;
    }
    let temp = dir.join(format!(".skills-index.{}.tmp", std::process::id()));
    if std::fs::write(&temp, bytes).is_err() || std::fs::rename(&temp, path).is_err() {
        let _ = std::fs::remove_file(&temp);
    }
}

fn entries<T: Clone>(memo: &Memo<T>) -> Vec<(PathBuf, PathBuf, Stamp, Result<T, Problem>)> {
    memo.lock()
        .iter()
        .map(|((folder, file), (stamp, answer))| {
            (folder.clone(), file.clone(), *stamp, answer.clone())
        })
        .collect()
}
