//! oml's git worktrees: a folder of its own for an agent that works beside the user, on a branch
//! of its own, made from the repository's current `HEAD`.
//!
//! A worktree is `git worktree add -b oml/<name> <state>/worktrees/<repo-id>/<name> <base>`,
//! where `<base>` is the commit `HEAD` named when it was made, kept in
//! `<state>/worktrees/<repo-id>/.bases/<name>` for the diff stat. The name is sanitised
//! ([`names::sanitise`]: letters, digits, `.`, `_`, `-`; never a leading `-` or `.`) and made
//! unique by a number, the folder being created first so two agents asking at once get two
//! names. Listing, removing and merging look at `git worktree list` and keep only the worktrees
//! in that folder on a branch `oml/<name>`: a name from outside is looked up, never used as a
//! path or an argument before it was found there.
//!
//! The diff stat is what the worktree changed against its base, committed or not, new files
//! included: untracked files are first recorded as intent-to-add (`git add -N`, in the
//! worktree's own index), then `git diff --stat <base>` runs. A merge commits what the worktree
//! left uncommitted (`git add -A`, `git commit`, with the user's identity), then runs
//! `git merge --no-edit oml/<name>` in the repository's work tree; a conflict is the merge's
//! output with `ok` false, left to the user as git leaves it.
//!
//! Every git runs as [`super::git`] runs it — the repository-safe options (no fsmonitor, no
//! hooks), only [`super::git::git_env`]'s environment, stdin from `/dev/null`, within
//! [`WORKTREE_GIT_TIMEOUT`] — and confined by the sandbox its caller's [`Confine`] gives for the
//! folders that command writes (the git folder, and the worktree or the work tree): a
//! repository's config can name programs git runs (a clean or smudge filter). Knows nothing of
//! Lisp, sessions or agents.

pub mod names;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

use crate::sandbox::Prepared;

/// How long one git command of a worktree may take (a checkout of a large repository).
pub const WORKTREE_GIT_TIMEOUT: Duration = Duration::from_secs(120);

/// The folder of oml's worktrees in its state folder.
pub const WORKTREES_DIR: &str = "worktrees";

/// The branch prefix of oml's worktrees.
pub const BRANCH_PREFIX: &str = "oml/";

/// The folder, beside the worktrees of a repository, that holds each one's base commit (a name
/// never starts with `.`, so no worktree has this name).
pub const BASES_DIR: &str = ".bases";

/// The sandbox for a git command that writes beneath the given folders.
pub type Confine = fn(&[PathBuf]) -> Prepared;

/// Why a worktree operation failed.
#[derive(Debug, thiserror::Error)]
pub enum WorktreeError {
    #[error("{0} is not in a git repository (worktrees need one)")]
    NotARepository(PathBuf),
    #[error("the git repository at {0} has no commit yet: a worktree starts from HEAD")]
    NoCommit(PathBuf),
    #[error("no worktree of oml's is named {0:?} in this repository")]
    NotFound(String),
    #[error("{0} is not one of oml's worktrees")]
    NotOurs(PathBuf),
    #[error("{0:?} is not a commit id")]
    BadBase(String),
    #[error("no free worktree name for {0:?}")]
    NoFreeName(String),
    #[error("git cannot be run confined: {0}")]
    Sandbox(String),
    #[error("git cannot be started: {0}")]
    Spawn(#[source] std::io::Error),
    #[error("git {what} took over {} s", WORKTREE_GIT_TIMEOUT.as_secs())]
    TimedOut { what: &'static str },
    #[error("git {what} failed: {output}")]
    Git { what: &'static str, output: String },
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

/// One of oml's worktrees.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Worktree {
    /// The sanitised, unique name: the folder's and the branch's.
    pub name: String,
    pub path: PathBuf,
    /// `oml/<name>`.
    pub branch: String,
    /// The commit it started from (empty when its record is gone).
    pub base: String,
}

/// What a removal or a merge did: whether git succeeded, and what it said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Done {
    pub ok: bool,
    pub output: String,
}

/// The repository a folder is in.
#[derive(Clone, Debug)]
pub struct Repo {
    /// The top of the work tree `dir` is in.
    pub top: PathBuf,
    /// The git folder all its worktrees share.
    pub common_dir: PathBuf,
    /// Where oml's worktrees of this repository are: `<state>/worktrees/<repo-id>`.
    pub worktrees: PathBuf,
}

impl Repo {
    /// The repository `dir` is in, with its worktrees' folder under `state`.
    pub async fn of(dir: &Path, state: &Path, confine: Confine) -> Result<Repo, WorktreeError> {
        if super::changes::work_tree(dir).is_none() {
            return Err(WorktreeError::NotARepository(dir.to_path_buf()));
        }
        let out = git(
            dir,
            &[
                "rev-parse",
                "--path-format=absolute",
                "--show-toplevel",
                "--git-common-dir",
            ],
            confine(&[]),
            "rev-parse",
        )
        .await?;
        let mut lines = out.lines();
        let (Some(top), Some(common)) = (lines.next(), lines.next()) else {
            return Err(WorktreeError::NotARepository(dir.to_path_buf()));
        };
        // Real, so the same repository reached through a link has the same id.
        let common_dir = std::fs::canonicalize(common).unwrap_or_else(|_| PathBuf::from(common));
        let worktrees = state.join(WORKTREES_DIR).join(names::repo_id(&common_dir));
        Ok(Repo {
            top: PathBuf::from(top),
            common_dir,
            worktrees,
        })
    }

    fn base_file(&self, name: &str) -> PathBuf {
        self.worktrees.join(BASES_DIR).join(name)
    }
}

/// A new worktree of the repository `dir` is in, from its `HEAD`, named after `name`.
pub async fn add(
    dir: &Path,
    name: &str,
    state: &Path,
    confine: Confine,
) -> Result<Worktree, WorktreeError> {
    let repo = Repo::of(dir, state, confine).await?;
    let head = git(
        &repo.top,
        &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"],
        confine(&[]),
        "rev-parse HEAD",
    )
    .await
    .map_err(|_| WorktreeError::NoCommit(repo.top.clone()))?;
    let base = head.trim().to_owned();
    let io = |what: &str| {
        let what = what.to_owned();
        move |source| WorktreeError::Io { what, source }
    };
    crate::paths::ensure_private_dir(&repo.worktrees.join(BASES_DIR))
        .map_err(io("the worktrees' folder"))?;
    let (name, path) = reserve(&repo, &names::sanitise(name), confine).await?;
    let branch = format!("{BRANCH_PREFIX}{name}");
    let path_arg = path.display().to_string();
    let added = git(
        &repo.top,
        &["worktree", "add", "-b", &branch, "--", &path_arg, &base],
        confine(&[repo.common_dir.clone(), path.clone()]),
        "worktree add",
    )
    .await;
    if let Err(e) = added {
        let _ = std::fs::remove_dir(&path);
        return Err(e);
    }
    std::fs::write(repo.base_file(&name), &base).map_err(io("the worktree's base record"))?;
    Ok(Worktree {
        name,
        path,
        branch,
        base,
    })
}

/// A free name from `wanted` (itself, else `wanted-2`, `-3`, …) and its folder, created now:
/// neither a folder nor a branch `oml/<name>` exists yet.
async fn reserve(
    repo: &Repo,
    wanted: &str,
    confine: Confine,
) -> Result<(String, PathBuf), WorktreeError> {
    for n in 1..=names::MAX_SUFFIX {
        let name = names::numbered(wanted, n);
        let path = repo.worktrees.join(&name);
        let branch = format!("refs/heads/{BRANCH_PREFIX}{name}");
        let taken = git(
            &repo.top,
            &["rev-parse", "--verify", "--quiet", &branch],
            confine(&[]),
            "rev-parse",
        )
        .await
        .is_ok();
        if taken {
            continue;
        }
        match std::fs::create_dir(&path) {
            Ok(()) => return Ok((name, path)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(source) => {
                return Err(WorktreeError::Io {
                    what: format!("creating {}", path.display()),
                    source,
                });
            }
        }
    }
    Err(WorktreeError::NoFreeName(wanted.to_owned()))
}

/// oml's worktrees of the repository `dir` is in, as `git worktree list` has them.
pub async fn list(
    dir: &Path,
    state: &Path,
    confine: Confine,
) -> Result<Vec<Worktree>, WorktreeError> {
    let repo = Repo::of(dir, state, confine).await?;
    list_of(&repo, confine).await
}

async fn list_of(repo: &Repo, confine: Confine) -> Result<Vec<Worktree>, WorktreeError> {
    let out = git(
        &repo.top,
        &["worktree", "list", "--porcelain", "-z"],
        confine(&[]),
        "worktree list",
    )
    .await?;
    let folder = std::fs::canonicalize(&repo.worktrees).unwrap_or_else(|_| repo.worktrees.clone());
    Ok(names::parse_list(&out, &[&repo.worktrees, &folder])
        .into_iter()
        .map(|(name, path)| Worktree {
            base: std::fs::read_to_string(repo.base_file(&name))
                .map(|s| s.trim().to_owned())
                .unwrap_or_default(),
            branch: format!("{BRANCH_PREFIX}{name}"),
            name,
            path,
        })
        .collect())
}

/// The worktree named `name` (exactly, as listed), or [`WorktreeError::NotFound`].
async fn find(repo: &Repo, name: &str, confine: Confine) -> Result<Worktree, WorktreeError> {
    if names::sanitise(name) != name {
        return Err(WorktreeError::NotFound(name.to_owned()));
    }
    list_of(repo, confine)
        .await?
        .into_iter()
        .find(|w| w.name == name)
        .ok_or_else(|| WorktreeError::NotFound(name.to_owned()))
}

/// What the worktree at `path` changed against the commit `base`: git's `--stat` text, empty
/// when nothing changed (new files included, see the module's doc). `path` must be one of
/// oml's worktrees (in `state`'s worktrees folder): the intent-to-add entries go to its index,
/// never to the user's.
pub async fn diffstat(
    path: &Path,
    base: &str,
    state: &Path,
    confine: Confine,
) -> Result<String, WorktreeError> {
    if !names::is_commit_id(base) {
        return Err(WorktreeError::BadBase(base.to_owned()));
    }
    let folder = state.join(WORKTREES_DIR);
    let real = |p: &Path| std::fs::canonicalize(p).ok();
    let ours =
        matches!((real(path), real(&folder)), (Some(p), Some(f)) if p.starts_with(&f) && p != f);
    if !ours {
        return Err(WorktreeError::NotOurs(path.to_path_buf()));
    }
    let common = git(
        path,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
        confine(&[]),
        "rev-parse",
    )
    .await
    .map_err(|_| WorktreeError::NotARepository(path.to_path_buf()))?;
    let writable = [PathBuf::from(common.trim())];
    git(path, &["add", "-N", "-A"], confine(&writable), "add -N").await?;
    git(
        path,
        &["diff", "--stat", base, "--"],
        confine(&writable),
        "diff --stat",
    )
    .await
}

/// Removes the worktree `name` of the repository `dir` is in, its changes and its branch.
pub async fn remove(
    dir: &Path,
    name: &str,
    state: &Path,
    confine: Confine,
) -> Result<Done, WorktreeError> {
    let repo = Repo::of(dir, state, confine).await?;
    let tree = find(&repo, name, confine).await?;
    let writable = [repo.common_dir.clone(), repo.worktrees.clone()];
    let path = tree.path.display().to_string();
    // A folder already gone (deleted by hand) is pruned from git's list instead.
    let args: &[&str] = if tree.path.exists() {
        &["worktree", "remove", "--force", &path]
    } else {
        &["worktree", "prune"]
    };
    let mut done = run(&repo.top, args, confine(&writable), "worktree remove").await?;
    if done.ok {
        let deleted = run(
            &repo.top,
            &["branch", "-D", &tree.branch],
            confine(&writable),
            "branch -D",
        )
        .await?;
        done.ok = deleted.ok;
        done.output.push_str(&deleted.output);
        let _ = std::fs::remove_file(repo.base_file(name));
    }
    Ok(done)
}

/// Commits what the worktree `name` left uncommitted, then merges its branch into the work
/// tree of the repository `dir` is in (`git merge --no-edit oml/<name>`).
pub async fn merge(
    dir: &Path,
    name: &str,
    state: &Path,
    confine: Confine,
) -> Result<Done, WorktreeError> {
    let repo = Repo::of(dir, state, confine).await?;
    let tree = find(&repo, name, confine).await?;
    let in_tree = [repo.common_dir.clone(), tree.path.clone()];
    git(&tree.path, &["add", "-A"], confine(&in_tree), "add -A").await?;
    let staged = run(
        &tree.path,
        &["diff", "--cached", "--quiet"],
        confine(&in_tree),
        "diff --cached",
    )
    .await?;
    let mut output = String::new();
    if !staged.ok {
        let message = format!("oml worktree {name}");
        let commit = run(
            &tree.path,
            &["commit", "--quiet", "--no-verify", "-m", &message],
            confine(&in_tree),
            "commit",
        )
        .await?;
        if !commit.ok {
            return Ok(commit);
        }
        output.push_str(&commit.output);
    }
    let mut merged = run(
        &repo.top,
        &["merge", "--no-edit", &tree.branch],
        confine(&[repo.common_dir.clone(), repo.top.clone()]),
        "merge",
    )
    .await?;
    output.push_str(&merged.output);
    merged.output = output;
    Ok(merged)
}

/// `git ARGS…` in `dir`: its stdout when it succeeded, else [`WorktreeError::Git`].
async fn git(
    dir: &Path,
    args: &[&str],
    sandbox: Prepared,
    what: &'static str,
) -> Result<String, WorktreeError> {
    let out = output(dir, args, sandbox, what).await?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(WorktreeError::Git {
            what,
            output: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        })
    }
}

/// `git ARGS…` in `dir` as a [`Done`]: whether it succeeded, its stdout and stderr.
async fn run(
    dir: &Path,
    args: &[&str],
    sandbox: Prepared,
    what: &'static str,
) -> Result<Done, WorktreeError> {
    let out = output(dir, args, sandbox, what).await?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    Ok(Done {
        ok: out.status.success(),
        output: text,
    })
}

async fn output(
    dir: &Path,
    args: &[&str],
    sandbox: Prepared,
    what: &'static str,
) -> Result<std::process::Output, WorktreeError> {
    let mut cmd = Command::new("git");
    sandbox
        .only_env(super::git::git_env())
        .confine(cmd.as_std_mut())
        .map_err(|e| WorktreeError::Sandbox(e.to_string()))?;
    cmd.args(super::git::SAFE_ARGS)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let child = cmd.spawn().map_err(WorktreeError::Spawn)?;
    tokio::time::timeout(WORKTREE_GIT_TIMEOUT, child.wait_with_output())
        .await
        .map_err(|_| WorktreeError::TimedOut { what })?
        .map_err(WorktreeError::Spawn)
}

#[cfg(test)]
mod tests;
