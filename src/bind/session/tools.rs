//! The Rust side of the built-in tools (`oml.tool-read`, `oml.tool-write`, `oml.tool-edit`,
//! `oml.tool-bash`, `oml.image-mime` and `oml.read-image`, which the documented Lisp tools in
//! `tools.fnl` call), primitives for user tools (`oml.list-dir`, `oml.run-process`,
//! `oml.tool-progress`, `oml.running-tool`, and `oml.cap-head`/`oml.keep-tail`, the one
//! character-counted truncation, for Lisp), and the `tools.*` settings those Lisp tools pass
//! them, with the defaults of `crate::tools`.
//!
//! Paths are relative to the running coroutine's session directory (the process's outside a
//! session). `oml.tool-read` follows symbolic links; `oml.tool-write` and `oml.tool-edit` follow
//! none in the folders of their path, which the agent resolved and checked before the call. `oml.tool-bash` and `oml.run-process` run their commands in the sandbox that
//! `crate::bind::sandbox` makes from the `sandbox.*` settings. This module does not decide
//! whether a tool may run; the agent asks first.

use std::time::Duration;

use mlua::{Lua, Table, Value};

use super::{current_cwd, rt, sessions, thread_key};
use crate::lisp::{HostFn, Lisp, LispError, SettingDecl, create_async_function, define, from_lua};
use crate::tools::{self, ReadLimits, ToolOutput};

/// Declare the `tools.*` settings and define the functions below in `oml`.
pub(super) fn install(lisp: &Lisp) -> Result<(), LispError> {
    for decl in settings() {
        lisp.declare_setting(&decl)?;
    }
    define(lisp.lua(), "oml", TOOLS)?;
    Ok(())
}

/// The tool settings, with the defaults of `src/tools/`.
fn settings() -> Vec<SettingDecl> {
    use crate::tools::{BASH_MAX_CHARS, BASH_TIMEOUT, READ_DEFAULT_LIMIT, READ_MAX_CHARS};
    vec![
        SettingDecl::new(
            "tools.read-max-chars",
            "integer",
            READ_MAX_CHARS,
            "Characters `read` returns at most; the head is kept and a footer says how much was cut.",
        ),
        SettingDecl::new(
            "tools.read-default-limit",
            "integer",
            READ_DEFAULT_LIMIT,
            "Lines `read` returns when the model gives no limit.",
        ),
        SettingDecl::new(
            "tools.bash-max-chars",
            "integer",
            BASH_MAX_CHARS,
            "Characters of output `bash` returns at most; the tail is kept.",
        ),
        SettingDecl::new(
            "tools.bash-timeout",
            "number",
            BASH_TIMEOUT.as_secs(),
            "Seconds a `bash` command may run when the model gives no timeout; then its process group is killed.",
        ),
    ]
}

/// The cancel token of the running coroutine's session (a fresh one outside a session).
pub(crate) fn session_cancel(lua: &Lua) -> crate::cancel::CancelToken {
    let Ok(s) = sessions(lua) else {
        return Default::default();
    };
    s.of_thread(thread_key(lua))
        .and_then(|id| s.with(&id, |s| s.cancel.clone()))
        .unwrap_or_default()
}

/// Bytes of one chunk of a running command's output sent as one `tool-output` event at most;
/// the chunk's tail is kept (the live view shows the last lines).
pub const TOOL_OUTPUT_EVENT_MAX_BYTES: usize = 4096;

/// Reports a running tool's output as `tool-output` events of the running coroutine's session,
/// under the id of its running tool call; `None` outside a session.
fn output_reporter(lua: &Lua) -> Option<impl Fn(&[u8]) + Send + Sync + use<>> {
    let s = sessions(lua).ok()?;
    let id = s.of_thread(thread_key(lua))?;
    Some(move |bytes: &[u8]| {
        let Some(call) = s.with(&id, |s| s.running_tool.clone()).flatten() else {
            return;
        };
        let tail = &bytes[bytes.len().saturating_sub(TOOL_OUTPUT_EVENT_MAX_BYTES)..];
        let text = String::from_utf8_lossy(tail).into_owned();
        s.emit(
            &id,
            crate::session::AgentEvent::ToolOutput {
                id: call,
                text,
                replace: false,
            },
        );
    })
}

/// The running coroutine's directory: its session's, else the process's.
pub(crate) fn cwd(lua: &Lua) -> std::path::PathBuf {
    match sessions(lua) {
        Ok(s) => current_cwd(lua, &s),
        Err(_) => super::process_cwd(),
    }
}

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

const TOOLS: &[HostFn] = &[
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
        name: "tool-bash",
        args: "command timeout max-chars",
        doc: "The bash tool: run COMMAND with bash in the session's directory, in the sandbox \
              of the sandbox.* settings and without secrets in its environment; its process \
              group is killed after TIMEOUT seconds or when the prompt is cancelled. Keeps the \
              last MAX-CHARS characters of output. Returns {:content :error?}; a sandbox that \
              cannot be set up here is an error result saying why.",
        make: |lua| {
            create_async_function(
                lua,
                |lua, (command, timeout, max_chars): (String, f64, usize)| {
                    let cwd = cwd(&lua);
                    let cancel = session_cancel(&lua);
                    let report = output_reporter(&lua);
                    async move {
                        // Before the sandbox is prepared: that takes a descriptor too.
                        let Some(_room) = super::descriptors::room(&cancel).await else {
                            let why = "[cancelled] before the command started";
                            return output_table(&lua, ToolOutput::error(why));
                        };
                        let sandbox = match crate::bind::sandbox::prepare(&lua, &cwd) {
                            Ok(sandbox) => sandbox,
                            Err(why) => return output_table(&lua, ToolOutput::error(why)),
                        };
                        let timeout = Duration::from_secs_f64(timeout.clamp(0.0, 1e9));
                        let progress = report.as_ref().map(|r| r as tools::bash::Progress<'_>);
                        let out = tools::bash_with_progress(
                            &command, &cwd, timeout, max_chars, &cancel, progress, sandbox,
                        )
                        .await;
                        output_table(&lua, out)
                    }
                },
            )
        },
    },
    HostFn {
        name: "cap-head",
        args: "text max",
        doc: "TEXT capped to its first MAX characters (never splitting one), followed by \
              \"\\n[output truncated: N more characters]\" when anything was cut: the form of \
              `read`'s and `delegate`'s long results.",
        make: |lua| {
            lua.create_function(|_, (text, max): (mlua::LuaString, usize)| {
                Ok(tools::truncate::cap_head(
                    &String::from_utf8_lossy(&text.as_bytes()),
                    max,
                ))
            })
        },
    },
    HostFn {
        name: "keep-tail",
        args: "text max",
        doc: "The last MAX characters of TEXT (never splitting one); TEXT itself when it is \
              no longer.",
        make: |lua| {
            lua.create_function(|lua, (text, max): (mlua::LuaString, usize)| {
                let bytes = text.as_bytes();
                let text = String::from_utf8_lossy(&bytes);
                lua.create_string(tools::truncate::truncate_tail(&text, max).kept)
            })
        },
    },
    HostFn {
        name: "tool-progress",
        args: "text",
        doc: "Show TEXT as the whole live view of the running tool call's card, replacing what \
              it showed (a tool-output event with :replace); the tool's result replaces it in \
              turn. Does nothing outside a tool call. Returns nil.",
        make: |lua| lua.create_function(tool_progress),
    },
    HostFn {
        name: "running-tool",
        args: "",
        doc: "The id of the tool call running in this coroutine's session (between its card and \
              its result), or nil.",
        make: |lua| {
            lua.create_function(|lua, ()| {
                let s = sessions(lua)?;
                Ok(s.of_thread(thread_key(lua))
                    .and_then(|id| s.with(&id, |s| s.running_tool.clone()).flatten()))
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
    HostFn {
        name: "run-process",
        args: "argv",
        doc: "Run the program ARGV[1] with the arguments ARGV[2..] in the session's directory, \
              without a shell, and wait for it; like bash, in the sandbox of the sandbox.* \
              settings and without secrets in its environment. Returns {:exit :stdout :stderr}. \
              A program that cannot start is an error; so are a sandbox that cannot be set up \
              here and the prompt's cancellation (\"Cancelled\").",
        make: |lua| {
            create_async_function(lua, |lua, argv: Vec<String>| {
                let cwd = cwd(&lua);
                let cancel = session_cancel(&lua);
                let sandbox = crate::bind::sandbox::prepare(&lua, &cwd);
                async move {
                    let (program, args) = argv
                        .split_first()
                        .ok_or_else(|| rt("run-process: the argument list is empty"))?;
                    let mut cmd = tokio::process::Command::new(program);
                    sandbox
                        .map_err(rt)?
                        .confine(cmd.as_std_mut())
                        .map_err(|e| rt(e.to_string()))?;
                    let child = cmd
                        .args(args)
                        .current_dir(&cwd)
                        .stdin(std::process::Stdio::null())
                        .stdout(std::process::Stdio::piped())
                        .stderr(std::process::Stdio::piped())
                        .kill_on_drop(true)
                        .spawn()
                        .map_err(|e| rt(format!("cannot run {program}: {e}")))?;
                    let out = tokio::select! {
                        out = child.wait_with_output() => out.map_err(|e| rt(format!("{program}: {e}")))?,
                        () = cancel.cancelled() => return Err(rt("Cancelled")),
                    };
                    let t = lua.create_table()?;
                    t.set("exit", out.status.code())?;
                    t.set("stdout", lua.create_string(&out.stdout)?)?;
                    t.set("stderr", lua.create_string(&out.stderr)?)?;
                    Ok(t)
                }
            })
        },
    },
];

/// `oml.tool-progress`.
fn tool_progress(lua: &Lua, text: String) -> mlua::Result<()> {
    let s = sessions(lua)?;
    let Some(id) = s.of_thread(thread_key(lua)) else {
        return Ok(());
    };
    if let Some(call) = s.with(&id, |s| s.running_tool.clone()).flatten() {
        let event = crate::session::AgentEvent::ToolOutput {
            id: call,
            text,
            replace: true,
        };
        s.emit(&id, event);
    }
    Ok(())
}

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

/// How a command ended, as Lisp sees it: `{:code N}`, `{:signal "SIGKILL"}`, `{:timed-out true}`
/// or `{:cancelled true}`.
fn exit_table(lua: &Lua, end: crate::tools::bash::CommandEnd) -> mlua::Result<Table> {
    use crate::tools::bash::CommandEnd;
    let t = lua.create_table()?;
    match end {
        CommandEnd::Code(code) => t.set("code", code)?,
        CommandEnd::Signal(signal) => t.set("signal", signal)?,
        CommandEnd::TimedOut => t.set("timed-out", true)?,
        CommandEnd::Cancelled => t.set("cancelled", true)?,
    }
    Ok(t)
}

/// Run a blocking tool on tokio's blocking pool; a panic there is a failed result.
pub(crate) async fn blocking(f: impl FnOnce() -> ToolOutput + Send + 'static) -> ToolOutput {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| ToolOutput::error(format!("the tool failed: {e}")))
}

/// A tool result as Lisp sees it: `{:content :error? :diff :exit}`.
pub(crate) fn output_table(lua: &Lua, out: ToolOutput) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("content", out.content)?;
    t.set("error?", out.is_error)?;
    if let Some(end) = out.end {
        t.set("exit", exit_table(lua, end)?)?;
    }
    if let Some(diff) = out.diff {
        let d = lua.create_table()?;
        d.set("path", diff.path.display().to_string())?;
        if let Some(old) = diff.old_text {
            d.set("old-text", old)?;
        }
        d.set("new-text", diff.new_text)?;
        t.set("diff", d)?;
    }
    Ok(t)
}
