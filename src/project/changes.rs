//! What a command changed in a git work tree, found cheaply for the checkpoints of `bash`: the
//! paths `git status` reports (modified, staged, deleted, untracked), and what a tracked path
//! holds at `HEAD`. A path the status did not report before a command and reports after was
//! clean before (its content is `HEAD`'s) or did not exist (untracked).
//!
//! git runs as [`super::git`] runs it: confined, without secrets, fsmonitor and hooks off, under
//! a time limit. A repository with more changed paths than [`MAX_CHANGED_PATHS`], a slow or
//! missing git, or no sandbox gives `None`: the command is then not checkpointed. Knows nothing
//! of sessions or of the checkpoint store.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncWriteExt as _;

use super::git::confined_git;
use crate::sandbox::Prepared;

/// How long one `git status` or `git cat-file` may take.
pub const GIT_CHANGES_TIMEOUT: Duration = Duration::from_millis(2000);

/// Changed paths past which a work tree is not checkpointed (a build that dumps thousands of
/// untracked files would make every command slow).
pub const MAX_CHANGED_PATHS: usize = 1000;

/// The root of the git work tree `dir` is in: the nearest folder holding `.git`.
pub fn work_tree(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|d| d.join(".git").exists())
        .map(Path::to_path_buf)
}

/// The paths (relative to `root`, as git writes them) `git status` reports now, untracked
/// files one by one, renames as a deletion and an addition; `None` when git cannot say in
/// time, or reports more than [`MAX_CHANGED_PATHS`].
pub async fn changed(root: &Path, sandbox: Prepared) -> Option<Vec<String>> {
    const STATUS: [&str; 6] = [
        "status",
        "--porcelain=v1",
        "-z",
        "--untracked-files=all",
        "--no-renames",
        "--ignore-submodules",
    ];
    let out = tokio::time::timeout(GIT_CHANGES_TIMEOUT, git_stdout(root, &STATUS, sandbox))
        .await
        .ok()??;
    let paths = parse_status(&out);
    (paths.len() <= MAX_CHANGED_PATHS).then_some(paths)
}

/// What a confined `git ARGS…` in `root` wrote to its stdout, when it ended well; started
/// through the spawn helper (this runs before every command in a git work tree, and a fork of
/// oml itself costs more), its stderr to `/dev/null`.
async fn git_stdout(root: &Path, args: &[&str], sandbox: Prepared) -> Option<Vec<u8>> {
    use std::os::fd::OwnedFd;
    use tokio::io::AsyncReadExt as _;
    let (reader, writer) = std::io::pipe().ok()?;
    let null = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .ok()?;
    let launch = crate::sandbox::Launch {
        program: "git".into(),
        args: super::git::SAFE_ARGS
            .iter()
            .chain(args)
            .map(Into::into)
            .collect(),
        cwd: root.to_path_buf(),
        stdout: OwnedFd::from(writer),
        stderr: OwnedFd::from(null),
    };
    let sandbox = sandbox.only_env(super::git::git_env());
    let mut child = sandbox.launch(launch).await.ok()?;
    let mut pipe = tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(reader)).ok()?;
    let mut out = Vec::new();
    pipe.read_to_end(&mut out).await.ok()?;
    child.wait().await.ok()?.success().then_some(out)
}

/// The paths of `git status --porcelain=v1 -z` output: `XY path\0` each.
fn parse_status(out: &[u8]) -> Vec<String> {
    out.split(|b| *b == 0)
        .filter(|rec| rec.len() > 3)
        .map(|rec| String::from_utf8_lossy(&rec[3..]).into_owned())
        .collect()
}

/// What each of `paths` (relative to `root`) holds at `HEAD`, read by one `git cat-file
/// --batch`; a path that is not there (untracked, added since, no commit yet) is left out, and
/// so is everything when git cannot say in time.
pub async fn at_head(root: &Path, paths: &[String], sandbox: Prepared) -> HashMap<String, Vec<u8>> {
    if paths.is_empty() {
        return HashMap::new();
    }
    let Some(mut cmd) = confined_git(root, sandbox) else {
        return HashMap::new();
    };
    cmd.args(["cat-file", "--batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let Ok(mut child) = cmd.spawn() else {
        return HashMap::new();
    };
    let mut input = Vec::new();
    for p in paths {
        input.extend_from_slice(format!("HEAD:{p}\n").as_bytes());
    }
    let stdin = child.stdin.take();
    let write = async move {
        if let Some(mut stdin) = stdin {
            let _ = stdin.write_all(&input).await;
        }
    };
    let read = async { tokio::join!(write, child.wait_with_output()).1 };
    match tokio::time::timeout(GIT_CHANGES_TIMEOUT, read).await {
        Ok(Ok(out)) if out.status.success() => parse_batch(paths, &out.stdout),
        _ => HashMap::new(),
    }
}

/// `git cat-file --batch` output for `paths`, in order: `<oid> blob <size>\n<content>\n`, or
/// `<name> missing\n`.
fn parse_batch(paths: &[String], mut out: &[u8]) -> HashMap<String, Vec<u8>> {
    let mut found = HashMap::new();
    for p in paths {
        let Some(end) = out.iter().position(|b| *b == b'\n') else {
            break;
        };
        let header = String::from_utf8_lossy(&out[..end]).into_owned();
        out = &out[end + 1..];
        let mut words = header.split(' ');
        let (Some(_), Some(kind), Some(size)) = (words.next(), words.next(), words.next()) else {
            continue; // `… missing`
        };
        let Ok(size) = size.parse::<usize>() else {
            break;
        };
        if out.len() < size + 1 {
            break;
        }
        if kind == "blob" {
            found.insert(p.clone(), out[..size].to_vec());
        }
        out = &out[size + 1..];
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_records_name_their_paths() {
        let out = b" M src/a.rs\0?? new file.txt\0D  gone\0A  b\0";
        assert_eq!(parse_status(out), ["src/a.rs", "new file.txt", "gone", "b"]);
        assert!(parse_status(b"").is_empty());
    }

    #[test]
    fn batch_output_gives_each_blob_and_skips_what_is_missing() {
        let paths = ["a".to_owned(), "new".to_owned(), "b".to_owned()];
        let out = b"1111 blob 3\nab\n\nHEAD:new missing\n2222 blob 0\n\n";
        let found = parse_batch(&paths, out);
        assert_eq!(found.get("a").map(Vec::as_slice), Some(&b"ab\n"[..]));
        assert_eq!(found.get("b").map(Vec::as_slice), Some(&b""[..]));
        assert!(!found.contains_key("new"));
    }
}
