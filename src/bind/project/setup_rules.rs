//! `project.setting-rules` and `project.glob-matches?`: the permission rules of the settings
//! files users already keep (Claude Code's `settings.json` files, oml's own), as
//! `crate::project::setup::rules` types them, reused for [`RULES_TTL`] (the permission policy
//! asks at every tool call), and the glob test a path rule needs. Whether a rule applies —
//! trust, and a project's rules only narrowing — is the policy's, in Lisp
//! (`src/agent/setup_rules.fnl`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};
use std::time::Instant;

use globset::{GlobBuilder, GlobMatcher};
use mlua::{Lua, Table};
use parking_lot::Mutex;

use super::skills::DISCOVERY_TTL;
use crate::lisp::{HostFn, to_lua};
use crate::paths::Paths;
use crate::project::setup::rules::{self, Bases, SettingRules};

/// How long the rules read for a directory are reused: as long as a skills discovery.
pub const RULES_TTL: std::time::Duration = DISCOVERY_TTL;

/// Compiled globs kept for `project.glob-matches?`; past this many the cache starts over.
pub const MAX_CACHED_GLOBS: usize = 256;

/// Each directory's rules: when read, their number (so the table made of them is known), them.
type Read = HashMap<PathBuf, (Instant, u64, Arc<SettingRules>)>;

static READ: LazyLock<Mutex<Read>> = LazyLock::new(Mutex::default);
static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
static GLOBS: LazyLock<Mutex<HashMap<String, GlobMatcher>>> = LazyLock::new(Mutex::default);

pub(super) const RULES_FNS: &[HostFn] = &[
    HostFn {
        name: "setting-rules",
        args: "dir",
        doc: "The permission rules of the settings files for a session in DIR \
              (~/.claude/settings.json or $CLAUDE_CONFIG_DIR's, settings.json in oml's config \
              folder, the project's .claude/settings.json and .claude/settings.local.json): \
              {:rules :problems}, rules as {:verdict (:allow, :ask or :deny) :text :rule :source \
              :origin :project? :unsupported}, :rule the table `agent.rule-matches?` reads (nil \
              when oml cannot apply it, :unsupported saying why), problems as {:file :message}. \
              Says nothing of trust: `agent.setting-rules` does. Reused for 2 s (the same table: \
              treat it as read-only).",
        make: |lua| lua.create_function(|lua, dir: String| table(lua, PathBuf::from(dir))),
    },
    HostFn {
        name: "glob-matches?",
        args: "glob path ?reach",
        doc: "Whether the absolute PATH, or a folder holding it, matches the absolute GLOB (`*` \
              within a folder, `**` across folders), as a path rule of the settings files is \
              matched; with ?REACH also when what GLOB matches lies inside the folder PATH (a \
              search there may read it).",
        make: |lua| {
            lua.create_function(|_, (glob, path, reach): (String, String, Option<bool>)| {
                glob_matches(&glob, Path::new(&path), reach.unwrap_or(false))
            })
        },
    },
];

/// The rules for `dir`, read now when those read last are older than [`RULES_TTL`].
fn fresh(dir: &Path) -> (u64, Arc<SettingRules>) {
    if let Some((at, n, found)) = READ.lock().get(dir)
        && at.elapsed() < RULES_TTL
    {
        return (*n, found.clone());
    }
    let config = Paths::from_env().config;
    let files = crate::project::setup::settings_files(&config, dir);
    // The real paths (links followed), as the calls' paths are compared: a home folder that
    // is a link (`/home` → `/var/home`) must not let its real path pass a `~/` rule.
    let real = |p: PathBuf| std::fs::canonicalize(&p).unwrap_or(p);
    let root = real(crate::project::find_root(dir).unwrap_or_else(|| dir.to_path_buf()));
    let home = crate::paths::home_dir().map(real);
    let found = Arc::new(rules::setting_rules(
        &files,
        Bases {
            root: &root,
            home: home.as_deref(),
        },
    ));
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut read = READ.lock();
    read.retain(|_, (at, _, _)| at.elapsed() < RULES_TTL);
    read.insert(dir.to_path_buf(), (Instant::now(), n, found.clone()));
    (n, found)
}

/// The Lua table of `dir`'s rules: the one made last while they are fresh, else a new one.
fn table(lua: &Lua, dir: PathBuf) -> mlua::Result<Table> {
    let (n, found) = fresh(&dir);
    let slot = format!("setting-rules\0{}", dir.display());
    crate::bind::reused::reused_table(lua, &slot, n, || {
        let json = serde_json::to_value(&*found).map_err(mlua::Error::external)?;
        let mlua::Value::Table(t) = to_lua(lua, &json)? else {
            return Err(mlua::Error::RuntimeError(
                "the rules are not a table".into(),
            ));
        };
        let list: Table = t.get("rules")?;
        for (rule, entry) in found.rules.iter().zip(list.sequence_values::<Table>()) {
            entry?.set("project?", rule.origin.project())?;
        }
        Ok(t)
    })
}

/// Whether `path` or a folder above it matches `glob`; with `reach`, also whether the fixed
/// head of `glob` lies inside the folder `path`.
fn glob_matches(glob: &str, path: &Path, reach: bool) -> mlua::Result<bool> {
    let matcher = {
        let mut globs = GLOBS.lock();
        match globs.get(glob) {
            Some(m) => m.clone(),
            None => {
                let m = GlobBuilder::new(glob)
                    .literal_separator(true)
                    .build()
                    .map_err(|e| mlua::Error::RuntimeError(format!("not a glob: {e}")))?
                    .compile_matcher();
                if globs.len() >= MAX_CACHED_GLOBS {
                    globs.clear();
                }
                globs.insert(glob.to_owned(), m.clone());
                m
            }
        }
    };
    if path.ancestors().any(|p| matcher.is_match(p)) {
        return Ok(true);
    }
    Ok(reach && Path::new(rules::literal_base(glob)).starts_with(path))
}
