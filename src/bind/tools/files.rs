//! The file tools' host functions: `oml.tool-read`, `oml.tool-write` and `oml.tool-edit`,
//! `oml.image-mime` and `oml.read-image`, and `oml.list-dir` for user tools.
//!
//! Paths are relative to the running coroutine's session directory. `oml.tool-read` follows
//! symbolic links; `oml.tool-write` and `oml.tool-edit` follow none in the folders of their
//! path, which the agent resolved and checked before the call. How a file is read, written or
//! edited is `crate::tools`'s; whether it may be, the agent's.

use mlua::{Lua, Value};

use super::{blocking, output_table};
use crate::bind::rt;
use crate::bind::session::cwd;
use crate::lisp::{HostFn, create_async_function, from_lua};
use crate::tools::{self, ReadLimits, ToolOutput};

/// The file `oml.tool-write` and `oml.tool-edit` change: `path` made absolute against the real
/// `cwd`, links in it not followed (the write refuses one among its folders). The agent gives
/// them the path resolved when the call was checked (`session.resolve-path`), so what was
/// checked is what is written, and a link swapped in since is refused rather than followed.
fn written_path(cwd: &std::path::Path, path: &str) -> Result<std::path::PathBuf, tools::ToolError> {
    let cwd = tools::real_path(cwd).unwrap_or_else(|_| cwd.to_path_buf());
    tools::resolve_path(&cwd, path)
}

/// Arguments of `oml.tool-read`: path, offset, limit, max-chars, default-limit.
type ReadArgs = (String, Option<i64>, Option<i64>, usize, usize);

pub(super) const FILES: &[HostFn] = &[
    HostFn {
        name: "tool-read",
        args: "path ?offset ?limit max-chars default-limit",
        doc: "The read tool: the text of the file PATH from line ?OFFSET (1-based), at most \
              ?LIMIT lines (DEFAULT-LIMIT when nil) and MAX-CHARS characters, with a footer when \
              cut. Returns {:content :error?}; a failure is a result with :error? true.",
        make: |lua| {
            create_async_function(
                lua,
                |lua, (path, offset, limit, max_chars, default_limit): ReadArgs| {
                    let cwd = cwd(&lua);
                    async move {
                        let out = match tools::resolve_real(&cwd, &path) {
                            Err(e) => ToolOutput::from(e),
                            Ok(abs) => {
                                let limits = ReadLimits {
                                    max_chars,
                                    default_limit,
                                };
                                blocking(move || tools::read(&abs, offset, limit, &limits)).await
                            }
                        };
                        output_table(&lua, out)
                    }
                },
            )
        },
    },
    HostFn {
        name: "tool-write",
        args: "path content",
        doc: "The write tool: write the string CONTENT to the file PATH, creating its \
              directories. No symbolic link among PATH's folders is followed (an error says \
              which): give the path as `session.resolve-path` resolves it. Returns {:content :error? :diff}; a failure (or CONTENT not a string) \
              is a result with :error? true.",
        make: |lua| {
            create_async_function(lua, |lua, (path, content): (String, Value)| {
                let cwd = cwd(&lua);
                async move {
                    let out = match (written_path(&cwd, &path), content) {
                        (Err(e), _) => ToolOutput::from(e),
                        // Valid UTF-8 (what a model's JSON gives) is written from the Lua
                        // string itself, held for the write: a large file is not copied
                        // again. Invalid bytes become U+FFFD in a copy.
                        (Ok(abs), Value::String(c)) => match c.to_str() {
                            Ok(text) => blocking(move || tools::write(&abs, &text)).await,
                            Err(_) => {
                                let content = c.to_string_lossy();
                                blocking(move || tools::write(&abs, &content)).await
                            }
                        },
                        (Ok(_), _) => ToolOutput::from(tools::ToolError::ContentRequired),
                    };
                    output_table(&lua, out)
                }
            })
        },
    },
    HostFn {
        name: "tool-edit",
        args: "path args",
        doc: "The edit tool: apply to the file PATH the edits of ARGS, the model's arguments \
              {:old_text :new_text} or {:edits [{:old_text :new_text} ...]}. No symbolic link \
              among PATH's folders is followed, as for `oml.tool-write`. Returns {:content \
              :error? :diff}; a failure is a result with :error? true.",
        make: |lua| {
            create_async_function(lua, |lua, (path, args): (String, Value)| {
                let cwd = cwd(&lua);
                let args = from_lua(&lua, args);
                async move {
                    let args = args?;
                    let out = match written_path(&cwd, &path) {
                        Err(e) => ToolOutput::from(e),
                        Ok(abs) => match tools::parse_edit_args(&args) {
                            Err(e) => ToolOutput::from(e),
                            Ok(edits) => blocking(move || tools::edit(&abs, &edits)).await,
                        },
                    };
                    output_table(&lua, out)
                }
            })
        },
    },
    HostFn {
        name: "image-mime",
        args: "path",
        doc: "The image type of the file PATH (relative to the session's directory), from its \
              first bytes: \"image/png\", \"image/jpeg\", \"image/gif\" or \"image/webp\"; nil for \
              any other file, or one that cannot be read.",
        make: |lua| {
            lua.create_function(|lua, path: String| {
                let path = tools::resolve_real(&cwd(lua), &path).ok();
                Ok(path.and_then(|p| tools::image::file_image_mime(&p)))
            })
        },
    },
    HostFn {
        name: "read-image",
        args: "path",
        doc: "The image file PATH for the model: {:mime :url :bytes}, :url a data: URL. nil and \
              the reason when it is not a PNG, JPEG, GIF or WebP image, is larger than 20 MiB or \
              cannot be read.",
        make: |lua| {
            create_async_function(lua, |lua, path: String| {
                let path = tools::resolve_real(&cwd(&lua), &path);
                async move {
                    let read = match path {
                        Err(e) => Err(e.to_string()),
                        Ok(p) => tokio::task::spawn_blocking(move || {
                            tools::image::read_image(&p).map_err(|e| e.to_string())
                        })
                        .await
                        .unwrap_or_else(|e| Err(e.to_string())),
                    };
                    match read {
                        Ok(image) => {
                            let t = lua.create_table()?;
                            t.set("mime", image.mime)?;
                            t.set("url", image.data_url())?;
                            t.set("bytes", image.bytes)?;
                            Ok((Value::Table(t), Value::Nil))
                        }
                        Err(why) => Ok((Value::Nil, Value::String(lua.create_string(why)?))),
                    }
                }
            })
        },
    },
    HostFn {
        name: "list-dir",
        args: "?path",
        doc: "The entries of the directory ?PATH (relative to the session's directory; default \
              the directory itself) as a sorted list of {:name :dir?}; symlinks to directories \
              count as directories. Not a directory: nil and \"Not a directory: PATH\".",
        make: |lua| lua.create_function(list_dir),
    },
];

/// `oml.list-dir`.
fn list_dir(lua: &Lua, path: Option<String>) -> mlua::Result<(Value, Value)> {
    let cwd = cwd(lua);
    let path = path.filter(|p| !p.trim().is_empty());
    let dir = match &path {
        None => cwd,
        Some(p) => tools::resolve_path(&cwd, p).map_err(|e| rt(e.to_string()))?,
    };
    let shown = path.unwrap_or_else(|| ".".to_owned());
    let Ok(read) = std::fs::read_dir(&dir) else {
        let problem = lua.create_string(format!("Not a directory: {shown}"))?;
        return Ok((Value::Nil, Value::String(problem)));
    };
    let mut entries: Vec<(String, bool)> = read
        .filter_map(Result::ok)
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let is_dir = std::fs::metadata(e.path())
                .map(|m| m.is_dir())
                .unwrap_or(false);
            (name, is_dir)
        })
        .collect();
    entries.sort();
    let out = lua.create_table()?;
    for (i, (name, is_dir)) in entries.into_iter().enumerate() {
        let e = lua.create_table()?;
        e.set("name", name)?;
        e.set("dir?", is_dir)?;
        out.set(i + 1, e)?;
    }
    Ok((Value::Table(out), Value::Nil))
}
