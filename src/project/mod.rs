//! What oml knows of the project a session works in, without Lisp: its root (`root`), the
//! instruction files written for agents (`instructions`: `AGENTS.md`, `CLAUDE.md`), and the
//! state of its git repository (`git`).
//!
//! The agent's system prompt is built from these in Lisp (`agent.system-prompt`), so what it
//! holds stays one redefinable function. This module knows nothing of prompts, Lisp or sessions.

pub mod git;
pub mod instructions;

use std::path::{Path, PathBuf};

/// The marker folder of an oml project (its `init.fnl` and `lisp/`).
pub const OML_DIR: &str = ".oml";

/// The project root of `dir`: the nearest directory, `dir` itself or above it, that holds `.git`
/// (a folder, or the file of a worktree or submodule) or `.oml/`. `None` outside any project.
pub fn find_root(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|d| d.join(".git").exists() || d.join(OML_DIR).is_dir())
        .map(Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_is_the_nearest_folder_with_git_or_oml() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("repo");
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::create_dir_all(root.join("a/b/.oml")).unwrap();
        std::fs::create_dir_all(root.join("a/b/c")).unwrap();
        assert_eq!(find_root(&root.join("a")), Some(root.clone()));
        assert_eq!(find_root(&root), Some(root.clone()));
        assert_eq!(find_root(&root.join("a/b/c")), Some(root.join("a/b")));
    }
}
