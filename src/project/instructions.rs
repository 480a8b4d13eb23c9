//! The instruction files of a project, the convention Codex, Claude Code, pi and OpenCode share:
//! an `AGENTS.md` (or, as a fallback name, `CLAUDE.md`) in the project root and in any folder
//! down to the session directory, plus a user-wide one in oml's config folder. Files come root
//! first, so the nearer a file is to the session directory, the later (and stronger) it reads.
//!
//! Files are read fresh for every request, but a file whose size and modification time have not
//! changed is served from a cache, so an unchanged project costs one `stat` per folder. Text past
//! a total cap is cut, and the cut is stated. A file that leads out of where it belongs (a link
//! out of the project root, or for the user-wide file out of oml's config folder) is not read:
//! it is listed with a problem saying where it leads (`super::escapes`), so the prompt and
//! `/context` say what was skipped. This module does file I/O only; it knows nothing of prompts
//! or Lisp.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use parking_lot::Mutex;

/// Characters of instructions kept in all, by default (Codex caps its project docs at 32 KiB):
/// the files come in order and the one that crosses the cap is cut.
pub const INSTRUCTIONS_MAX_CHARS: usize = 32 * 1024;

/// Bytes of one instruction file read at most; a larger file is cut here before decoding.
pub const INSTRUCTION_FILE_MAX_BYTES: u64 = 1024 * 1024;

/// One instruction file as it will be shown to the model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstructionFile {
    pub path: PathBuf,
    /// The text kept (empty when the file could not be used).
    pub text: String,
    /// Characters cut by the cap.
    pub cut_chars: usize,
    /// Why the file could not be used (unreadable, binary), when it could not.
    pub problem: Option<String>,
}

/// Why an instruction file could not be used; its `Display` is the [`InstructionFile::problem`]
/// the prompt and `/context` show.
#[derive(Clone, Debug, thiserror::Error)]
enum Unusable {
    /// Opening or reading it failed (shared, so a cached failure can be handed out again).
    #[error("cannot be read: {0}")]
    Unreadable(Arc<std::io::Error>),
    /// It holds NUL bytes.
    #[error("is not text (it holds NUL bytes)")]
    Binary,
    /// It is not UTF-8.
    #[error("is not UTF-8 text")]
    NotUtf8,
    /// It is a link to `real`, out of `within` (the project, or oml's config folder for the
    /// user-wide file).
    #[error(
        "leads outside {what} ({}): it is a link to {}, so it was not read",
        within.display(),
        real.display()
    )]
    Outside {
        what: &'static str,
        within: PathBuf,
        real: PathBuf,
    },
}

impl From<std::io::Error> for Unusable {
    fn from(error: std::io::Error) -> Self {
        Self::Unreadable(Arc::new(error))
    }
}

/// Which files to look for and how much to keep.
#[derive(Clone, Debug)]
pub struct Lookup<'a> {
    /// File names tried in each folder, in order; the first that exists is used.
    pub names: &'a [String],
    /// The user-wide file, read first when it exists.
    pub user_file: Option<&'a Path>,
    pub max_chars: usize,
}

/// Read files, remembering each by (size, modification time).
#[derive(Default)]
pub struct Cache {
    files: Mutex<HashMap<PathBuf, Seen>>,
}

/// A file as last read: its (size, modification time), and its text or why it is unusable.
struct Seen {
    key: (u64, Option<SystemTime>),
    text: Result<String, Unusable>,
}

impl Cache {
    /// The instruction files for a session in `dir` within the project `root` (`None`: only
    /// `dir` itself is looked at), in reading order, capped.
    pub fn collect(
        &self,
        dir: &Path,
        root: Option<&Path>,
        lookup: &Lookup<'_>,
    ) -> Vec<InstructionFile> {
        // Each file with the folder it must stay in.
        let mut paths: Vec<(PathBuf, PathBuf)> = lookup
            .user_file
            .filter(|p| p.is_file())
            .map(|p| (p.to_path_buf(), p.parent().unwrap_or(p).to_path_buf()))
            .into_iter()
            .collect();
        let within = root.filter(|root| dir.starts_with(root)).unwrap_or(dir);
        let folders: Vec<&Path> = match root {
            Some(root) if dir.starts_with(root) => {
                let mut v: Vec<&Path> = dir
                    .ancestors()
                    .take_while(|d| d.starts_with(root))
                    .collect();
                v.reverse();
                v
            }
            _ => vec![dir],
        };
        for folder in folders {
            if let Some(found) = lookup
                .names
                .iter()
                .map(|n| folder.join(n))
                .find(|p| p.is_file())
            {
                paths.push((found, within.to_path_buf()));
            }
        }
        let mut room = lookup.max_chars;
        paths
            .into_iter()
            .map(|(path, within)| {
                let read = match super::escapes(&path, &within) {
                    Some(real) => Err(outside(&real, &within, lookup.user_file == Some(&path))),
                    None => self.read(&path),
                };
                let (text, problem) = match read {
                    Ok(text) => (text, None),
                    Err(problem) => (String::new(), Some(problem.to_string())),
                };
                let total = text.chars().count();
                let kept: String = text.chars().take(room).collect();
                room -= kept.chars().count();
                InstructionFile {
                    path,
                    cut_chars: total - kept.chars().count(),
                    text: kept,
                    problem,
                }
            })
            .collect()
    }

    fn read(&self, path: &Path) -> Result<String, Unusable> {
        let meta = std::fs::metadata(path)?;
        let key = (meta.len(), meta.modified().ok());
        let mut files = self.files.lock();
        if let Some(seen) = files.get(path).filter(|seen| seen.key == key) {
            return seen.text.clone();
        }
        let text = read_text(path);
        files.insert(
            path.to_path_buf(),
            Seen {
                key,
                text: text.clone(),
            },
        );
        text
    }
}

/// Why a file that leads to `real`, out of `within`, was not read.
fn outside(real: &Path, within: &Path, user_wide: bool) -> Unusable {
    let what = if user_wide {
        "oml's config folder"
    } else {
        "the project"
    };
    Unusable::Outside {
        what,
        within: within.to_path_buf(),
        real: real.to_path_buf(),
    }
}

/// The file as text: at most [`INSTRUCTION_FILE_MAX_BYTES`], refused when it is not UTF-8 text.
fn read_text(path: &Path) -> Result<String, Unusable> {
    use std::io::Read as _;
    // Only a regular file, opened without blocking: a FIFO named AGENTS.md would hang every request.
    let file = crate::regular::open_regular(path)?;
    let mut bytes = Vec::new();
    file.take(INSTRUCTION_FILE_MAX_BYTES)
        .read_to_end(&mut bytes)?;
    if memchr::memchr(0, &bytes).is_some() {
        return Err(Unusable::Binary);
    }
    match String::from_utf8(bytes) {
        Ok(text) => Ok(text),
        Err(e) if e.utf8_error().error_len().is_none() => {
            // Cut inside a character by the byte cap: keep what is whole.
            let valid = e.utf8_error().valid_up_to();
            let mut bytes = e.into_bytes();
            bytes.truncate(valid);
            Ok(String::from_utf8(bytes).unwrap_or_default())
        }
        Err(_) => Err(Unusable::NotUtf8),
    }
}
