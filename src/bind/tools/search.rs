//! The host functions behind the search tools: `oml.tool-grep`, `oml.tool-find` and
//! `oml.tool-ls`, each taking the session's directory and the model's arguments and returning a
//! tool result `{:content :error?}`; and the setting `tools.grep-ripgrep?`. The tools themselves
//! (`tools.grep`, `tools.find`, `tools.ls`, with their schemas and docstrings) are Fennel, in
//! `src/agent/tools.fnl`, so they can be redefined like every other tool.
//!
//! This file knows nothing of how the search is done (`crate::tools`).

use std::path::PathBuf;

use mlua::{Lua, Value};
use serde::Deserialize;

use super::{blocking, output_table};
use crate::bind::session::session_cancel;
use crate::lisp::{HostFn, Lisp, LispError, SettingDecl, create_async_function, define, from_lua};
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

/// Install the search tools' host functions into `oml` and their setting into `tools`.
pub(super) fn install(lisp: &Lisp) -> Result<(), LispError> {
    lisp.declare_setting(&SettingDecl::new(
        "tools.grep-ripgrep?",
        "boolean",
        true,
        "Whether `grep` runs ripgrep (`rg`) when it is on PATH; otherwise, or when this is false, a Rust search that honours the same ignore files does the work.",
    ))?;
    define(lisp.lua(), "oml", SEARCH)?;
    Ok(())
}

const SEARCH: &[HostFn] = &[
    HostFn {
        name: "tool-grep",
        args: "dir args ?ripgrep",
        doc: "The grep tool in the directory DIR: ARGS is the model's {:pattern :path :glob \
              :ignore_case :literal :context :limit}; ripgrep runs when ?RIPGREP is not false and \
              rg is on PATH. Returns {:content :error?}; a failure is a result with :error? true.",
        make: |lua| {
            create_async_function(
                lua,
                |lua, (cwd, args, rg): (String, Value, Option<bool>)| {
                    let params = params::<GrepParams>(&lua, args);
                    let cancel = session_cancel(&lua);
                    async move {
                        let out = match params {
                            Err(error) => ToolOutput::error(error.to_string()),
                            Ok(p) => {
                                let args = grep_args(p);
                                let cwd = PathBuf::from(cwd);
                                tools::grep(&cwd, &args, rg.unwrap_or(true), &cancel).await
                            }
                        };
                        output_table(&lua, out)
                    }
                },
            )
        },
    },
    HostFn {
        name: "tool-find",
        args: "dir args",
        doc: "The find tool in the directory DIR: ARGS is the model's {:pattern :path :limit}. \
              Returns {:content :error?}.",
        make: |lua| {
            create_async_function(lua, |lua, (cwd, args): (String, Value)| {
                let params = params::<PathParams>(&lua, args);
                let cancel = session_cancel(&lua);
                async move {
                    let out = match params {
                        Err(error) => ToolOutput::error(error.to_string()),
                        Ok(p) => {
                            let stop = cancel.clone();
                            let run = blocking(move || {
                                let cwd = PathBuf::from(cwd);
                                tools::find(&cwd, &p.pattern, p.path.as_deref(), p.limit, &cancel)
                            });
                            // A walk stuck on an ignore file made odd while it ran is left
                            // behind rather than waited for.
                            let limit = tools::search::SEARCH_TIME_LIMIT;
                            tokio::select! {
                                out = tokio::time::timeout(limit, run) => out.unwrap_or_else(|_| {
                                    ToolOutput::error(format!("find failed: the search did not end within {limit:?}"))
                                }),
                                () = stop.cancelled() => ToolOutput::error("Cancelled"),
                            }
                        }
                    };
                    output_table(&lua, out)
                }
            })
        },
    },
    HostFn {
        name: "tool-ls",
        args: "dir args",
        doc: "The ls tool in the directory DIR: ARGS is the model's {:path :limit}. Returns \
              {:content :error?}.",
        make: |lua| {
            create_async_function(lua, |lua, (cwd, args): (String, Value)| {
                let params = params::<PathParams>(&lua, args);
                async move {
                    let out = match params {
                        Err(error) => ToolOutput::error(error.to_string()),
                        Ok(p) => {
                            let cwd = PathBuf::from(cwd);
                            blocking(move || tools::ls(&cwd, p.path.as_deref(), p.limit)).await
                        }
                    };
                    output_table(&lua, out)
                }
            })
        },
    },
];

fn grep_args(p: GrepParams) -> GrepArgs {
    GrepArgs {
        pattern: p.pattern,
        path: p.path,
        glob: p.glob.filter(|g| !g.is_empty()),
        ignore_case: p.ignore_case.unwrap_or(false),
        literal: p.literal.unwrap_or(false),
        context: p.context.unwrap_or(0).clamp(0, 100) as usize,
        limit: p.limit,
    }
}

/// Why the model's arguments could not be read; its `Display` is the message the model reads,
/// as `ToolError`'s is.
#[derive(Debug, thiserror::Error)]
enum ArgsError {
    /// The Lisp value is not one JSON can hold.
    #[error(transparent)]
    Lisp(#[from] mlua::Error),
    /// The arguments are not of the tool's shape.
    #[error("Invalid arguments: {0}")]
    Shape(#[from] serde_json::Error),
}

/// The model's arguments, deserialised.
fn params<T: serde::de::DeserializeOwned + Default>(
    lua: &Lua,
    args: Value,
) -> Result<T, ArgsError> {
    if args.is_nil() {
        return Ok(T::default());
    }
    Ok(serde_json::from_value(from_lua(lua, args)?)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_of_another_shape_are_told_to_the_model() {
        let lua = Lua::new();
        let args: Value = lua.load("{pattern = 3}").eval().unwrap();
        let error = params::<GrepParams>(&lua, args).unwrap_err();
        assert!(matches!(error, ArgsError::Shape(_)), "{error:?}");
        assert!(
            error.to_string().starts_with("Invalid arguments: "),
            "{error}"
        );
        let none: GrepParams = params(&lua, Value::Nil).unwrap();
        assert!(none.pattern.is_empty());
    }
}
