//! `project.agent-defs` and `project.trusted?`: the sub-agent definitions of a directory as Lisp
//! tables, found by `crate::project::agent_defs` in the project's folders and the user's,
//! reused for `DISCOVERY_TTL` as skills are (the system prompt lists them before every model
//! call); and whether a project is trusted, the one notion `skill.fnl` uses too. What a
//! definition may grant, and the `agent.def` ones of Lisp, are decided in Lisp
//! (`src/agent/agents.fnl`).

use std::path::{Path, PathBuf};

use mlua::{Lua, Table};

use super::skills::{Cached, Key, cached, untrusted};
use crate::lisp::{HostFn, Lisp, to_lua};
use crate::paths::Paths;
use crate::project::agent_defs::{self, AgentDef};
use crate::project::skills::Found;

static AGENTS: std::sync::LazyLock<Cached<AgentDef>> = std::sync::LazyLock::new(Cached::default);

fn find_agents((dir, _): &Key) -> Found<AgentDef> {
    agent_defs::agent_defs(&agent_defs::folders(&Paths::from_env().config, dir))
}

fn def_table(lua: &Lua, d: &AgentDef) -> mlua::Result<Table> {
    let json = serde_json::to_value(d).map_err(mlua::Error::external)?;
    match to_lua(lua, &json)? {
        mlua::Value::Table(t) => Ok(t),
        _ => Err(mlua::Error::RuntimeError(
            "a definition is not a table".into(),
        )),
    }
}

pub(super) const AGENTS_FNS: &[HostFn] = &[
    HostFn {
        name: "agent-defs",
        args: "dir",
        doc: "The sub-agent definitions on disk for a session in DIR: the project's \
              .oml/agents, .claude/agents (*.md, Claude Code's format) and .codex/agents \
              (*.toml, Codex's) from DIR up to the project root, then the user's `agents` folder \
              of oml's config folder, ~/.claude/agents ($CLAUDE_CONFIG_DIR) and ~/.codex/agents \
              ($CODEX_HOME); the first of a name wins. Returns {:found :shadowed :problems}: \
              definitions as {:name :description :prompt :tools :disallowed-tools :model \
              :permission-mode :max-turns :skills :mcp-servers :background :isolation :acp \
              :reasoning-effort :sandbox-mode :source :line :project? :lines}, problems as {:file \
              :line :message}. Reused for 2 s (the same table: treat it as read-only).",
        make: |lua| {
            lua.create_function(|lua, dir: String| {
                let key = (PathBuf::from(dir), true);
                let find = || find_agents(&key);
                cached(lua, &AGENTS, ("agents", key.clone()), find, def_table)
            })
        },
    },
    HostFn {
        name: "trusted?",
        args: "dir",
        doc: "Whether the project of DIR (its root, else DIR) is trusted to add to what a \
              session may do: `init.project-init` is :always, or :trusted and `oml trust` \
              recorded the project as it is now. Returns true, or false and why not.",
        make: |lua| {
            lua.create_function(|lua, dir: String| {
                let lisp = Lisp::from_lua(lua)
                    .ok_or_else(|| mlua::Error::RuntimeError("no Lisp host".into()))?;
                let dir = Path::new(&dir);
                let root = crate::project::find_root(dir).unwrap_or_else(|| dir.to_path_buf());
                Ok(match untrusted(&lisp, &root) {
                    None => (true, None),
                    Some(why) => (false, Some(why)),
                })
            })
        },
    },
];
