//! The host's own functions: `print` (to the coroutine's capture, its sink or the default
//! output) and the capture of what a coroutine prints, `os.exit`
//! (which unwinds instead of exiting), the `oml.*` primitives the prelude stands on, and the
//! `json` namespace.
//!
//! This module knows nothing about models, tools, sessions or ACP.

use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

use mlua::{Function, Lua, MultiValue, Table, Value};

use super::error::{ExitRequest, classify};
use super::surface::{HostFn, define, document};
use super::{Output, Shared, convert, create_async_function, sha256_hex};

/// The `oml.*` functions of the host.
const OML: &[HostFn] = &[
    HostFn {
        name: "log",
        args: "message",
        doc: "Write the string MESSAGE to stderr with the prefix [oml], never to the protocol \
              stream. Returns nil.",
        make: |lua| {
            lua.create_function(|_, msg: String| {
                let _ = writeln!(std::io::stderr().lock(), "[oml] {msg}");
                Ok(())
            })
        },
    },
    HostFn {
        name: "read-file",
        args: "path",
        doc: "The whole text of the file at PATH (relative to the process's directory), or nil \
              when it cannot be read as UTF-8 text.",
        make: |lua| lua.create_function(|_, path: String| Ok(std::fs::read_to_string(path).ok())),
    },
    HostFn {
        name: "embedded-source",
        args: "name",
        doc: "The source text of the Fennel file NAME built into oml (a path in oml's source \
              tree, such as \"src/lisp/prelude/core.fnl\"), or nil. What `source` reads for \
              built-in functions.",
        make: |lua| {
            lua.create_function(|lua, name: String| {
                Ok(lua
                    .app_data_ref::<Arc<Shared>>()
                    .and_then(|shared| shared.source(&name)))
            })
        },
    },
    HostFn {
        name: "sha256",
        args: "s",
        doc: "The SHA-256 digest of the string S, as 64 lowercase hexadecimal digits.",
        make: |lua| lua.create_function(|_, s: mlua::LuaString| Ok(sha256_hex(&s.as_bytes()))),
    },
    HostFn {
        name: "sleep",
        args: "ms",
        doc: "Wait MS milliseconds (less than zero counts as zero), suspending only the calling \
              coroutine. An interrupt ends the wait with the error `interrupted`. Returns nil.",
        make: |lua| {
            create_async_function(lua, |_, ms: f64| async move {
                tokio::time::sleep(Duration::from_secs_f64(ms.max(0.0) / 1000.0)).await;
                Ok(())
            })
        },
    },
    HostFn {
        name: "capture-begin",
        args: "",
        doc: "Start capturing what `print` writes in the calling coroutine: until               `oml.capture-end`, its lines are kept instead of written. Returns the capture this               one stands in for (nil when none), to hand to `oml.capture-end`. A pair of calls               around an `xpcall` captures a function that may yield (what slash commands do).",
        make: |lua| lua.create_function(capture_begin),
    },
    HostFn {
        name: "capture-end",
        args: "previous",
        doc: "End the calling coroutine's capture, putting back PREVIOUS (what               `oml.capture-begin` returned), and return the printed text.",
        make: |lua| lua.create_function(capture_end),
    },
];

/// The `oml.*` functions that read caught error values.
const ERRORS: &[HostFn] = &[
    HostFn {
        name: "error-message",
        args: "e",
        doc: "The text of the error value E without Lua's traceback or mlua's wrapping: for an \
              error raised by Rust, its message (after file:line: when it has one); for any other \
              value, (tostring E), trimmed.",
        make: |lua| lua.create_function(error_message),
    },
    HostFn {
        name: "error-category",
        args: "e",
        doc: "What kind of error the caught value E is: for an error raised by Rust, one of \
              \"runtime\", \"cancelled\" (a wait given up because its prompt was cancelled), \
              \"interrupted\", \"exit\", \"setting\", \"compile\" or \"io\"; \"runtime\" for a \
              string; the :category of an error table that has one (client errors); else nil.",
        make: |lua| lua.create_function(error_category),
    },
];

const PRINT_DOC: &str = "Print the arguments, converted with tostring and separated by tabs, \
    and a newline: to the output of the running REPL conversation when it has one, else to \
    stdout (stderr under `oml acp`, whose stdout is the protocol's).";

const EXIT_DOC: &str = "End the evaluation and make oml exit with status ?CODE: nil or true is \
    0, false is 1, a number is that status. It unwinds to the caller (oml eval, oml run), which \
    exits; it never ends the process from inside Lisp.";

/// Install `print`, `os.exit`, the `oml.*` functions above and the `json` namespace.
pub(super) fn install(lua: &Lua, output: Output) -> mlua::Result<()> {
    let globals = lua.globals();
    let print = lua.create_function(print)?;
    document(lua, &print, "...", PRINT_DOC)?;
    globals.set("print", print)?;
    if output == Output::Stderr {
        // `io.write` and `io.stdout` must never reach the protocol stream.
        let io: Table = globals.get("io")?;
        let stderr: Value = io.get("stderr")?;
        io.set("stdout", stderr.clone())?;
        let output: Function = io.get("output")?;
        output.call::<()>(stderr)?;
    }
    define(lua, "oml", OML)?;
    define(lua, "oml", ERRORS)?;
    // Only `main.rs` exits the process: `os.exit` unwinds to the caller, which maps it to a
    // status.
    let exit = lua.create_function(exit)?;
    document(lua, &exit, "?code", EXIT_DOC)?;
    globals.get::<Table>("os")?.set("exit", exit)?;
    convert::install_json(lua)
}

/// The registry name of the captures: a table with weak keys, from each capturing coroutine to
/// the list of lines it printed (weak, so that a coroutine that dies mid-capture takes its
/// capture with it, and a new one at the same address has none).
const CAPTURES: &str = "oml.captures";

fn captures(lua: &Lua) -> mlua::Result<Table> {
    if let Ok(t) = lua.named_registry_value::<Table>(CAPTURES) {
        return Ok(t);
    }
    let t = lua.create_table()?;
    let weak = lua.create_table()?;
    weak.raw_set("__mode", "k")?;
    t.set_metatable(Some(weak))?;
    lua.set_named_registry_value(CAPTURES, &t)?;
    Ok(t)
}

fn capture_begin(lua: &Lua, (): ()) -> mlua::Result<Value> {
    let all = captures(lua)?;
    let co = lua.current_thread();
    let previous: Value = all.raw_get(&co)?;
    all.raw_set(co, lua.create_table()?)?;
    Ok(previous)
}

fn capture_end(lua: &Lua, previous: Value) -> mlua::Result<String> {
    let all = captures(lua)?;
    let co = lua.current_thread();
    let lines: Option<Table> = all.raw_get(&co)?;
    all.raw_set(co, previous)?;
    let mut text = String::new();
    for line in lines
        .iter()
        .flat_map(|t| t.sequence_values::<mlua::LuaString>())
    {
        text.push_str(&line?.to_string_lossy());
    }
    Ok(text)
}

fn print(lua: &Lua, args: MultiValue) -> mlua::Result<()> {
    let mut line = String::new();
    for (i, v) in args.iter().enumerate() {
        if i > 0 {
            line.push('\t');
        }
        line.push_str(&v.to_string()?);
    }
    line.push('\n');
    // A capture (a slash command's output) first, then the coroutine's sink, then the default.
    if let Ok(all) = lua.named_registry_value::<Table>(CAPTURES)
        && let Ok(Value::Table(lines)) = all.raw_get(lua.current_thread())
    {
        return lines.raw_push(line);
    }
    let Some(shared) = lua.app_data_ref::<Arc<Shared>>().map(|s| Arc::clone(&s)) else {
        return Ok(());
    };
    let key = lua.current_thread().to_pointer() as usize;
    let sink = shared.sinks.lock().get(&key).cloned();
    match sink {
        Some(sink) => {
            let _ = sink.send(super::repl::Said::Printed(line));
        }
        None => write_default(shared.output, &line),
    }
    Ok(())
}

fn exit(_: &Lua, code: Option<Value>) -> mlua::Result<()> {
    let code = match code {
        None | Some(Value::Nil) | Some(Value::Boolean(true)) => 0,
        Some(Value::Boolean(false)) => 1,
        Some(Value::Integer(i)) => i as i32,
        Some(Value::Number(n)) => n as i32,
        Some(_) => 1,
    };
    Err(mlua::Error::external(ExitRequest(code)))
}

fn error_message(lua: &Lua, e: Value) -> mlua::Result<String> {
    Ok(match e {
        Value::Error(e) => classify(&e, None).to_string(),
        Value::String(s) => s.to_string_lossy().trim().to_owned(),
        other => {
            let tostring: Function = lua.globals().get("tostring")?;
            tostring.call::<String>(other)?.trim().to_owned()
        }
    })
}

fn error_category(_: &Lua, e: Value) -> mlua::Result<Option<String>> {
    Ok(match e {
        Value::Error(e) => Some(classify(&e, None).category().to_owned()),
        Value::String(_) => Some("runtime".to_owned()),
        Value::Table(t) => match t.get::<Value>("category")? {
            Value::String(c) => Some(c.to_string_lossy()),
            _ => None,
        },
        _ => None,
    })
}

fn write_default(output: Output, text: &str) {
    match output {
        Output::Stdout => {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
        }
        Output::Stderr => {
            let _ = std::io::stderr().lock().write_all(text.as_bytes());
        }
    }
}
