//! `project.worktree-add`, `project.worktree-diffstat`, `project.worktrees`,
//! `project.worktree-remove`, `project.worktree-merge` and `project.worktrees-folder`: oml's git worktrees of a repository
//! (`crate::project::worktree`) as Lisp tables, under the state folder of `Paths::from_env`;
//! and [`confine`], the sandbox their git runs in, which `oml compare` uses too. What a sub-agent
//! or a command does with a worktree is decided above (the `task` tool, `/worktrees`).

use std::path::{Path, PathBuf};

use mlua::{Lua, Table};

use crate::lisp::{HostFn, create_async_function};
use crate::paths::Paths;
use crate::project::worktree::{self, Done, Worktree, WorktreeError};
use crate::sandbox::{Mode, Policy, Prepared};

/// The sandbox of a worktree's git that writes beneath `writable` (nothing else): no network,
/// the `sandbox.deny-read` defaults unread, read-only when `writable` is empty.
pub fn confine(writable: &[PathBuf]) -> Prepared {
    crate::sandbox::prepare(&Policy {
        mode: if writable.is_empty() {
            Mode::ReadOnly
        } else {
            Mode::WorkspaceWrite
        },
        writable: writable.to_vec(),
        network: false,
        protected: Vec::new(),
        guarded: Vec::new(),
        deny_read: super::denied_read().clone(),
        domains: None,
    })
}

fn state() -> PathBuf {
    Paths::from_env().state
}

pub(super) const WORKTREE_FNS: &[HostFn] = &[
    HostFn {
        name: "worktrees-folder",
        args: "",
        doc: "The folder of oml's git worktrees (<state>/worktrees), as a real path when it \
              exists: the one part of oml's own folders (`oml.own-folders`) where a session \
              working in one of them may write.",
        make: |lua| {
            lua.create_function(|_, ()| {
                let dir = Paths::from_env().worktrees_dir();
                let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
                Ok(dir.display().to_string())
            })
        },
    },
    HostFn {
        name: "worktree-add",
        args: "dir name",
        doc: "A new git worktree of the repository DIR is in, from its HEAD, on a branch \
              oml/NAME in oml's state folder (<state>/worktrees/<repo-id>/NAME); NAME is \
              sanitised (letters, digits, . _ -) and numbered when taken. Returns {:name :path \
              :branch :base}, :base the commit it started from. Raises an error outside a git \
              repository or one without a commit.",
        make: |lua| {
            create_async_function(lua, |lua, (dir, name): (String, String)| async move {
                let tree = worktree::add(Path::new(&dir), &name, &state(), confine)
                    .await
                    .map_err(raise)?;
                tree_table(&lua, &tree)
            })
        },
    },
    HostFn {
        name: "worktree-diffstat",
        args: "path base",
        doc: "What oml's worktree at PATH changed against the commit BASE, committed or not, \
              new files included: git's `diff --stat` text, \"\" when nothing changed. BASE \
              must be a commit id (hex), PATH one of oml's worktrees (`project.worktrees`).",
        make: |lua| {
            create_async_function(lua, |_, (path, base): (String, String)| async move {
                worktree::diffstat(Path::new(&path), &base, &state(), confine)
                    .await
                    .map_err(raise)
            })
        },
    },
    HostFn {
        name: "worktrees",
        args: "dir",
        doc: "oml's worktrees of the repository DIR is in (those `project.worktree-add` made \
              and git still lists): a list of {:name :path :branch :base}.",
        make: |lua| {
            create_async_function(lua, |lua, dir: String| async move {
                let trees = worktree::list(Path::new(&dir), &state(), confine)
                    .await
                    .map_err(raise)?;
                let list = lua.create_table()?;
                // A list also when empty (`json.encode` writes `[]`).
                list.set_metatable(Some(mlua::LuaSerdeExt::array_metatable(&lua)))?;
                for tree in &trees {
                    list.raw_push(tree_table(&lua, tree)?)?;
                }
                Ok(list)
            })
        },
    },
    HostFn {
        name: "worktree-remove",
        args: "dir name",
        doc: "Removes oml's worktree NAME of the repository DIR is in, with its uncommitted \
              changes, and deletes its branch. Returns {:ok :output} (git's words).",
        make: |lua| {
            create_async_function(lua, |lua, (dir, name): (String, String)| async move {
                let done = worktree::remove(Path::new(&dir), &name, &state(), confine)
                    .await
                    .map_err(raise)?;
                done_table(&lua, &done)
            })
        },
    },
    HostFn {
        name: "worktree-merge",
        args: "dir name",
        doc: "Commits what oml's worktree NAME left uncommitted, then merges its branch into \
              the work tree of the repository DIR is in (`git merge --no-edit oml/NAME`). \
              Returns {:ok :output}; a conflict is :ok false, left as git leaves it.",
        make: |lua| {
            create_async_function(lua, |lua, (dir, name): (String, String)| async move {
                let done = worktree::merge(Path::new(&dir), &name, &state(), confine)
                    .await
                    .map_err(raise)?;
                done_table(&lua, &done)
            })
        },
    },
];

fn tree_table(lua: &Lua, tree: &Worktree) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("name", tree.name.as_str())?;
    t.set("path", tree.path.display().to_string())?;
    t.set("branch", tree.branch.as_str())?;
    t.set("base", tree.base.as_str())?;
    Ok(t)
}

fn done_table(lua: &Lua, done: &Done) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("ok", done.ok)?;
    t.set("output", done.output.as_str())?;
    Ok(t)
}

fn raise(e: WorktreeError) -> mlua::Error {
    mlua::Error::RuntimeError(e.to_string())
}
