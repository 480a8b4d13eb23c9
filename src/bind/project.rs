//! The `project` namespace: the project a session works in, as the system prompt and `/context`
//! see it. `project.root`, `project.instructions` (the `AGENTS.md` files, capped, read fresh but
//! cached while unchanged), `project.git` (the git state, within a time limit) and
//! `project.platform`, with the settings that shape them; the permission rules saved per
//! trusted project (`saved`); the skills and markdown commands (`skills`); the sub-agent
//! definitions and whether a project is trusted (`agents`); the permission rules of the
//! settings files (`setup_rules`); oml's git worktrees (`worktree`).
//! The prompt itself is built in Lisp
//! (`agent.system-prompt` in `src/agent/agent.fnl`).
//!
//! This file knows nothing of how the project is inspected (`crate::project`).

mod agents;
mod saved;
mod setup_rules;
mod skills;
pub(crate) use skills::untrusted_given;
pub mod worktree;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mlua::{Lua, Table};
use parking_lot::Mutex;

use crate::lisp::{HostFn, Lisp, LispError, SettingDecl, create_async_function, define};
use crate::paths::Paths;
use crate::project::{self, git, instructions};

/// How long a git summary is reused for the same directory: a turn rebuilds the system prompt
/// before every model call, and one `git status` per turn is enough.
pub const GIT_SUMMARY_TTL: Duration = Duration::from_secs(2);

/// The user-wide instruction file's name in oml's config folder.
pub const USER_INSTRUCTIONS: &str = "AGENTS.md";

/// The git summary last computed per directory, and when.
type GitSummaries = HashMap<PathBuf, (Instant, Option<String>)>;

fn settings() -> Vec<SettingDecl> {
    vec![
        SettingDecl::new(
            "project.instruction-files",
            "table",
            serde_json::json!(["AGENTS.md", "CLAUDE.md"]),
            "File names of project instructions, tried in order in each folder from the project root down to the session directory; the first that exists in a folder is used.",
        ),
        SettingDecl::new(
            "project.instructions-max-chars",
            "integer",
            instructions::INSTRUCTIONS_MAX_CHARS,
            "Characters of instructions (all files together) put in the system prompt; the file that crosses the cap is cut and the prompt says so.",
        ),
    ]
}

/// What the `project` functions keep between calls, in the Lua state's app data.
struct State {
    instructions: instructions::Cache,
    user_file: PathBuf,
    git: Mutex<GitSummaries>,
}

/// Install `project.*` and its settings; the user-wide instructions are looked for in the
/// config folder of `Paths::from_env`.
pub fn install(lisp: &Lisp) -> Result<(), LispError> {
    for decl in settings() {
        lisp.declare_setting(&decl)?;
    }
    lisp.lua().set_app_data(Arc::new(State {
        instructions: instructions::Cache::default(),
        user_file: Paths::from_env().config.join(USER_INSTRUCTIONS),
        git: Mutex::default(),
    }));
    define(lisp.lua(), "project", PROJECT)?;
    define(lisp.lua(), "project", saved::SAVED)?;
    define(lisp.lua(), "project", skills::SKILLS_FNS)?;
    define(lisp.lua(), "project", agents::AGENTS_FNS)?;
    define(lisp.lua(), "project", setup_rules::RULES_FNS)?;
    define(lisp.lua(), "project", worktree::WORKTREE_FNS)?;
    Ok(())
}

fn state(lua: &Lua) -> mlua::Result<Arc<State>> {
    lua.app_data_ref::<Arc<State>>()
        .map(|s| s.clone())
        .ok_or_else(|| mlua::Error::RuntimeError("project.* is not installed".into()))
}

const PROJECT: &[HostFn] = &[
    HostFn {
        name: "root",
        args: "dir",
        doc: "The project root of the directory DIR: the nearest directory, DIR or above it, \
              holding .git or .oml/; nil outside any project.",
        make: |lua| {
            lua.create_function(|_, dir: String| {
                Ok(project::find_root(Path::new(&dir)).map(|p| p.display().to_string()))
            })
        },
    },
    HostFn {
        name: "instructions",
        args: "dir",
        doc: "The instruction files for a session in DIR, in reading order: the user-wide \
              AGENTS.md of the config folder, then in each folder from the project root down to \
              DIR the first of `project.instruction-files` that exists. A list of {:path :text \
              :cut :problem}: :cut counts the characters cut by \
              `project.instructions-max-chars`, :problem says why a file was not used.",
        make: |lua| {
            lua.create_function(|lua, dir: String| {
                let lisp = Lisp::from_lua(lua).ok_or_else(|| rt_msg("no Lisp host"))?;
                let names: Vec<String> = lisp
                    .setting("project.instruction-files")
                    .map_err(LispError::into_lua)?;
                let max: i64 = lisp
                    .setting("project.instructions-max-chars")
                    .map_err(LispError::into_lua)?;
                let state = state(lua)?;
                let dir = PathBuf::from(dir);
                let root = project::find_root(&dir);
                let lookup = instructions::Lookup {
                    names: &names,
                    user_file: Some(&state.user_file),
                    max_chars: max.max(0) as usize,
                };
                files_table(
                    lua,
                    &state.instructions.collect(&dir, root.as_deref(), &lookup),
                )
            })
        },
    },
    HostFn {
        name: "git",
        args: "dir",
        doc: "A one-line summary of the git repository DIR is in (\"branch main; 2 modified\", \
              \"detached at 1a2b3c4; clean\"), or nil outside one. git status runs within \
              500 ms, confined read-only with no network (a repository's config can name \
              programs git runs); the summary is reused for 2 s.",
        make: |lua| {
            create_async_function(lua, |lua, dir: String| {
                let state = state(&lua);
                async move {
                    let state = state?;
                    let dir = PathBuf::from(dir);
                    let cached = lock(&state.git).get(&dir).cloned();
                    if let Some((_, summary)) =
                        cached.filter(|(at, _)| at.elapsed() < GIT_SUMMARY_TTL)
                    {
                        return Ok(summary);
                    }
                    let summary = git::summary(&dir, git::GIT_STATUS_TIMEOUT, read_only()).await;
                    lock(&state.git).insert(dir, (Instant::now(), summary.clone()));
                    Ok(summary)
                }
            })
        },
    },
    HostFn {
        name: "platform",
        args: "",
        doc: "The operating system and architecture oml runs on, e.g. \"linux (x86_64)\".",
        make: |lua| {
            lua.create_function(|_, ()| {
                Ok(format!(
                    "{} ({})",
                    std::env::consts::OS,
                    std::env::consts::ARCH
                ))
            })
        },
    },
];

fn files_table(lua: &Lua, files: &[instructions::InstructionFile]) -> mlua::Result<Table> {
    let list = lua.create_table()?;
    for f in files {
        let t = lua.create_table()?;
        t.set("path", f.path.display().to_string())?;
        t.set("text", f.text.as_str())?;
        t.set("cut", f.cut_chars)?;
        if let Some(problem) = &f.problem {
            t.set("problem", problem.as_str())?;
        }
        list.raw_push(t)?;
    }
    Ok(list)
}

/// The sandbox oml's own `git status` runs in: read-only, no network, and the default
/// `sandbox.deny-read` paths unread (a repository's clean filter or fsmonitor is the
/// repository's code).
pub(crate) fn read_only() -> crate::sandbox::Prepared {
    crate::sandbox::prepare(&crate::sandbox::Policy {
        mode: crate::sandbox::Mode::ReadOnly,
        writable: Vec::new(),
        network: false,
        protected: Vec::new(),
        guarded: Vec::new(),
        deny_read: denied_read().clone(),
        domains: None,
    })
}

/// The default `sandbox.deny-read` paths, resolved once per process, not twice per `bash` call
/// (the checks around a command in a git work tree run this): oml's own git reads none of them.
fn denied_read() -> &'static Vec<PathBuf> {
    // The defaults are `~` or absolute paths.
    static DENIED: std::sync::OnceLock<Vec<std::path::PathBuf>> = std::sync::OnceLock::new();
    DENIED.get_or_init(|| {
        let here = std::env::current_dir().unwrap_or_default();
        super::sandbox::default_deny_read()
            .iter()
            .filter_map(|path| crate::tools::resolve_path(&here, path).ok())
            .collect()
    })
}

fn rt_msg(msg: &str) -> mlua::Error {
    mlua::Error::RuntimeError(msg.to_owned())
}

fn lock<T>(m: &Mutex<T>) -> parking_lot::MutexGuard<'_, T> {
    m.lock()
}
