//! The `project` namespace: the project a session works in, as the system prompt and `/context`
//! see it. `project.root`, `project.instructions` (the `AGENTS.md` files, capped, read fresh but
//! cached while unchanged) and `project.environment` (date, OS, shell, directory, git state),
//! with the settings that shape them. The prompt itself is built in Lisp
//! (`agent.system-prompt` in `src/agent/agent.fnl`).
//!
//! This file knows nothing of how the project is inspected (`crate::project`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use mlua::{Lua, Table};

use crate::lisp::{Lisp, LispError, SettingDecl, create_async_function};
use crate::paths::Paths;
use crate::project::{self, git, instructions};

/// How long a git summary is reused for the same directory: a turn rebuilds the system prompt
/// before every model call, and one `git status` per turn is enough.
pub const GIT_SUMMARY_TTL: Duration = Duration::from_secs(2);

/// The user-wide instruction file's name in oml's config folder.
pub const USER_INSTRUCTIONS: &str = "AGENTS.md";

const FILE: &str = "src/bind/project.rs";

/// The git summary last computed per directory, and when.
type GitSummaries = HashMap<PathBuf, (Instant, Option<String>)>;

fn settings() -> Vec<SettingDecl> {
    vec![
        SettingDecl {
            name: "project.instruction-files",
            doc: "File names of project instructions, tried in order in each folder from the project root down to the session directory; the first that exists in a folder is used.",
            ty: "table".into(),
            default: serde_json::json!(["AGENTS.md", "CLAUDE.md"]),
            secret: false,
            file: FILE,
            line: line!(),
        },
        SettingDecl {
            name: "project.instructions-max-chars",
            doc: "Characters of instructions (all files together) put in the system prompt; the file that crosses the cap is cut and the prompt says so.",
            ty: "integer".into(),
            default: instructions::INSTRUCTIONS_MAX_CHARS.into(),
            secret: false,
            file: FILE,
            line: line!(),
        },
    ]
}

/// Install `project.*` and its settings; the user-wide instructions are looked for in the
/// config folder of `Paths::from_env`.
pub fn install(lisp: &Lisp) -> Result<(), LispError> {
    let paths = Paths::from_env();
    for decl in settings() {
        lisp.declare_setting(&decl)?;
    }
    let lua = lisp.lua();
    let ns: Table = lua.globals().get("project")?;
    ns.set(
        "root",
        lua.create_function(|_, dir: String| {
            Ok(project::find_root(Path::new(&dir)).map(|p| p.display().to_string()))
        })?,
    )?;
    let cache = Arc::new(instructions::Cache::default());
    let user_file = paths.config.join(USER_INSTRUCTIONS);
    let me = lisp.clone();
    ns.set(
        "instructions",
        lua.create_function(move |lua, dir: String| {
            let names: Vec<String> = me.setting("project.instruction-files").map_err(rt)?;
            let max_chars: i64 = me.setting("project.instructions-max-chars").map_err(rt)?;
            let dir = PathBuf::from(dir);
            let root = project::find_root(&dir);
            let lookup = instructions::Lookup {
                names: &names,
                user_file: Some(&user_file),
                max_chars: max_chars.max(0) as usize,
            };
            files_table(lua, &cache.collect(&dir, root.as_deref(), &lookup))
        })?,
    )?;
    let recent: Arc<Mutex<GitSummaries>> = Arc::default();
    ns.set(
        "git",
        create_async_function(lua, move |_, dir: String| {
            let recent = recent.clone();
            async move {
                let dir = PathBuf::from(dir);
                let cached = lock(&recent).get(&dir).cloned();
                if let Some((_, summary)) = cached.filter(|(at, _)| at.elapsed() < GIT_SUMMARY_TTL)
                {
                    return Ok(summary);
                }
                let summary = git::summary(&dir, git::GIT_STATUS_TIMEOUT).await;
                lock(&recent).insert(dir, (Instant::now(), summary.clone()));
                Ok(summary)
            }
        })?,
    )?;
    ns.set(
        "platform",
        lua.create_function(|_, ()| {
            Ok(format!(
                "{} ({})",
                std::env::consts::OS,
                std::env::consts::ARCH
            ))
        })?,
    )?;
    Ok(())
}

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

fn rt(e: LispError) -> mlua::Error {
    mlua::Error::RuntimeError(e.to_string())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
