//! `grep`: search file contents for a regular expression, lines back as `path:line:text`.
//!
//! ripgrep runs when it is on `PATH` (and the caller allows it); otherwise a Rust fallback walks
//! the same files with ripgrep's own walker and matcher syntax (`ignore`, `regex`), so the
//! answer does not depend on what is installed: `.gitignore` honoured, hidden and binary files
//! skipped, results sorted by path, context lines as `path-line-text` with `--` between groups.
//! Paths are shown relative to the working directory when they are inside it.
//!
//! This module knows nothing of Lisp or permissions. ripgrep runs in its own process group with
//! stdin from `/dev/null`, is killed when the call is cancelled, and is read only up to
//! [`GREP_SCAN_MAX_LINES`] lines.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::Command;

use super::search::{GREP_DEFAULT_LIMIT, effective_limit, join_capped};
use super::{ToolError, ToolOutput, resolve_path};
use crate::cancel::CancelToken;

/// Result lines read from ripgrep (or produced by the fallback) at most; past this the search
/// stops and the footer says "at least". Bounds the memory and time of a pattern that matches
/// everything.
pub const GREP_SCAN_MAX_LINES: usize = 100_000;

/// The name of the ripgrep program looked for on `PATH`.
pub const RIPGREP: &str = "rg";

/// Why a search, by ripgrep or by the fallback, gave no lines. Its `Display` is the message the
/// model reads, as [`ToolError`]'s is.
#[derive(Debug, thiserror::Error)]
enum SearchError {
    /// ripgrep could not be started.
    #[error("cannot run rg: {0}")]
    Spawn(std::io::Error),
    /// ripgrep's output pipes were not there to read.
    #[error("cannot read rg's output")]
    NoPipes,
    /// Reading ripgrep's output failed.
    #[error("cannot read rg's output: {0}")]
    Read(std::io::Error),
    /// Waiting for ripgrep to end failed.
    #[error(transparent)]
    Wait(std::io::Error),
    /// ripgrep failed before it found a line: what it wrote to stderr.
    #[error("grep failed: {0}")]
    Ripgrep(String),
    /// The fallback's pattern is not a regular expression.
    #[error("grep failed: invalid pattern: {0}")]
    Pattern(regex::Error),
    /// The fallback's glob is not one.
    #[error("grep failed: invalid glob {glob}: {source}")]
    Glob { glob: String, source: ignore::Error },
    /// The fallback's globs could not be put together.
    #[error(transparent)]
    Globs(ignore::Error),
    /// The fallback's task ended without an answer.
    #[error("the search failed: {0}")]
    Task(tokio::task::JoinError),
    /// The call was cancelled.
    #[error("Cancelled")]
    Cancelled,
    /// An ignore file the search would read is not a regular file.
    #[error(transparent)]
    OddIgnoreFile(super::search::OddIgnoreFile),
    /// The search took longer than [`super::search::SEARCH_TIME_LIMIT`].
    #[error("grep failed: the search did not end within {0:?}")]
    TooLong(std::time::Duration),
}

/// What the model asked of `grep`.
#[derive(Clone, Debug, Default)]
pub struct GrepArgs {
    /// A regular expression (Rust/ripgrep syntax), or a plain string with `literal`.
    pub pattern: String,
    /// A file or directory, relative to the working directory; default: the working directory.
    pub path: Option<String>,
    /// Only files matching this glob (`*.rs`; with a `/`, matched against the path).
    pub glob: Option<String>,
    pub ignore_case: bool,
    /// `pattern` is a plain string, not a regular expression.
    pub literal: bool,
    /// Lines of context before and after each match.
    pub context: usize,
    /// Result lines to return; default [`GREP_DEFAULT_LIMIT`].
    pub limit: Option<i64>,
}

/// The lines a search found (at most `limit` kept) and how many there were in all.
struct Found {
    lines: Vec<String>,
    total: usize,
}

/// Run `grep` in `cwd`. With `use_ripgrep` and `rg` on `PATH`, ripgrep does the search.
pub async fn grep(
    cwd: &Path,
    args: &GrepArgs,
    use_ripgrep: bool,
    cancel: &CancelToken,
) -> ToolOutput {
    if args.pattern.is_empty() {
        return ToolError::PatternRequired.into();
    }
    let root = match resolve_path(cwd, args.path.as_deref().unwrap_or(".")) {
        Ok(root) => root,
        Err(e) => return e.into(),
    };
    if !root.exists() {
        return ToolError::NotFound(root).into();
    }
    let limit = effective_limit(args.limit, GREP_DEFAULT_LIMIT);
    let search = async {
        // The ignore files read before the first entry, checked for ripgrep too.
        super::search::walker(&root).map_err(SearchError::OddIgnoreFile)?;
        match ripgrep_path().filter(|_| use_ripgrep) {
            Some(rg) => ripgrep(&rg, cwd, &root, args, limit, cancel).await,
            None => {
                let (cwd, root, args) = (cwd.to_path_buf(), root.clone(), args.clone());
                let cancel = cancel.clone();
                tokio::task::spawn_blocking(move || fallback(&cwd, &root, &args, limit, &cancel))
                    .await
                    .unwrap_or_else(|e| Err(SearchError::Task(e)))
            }
        }
    };
    // A walk stuck on an ignore file made odd while it ran is left behind (ripgrep is killed).
    let limit_time = super::search::SEARCH_TIME_LIMIT;
    let found = tokio::select! {
        found = tokio::time::timeout(limit_time, search) => {
            found.unwrap_or(Err(SearchError::TooLong(limit_time)))
        }
        () = cancel.cancelled() => Err(SearchError::Cancelled),
    };
    match found {
        Err(error) => ToolOutput::error(error.to_string()),
        Ok(found) if found.total == 0 => ToolOutput::ok("No matches."),
        Ok(found) => {
            let what = if found.total >= GREP_SCAN_MAX_LINES {
                "lines (at least)"
            } else {
                "lines"
            };
            ToolOutput::ok(join_capped(&found.lines, found.total, limit, what))
        }
    }
}

/// `rg` on `PATH`, if it is there.
pub fn ripgrep_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(RIPGREP))
        .find(|p| p.is_file())
}

async fn ripgrep(
    rg: &Path,
    cwd: &Path,
    root: &Path,
    args: &GrepArgs,
    limit: usize,
    cancel: &CancelToken,
) -> Result<Found, SearchError> {
    let mut cmd = rg_command(rg, cwd, root, args);
    let mut child = cmd.spawn().map_err(SearchError::Spawn)?;
    let (Some(stdout), Some(mut stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(SearchError::NoPipes);
    };
    // stderr is read while stdout is: an rg with many errors would otherwise fill its pipe and
    // stop.
    let errors = tokio::spawn(async move {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text).await;
        text
    });
    let mut found = Found {
        lines: Vec::new(),
        total: 0,
    };
    let mut reader = BufReader::new(stdout);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = tokio::select! {
            n = reader.read_until(b'\n', &mut buf) => n.map_err(SearchError::Read)?,
            () = cancel.cancelled() => return Err(SearchError::Cancelled),
        };
        if n == 0 || found.total >= GREP_SCAN_MAX_LINES {
            break;
        }
        found.total += 1;
        if found.lines.len() < limit {
            let line = String::from_utf8_lossy(&buf);
            found
                .lines
                .push(line.trim_end_matches(['\n', '\r']).to_owned());
        }
    }
    if found.total >= GREP_SCAN_MAX_LINES {
        let _ = child.start_kill();
    }
    let errors = errors.await.unwrap_or_default();
    let status = child.wait().await.map_err(SearchError::Wait)?;
    match status.code() {
        Some(0 | 1) => Ok(found),
        _ if found.total > 0 => Ok(found),
        _ => Err(SearchError::Ripgrep(errors.trim().to_owned())),
    }
}

/// The ripgrep command line of a search: the output ripgrep's fallback reproduces, in `cwd`.
fn rg_command(rg: &Path, cwd: &Path, root: &Path, args: &GrepArgs) -> Command {
    let mut cmd = Command::new(rg);
    // --no-config: a user's RIPGREP_CONFIG_PATH (--hidden, --no-ignore, ...) must not make rg
    // answer differently from the fallback.
    cmd.args([
        "--no-config",
        "--line-number",
        "--no-heading",
        "--with-filename",
    ])
    .args(["--color", "never", "--sort", "path"]);
    if args.ignore_case {
        cmd.arg("--ignore-case");
    }
    if args.literal {
        cmd.arg("--fixed-strings");
    }
    if args.context > 0 {
        cmd.arg("--context").arg(args.context.to_string());
    }
    if let Some(glob) = &args.glob {
        cmd.arg("--glob").arg(glob);
    }
    cmd.arg("--regexp").arg(&args.pattern).arg("--");
    // Relative to the working directory, so rg prints the paths the model gave.
    match root.strip_prefix(cwd) {
        Ok(rel) if rel.as_os_str().is_empty() => {}
        Ok(rel) => {
            cmd.arg(rel);
        }
        Err(_) => {
            cmd.arg(root);
        }
    }
    cmd.current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    cmd
}

/// The search without ripgrep: the same files, the same output.
fn fallback(
    cwd: &Path,
    root: &Path,
    args: &GrepArgs,
    limit: usize,
    cancel: &CancelToken,
) -> Result<Found, SearchError> {
    let pattern = if args.literal {
        regex::escape(&args.pattern)
    } else {
        args.pattern.clone()
    };
    let matcher = regex::RegexBuilder::new(&pattern)
        .case_insensitive(args.ignore_case)
        .build()
        .map_err(SearchError::Pattern)?;
    let mut walk = super::search::walker(root).map_err(SearchError::OddIgnoreFile)?;
    if let Some(glob) = &args.glob {
        let mut overrides = ignore::overrides::OverrideBuilder::new(root);
        overrides.add(glob).map_err(|source| SearchError::Glob {
            glob: glob.clone(),
            source,
        })?;
        walk.overrides(overrides.build().map_err(SearchError::Globs)?);
    }
    let mut found = Found {
        lines: Vec::new(),
        total: 0,
    };
    for entry in walk.build().filter_map(Result::ok) {
        if cancel.is_cancelled() {
            return Err(SearchError::Cancelled);
        }
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let Ok(bytes) = crate::regular::read_regular(entry.path()) else {
            continue;
        };
        let sniff = &bytes[..bytes.len().min(super::search::BINARY_SNIFF_BYTES)];
        if memchr::memchr(0, sniff).is_some() {
            continue;
        }
        let shown = super::search::shown_path(entry.path(), cwd);
        search_text(
            &String::from_utf8_lossy(&bytes),
            &shown,
            &matcher,
            args.context,
            limit,
            &mut found,
        );
        if found.total >= GREP_SCAN_MAX_LINES {
            break;
        }
    }
    Ok(found)
}

/// Append the result lines of one file, ripgrep's way: `path:n:text` for a match,
/// `path-n-text` for context, and with context a `--` line between groups that do not touch
/// (also between files).
fn search_text(
    text: &str,
    shown: &str,
    matcher: &regex::Regex,
    context: usize,
    limit: usize,
    found: &mut Found,
) {
    let lines: Vec<&str> = text.lines().collect();
    let is_match: Vec<bool> = lines.iter().map(|l| matcher.is_match(l)).collect();
    let mut show = vec![false; lines.len()];
    for (i, _) in is_match.iter().enumerate().filter(|(_, m)| **m) {
        let to = (i + context).min(lines.len() - 1);
        show[i.saturating_sub(context)..=to].fill(true);
    }
    let push = |found: &mut Found, line: String| {
        found.total += 1;
        if found.lines.len() < limit {
            found.lines.push(line);
        }
    };
    let mut previous: Option<usize> = None;
    for (i, line) in lines.iter().enumerate().filter(|(i, _)| show[*i]) {
        let gap = match previous {
            Some(p) => i > p + 1,
            None => found.total > 0,
        };
        if context > 0 && gap {
            push(found, "--".to_owned());
        }
        let sep = if is_match[i] { ':' } else { '-' };
        push(found, format!("{shown}{sep}{}{sep}{line}", i + 1));
        previous = Some(i);
        if found.total >= GREP_SCAN_MAX_LINES {
            return;
        }
    }
}
