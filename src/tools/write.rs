//! The `write` tool: create or overwrite one file with the given text.
//!
//! Parent directories are created. The replacement is atomic (temporary file, fsync, rename; see
//! `atomic.rs`) and keeps an existing file's permissions. The path is the resolved one
//! (`path::resolve_real`: links already followed); no symbolic link in its folders is followed
//! again, and one that appeared since makes the write fail. The result
//! is the original's "Wrote N bytes to <abs>" (N in UTF-8 bytes) plus a [`FileDiff`] for the ACP
//! tool card (none past [`WRITE_DIFF_NEW_MAX_BYTES`]).
//!
//! It deliberately does not know about permissions to ask for, confinement, or line endings: the
//! content is written exactly as given.
//!
//! Compare with pi: `packages/coding-agent/src/core/tools/write.ts`.
//! Compare with oml.clj: `oml.tools/write`.

use std::fs;
use std::path::Path;

use super::{FileDiff, ToolError, ToolOutput, atomic};

/// An existing file larger than this gets no `old_text` in the diff payload: reading it would
/// cost more than a client gains from rendering it.
pub const WRITE_DIFF_OLD_MAX_BYTES: u64 = 16 * 1024 * 1024;

/// Content larger than this gets no diff in the result (the message says how much was written):
/// a client renders such a diff no better than the message, and each copy of it costs as much
/// memory as the content.
pub const WRITE_DIFF_NEW_MAX_BYTES: usize = 4 * 1024 * 1024;

/// Write `content` to `path` (already resolved by [`super::resolve_real`]), creating parent
/// directories. A symbolic link among its folders is an error ([`ToolError::LinkInPath`]).
///
/// Never panics; every failure is an error [`ToolOutput`] saying what failed and where.
pub fn write(path: &Path, content: &str) -> ToolOutput {
    match try_write(path, content) {
        Ok(output) => output,
        Err(error) => error.into(),
    }
}

// --- private helpers

fn try_write(path: &Path, content: &str) -> Result<ToolOutput, ToolError> {
    check_target(path)?;
    let _lock = atomic::file_lock();
    let with_diff = content.len() <= WRITE_DIFF_NEW_MAX_BYTES;
    let old_text = if with_diff { old_text(path) } else { None };
    atomic::write_atomic(path, &[content.as_bytes()], true)?;
    let unit = if content.len() == 1 { "byte" } else { "bytes" };
    let message = format!("Wrote {} {unit} to {}", content.len(), path.display());
    let output = ToolOutput::ok(message);
    if !with_diff {
        return Ok(output);
    }
    Ok(output.with_diff(FileDiff {
        path: path.to_path_buf(),
        old_text,
        new_text: content.to_owned(),
    }))
}

/// What writing to `path` would replace, written nowhere: the file's text before the write
/// (`None` for a new file, or one that is not text), or why the write would fail. A permission
/// question's diff is this and the new content, which the caller holds and need not copy.
pub fn preview_write(path: &Path) -> Result<Option<String>, ToolError> {
    check_target(path)?;
    Ok(old_text(path))
}

/// A directory, a FIFO or a device cannot be written (a FIFO would block, and either would be
/// replaced by a plain file).
fn check_target(path: &Path) -> Result<(), ToolError> {
    match fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Err(ToolError::IsDirectory(path.to_path_buf())),
        Ok(meta) if !meta.is_file() => {
            let error = std::io::Error::other("not a regular file");
            Err(ToolError::io("write", path, error))
        }
        _ => Ok(()),
    }
}

/// The file's text before the write, for the diff: `None` for a new file, a file that is not
/// UTF-8 text, or one over [`WRITE_DIFF_OLD_MAX_BYTES`].
fn old_text(path: &Path) -> Option<String> {
    fs::metadata(path)
        .ok()
        .filter(|meta| meta.len() <= WRITE_DIFF_OLD_MAX_BYTES)
        .and_then(|_| crate::regular::read_regular(path).ok())
        .and_then(|bytes| String::from_utf8(bytes).ok())
}
