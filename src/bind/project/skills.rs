//! `project.skills`, `project.prompt-commands`, `project.skill-body` and
//! `project.command-prompt`: the skills and markdown commands of a directory as Lisp tables, found
//! by `crate::project::skills` in the user's folders and the project's, reused for
//! [`DISCOVERY_TTL`] (the system prompt is rebuilt before every model call), what each file held
//! kept in indexes in the cache folder ([`SKILLS_INDEX`], [`COMMANDS_INDEX`]) for the next
//! process. Which skills the model is told of, and which `skill.fnl` may run, is decided in Lisp
//! (`src/agent/skills.fnl`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mlua::{Lua, Table};
use parking_lot::Mutex;

use crate::lisp::HostFn;
use crate::paths::Paths;
use crate::project::skill_index;
use crate::project::skills::{self, Folder, Found, Problem, PromptCommand, Skill};

/// How long one discovery is reused for the same directory and options.
pub const DISCOVERY_TTL: Duration = Duration::from_secs(2);

/// The indexes of what discoveries read, in oml's cache folder (`crate::project::skill_index`):
/// one per kind, so that a session's setup, which finds only the commands, loads only theirs.
pub const SKILLS_INDEX: &str = "skills-index.json";
pub const COMMANDS_INDEX: &str = "commands-index.json";

pub(super) type Key = (PathBuf, bool);
/// Each discovery: when it was made, its number (so a table made of it is known), and it.
pub(super) type Cached<T> = Mutex<HashMap<Key, (Instant, u64, Found<T>)>>;

static SKILLS: std::sync::LazyLock<Cached<Skill>> = std::sync::LazyLock::new(Cached::default);
static COMMANDS: std::sync::LazyLock<Cached<PromptCommand>> =
    std::sync::LazyLock::new(Cached::default);
/// The number of the next discovery.
static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
/// The fresh discovery of `key` in `cache`, made now by `find` when there is none.
fn discovery<T: Clone>(
    cache: &Cached<T>,
    key: &Key,
    find: impl FnOnce() -> Found<T>,
) -> (u64, Found<T>) {
    if let Some((at, n, found)) = cache.lock().get(key)
        && at.elapsed() < DISCOVERY_TTL
    {
        return (*n, found.clone());
    }
    let found = find();
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    cache
        .lock()
        .insert(key.clone(), (Instant::now(), n, found.clone()));
    (n, found)
}

/// The index file of a kind in the cache folder.
fn index_path(name: &str) -> PathBuf {
    Paths::from_env().cache.join(name)
}

fn find_skills((dir, claude): &Key) -> Found<Skill> {
    static LOADED: std::sync::Once = std::sync::Once::new();
    let (index, kind) = (index_path(SKILLS_INDEX), skill_index::skills());
    LOADED.call_once(|| skill_index::load(&index, &kind));
    let folders = folders(dir, "skills", &skills::PROJECT_SKILL_DIRS, *claude);
    let found = skills::skills(&folders);
    skill_index::save(&index, &kind);
    found
}

fn find_commands((dir, claude): &Key) -> Found<PromptCommand> {
    static LOADED: std::sync::Once = std::sync::Once::new();
    let (index, kind) = (index_path(COMMANDS_INDEX), skill_index::commands());
    LOADED.call_once(|| skill_index::load(&index, &kind));
    let folders = folders(dir, "commands", &skills::PROJECT_COMMAND_DIRS, *claude);
    let found = skills::commands(&folders);
    skill_index::save(&index, &kind);
    found
}

/// The user's folders named `own` (under oml's config folder), `.agents/<own>` and, with
/// `claude`, `.claude/<own>` (under the home folder), in that order.
fn user_folders(own: &str, claude: bool) -> Vec<Folder> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let mut dirs = vec![Paths::from_env().config.join(own)];
    if let Some(home) = &home {
        dirs.push(home.join(".agents").join(own));
        if claude {
            dirs.push(home.join(".claude").join(own));
        }
    }
    dirs.into_iter()
        .map(|dir| Folder {
            dir,
            project_root: None,
        })
        .collect()
}

/// The user's folders, then the project's from `dir` up to its root (`dir` itself outside any
/// project).
fn folders(dir: &Path, own: &str, project: &[&str], claude: bool) -> Vec<Folder> {
    let mut out = user_folders(own, claude);
    let root = crate::project::find_root(dir).unwrap_or_else(|| dir.to_path_buf());
    out.extend(skills::project_folders(&root, dir, project));
    out
}

/// The table of the discovery of `key` in `cache` (`kind` names the cache): the one made last
/// while that discovery is fresh, else one made of a fresh discovery (`find` when there is
/// none), kept for the next call (`crate::bind::reused`: a fresh discovery is converted once,
/// not at every call; the system prompt and the tools ask before every model call). Callers treat
/// it as read-only.
pub(super) fn cached<T: Clone>(
    lua: &Lua,
    cache: &Cached<T>,
    (kind, key): (&str, Key),
    find: impl FnOnce() -> Found<T>,
    item: fn(&Lua, &T) -> mlua::Result<Table>,
) -> mlua::Result<Table> {
    let slot = format!("{kind}\0{}\0{}", key.0.display(), key.1);
    let (n, found) = discovery(cache, &key, find);
    crate::bind::reused::reused_table(lua, &slot, n, || found_table(lua, &found, item))
}

fn problems(lua: &Lua, list: &[Problem]) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    for p in list {
        let e = lua.create_table()?;
        e.set("file", p.file.display().to_string())?;
        e.set("line", p.line)?;
        e.set("message", p.message.as_str())?;
        t.raw_push(e)?;
    }
    Ok(t)
}

fn skill_table(lua: &Lua, s: &Skill) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("name", s.name.as_str())?;
    t.set("description", s.description.as_str())?;
    t.set("file", s.file.display().to_string())?;
    t.set("source", s.source.display().to_string())?;
    t.set("project", s.project)?;
    let lisp = s.file.with_file_name(skills::SKILL_LISP);
    if lisp.is_file() {
        t.set("lisp", lisp.display().to_string())?;
    }
    Ok(t)
}

fn command_table(lua: &Lua, c: &PromptCommand) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("name", c.name.as_str())?;
    t.set("description", c.description.as_deref())?;
    t.set("hint", c.hint.as_deref())?;
    t.set("file", c.file.display().to_string())?;
    t.set("source", c.source.display().to_string())?;
    t.set("project", c.project)?;
    Ok(t)
}

/// `{:found [...] :shadowed [...] :problems [...]}` of `found`, each item by `item`.
fn found_table<T>(
    lua: &Lua,
    found: &Found<T>,
    item: fn(&Lua, &T) -> mlua::Result<Table>,
) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let list = |items: &[T]| -> mlua::Result<Table> {
        let l = lua.create_table()?;
        for i in items {
            l.raw_push(item(lua, i)?)?;
        }
        Ok(l)
    };
    t.set("found", list(&found.found)?)?;
    t.set("shadowed", list(&found.shadowed)?)?;
    t.set("problems", problems(lua, &found.problems)?)?;
    Ok(t)
}

fn rt(e: Problem) -> mlua::Error {
    mlua::Error::RuntimeError(format!("{}: {}", e.file.display(), e.message))
}

/// Why the `skill.fnl` at `file` may not run, or `None` when it may: it must be in one of the
/// user's skill folders, or in the `.oml/skills` of a project that is trusted (`oml trust`,
/// whose record covers these files) while `init.project-init` allows project code.
///
/// Both sides are real paths (every link followed): a user skill folder that links into a
/// workspace, where a confined command may write, does not make a `skill.fnl` planted there the
/// user's own.
fn refusal(lisp: &crate::lisp::Lisp, file: &Path) -> Option<String> {
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let file = &real(file);
    if user_folders("skills", true)
        .iter()
        .any(|f| file.starts_with(real(&f.dir)))
    {
        return None;
    }
    let why =
        "a skill.fnl runs only from your own skill folders or from a trusted project's .oml/skills";
    let Some(root) = crate::project::find_root(file) else {
        return Some(why.into());
    };
    if !file.starts_with(root.join(".oml/skills")) {
        return Some(why.into());
    }
    untrusted(lisp, &root)
}

/// Why the project `root` is not trusted to add what a session may do (run its `skill.fnl`,
/// grant its sub-agents MCP servers), or `None` when it is: `init.project-init` is `:always`, or
/// `:trusted` (the default) and `oml trust` recorded the project as it is now.
pub(crate) fn untrusted(lisp: &crate::lisp::Lisp, root: &Path) -> Option<String> {
    untrusted_given(lisp, root, &[])
}

/// [`untrusted`], with trust checked on the `given` bytes of setup files a reader has read
/// (`crate::lisp::init::TrustStore::status_given`).
pub(crate) fn untrusted_given(
    lisp: &crate::lisp::Lisp,
    root: &Path,
    given: &[(&str, &[u8])],
) -> Option<String> {
    let policy: String = lisp
        .setting("init.project-init")
        .unwrap_or_else(|_| "never".into());
    let trust = crate::lisp::init::TrustStore::new(Paths::from_env().trust_file());
    match policy.as_str() {
        "never" => Some("init.project-init is :never".into()),
        "always" => None,
        _ if trust.status_given(root, given) == crate::lisp::init::TrustStatus::Trusted => None,
        _ => Some(format!(
            "the project is not trusted (or changed since): review it, then run `oml trust {}`",
            root.display()
        )),
    }
}

pub(super) const SKILLS_FNS: &[HostFn] = &[
    HostFn {
        name: "skills",
        args: "dir ?claude",
        doc: "The skills for a session in DIR: folders holding a SKILL.md in the user's \
              `skills` folder of oml's config folder, ~/.agents/skills and (with ?CLAUDE) \
              ~/.claude/skills, then the project's .oml/skills, .agents/skills and \
              .claude/skills from DIR up to the project root; the first of a name wins. Returns \
              {:found :shadowed :problems}: skills as {:name :description :file :source :project \
              :lisp}, problems as {:file :line :message}. Reused for 2 s (the same table: \
              treat it as read-only).",
        make: |lua| {
            lua.create_function(|lua, (dir, claude): (String, Option<bool>)| {
                let key = (PathBuf::from(dir), claude.unwrap_or(false));
                let find = || find_skills(&key);
                cached(lua, &SKILLS, ("skills", key.clone()), find, skill_table)
            })
        },
    },
    HostFn {
        name: "prompt-commands",
        args: "dir ?claude",
        doc: "The markdown commands for a session in DIR: NAME.md files in the user's \
              `commands` folder of oml's config folder, ~/.agents/commands and (with ?CLAUDE) \
              ~/.claude/commands, then the project's .oml/commands and .claude/commands from DIR \
              up to the project root; the first of a name wins. Returns {:found :shadowed \
              :problems}: commands as {:name :description :hint :file :source :project}. Reused \
              for 2 s.",
        make: |lua| {
            lua.create_function(|lua, (dir, claude): (String, Option<bool>)| {
                let key = (PathBuf::from(dir), claude.unwrap_or(false));
                let find = || find_commands(&key);
                cached(
                    lua,
                    &COMMANDS,
                    ("commands", key.clone()),
                    find,
                    command_table,
                )
            })
        },
    },
    HostFn {
        name: "skill-body",
        args: "file",
        doc: "The instructions of the SKILL.md (or markdown command) FILE: its text after the \
              front matter, read now. An unreadable file is an error.",
        make: |lua| {
            lua.create_function(|_, file: String| skills::body(Path::new(&file)).map_err(rt))
        },
    },
    HostFn {
        name: "load-skill-lisp",
        args: "file",
        doc: "Run the skill.fnl FILE, as an init file runs, when it may: from the user's skill \
              folders, or a trusted project's .oml/skills. Returns true, or nil and why it did \
              not run (an error in the file is an error).",
        make: |lua| {
            crate::lisp::create_async_function(lua, |lua, file: String| async move {
                let lisp = crate::lisp::Lisp::from_lua(&lua)
                    .ok_or_else(|| mlua::Error::RuntimeError("no Lisp host".into()))?;
                let file = PathBuf::from(file);
                if let Some(why) = refusal(&lisp, &file) {
                    return Ok((None, Some(why)));
                }
                lisp.load_file(&file, &crate::cancel::CancelToken::new())
                    .await
                    .map_err(|e| mlua::Error::RuntimeError(e.to_string()))?;
                Ok((Some(true), None))
            })
        },
    },
    HostFn {
        name: "command-prompt",
        args: "file input",
        doc: "The prompt the markdown command FILE makes of INPUT (the text after its name): \
              its body, read now, with $ARGUMENTS replaced by INPUT and $1 to $9 by its words.",
        make: |lua| {
            lua.create_function(|_, (file, input): (String, String)| {
                let body = skills::body(Path::new(&file)).map_err(rt)?;
                Ok(skills::expand(&body, &input))
            })
        },
    },
];
