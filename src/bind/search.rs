//! The host functions behind the search tools: `oml.tool-grep`, `oml.tool-find` and
//! `oml.tool-ls`, each taking the session's directory and the model's arguments and returning a
//! tool result `{:content :error?}`; and the setting `tools.grep-ripgrep?`. The tools themselves
//! (`tools.grep`, `tools.find`, `tools.ls`, with their schemas and docstrings) are Fennel, in
//! `src/agent/agent.fnl`, so they can be redefined like every other tool.
//!
//! This file knows nothing of how the search is done (`crate::tools`).

use std::path::PathBuf;

use mlua::{Lua, Table, Value};
use serde::Deserialize;

use crate::lisp::{Lisp, LispError, SettingDecl, create_async_function, from_lua};
use crate::tools::{self, GrepArgs, ToolOutput};

/// The model's arguments of `grep`, as the Lisp tool passes them on.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct GrepParams {
    pattern: String,
    path: Option<String>,
    glob: Option<String>,
    ignore_case: Option<bool>,
    literal: Option<bool>,
    context: Option<i64>,
    limit: Option<i64>,
}

/// The model's arguments of `find` and `ls`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct PathParams {
    pattern: String,
    path: Option<String>,
    limit: Option<i64>,
}

/// Install the search tools' host functions and setting into `oml` and `tools`.
pub fn install(lisp: &Lisp) -> Result<(), LispError> {
    lisp.declare_setting(&SettingDecl {
        name: "tools.grep-ripgrep?",
        doc: "Whether `grep` runs ripgrep (`rg`) when it is on PATH; otherwise, or when this is false, a Rust search that honours the same ignore files does the work.",
        ty: "boolean".into(),
        default: true.into(),
        secret: false,
        file: "src/bind/search.rs",
        line: line!(),
    })?;
    let lua = lisp.lua();
    let oml: Table = lua.globals().get("oml")?;
    oml.set(
        "tool-grep",
        create_async_function(
            lua,
            |lua, (cwd, args, rg): (String, Value, Option<bool>)| {
                let params = params::<GrepParams>(&lua, args);
                async move {
                    let out = match params {
                        Err(message) => ToolOutput::error(message),
                        Ok(p) => {
                            let args = GrepArgs {
                                pattern: p.pattern,
                                path: p.path,
                                glob: p.glob.filter(|g| !g.is_empty()),
                                ignore_case: p.ignore_case.unwrap_or(false),
                                literal: p.literal.unwrap_or(false),
                                context: p.context.unwrap_or(0).clamp(0, 100) as usize,
                                limit: p.limit,
                            };
                            let cancel = crate::cancel::CancelToken::new();
                            tools::grep(&PathBuf::from(cwd), &args, rg.unwrap_or(true), &cancel)
                                .await
                        }
                    };
                    result_table(&lua, out)
                }
            },
        )?,
    )?;
    oml.set(
        "tool-find",
        create_async_function(lua, |lua, (cwd, args): (String, Value)| {
            let params = params::<PathParams>(&lua, args);
            async move {
                let out = match params {
                    Err(message) => ToolOutput::error(message),
                    Ok(p) => {
                        blocking(move || {
                            let cancel = crate::cancel::CancelToken::new();
                            let cwd = PathBuf::from(cwd);
                            tools::find(&cwd, &p.pattern, p.path.as_deref(), p.limit, &cancel)
                        })
                        .await
                    }
                };
                result_table(&lua, out)
            }
        })?,
    )?;
    oml.set(
        "tool-ls",
        create_async_function(lua, |lua, (cwd, args): (String, Value)| {
            let params = params::<PathParams>(&lua, args);
            async move {
                let out = match params {
                    Err(message) => ToolOutput::error(message),
                    Ok(p) => {
                        blocking(move || tools::ls(&PathBuf::from(cwd), p.path.as_deref(), p.limit))
                            .await
                    }
                };
                result_table(&lua, out)
            }
        })?,
    )?;
    Ok(())
}

/// The model's arguments, deserialised; a wrong shape is a message the model reads.
fn params<T: serde::de::DeserializeOwned + Default>(lua: &Lua, args: Value) -> Result<T, String> {
    if args.is_nil() {
        return Ok(T::default());
    }
    let json = from_lua(lua, args).map_err(|e| e.to_string())?;
    serde_json::from_value(json).map_err(|e| format!("Invalid arguments: {e}"))
}

async fn blocking(f: impl FnOnce() -> ToolOutput + Send + 'static) -> ToolOutput {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| ToolOutput::error(format!("the tool failed: {e}")))
}

fn result_table(lua: &Lua, out: ToolOutput) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("content", out.content)?;
    t.set("error?", out.is_error)?;
    Ok(t)
}
