//! The worktree operations against real git, in a throw-away repository and state folder.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;
use crate::sandbox::{Mode, Policy};

fn confine(writable: &[PathBuf]) -> Prepared {
    crate::sandbox::prepare(&Policy {
        mode: Mode::WorkspaceWrite,
        writable: writable.to_vec(),
        network: false,
        protected: Vec::new(),
        guarded: Vec::new(),
        deny_read: Vec::new(),
        domains: None,
    })
}

fn sh(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// A repository with one commit (`a.txt`) and its identity, and a state folder.
fn repo() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let repo = t.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    sh(&repo, &["init", "-q", "-b", "main"]);
    sh(&repo, &["config", "user.name", "T"]);
    sh(&repo, &["config", "user.email", "t@example.com"]);
    std::fs::write(repo.join("a.txt"), "one\n").unwrap();
    sh(&repo, &["add", "a.txt"]);
    sh(&repo, &["commit", "-q", "-m", "one"]);
    let state = t.path().join("state");
    (t, repo, state)
}

#[tokio::test]
async fn a_worktree_starts_from_head_and_its_changes_are_its_own() {
    let (_t, repo, state) = repo();
    let head = sh(&repo, &["rev-parse", "HEAD"]).trim().to_owned();
    let tree = add(&repo.join("."), "review me", &state, confine)
        .await
        .unwrap();
    assert_eq!(tree.name, "review-me");
    assert_eq!(tree.branch, "oml/review-me");
    assert_eq!(tree.base, head);
    assert!(tree.path.starts_with(state.join(WORKTREES_DIR)));
    assert_eq!(
        std::fs::read_to_string(tree.path.join("a.txt")).unwrap(),
        "one\n"
    );
    assert_eq!(
        diffstat(&tree.path, &head, &state, confine).await.unwrap(),
        ""
    );
    // Uncommitted, committed and new files all count.
    std::fs::write(tree.path.join("a.txt"), "two\n").unwrap();
    std::fs::write(tree.path.join("new.txt"), "new\n").unwrap();
    let stat = diffstat(&tree.path, &head, &state, confine).await.unwrap();
    assert!(stat.contains("a.txt") && stat.contains("new.txt"), "{stat}");
    assert!(stat.contains("2 files changed"), "{stat}");
    // The main tree is untouched.
    assert_eq!(sh(&repo, &["status", "--porcelain"]), "");
    let listed = list(&repo, &state, confine).await.unwrap();
    assert_eq!(listed, vec![tree]);
}

#[tokio::test]
async fn names_are_made_unique_even_when_asked_at_once() {
    let (_t, repo, state) = repo();
    let (a, b) = tokio::join!(
        add(&repo, "oml", &state, confine),
        add(&repo, "oml", &state, confine)
    );
    let mut names = vec![a.unwrap().name, b.unwrap().name];
    names.sort();
    assert_eq!(names, ["oml", "oml-2"]);
    let third = add(&repo, "oml", &state, confine).await.unwrap();
    assert_eq!(third.name, "oml-3");
    assert_eq!(list(&repo, &state, confine).await.unwrap().len(), 3);
}

#[tokio::test]
async fn merge_commits_the_worktree_and_merges_it_and_remove_deletes_it() {
    let (_t, repo, state) = repo();
    let tree = add(&repo, "w", &state, confine).await.unwrap();
    std::fs::write(tree.path.join("b.txt"), "b\n").unwrap();
    let merged = merge(&repo, "w", &state, confine).await.unwrap();
    assert!(merged.ok, "{}", merged.output);
    assert_eq!(std::fs::read_to_string(repo.join("b.txt")).unwrap(), "b\n");
    let removed = remove(&repo, "w", &state, confine).await.unwrap();
    assert!(removed.ok, "{}", removed.output);
    assert!(!tree.path.exists());
    assert!(list(&repo, &state, confine).await.unwrap().is_empty());
    assert_eq!(sh(&repo, &["branch", "--list", "oml/*"]), "");
}

#[tokio::test]
async fn names_not_listed_are_not_found_and_nothing_else_is_touched() {
    let (t, repo, state) = repo();
    add(&repo, "w", &state, confine).await.unwrap();
    sh(&repo, &["branch", "victim"]);
    for name in ["../../x", "--force", "victim", "main", "w/../w", ""] {
        let removed = remove(&repo, name, &state, confine).await;
        assert!(
            matches!(removed, Err(WorktreeError::NotFound(_))),
            "{name:?}: {removed:?}"
        );
        let merged = merge(&repo, name, &state, confine).await;
        assert!(
            matches!(merged, Err(WorktreeError::NotFound(_))),
            "{name:?}"
        );
    }
    assert!(sh(&repo, &["branch", "--list", "victim"]).contains("victim"));
    assert!(!t.path().join("x").exists());
    let bad = diffstat(&repo, "--output=/tmp/oml-x", &state, confine).await;
    assert!(matches!(bad, Err(WorktreeError::BadBase(_))), "{bad:?}");
    // The user's own tree is not one of oml's: its index is left alone.
    std::fs::write(repo.join("mine.txt"), "mine\n").unwrap();
    let head = sh(&repo, &["rev-parse", "HEAD"]).trim().to_owned();
    let theirs = diffstat(&repo, &head, &state, confine).await;
    assert!(
        matches!(theirs, Err(WorktreeError::NotOurs(_))),
        "{theirs:?}"
    );
    assert_eq!(sh(&repo, &["status", "--porcelain"]), "?? mine.txt\n");
}

#[tokio::test]
async fn outside_a_repository_or_before_a_commit_the_error_says_so() {
    let t = tempfile::tempdir().unwrap();
    let state = t.path().join("state");
    let outside = add(t.path(), "w", &state, confine).await;
    assert!(
        matches!(outside, Err(WorktreeError::NotARepository(_))),
        "{outside:?}"
    );
    let listed = list(t.path(), &state, confine).await;
    assert!(matches!(listed, Err(WorktreeError::NotARepository(_))));
    let empty = t.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    sh(&empty, &["init", "-q"]);
    let unborn = add(&empty, "w", &state, confine).await;
    assert!(
        matches!(unborn, Err(WorktreeError::NoCommit(_))),
        "{unborn:?}"
    );
}

#[tokio::test]
async fn a_worktree_made_from_another_is_in_the_same_folder_and_one_deleted_by_hand_is_removed() {
    let (_t, repo, state) = repo();
    let first = add(&repo, "a", &state, confine).await.unwrap();
    let second = add(&first.path, "b", &state, confine).await.unwrap();
    assert_eq!(first.path.parent(), second.path.parent());
    assert_eq!(list(&repo, &state, confine).await.unwrap().len(), 2);
    std::fs::remove_dir_all(&second.path).unwrap();
    let removed = remove(&repo, "b", &state, confine).await.unwrap();
    assert!(removed.ok, "{}", removed.output);
    assert_eq!(list(&repo, &state, confine).await.unwrap(), vec![first]);
    assert_eq!(sh(&repo, &["branch", "--list", "oml/b"]), "");
}
