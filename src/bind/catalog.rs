//! The `catalog` namespace: the known ACP agents and where they are (see docs/src/agents.md).
//!
//! - `catalog.entries`: every entry, as tables `{:id :name :commands :args :env :env-hints :auth
//!   :auth-how :homepage :source :registry-id :description :version}`, in catalog order (`:source`
//!   is `"registry"` or `"oml"`; the last three only for registry agents).
//! - `(catalog.find id)`: that entry's table, or nil.
//! - `(catalog.command id)`: `{:command "/resolved/path" :args [...] :env {...}}` when the
//!   entry's command is on `PATH` (looked up at call time), else nil.
//! - `(catalog.proposal)`: the proposed Fennel configuration for what is on `PATH` (a string).

use mlua::{Lua, LuaSerdeExt as _, Table, Value};

use crate::catalog::{self, Entry, Found};
use crate::lisp::{HostFn, Lisp, define};

fn entry_table(lua: &Lua, e: &Entry) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("id", e.id)?;
    t.set("name", e.name)?;
    t.set("commands", seq(lua, e.commands)?)?;
    t.set("args", seq(lua, e.args)?)?;
    let env = lua.create_table()?;
    for (k, v) in e.env {
        env.set(*k, *v)?;
    }
    t.set("env", env)?;
    t.set("env-hints", seq(lua, e.env_hints)?)?;
    t.set("auth", e.auth.as_str())?;
    if !e.auth.how().is_empty() {
        t.set("auth-how", e.auth.how())?;
    }
    if !e.homepage.is_empty() {
        t.set("homepage", e.homepage)?;
    }
    t.set("source", e.source.as_str())?;
    for (key, value) in [
        ("registry-id", e.registry_id),
        ("description", e.description),
        ("version", e.version),
    ] {
        if !value.is_empty() {
            t.set(key, value)?;
        }
    }
    Ok(t)
}

fn seq(lua: &Lua, items: &[&str]) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set_metatable(Some(lua.array_metatable()))?;
    for s in items {
        t.raw_push(*s)?;
    }
    Ok(t)
}

/// `{:command :args :env}` for a found entry.
pub fn command_table(lua: &Lua, found: &Found) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("command", found.path.to_string_lossy().into_owned())?;
    t.set("args", seq(lua, found.entry.args)?)?;
    let env = lua.create_table()?;
    for (k, v) in found.entry.env {
        env.set(*k, *v)?;
    }
    t.set("env", env)?;
    Ok(t)
}

/// The `catalog.*` functions.
const CATALOG: &[HostFn] = &[
    HostFn {
        name: "find",
        args: "id",
        doc: "The catalog entry ID as a table {:id :name :commands :args :env :env-hints :auth \
              :auth-how :homepage :source :registry-id :description :version} (:source is \
              \"registry\" or \"oml\"), or nil when the catalog has no entry ID.",
        make: |lua| {
            lua.create_function(|lua, id: String| match catalog::find(&id) {
                Some(e) => Ok(Value::Table(entry_table(lua, e)?)),
                None => Ok(Value::Nil),
            })
        },
    },
    HostFn {
        name: "command",
        args: "id",
        doc: "How to start the catalog agent ID: {:command :args :env}, :command being the path \
              of its program found on PATH now. nil when ID is unknown or not on PATH.",
        make: |lua| {
            lua.create_function(|lua, id: String| {
                let Some(e) = catalog::find(&id) else {
                    return Ok(Value::Nil);
                };
                match catalog::locate(e, std::env::var_os("PATH").as_deref()) {
                    Some(found) => Ok(Value::Table(command_table(lua, &found)?)),
                    None => Ok(Value::Nil),
                }
            })
        },
    },
    HostFn {
        name: "proposal",
        args: "",
        doc: "The proposed Fennel configuration for the catalog agents found on PATH now: a \
              string of client.defagent forms and the setq of client.default-agent.",
        make: |lua| {
            lua.create_function(|_, ()| {
                let found: Vec<Found> = catalog::discover_env()
                    .into_iter()
                    .filter_map(|(_, f)| f)
                    .collect();
                Ok(catalog::proposed_config(&found))
            })
        },
    },
    HostFn {
        name: "missing-default-message",
        args: "",
        doc: "What (client.connect) says when client.default-agent is not set: the message \
              (what is missing, which agents are on PATH, the Fennel to add) and, as a second \
              value, that Fennel alone.",
        make: |lua| lua.create_function(|_, ()| Ok(missing_default_message())),
    },
];

/// Installs the `catalog` table: `catalog.entries` and the functions above.
pub fn install(lisp: &Lisp) -> mlua::Result<()> {
    let lua = lisp.lua();
    let ns = define(lua, "catalog", CATALOG)?;
    let entries = lua.create_table()?;
    entries.set_metatable(Some(lua.array_metatable()))?;
    for e in catalog::entries() {
        entries.raw_push(entry_table(lua, e)?)?;
    }
    ns.set("entries", entries)
}

/// What a program that asks for the default agent is told when none is configured: what is
/// missing, which agents are on `PATH`, and the exact Fennel to add.
pub fn missing_default_message() -> (String, String) {
    let discovered = catalog::discover_env();
    let external = catalog::found_external(&discovered);
    let mut s = String::from(
        "no default ACP agent: client.default-agent is not set (and no agent was named).\n",
    );
    if external.is_empty() {
        s.push_str(
            "No catalog agent was found on PATH (`oml agents` lists what oml looks for). \
             Install one, or name any ACP command: (client.connect \"/path/to/agent\" [args]). \
             oml itself can serve: add this to ~/.config/oml/agents.fnl or init.fnl:\n",
        );
        let all: Vec<Found> = discovered.into_iter().filter_map(|(_, f)| f).collect();
        let fennel = catalog::proposed_config(&all);
        s.push_str(&fennel);
        (s, fennel)
    } else {
        let names: Vec<String> = external
            .iter()
            .map(|f| format!("{} ({})", f.entry.id, f.path.display()))
            .collect();
        s.push_str(&format!("Found on PATH: {}.\n", names.join(", ")));
        s.push_str("Add this to ~/.config/oml/agents.fnl or init.fnl:\n");
        let fennel = catalog::proposed_config(&external);
        s.push_str(&fennel);
        (s, fennel)
    }
}
