//! `oml.preview-change`: the change a `write` or `edit` call would make, computed the way the
//! tool computes it but written nowhere, so that a permission question can show the diff it
//! asks about (ACP's `diff` content, the chat's coloured diff).
//!
//! Paths resolve against the running coroutine's session directory, as the tools' do. It does
//! not decide anything about permissions.

use mlua::{Lua, Table, Value};

use super::{current_cwd, sessions};
use crate::lisp::{HostFn, LispError, define, from_lua};
use crate::tools::{self, FileDiff};

/// Define `oml.preview-change`.
pub(super) fn install(lua: &Lua) -> Result<(), LispError> {
    define(lua, "oml", PREVIEW)?;
    Ok(())
}

const PREVIEW: &[HostFn] = &[HostFn {
    name: "preview-change",
    args: "tool args",
    doc: "The change the TOOL call (\"write\" or \"edit\") with ARGS would make, without making \
          it: {:path :old-text :new-text} (no :old-text for a new file). nil and the message \
          the tool would give when it would fail (no match, not text, ...), and nil for any \
          other tool.",
    make: |lua| lua.create_function(preview),
}];

fn preview(
    lua: &Lua,
    (tool, args): (String, Value),
) -> mlua::Result<(Option<Table>, Option<String>)> {
    let args = from_lua(lua, args)?;
    let path = args.get("path").and_then(|p| p.as_str()).unwrap_or("");
    let cwd = current_cwd(lua, &*sessions(lua)?);
    let abs = match tools::resolve_path(&cwd, path) {
        Ok(abs) => abs,
        Err(e) => return Ok((None, Some(e.to_string()))),
    };
    let diff = match tool.as_str() {
        "write" => {
            let content = args.get("content").and_then(|c| c.as_str()).unwrap_or("");
            tools::preview_write(&abs, content)
        }
        "edit" => tools::parse_edit_args(&args).and_then(|edits| tools::preview_edit(&abs, &edits)),
        _ => return Ok((None, None)),
    };
    match diff {
        Ok(diff) => Ok((Some(diff_table(lua, diff)?), None)),
        Err(e) => Ok((None, Some(e.to_string()))),
    }
}

fn diff_table(lua: &Lua, diff: FileDiff) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("path", diff.path.display().to_string())?;
    if let Some(old) = diff.old_text {
        t.set("old-text", old)?;
    }
    t.set("new-text", diff.new_text)?;
    Ok(t)
}
