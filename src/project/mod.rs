//! What oml knows of the project a session works in, without Lisp: its root (`root`), the
//! instruction files written for agents (`instructions`: `AGENTS.md`, `CLAUDE.md`), the
//! state of its git repository (`git`), what a command changed in it (`changes`), and the
//! skills and markdown commands written for agents (`skills`, `front_matter`, `skill_index`),
//! the sub-agents users define (`agent_defs`, with `agent_md` and `agent_toml` for the formats and
//! `agent_fields` for what they share), and oml's own git worktrees of it (`worktree`).
//!
//! The agent's system prompt is built from these in Lisp (`agent.system-prompt`), so what it
//! holds stays one redefinable function. This module knows nothing of prompts, Lisp or sessions.
//!
//! Project files stay in the project: a file that is a link (or lies under one) leading out of
//! the folder it belongs to is not read (`escapes`). The root itself is compared by its real
//! path, so a project under a linked folder still holds its own files.

pub mod agent_defs;
pub mod agent_fields;
pub mod agent_md;
pub mod agent_toml;
pub mod changes;
pub mod front_matter;
pub mod git;
pub mod instructions;
pub mod setup;
pub mod skill_index;
pub mod skills;
pub mod worktree;

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

/// Where `path` really is, when that is outside the real path of `within` (the project root, or
/// oml's config folder for a user-wide file): `None` while it stays inside. A path that cannot
/// be resolved (missing, unreadable) counts as inside here; reading it fails on its own.
pub fn escapes(path: &Path, within: &Path) -> Option<PathBuf> {
    let real = std::fs::canonicalize(path).ok()?;
    let base = std::fs::canonicalize(within).unwrap_or_else(|_| within.to_path_buf());
    (!real.starts_with(&base)).then_some(real)
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

    #[test]
    fn a_link_out_of_the_folder_escapes_it_and_one_inside_does_not() {
        let t = tempfile::tempdir().unwrap();
        let (inside, outside) = (t.path().join("p"), t.path().join("secret"));
        std::fs::create_dir_all(inside.join("docs")).unwrap();
        std::fs::write(&outside, "key").unwrap();
        std::fs::write(inside.join("docs/a.md"), "a").unwrap();
        std::os::unix::fs::symlink(&outside, inside.join("out.md")).unwrap();
        std::os::unix::fs::symlink("docs/a.md", inside.join("in.md")).unwrap();
        let real = std::fs::canonicalize(&outside).unwrap();
        assert_eq!(escapes(&inside.join("out.md"), &inside), Some(real));
        assert_eq!(escapes(&inside.join("in.md"), &inside), None);
        // The same folder reached through a link still holds its files.
        std::os::unix::fs::symlink(&inside, t.path().join("via")).unwrap();
        assert_eq!(escapes(&inside.join("in.md"), &t.path().join("via")), None);
    }
}
