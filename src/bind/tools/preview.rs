//! The file tools without the disk: `oml.preview-change`, the change a `write` or `edit` call
//! would make, computed the way the tool computes it but written nowhere, so that a permission
//! question can show the diff it asks about; and `oml.read-text` and `oml.edit-text`, `read`
//! and `edit` of text given by the caller (an editor's unsaved buffer, read over ACP), with the
//! tools' numbering, limits and messages.
//!
//! Paths resolve against the running coroutine's session directory, links followed
//! (`tools::resolve_real`), as the tools' do. It does
//! not decide anything about permissions, and knows nothing of where the text came from.

use std::path::Path;

use mlua::{Lua, Table, Value};

use crate::bind::session::{current_cwd, sessions};
use crate::lisp::{HostFn, LispError, define, from_lua};
use crate::tools::{self, FileDiff};

/// Define `oml.preview-change`.
pub(super) fn install(lua: &Lua) -> Result<(), LispError> {
    define(lua, "oml", PREVIEW)?;
    Ok(())
}

const PREVIEW: &[HostFn] = &[
    HostFn {
        name: "read-text",
        args: "text path ?offset ?limit max-chars default-limit",
        doc: "The read tool on TEXT given for the file PATH (not read from disk): lines from \
              ?OFFSET, at most ?LIMIT (DEFAULT-LIMIT when nil) and MAX-CHARS characters, \
              numbered, with the same footer and errors as the read tool. Returns \
              {:content :error?}.",
        make: |lua| lua.create_function(read_text),
    },
    HostFn {
        name: "edit-text",
        args: "text path args",
        doc: "The edit tool's ARGS ({:old_text :new_text} or {:edits [...]}) applied to TEXT, \
              the content of the file PATH, writing nothing. Returns {:content :error? :diff \
              :new-text}: :new-text is what to write (nil on an error, whose message is the \
              edit tool's).",
        make: |lua| lua.create_function(edit_text),
    },
    HostFn {
        name: "preview-change",
        args: "tool args",
        doc: "The change the TOOL call (\"write\" or \"edit\") with ARGS would make, without making \
          it: {:path :old-text :new-text} (no :old-text for a new file). nil and the message \
          the tool would give when it would fail (no match, not text, ...), and nil for any \
          other tool.",
        make: |lua| lua.create_function(preview),
    },
];

/// Arguments of `oml.read-text`.
type ReadTextArgs = (String, String, Option<i64>, Option<i64>, usize, usize);

fn read_text(
    lua: &Lua,
    (text, path, offset, limit, max_chars, default_limit): ReadTextArgs,
) -> mlua::Result<Table> {
    let limits = tools::ReadLimits {
        max_chars,
        default_limit,
    };
    let out = tools::read_text(Path::new(&path), &text, offset, limit, &limits);
    super::output_table(lua, out)
}

fn edit_text(lua: &Lua, (text, path, args): (String, String, Value)) -> mlua::Result<Table> {
    let args = from_lua(lua, args)?;
    let result = tools::parse_edit_args(&args)
        .and_then(|edits| tools::edit_text(Path::new(&path), &text, &edits));
    match result {
        Ok((new_text, out)) => {
            let t = super::output_table(lua, out)?;
            t.set("new-text", new_text)?;
            Ok(t)
        }
        Err(e) => super::output_table(lua, e.into()),
    }
}

fn preview(
    lua: &Lua,
    (tool, args): (String, Value),
) -> mlua::Result<(Option<Table>, Option<String>)> {
    if tool != "write" && tool != "edit" {
        return Ok((None, None));
    }
    let path = match &args {
        Value::Table(t) => t.get::<Option<String>>("path").ok().flatten(),
        _ => None,
    };
    let cwd = current_cwd(lua, &*sessions(lua)?);
    let abs = match tools::resolve_real(&cwd, path.as_deref().unwrap_or("")) {
        Ok(abs) => abs,
        Err(e) => return Ok((None, Some(e.to_string()))),
    };
    if tool == "write" {
        return preview_write(lua, &abs, &args);
    }
    let diff = tools::parse_edit_args(&from_lua(lua, args)?)
        .and_then(|edits| tools::preview_edit(&abs, &edits));
    match diff {
        Ok(diff) => Ok((Some(diff_table(lua, diff)?), None)),
        Err(e) => Ok((None, Some(e.to_string()))),
    }
}

/// The write's diff, its new text the very Lua string of the call's `content` (the file a
/// model writes can be large: it is not copied for the question).
fn preview_write(
    lua: &Lua,
    abs: &Path,
    args: &Value,
) -> mlua::Result<(Option<Table>, Option<String>)> {
    let content = match args {
        Value::Table(t) => t.get::<Value>("content")?,
        _ => Value::Nil,
    };
    let content = match content {
        Value::String(s) => s,
        _ => lua.create_string("")?,
    };
    match tools::preview_write(abs) {
        Ok(old) => {
            let t = lua.create_table()?;
            t.set("path", abs.display().to_string())?;
            if let Some(old) = old {
                t.set("old-text", old)?;
            }
            t.set("new-text", content)?;
            Ok((Some(t), None))
        }
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
