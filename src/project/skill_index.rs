//! What discovering skills and markdown commands read before, kept while each file is unchanged:
//! in memory, and in an index file per kind (in oml's cache folder, given by the caller) so that
//! a new process does not read and parse every `SKILL.md` again, and a session's setup, which
//! needs only the commands, does not load the skills' index. A file's stamp (modification time,
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

/// Everything read before, in this process or (through the indexes) an earlier one.
#[derive(Default)]
struct ReadBefore {
    skills: Memo<Skill>,
    commands: Memo<PromptCommand>,
}

static READ: LazyLock<ReadBefore> = LazyLock::new(ReadBefore::default);

/// `read()`'s answer for `file` of `folder`, from `kind`'s memo while the file's stamp is what
/// it was; `seen` is the stamp when the caller has it (else it is taken now, links followed).
pub fn memo<T: Clone>(
    kind: &Kind<T>,
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
    let memo = kind.memo;
    if let Some((then, answer)) = memo.lock().get(&key)
        && *then == now
    {
        return answer.clone();
    }
    let answer = read();
    memo.lock().insert(key, (now, answer.clone()));
    kind.changed.store(true, Ordering::Relaxed);
    answer
}

/// An index file's content: what one kind (skills, or commands) read.
#[derive(Serialize, Deserialize)]
struct Index<T> {
    version: u32,
    read: Vec<(PathBuf, PathBuf, Stamp, Result<T, Problem>)>,
}

/// The index format; another is ignored.
const VERSION: u32 = 2;

/// What a kind's memo and "read since saved" flag are.
pub struct Kind<T: 'static> {
    memo: &'static Memo<T>,
    changed: &'static AtomicBool,
}

static SKILLS_CHANGED: AtomicBool = AtomicBool::new(false);
static COMMANDS_CHANGED: AtomicBool = AtomicBool::new(false);

/// The skills' memo and flag.
pub fn skills() -> Kind<Skill> {
    Kind {
        memo: &READ.skills,
        changed: &SKILLS_CHANGED,
    }
}

/// The markdown commands' memo and flag.
pub fn commands() -> Kind<PromptCommand> {
    Kind {
        memo: &READ.commands,
        changed: &COMMANDS_CHANGED,
    }
}

/// Add what the index at `path` holds to what `kind` read before (once per process is enough).
pub fn load<T: serde::de::DeserializeOwned>(path: &Path, kind: &Kind<T>) {
    let Ok(bytes) = std::fs::read(path) else {
        return;
    };
    let Ok(index) = serde_json::from_slice::<Index<T>>(&bytes) else {
        return;
    };
    if index.version != VERSION {
        return;
    }
    let mut memo = kind.memo.lock();
    for (folder, file, stamp, answer) in index.read {
        memo.entry((folder, file)).or_insert((stamp, answer));
    }
}

/// Write what `kind` read before to the index at `path` when something was read since the last
/// time (a temporary file renamed over it); a failure leaves the old index.
pub fn save<T: Serialize + Clone>(path: &Path, kind: &Kind<T>) {
    if !kind.changed.swap(false, Ordering::Relaxed) {
        return;
    }
    let read = kind
        .memo
        .lock()
        .iter()
        .map(|((folder, file), (stamp, answer))| {
            (folder.clone(), file.clone(), *stamp, answer.clone())
        })
        .collect();
    let Ok(bytes) = serde_json::to_vec(&Index {
        version: VERSION,
        read,
    }) else {
        return;
    };
    let Some(dir) = path.parent() else {
        return;
    };
    if crate::paths::ensure_private_dir(dir).is_err() {
        return;
    }
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let temp = dir.join(format!(
        ".{}.{}.tmp",
        name.unwrap_or_default(),
        std::process::id()
    ));
    if std::fs::write(&temp, bytes).is_err() || std::fs::rename(&temp, path).is_err() {
        let _ = std::fs::remove_file(&temp);
    }
}
