//! `find`: the files under a directory whose path matches a glob, sorted, relative to the
//! working directory.
//!
//! Globs are matched against the path relative to the searched directory, with `*` and `?`
//! inside one path segment, `**` across segments (`**/*.rs` matches at any depth, `*.rs` only
//! at the top), `[...]` and `{a,b}`. The files looked at are those `rg --files` lists
//! (`.gitignore` honoured, hidden files skipped; see `search`). Blocking file I/O: call it from
//! `spawn_blocking`. Knows nothing of Lisp.

use std::path::Path;

use super::search::{FIND_DEFAULT_LIMIT, effective_limit, join_capped, shown_path, walk_files};
use super::{ToolError, ToolOutput, resolve_path};
use crate::cancel::CancelToken;

/// Run `find` in `cwd`: files under `path` (default: the working directory) matching `pattern`.
pub fn find(
    cwd: &Path,
    pattern: &str,
    path: Option<&str>,
    limit: Option<i64>,
    cancel: &CancelToken,
) -> ToolOutput {
    if pattern.trim().is_empty() {
        return ToolError::PatternRequired.into();
    }
    let root = match resolve_path(cwd, path.unwrap_or(".")) {
        Ok(root) => root,
        Err(e) => return e.into(),
    };
    if !root.is_dir() {
        return match root.exists() {
            true => ToolOutput::error(format!("Not a directory: {}", root.display())),
            false => ToolError::NotFound(root).into(),
        };
    }
    let glob = match globset::GlobBuilder::new(pattern.trim_start_matches("./"))
        .literal_separator(true)
        .build()
    {
        Ok(glob) => glob.compile_matcher(),
        Err(e) => return ToolOutput::error(format!("Invalid glob {pattern}: {e}")),
    };
    let files = match walk_files(&root) {
        Ok(files) => files,
        Err(odd) => return ToolOutput::error(odd.to_string()),
    };
    let mut matches = Vec::new();
    for file in files {
        if cancel.is_cancelled() {
            return ToolOutput::error("Cancelled");
        }
        let rel = file.strip_prefix(&root).unwrap_or(&file);
        if glob.is_match(rel) {
            matches.push(shown_path(&file, cwd));
        }
    }
    if matches.is_empty() {
        return ToolOutput::ok("No files found.");
    }
    let limit = effective_limit(limit, FIND_DEFAULT_LIMIT);
    ToolOutput::ok(join_capped(&matches, matches.len(), limit, "paths"))
}
