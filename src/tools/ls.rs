//! `ls`: the entries of one directory, sorted by name, directories ending in `/` and symbolic
//! links in `@`. Hidden entries are listed too (a `.github/` is worth seeing). Blocking file I/O:
//! call it from `spawn_blocking`. Knows nothing of Lisp.

use std::path::Path;

use super::search::{LS_DEFAULT_LIMIT, effective_limit, join_capped};
use super::{ToolError, ToolOutput, resolve_path};

/// Run `ls` in `cwd` on `path` (default: the working directory).
pub fn ls(cwd: &Path, path: Option<&str>, limit: Option<i64>) -> ToolOutput {
    let dir = match resolve_path(cwd, path.unwrap_or(".")) {
        Ok(dir) => dir,
        Err(e) => return e.into(),
    };
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(_) if !dir.exists() => return ToolError::NotFound(dir).into(),
        Err(_) if !dir.is_dir() => {
            return ToolOutput::error(format!("Not a directory: {}", dir.display()));
        }
        Err(e) => return ToolOutput::error(format!("Cannot list {}: {e}", dir.display())),
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            match e.file_type() {
                Ok(t) if t.is_symlink() => format!("{name}@"),
                Ok(t) if t.is_dir() => format!("{name}/"),
                _ => name,
            }
        })
        .collect();
    if names.is_empty() {
        return ToolOutput::ok("(empty directory)");
    }
    names.sort();
    let limit = effective_limit(limit, LS_DEFAULT_LIMIT);
    ToolOutput::ok(join_capped(&names, names.len(), limit, "entries"))
}
