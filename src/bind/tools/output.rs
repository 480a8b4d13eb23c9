//! What a tool gives back, as Lisp sees it: a result table `{:content :error? :diff :exit}`
//! ([`output_table`]), the one character-counted truncation (`oml.cap-head`,
//! `oml.keep-tail`), and the live view of a running tool call (`oml.tool-progress`,
//! `oml.running-tool`, and the `tool-output` events of a running command's output).
//!
//! It knows nothing of what a tool does.

use mlua::{Lua, Table};

use crate::bind::session::{sessions, thread_key};
use crate::lisp::HostFn;
use crate::tools::{self, ToolOutput};

/// Bytes of one chunk of a running command's output sent as one `tool-output` event at most;
/// the chunk's tail is kept (the live view shows the last lines).
pub const TOOL_OUTPUT_EVENT_MAX_BYTES: usize = 4096;

/// Reports a running tool's output as `tool-output` events of the running coroutine's session,
/// under the id of its running tool call; `None` outside a session.
pub(super) fn output_reporter(lua: &Lua) -> Option<impl Fn(&[u8]) + Send + Sync + use<>> {
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

pub(super) const OUTPUT: &[HostFn] = &[
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
