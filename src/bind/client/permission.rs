//! Who answers an agent's permission requests: the Lisp handler given as `:on-permission`, or,
//! in the interactive REPL, the user on the terminal.
//!
//! This module does not know about sessions or prompts.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use mlua::{Function, LuaSerdeExt as _, Table, Value};

use crate::acp::answers::ToolCallHead;
use crate::acp::tool_call::ToolCallShown;
use crate::acp_client::{PermissionDecision, PermissionHandler, PermissionRequest};
use crate::lisp::{Lisp, to_lua};

/// Set while the interactive terminal REPL runs: a connection made without `:on-permission`
/// then asks the user on the terminal instead of rejecting.
pub(super) static ASK_ON_TERMINAL: AtomicBool = AtomicBool::new(false);

/// Called by the interactive REPL (and only there): permission requests of connections without
/// a handler are asked on the terminal. Headless programs never prompt; they reject safely.
pub fn ask_on_terminal(enabled: bool) {
    ASK_ON_TERMINAL.store(enabled, Ordering::SeqCst);
}

/// Asks on the controlling terminal (`/dev/tty`): the tool call's title and kind, the options
/// numbered; an empty, unreadable or unknown answer rejects. The REPL's line editor is idle
/// while a form waits for its prompt, so the terminal is free. A turn cancelled meanwhile is
/// answered `cancelled` by the client whatever is typed.
pub fn terminal_permission_handler() -> PermissionHandler {
    Arc::new(|request: PermissionRequest| {
        Box::pin(async move {
            let answer = tokio::task::spawn_blocking(move || ask_tty(&request))
                .await
                .map_err(|e| format!("the terminal question failed: {e}"))?;
            Ok(answer)
        })
    })
}

fn ask_tty(request: &PermissionRequest) -> PermissionDecision {
    use std::io::{BufRead as _, Write as _};
    let Ok(tty) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
    else {
        return PermissionDecision::Reject;
    };
    let options = &request.options;
    let head = ToolCallHead::of(&request.tool_call);
    let title = head
        .title()
        .or(head.tool_call_id())
        .unwrap_or("a tool call");
    let kind = head.kind().unwrap_or("other");
    let mut out = &tty;
    let mut text = format!("\nThe agent asks permission for: {title} ({kind})\n");
    text.push_str(&question_details(&request.tool_call));
    for (i, option) in options.iter().enumerate() {
        text.push_str(&format!("  {}) {}\n", i + 1, option.label()));
    }
    text.push_str(&format!(
        "Choose 1-{} (anything else rejects): ",
        options.len()
    ));
    if out
        .write_all(text.as_bytes())
        .and_then(|_| out.flush())
        .is_err()
    {
        return PermissionDecision::Reject;
    }
    let mut line = String::new();
    if std::io::BufReader::new(&tty).read_line(&mut line).is_err() {
        return PermissionDecision::Reject;
    }
    match line.trim().parse::<usize>() {
        Ok(n) if (1..=options.len()).contains(&n) => {
            PermissionDecision::Option(options[n - 1].option_id.clone())
        }
        _ => PermissionDecision::Reject,
    }
}

/// Lines of a proposed diff the terminal question shows at most.
pub const QUESTION_DIFF_MAX_LINES: usize = 40;

/// What the terminal question shows under its title: the command (`rawInput.command`) and the
/// proposed changes (`diff` content) as unified diffs, as an editor would show them.
pub fn question_details(tool_call: &serde_json::Value) -> String {
    let mut text = String::new();
    let shown = ToolCallShown::of(tool_call);
    let (command, cwd) = shown.command();
    if let Some(command) = command.filter(|c| !c.trim().is_empty()) {
        text.push_str(&format!("  $ {command}\n"));
        if let Some(cwd) = cwd {
            text.push_str(&format!("  in {cwd}\n"));
        }
    }
    for diff in shown.diffs() {
        let path = diff.path.as_deref().unwrap_or("?");
        let old = diff.old.as_deref();
        let new = diff.new.as_deref().unwrap_or("");
        text.push_str(&format!(
            "  {} {path}:\n",
            if old.is_some() { "change" } else { "new file" }
        ));
        let diff = similar::TextDiff::from_lines(old.unwrap_or(""), new);
        let unified = diff.unified_diff().context_radius(2).to_string();
        let lines: Vec<&str> = unified.lines().collect();
        for line in lines.iter().take(QUESTION_DIFF_MAX_LINES) {
            text.push_str(&format!("    {line}\n"));
        }
        if lines.len() > QUESTION_DIFF_MAX_LINES {
            let more = lines.len() - QUESTION_DIFF_MAX_LINES;
            text.push_str(&format!("    … {more} more diff lines\n"));
        }
    }
    text
}

pub fn permission_handler(lisp: &Lisp, f: Function) -> mlua::Result<PermissionHandler> {
    let key = Arc::new(lisp.lua().create_registry_value(f)?);
    let lisp = lisp.clone();
    Ok(Arc::new(move |request: PermissionRequest| {
        let lisp = lisp.clone();
        let key = Arc::clone(&key);
        Box::pin(async move {
            let lua = lisp.lua();
            let arg = (|| -> mlua::Result<(Function, Table)> {
                let f: Function = lua.registry_value(&key)?;
                let t = lua.create_table()?;
                t.set("session-id", request.session_id.as_str())?;
                t.set("tool-call", to_lua(lua, &request.tool_call)?)?;
                // Typed to Lisp as serde writes them: the members the agent sent.
                t.set("options", lua.to_value(&request.options)?)?;
                Ok((f, t))
            })();
            let (f, t) = arg.map_err(|e| e.to_string())?;
            let answer: Value = lisp
                .run(f, t, &request.cancel)
                .await
                .map_err(|e| format!("the permission handler failed: {e}"))?;
            let Value::String(s) = answer else {
                return Err(format!(
                    "the permission handler returned {}, not an option id, :allow, :reject or :cancel",
                    answer.type_name()
                ));
            };
            let s = s.to_str().map_err(|e| e.to_string())?.to_owned();
            let offered = request.options.iter().any(|o| o.option_id == s);
            Ok(match s.as_str() {
                _ if offered => PermissionDecision::Option(s),
                "allow" => PermissionDecision::Allow,
                "reject" => PermissionDecision::Reject,
                "cancel" => PermissionDecision::Cancel,
                _ => PermissionDecision::Option(s),
            })
        })
    }))
}

/// `:on-elicitation`: the Lisp function F answers the agent's `elicitation/create`. It is called
/// with the request's params as on the wire (`message`, `mode`, `requestedSchema`, `sessionId`,
/// …) and returns the answer in wire form (`{:action :accept :content {…}}`, `{:action :decline}`
/// or `{:action :cancel}`); the agent giving the question up stops it.
pub(super) fn elicitation_handler(
    lisp: &Lisp,
    f: Function,
) -> mlua::Result<crate::acp_client::ElicitationHandler> {
    let key = Arc::new(lisp.lua().create_registry_value(f)?);
    let lisp = lisp.clone();
    Ok(Arc::new(move |params: serde_json::Value, cancel| {
        let lisp = lisp.clone();
        let key = Arc::clone(&key);
        Box::pin(async move {
            let lua = lisp.lua();
            let (f, arg) = (|| -> mlua::Result<(Function, Value)> {
                Ok((lua.registry_value(&key)?, to_lua(lua, &params)?))
            })()
            .map_err(|e| e.to_string())?;
            let answer: Value = lisp
                .run(f, arg, &cancel)
                .await
                .map_err(|e| format!("the elicitation handler failed: {e}"))?;
            let answer = crate::lisp::from_lua(lua, answer).map_err(|e| e.to_string())?;
            if !crate::acp::served::ElicitationAnswer::is_answer(&answer) {
                return Err(format!(
                    "the elicitation handler returned {answer}, not {{:action …}}"
                ));
            }
            Ok(answer)
        })
    }))
}

/// `:on-permission` and `:on-elicitation`, the handlers of the agent's requests.
pub(super) fn handlers(
    lisp: &Lisp,
    opts: &Table,
    options: &mut crate::acp_client::ConnectOptions,
) -> Result<(), crate::acp_client::ClientError> {
    if let Some(f) = opts
        .get::<Option<Function>>("on-permission")
        .map_err(super::lua_error)?
    {
        options.on_permission = Some(permission_handler(lisp, f).map_err(super::lua_error)?);
    }
    if let Some(f) = opts
        .get::<Option<Function>>("on-elicitation")
        .map_err(super::lua_error)?
    {
        options.on_elicitation = Some(elicitation_handler(lisp, f).map_err(super::lua_error)?);
    }
    if let Some(decide) = served(opts, "fs")? {
        options.fs = Some(super::fs::fs_handler(lisp, decide).map_err(super::lua_error)?);
    }
    if let Some(decide) = served(opts, "terminal")? {
        let handler = super::terminal::terminal_handler(lisp, decide);
        options.terminal = Some(handler.map_err(super::lua_error)?);
    }
    Ok(())
}

/// `:fs` or `:terminal`: `None` when not served, else the program's function if it gave one.
fn served(
    opts: &Table,
    key: &str,
) -> Result<Option<Option<Function>>, crate::acp_client::ClientError> {
    match opts.get::<Value>(key).map_err(super::lua_error)? {
        Value::Nil | Value::Boolean(false) => Ok(None),
        Value::Function(f) => Ok(Some(Some(f))),
        Value::Boolean(true) => Ok(Some(None)),
        other => Err(super::lua_error(crate::bind::rt(format!(
            ":{key} is true or a function, not {}",
            other.type_name()
        )))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_question_shows_the_command_and_the_proposed_diff() {
        let call = json!({"title": "Edit a.txt", "rawInput": {"command": ["git", "commit"], "cwd": "/p"},
            "content": [{"type": "diff", "path": "/p/a.txt", "oldText": "one\ntwo\n", "newText": "one\n2\n"},
                        {"type": "diff", "path": "/p/b.txt", "oldText": null, "newText": "new\n"},
                        {"type": "content", "content": {"type": "text", "text": "ignored"}}]});
        let text = question_details(&call);
        assert!(text.starts_with("  $ git commit\n  in /p\n"), "{text}");
        assert!(text.contains("  change /p/a.txt:\n"), "{text}");
        assert!(text.contains("    -two\n    +2\n"), "{text}");
        assert!(text.contains("  new file /p/b.txt:\n"), "{text}");
        assert!(text.contains("    +new\n"), "{text}");
        assert!(!text.contains("ignored"));
        assert_eq!(question_details(&json!({"title": "x"})), "");
    }
}
