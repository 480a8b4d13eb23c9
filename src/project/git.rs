//! A short summary of a git repository's state for the system prompt: the branch (or the
//! detached commit) and how many files are changed, staged and untracked.
//!
//! `git status` runs with a time limit, without taking git's optional locks, stdin from
//! `/dev/null`, in its own process group; when it is slow, missing or fails, the summary says so
//! instead of delaying the turn. It runs in the sandbox its caller gives (read-only, no
//! network): a repository's own config can name programs git runs (`core.fsmonitor`, hooks,
//! clean filters), and an untrusted repository must not run them unconfined, nor with the API key
//! in their environment (git gets only [`GIT_ENV`]); fsmonitor and hooks are also turned off on
//! the command line. Where no sandbox can be had, git is not run. Knows nothing of prompts or
//! Lisp.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

use crate::sandbox::Prepared;

/// The environment variables `git status` gets; everything else (secrets included) is removed.
const GIT_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TZ",
];

/// How long `git status` may take before the summary says it was too slow.
pub const GIT_STATUS_TIMEOUT: Duration = Duration::from_millis(500);

/// The state of the repository at `dir`, as one line: `branch main; 2 modified, 1 untracked`,
/// `detached at 1a2b3c4; clean`. `None` when `dir` is not in a git repository.
pub async fn summary(dir: &Path, timeout: Duration, sandbox: Prepared) -> Option<String> {
    // Where no sandbox can be had, git is not run: a repository's config could run programs
    // (clean filters) unconfined.
    let Some(mut cmd) = confined_git(dir, sandbox) else {
        return in_repository(dir).then(|| {
            "a git repository (not inspected here: no sandbox to run git status in)".to_owned()
        });
    };
    cmd.args([
        "status",
        "--porcelain=v1",
        "--branch",
        "--untracked-files=normal",
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let output = match cmd.spawn() {
        Ok(child) => tokio::time::timeout(timeout, child.wait_with_output()).await,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return in_repository(dir)
                .then(|| "a git repository (git is not installed)".to_owned());
        }
        Err(e) => return Some(format!("a git repository? (git failed to start: {e})")),
    };
    match output {
        Err(_) => Some(format!(
            "a git repository (git status took over {} ms)",
            timeout.as_millis()
        )),
        Ok(Err(e)) => Some(format!("a git repository? (git status failed: {e})")),
        Ok(Ok(out)) if out.status.success() => {
            Some(describe(&String::from_utf8_lossy(&out.stdout), dir).await)
        }
        Ok(Ok(_)) => None,
    }
}

/// `git` in `dir`, confined by `sandbox` (which gives it a process group of its own), with only
/// [`GIT_ENV`] of the environment (the API key and other secrets stay out of the programs a
/// repository's config may name), fsmonitor and hooks off, no optional locks, stdin from
/// `/dev/null`, killed when dropped; `None` when the sandbox cannot be had.
pub(super) fn confined_git(dir: &Path, sandbox: Prepared) -> Option<Command> {
    let mut cmd = Command::new("git");
    sandbox.only_env(git_env()).confine(cmd.as_std_mut()).ok()?;
    cmd.args(SAFE_ARGS)
        .current_dir(dir)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    Some(cmd)
}

/// The options every git of oml's gets first: no fsmonitor, no hooks.
pub(super) const SAFE_ARGS: [&str; 4] = [
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.hooksPath=/dev/null",
];

/// The whole environment of oml's git: [`GIT_ENV`] as oml has them, and no optional locks.
pub(super) fn git_env() -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    let mut vars: Vec<_> = GIT_ENV
        .iter()
        .filter_map(|name| Some((name.into(), std::env::var_os(name)?)))
        .collect();
    vars.push(("GIT_OPTIONAL_LOCKS".into(), "0".into()));
    vars
}

fn in_repository(dir: &Path) -> bool {
    dir.ancestors().any(|d| d.join(".git").exists())
}

/// `git status --porcelain=v1 --branch` as one line.
async fn describe(porcelain: &str, dir: &Path) -> String {
    let mut lines = porcelain.lines();
    let head = lines.next().unwrap_or("").trim_start_matches("## ");
    let branch = if head.starts_with("HEAD (no branch)") {
        match short_head(dir).await {
            Some(commit) => format!("detached at {commit}"),
            None => "detached HEAD".to_owned(),
        }
    } else if let Some(name) = head.strip_prefix("No commits yet on ") {
        format!("branch {name} (no commits yet)")
    } else {
        let name = head.split("...").next().unwrap_or(head);
        let tracking = head
            .find('[')
            .map(|i| format!(" {}", &head[i..]))
            .unwrap_or_default();
        format!(
            "branch {}{tracking}",
            name.split(' ').next().unwrap_or(name)
        )
    };
    let (mut staged, mut modified, mut untracked) = (0, 0, 0);
    for line in lines {
        let bytes = line.as_bytes();
        if line.starts_with("??") {
            untracked += 1;
            continue;
        }
        if bytes.first().is_some_and(|c| *c != b' ') {
            staged += 1;
        }
        if bytes.get(1).is_some_and(|c| *c != b' ') {
            modified += 1;
        }
    }
    let counts: Vec<String> = [
        (staged, "staged"),
        (modified, "modified"),
        (untracked, "untracked"),
    ]
    .into_iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect();
    let state = if counts.is_empty() {
        "clean".to_owned()
    } else {
        counts.join(", ")
    };
    format!("{branch}; {state}")
}

async fn short_head(dir: &Path) -> Option<String> {
    let out = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(GIT_STATUS_TIMEOUT, out)
        .await
        .ok()?
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}
