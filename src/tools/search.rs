//! What the search tools (`grep`, `find`, `ls`) share: their limits, the directory walk that
//! decides which files are searched, and the way long results are cut.
//!
//! The walk is ripgrep's own (`ignore`): `.gitignore` (inside a git repository), `.ignore`,
//! git's global excludes and `.git/info/exclude` are honoured and hidden files are skipped, so
//! the Rust fallback of `grep` and `find` search exactly what `rg` would. Results are sorted by
//! path, so a search gives the same answer every time. An ignore file that is not a regular
//! file (a FIFO planted in a repository, a device) would block the walk when it is read: a
//! folder that holds one is not entered, and a search whose own folder (or one above it) holds
//! one is refused, naming the file ([`OddIgnoreFile`]). A search also has
//! [`SEARCH_TIME_LIMIT`] in all, for such a file put in place while it walks.
//!
//! This module knows nothing of Lisp, processes or permissions.

use std::path::{Path, PathBuf};

use super::truncate::cap_head;

/// Result lines `grep` returns when the model gives no `limit` (context lines count too); the
/// **head** is kept, sorted by file and line, and a footer says how many more there were.
pub const GREP_DEFAULT_LIMIT: usize = 100;

/// Paths `find` returns when the model gives no `limit`; the head of the sorted list is kept.
pub const FIND_DEFAULT_LIMIT: usize = 1000;

/// Entries `ls` returns when the model gives no `limit`; the head of the sorted list is kept.
pub const LS_DEFAULT_LIMIT: usize = 500;

/// The largest `limit` the model may ask of any search tool.
pub const SEARCH_MAX_LIMIT: usize = 10_000;

/// Characters of one result line; the head is kept and `...` marks the cut (a minified file's
/// one line would otherwise fill the context).
pub const SEARCH_MAX_LINE_CHARS: usize = 500;

/// Characters a search tool returns at most, whatever the limit: the head is kept, as `read`
/// does, with `[output truncated: K more characters]`.
pub const SEARCH_MAX_CHARS: usize = 50_000;

/// Bytes at the start of a file that `grep`'s fallback looks at to tell a binary file (one with
/// a NUL byte there) from text; ripgrep skips such files the same way.
pub const BINARY_SNIFF_BYTES: usize = 8 * 1024;

/// The longest a search (`grep`, `find`) may take; past it the call fails, saying so.
pub const SEARCH_TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The ignore files a walk reads in each folder.
const IGNORE_FILES: [&str; 3] = [".gitignore", ".ignore", ".rgignore"];

/// An ignore file where the search would read it that is not a regular file.
#[derive(Debug, thiserror::Error)]
#[error(
    "{0} is not a regular file (a FIFO or a device?): reading it would never end; not searched"
)]
pub struct OddIgnoreFile(pub PathBuf);

/// The ignore file of `dir` that is not a regular file, if any (links followed).
fn odd_ignore_file(dir: &Path) -> Option<PathBuf> {
    let odd = |path: &PathBuf| std::fs::metadata(path).is_ok_and(|m| !m.is_file());
    IGNORE_FILES.iter().map(|name| dir.join(name)).find(odd)
}

/// The walk of a search under `root`, ripgrep's own, that does not enter a folder holding an
/// ignore file that is not a regular file. `Err` when the search's own folder or one above it
/// holds one, or git's `info/exclude` is one: those are read before the first entry.
pub fn walker(root: &Path) -> Result<ignore::WalkBuilder, OddIgnoreFile> {
    for dir in root.ancestors() {
        if let Some(odd) = odd_ignore_file(dir) {
            return Err(OddIgnoreFile(odd));
        }
        let exclude = dir.join(".git/info/exclude");
        if std::fs::metadata(&exclude).is_ok_and(|m| !m.is_file()) {
            return Err(OddIgnoreFile(exclude));
        }
    }
    let mut walk = ignore::WalkBuilder::new(root);
    walk.sort_by_file_path(|a, b| a.cmp(b))
        .filter_entry(|entry| {
            let dir = entry.file_type().is_some_and(|t| t.is_dir());
            !dir || odd_ignore_file(entry.path()).is_none()
        });
    Ok(walk)
}

/// The `limit` to use: the model's, within `1..=SEARCH_MAX_LIMIT`, else `default`.
pub fn effective_limit(limit: Option<i64>, default: usize) -> usize {
    match limit {
        Some(n) if n >= 1 => (n as usize).min(SEARCH_MAX_LIMIT),
        _ => default,
    }
}

/// The files under `root` that a search looks at, in path order: what `rg --files` lists
/// ([`walker`]'s). `root` may be a file, which is then the only one.
pub fn walk_files(root: &Path) -> Result<impl Iterator<Item = PathBuf>, OddIgnoreFile> {
    Ok(walker(root)?
        .build()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
        .map(ignore::DirEntry::into_path))
}

/// `path` as the model should see it: relative to `base` when it is inside, else as it is.
pub fn shown_path(path: &Path, base: &Path) -> String {
    path.strip_prefix(base)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

/// One result line, cut to [`SEARCH_MAX_LINE_CHARS`] characters.
pub fn cut_line(line: &str) -> String {
    match line.char_indices().nth(SEARCH_MAX_LINE_CHARS) {
        Some((i, _)) => format!("{}...", &line[..i]),
        None => line.to_owned(),
    }
}

/// The lines of a result joined, the first `limit` of `total`, with a footer saying how many
/// were left out and what to do, all capped at [`SEARCH_MAX_CHARS`].
pub fn join_capped(lines: &[String], total: usize, limit: usize, what: &str) -> String {
    let mut text = lines
        .iter()
        .take(limit)
        .map(|l| cut_line(l))
        .collect::<Vec<_>>()
        .join("\n");
    if total > limit {
        text.push_str(&format!(
            "\n[{} more {what} not shown; narrow the search or raise limit]",
            total - limit
        ));
    }
    cap_head(&text, SEARCH_MAX_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_clamped() {
        assert_eq!(effective_limit(None, 7), 7);
        assert_eq!(effective_limit(Some(0), 7), 7);
        assert_eq!(effective_limit(Some(-3), 7), 7);
        assert_eq!(effective_limit(Some(3), 7), 3);
        assert_eq!(effective_limit(Some(1 << 40), 7), SEARCH_MAX_LIMIT);
    }

    #[test]
    fn long_lines_are_cut_on_a_character_boundary() {
        let line = "é".repeat(SEARCH_MAX_LINE_CHARS + 5);
        let cut = cut_line(&line);
        assert!(cut.ends_with("..."));
        assert_eq!(cut.chars().count(), SEARCH_MAX_LINE_CHARS + 3);
        assert_eq!(cut_line("short"), "short");
    }

    #[test]
    fn a_footer_says_how_many_lines_were_left_out() {
        let lines: Vec<String> = (1..=5).map(|i| format!("l{i}")).collect();
        assert_eq!(join_capped(&lines, 5, 10, "lines"), "l1\nl2\nl3\nl4\nl5");
        assert_eq!(
            join_capped(&lines, 5, 2, "lines"),
            "l1\nl2\n[3 more lines not shown; narrow the search or raise limit]"
        );
    }
}
