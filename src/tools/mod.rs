//! The built-in tools the model can call — `read`, `write`, `edit`, `bash`, and the search tools
//! `grep`, `find` and `ls` — as plain Rust functions, plus the path resolution, truncation and
//! directory walk they share.
//!
//! The idea: every tool is a function from already-parsed arguments (and the settings that shape
//! it, passed in by the caller) to a [`ToolOutput`]. A failure is a value with `is_error: true`
//! whose text the model reads and recovers from; no tool panics, aborts the turn, or writes to
//! stdout. The messages match the Clojure original word for word, so transcripts and prompts
//! written for it keep working.
//!
//! This module deliberately does not know about Lisp, JSON schemas, tool cards, permissions or
//! ACP: the Lisp wrappers look settings up, resolve the path with [`path::resolve_real`] (every
//! link followed, so the path a permission policy checks is the file itself) and call these
//! functions; the ACP layer turns [`FileDiff`] into a `diff` content block. `write` and `edit`
//! follow no symbolic link in the folders of the path they are given (`atomic.rs`): links are
//! followed once, when the path is resolved. `read`, `write` and `edit` do blocking file I/O;
//! call them from `spawn_blocking` on an async runtime.
//!
//! Compare with pi: `packages/coding-agent/src/core/tools/` (`read.ts`, `write.ts`, `edit.ts`,
//! `bash.ts`, `truncate.ts`).
//! Compare with oml.clj: `src/oml/tools.clj` and `oml.session/resolve-path`.

pub mod bash;
pub mod edit;
pub mod find;
pub mod grep;
pub mod image;
pub mod ls;
pub mod path;
pub mod read;
pub mod search;
pub mod shown;
pub mod truncate;
pub mod write;

pub(crate) mod atomic;

use std::path::PathBuf;
use std::time::Duration;

pub use bash::{bash, bash_with_progress};
pub use edit::{Edit, edit, edit_text, parse_edit_args, preview_edit};
pub use find::find;
pub use grep::{GrepArgs, grep};
pub use ls::ls;
pub use path::{real_path, resolve_path, resolve_real};
pub use read::{ReadLimits, read, read_text};
pub use write::{preview_write, write};

/// Characters `read` returns at most; the **head** (beginning) of the numbered text is kept and
/// the rest is reported as `[output truncated: K more characters]`.
pub const READ_MAX_CHARS: usize = 50_000;

/// Lines `read` returns when the model gives no `limit`, counted from `offset`: the **head** of
/// the file (from the offset on) is kept and a footer says where to continue.
pub const READ_DEFAULT_LIMIT: usize = 2000;

/// Characters `bash` returns at most; the **tail** (end) of the output is kept, because errors
/// and summaries come last, and the head is reported as `[output truncated: first K characters
/// dropped]`.
pub const BASH_MAX_CHARS: usize = 50_000;

/// How long `bash` lets a command run when the model gives no `timeout`; then the whole process
/// group is killed.
pub const BASH_TIMEOUT: Duration = Duration::from_secs(120);

/// The result of one tool call, as the model (and the ACP tool card) sees it.
///
/// A failure is a value: `is_error` is set and `content` says what went wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolOutput {
    /// The text the model reads.
    pub content: String,
    /// Whether the call failed.
    pub is_error: bool,
    /// What a successful `write` or `edit` changed, for ACP's `diff` tool-call content.
    pub diff: Option<FileDiff>,
    /// How a command ended (`bash`), as data: front ends show it without reading `content`.
    pub end: Option<bash::CommandEnd>,
}

/// A whole-file change, shaped like ACP's `diff` content (`path`, `oldText`, `newText`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileDiff {
    /// The absolute path of the changed file.
    pub path: PathBuf,
    /// The text before the change; `None` for a new file, or when the old content was not text.
    pub old_text: Option<String>,
    /// The text after the change.
    pub new_text: String,
}

/// Why a tool could not do what it was asked. Its `Display` is the exact message the model
/// sees; converting into [`ToolOutput`] makes it an error result.
///
/// The capitalised, full-sentence messages are deliberate: they are the Clojure original's
/// messages, which the model (and existing prompts) already know.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// A blank `path` argument.
    #[error("path is required")]
    PathRequired,
    /// A `~` path with no home directory to expand it to.
    #[error("cannot expand ~ in {path}: HOME is not set")]
    NoHome { path: String },
    /// A blank `pattern` argument of `grep` or `find`.
    #[error("pattern is required")]
    PatternRequired,
    /// A blank `command` argument.
    #[error("command is required")]
    CommandRequired,
    /// A missing or non-string `content` argument.
    #[error("content is required")]
    ContentRequired,
    /// An empty or missing `old_text` in an edit.
    #[error("{}old_text must be a non-empty string", edit_prefix(*.edit))]
    OldTextRequired { edit: Option<usize> },
    /// A missing or non-string `new_text` in an edit.
    #[error("{}new_text is required", edit_prefix(*.edit))]
    NewTextRequired { edit: Option<usize> },
    /// `edits` that is not a non-empty list of edits.
    #[error("edits must be a non-empty list of {{old_text, new_text}} objects")]
    EditsRequired,
    /// Both the single form and the list form in one call.
    #[error("give either old_text and new_text, or edits, not both")]
    EditFormsMixed,
    /// The target does not exist (or, for `edit`, is not a regular file).
    #[error("File not found: {}", .0.display())]
    NotFound(PathBuf),
    /// The target is a directory.
    #[error("Is a directory: {}", .0.display())]
    IsDirectory(PathBuf),
    /// `read` refuses files that are not text.
    #[error("Cannot read {}: it looks like a binary file ({reason})", path.display())]
    Binary { path: PathBuf, reason: String },
    /// `edit` refuses files that are not UTF-8 text.
    #[error("Cannot edit {}: it is not valid UTF-8 text", .0.display())]
    NotText(PathBuf),
    /// `read` with a `limit` below 1.
    #[error("limit must be at least 1 (got {0}); leave it out to read up to the default")]
    LimitTooSmall(i64),
    /// A `read` window that starts after the last line.
    #[error("offset {offset} is past the end of the file ({lines} lines)")]
    OffsetPastEnd { offset: i64, lines: u64 },
    /// An edit's `old_text` does not occur in the file.
    #[error(
        "{}old_text not found in {}. It must match the file exactly, including whitespace.",
        edit_prefix(*.edit),
        path.display()
    )]
    NoMatch { edit: Option<usize>, path: PathBuf },
    /// An edit's `old_text` occurs more than once.
    #[error(
        "{}old_text matches {count} times in {}. Include more surrounding context so it matches exactly once.",
        edit_prefix(*.edit),
        path.display()
    )]
    ManyMatches {
        edit: Option<usize>,
        count: usize,
        path: PathBuf,
    },
    /// Two edits of one call replace overlapping text (1-based, in the order given).
    #[error(
        "edits {first} and {second} overlap in {}. Merge them into one edit, or make them replace separate text.",
        path.display()
    )]
    EditsOverlap {
        first: usize,
        second: usize,
        path: PathBuf,
    },
    /// The working directory for `bash` does not exist.
    #[error("Working directory not found: {}", .0.display())]
    NoWorkingDirectory(PathBuf),
    /// The command's sandbox cannot be set up here, so the command did not run.
    #[error(transparent)]
    Sandbox(#[from] crate::sandbox::SandboxError),
    /// Resolving the path met more than [`path::MAX_LINK_FOLLOWS`] symbolic links (a loop).
    #[error("Cannot resolve {}: too many levels of symbolic links", .0.display())]
    TooManyLinks(PathBuf),
    /// A folder of the path to write is a symbolic link: links are followed when a path is
    /// resolved and checked, so one here was not (or appeared since) and is not followed.
    #[error(
        "Cannot write {}: {} is a symbolic link, and links are followed only when the path is resolved and checked (session.resolve-path), never by the write",
        path.display(),
        link.display()
    )]
    LinkInPath { path: PathBuf, link: PathBuf },
    /// Any other I/O failure, with what was being done and to which path.
    #[error("Cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

impl ToolError {
    /// An [`ToolError::Io`] with context.
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Self::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

impl ToolOutput {
    /// A successful result.
    pub fn ok(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: false,
            diff: None,
            end: None,
        }
    }

    /// A failed result the model will read.
    pub fn error(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: true,
            diff: None,
            end: None,
        }
    }

    /// The same result, carrying how its command ended.
    pub fn with_end(self, end: bash::CommandEnd) -> Self {
        Self {
            end: Some(end),
            ..self
        }
    }

    /// The same result, carrying `diff` for the ACP tool card.
    pub fn with_diff(self, diff: FileDiff) -> Self {
        Self {
            diff: Some(diff),
            ..self
        }
    }
}

impl From<ToolError> for ToolOutput {
    fn from(error: ToolError) -> Self {
        Self::error(error.to_string())
    }
}

// --- private helpers

/// "edit 2: " for the second edit of a multi-edit call; nothing for a single edit, whose
/// messages stay exactly the original's.
fn edit_prefix(edit: Option<usize>) -> String {
    edit.map(|n| format!("edit {n}: ")).unwrap_or_default()
}
