//! Permission rules saved per project: `project.saved-rules` and `project.save-rules!`. They are
//! kept in the user's state folder (`permission-rules.json`, keyed by project root), never in
//! the project itself, where a commit could grant itself permissions; and they are only handed
//! out for a project that is trusted (`oml trust`), as its init file is.
//!
//! It stores and returns rules as they are; what a rule means is the permission policy's
//! (`src/agent/permission.fnl`).

use std::collections::BTreeMap;
use std::path::Path;

use mlua::{Lua, Value};
use serde_json::Value as Json;

use crate::lisp::init::{TrustStatus, TrustStore, canonical};
use crate::lisp::{HostFn, from_lua, to_lua};
use crate::paths::Paths;

/// The file, in the state folder, that holds the saved rules of every project.
pub const RULES_FILE: &str = "permission-rules.json";

pub(super) const SAVED: &[HostFn] = &[
    HostFn {
        name: "saved-rules",
        args: "root",
        doc: "The permission rules saved for the project ROOT (a list of {:rule :verdict}), when \
              ROOT is trusted (oml trust); an empty list otherwise.",
        make: |lua| lua.create_function(saved_rules),
    },
    HostFn {
        name: "save-rules!",
        args: "root rules",
        doc: "Save RULES (a list of {:rule :verdict}; empty forgets them) for the project ROOT \
              in the user's state folder. Saved rules apply only while ROOT is trusted. \
              Returns the path of the file written.",
        make: |lua| lua.create_function(save_rules),
    },
];

fn read(paths: &Paths) -> BTreeMap<String, Json> {
    std::fs::read(paths.state.join(RULES_FILE))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

fn saved_rules(lua: &Lua, root: String) -> mlua::Result<Value> {
    let paths = Paths::from_env();
    let trusted =
        TrustStore::new(paths.trust_file()).status(Path::new(&root)) == TrustStatus::Trusted;
    let rules = if trusted {
        read(&paths).remove(&canonical(Path::new(&root)))
    } else {
        None
    };
    to_lua(lua, &rules.unwrap_or_else(|| Json::Array(Vec::new()))).map_err(mlua::Error::external)
}

fn save_rules(lua: &Lua, (root, rules): (String, Value)) -> mlua::Result<String> {
    let paths = Paths::from_env();
    let rules = from_lua(lua, rules)?;
    let mut all = read(&paths);
    let key = canonical(Path::new(&root));
    if rules.as_array().is_none_or(Vec::is_empty) {
        all.remove(&key);
    } else {
        all.insert(key, rules);
    }
    let file = paths.state.join(RULES_FILE);
    let write = || -> std::io::Result<()> {
        crate::paths::ensure_private_dir(&paths.state)?;
        let json = serde_json::to_vec_pretty(&all).map_err(std::io::Error::other)?;
        let tmp = file.with_extension("json.tmp");
        std::fs::write(&tmp, json)?;
        std::fs::rename(&tmp, &file)
    };
    write().map_err(|e| mlua::Error::RuntimeError(format!("cannot save the rules: {e}")))?;
    Ok(file.display().to_string())
}
