//! `acp.terminal-bash`: the `bash` tool run in the ACP client's terminal (`terminal/create`,
//! `terminal/wait_for_exit`, `terminal/kill`, `terminal/output`, `terminal/release`), so the
//! editor shows the command live in its tool card.
//!
//! The editor starts the process, so the command is wrapped in oml's sandbox launcher (`oml
//! sandbox-exec`, `crate::cli`), which confines it exactly as a local command is confined and
//! removes the secrets from the environment the editor gives it; nothing is passed in the
//! request's `env`. The card gets the terminal (`{type: "terminal", terminalId}`) as soon as it
//! exists. A timeout or the prompt's cancel kills the command (`terminal/kill`); then the output
//! is read and the terminal released, each within [`TERMINAL_CLEANUP_TIMEOUT`], also when the
//! tool is interrupted mid-way (the release is then sent from a task of its own). A terminal the
//! editor makes after the prompt was cancelled (or the tool interrupted) while it was asked for
//! is killed and released when its id arrives.
//!
//! The result reads as a local command's does (`tools::bash::outcome`), from the tail of what
//! the editor kept. This module does not decide whether the client's terminal is used (the
//! `:client-terminal` advice in acp.fnl does) nor whether the command may run (the agent asks
//! first).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use mlua::{Lua, Table};
use serde_json::Value;

use crate::acp::NameValue;
use crate::acp::served::{self, CreateTerminalRequest, ExitRead, OutputRead, TerminalParams};
use crate::acp::updates::{SessionUpdate, ToolCallContent, UpdateParams};
use crate::bind::session::{cwd, session_cancel};
use crate::bind::tools::output_table;
use crate::cancel::CancelToken;
use crate::front::acp::hub::hub;
use crate::jsonrpc::Connection;
use crate::lisp::{HostFn, create_async_function};
use crate::session::Sessions;
use crate::tools::bash::{CommandEnd, outcome};
use crate::tools::{ToolError, ToolOutput, truncate::cap_tail};

/// The `outputByteLimit` oml asks the editor for: bytes of output it keeps per terminal.
/// The spec has the client drop the beginning past it (Zed keeps the beginning instead); oml
/// then keeps the last `tools.bash-max-chars` characters of what it gets.
pub const TERMINAL_OUTPUT_BYTE_LIMIT: usize = 1024 * 1024;

/// How long each clean-up request (`terminal/kill`, the wait after it, `terminal/output`,
/// `terminal/release`) may take before oml goes on without its answer.
pub const TERMINAL_CLEANUP_TIMEOUT: Duration = Duration::from_secs(5);

/// The `acp` host functions of this file.
pub(super) const TERMINAL_FNS: &[HostFn] = &[HostFn {
    name: "terminal-bash",
    args: "command timeout max-chars",
    doc: "The bash tool in the ACP client's terminal: run COMMAND with bash in the session's \
          directory through terminal/create, wrapped in oml's sandbox launcher (the sandbox.* \
          settings and secret rules apply as to a local command), showing the terminal in the \
          running tool card; kill it after TIMEOUT seconds or when the prompt is cancelled, then \
          read its output (the last MAX-CHARS characters are kept) and release it. Returns \
          {:content :error? :terminal-id}; a refusal or an error from the client is an error \
          result.",
    make: |lua| create_async_function(lua, terminal_bash),
}];

/// `acp.terminal-bash`.
fn terminal_bash(
    lua: Lua,
    (command, timeout, max_chars): (String, f64, usize),
) -> impl Future<Output = mlua::Result<Table>> {
    let hub = hub(&lua);
    let sessions = lua.app_data_ref::<Arc<Sessions>>().map(|s| s.clone());
    let key = lua.current_thread().to_pointer() as usize;
    let sid = sessions.as_ref().and_then(|s| s.of_thread(key));
    let cancel = session_cancel(&lua);
    let dir = cwd(&lua);
    let launcher = if command.trim().is_empty() {
        Err(ToolError::CommandRequired.to_string())
    } else {
        let scope = crate::bind::tools::scope_in(&lua, dir.clone());
        crate::bind::sandbox::launcher(&lua, &scope, &command)
    };
    async move {
        let hub = hub?;
        let timeout = Duration::from_secs_f64(timeout.clamp(0.0, 1e9));
        let (out, terminal) = match (hub.connection(), sessions, sid, launcher) {
            (_, _, _, Err(why)) => (ToolOutput::error(why), None),
            (None, ..) | (_, None, ..) | (_, _, None, _) => (
                ToolOutput::error("No ACP client to run the command in"),
                None,
            ),
            (Some(conn), Some(sessions), Some(sid), Ok(launcher)) => {
                hub.barrier(&sid).await;
                let run = Run {
                    conn: &conn,
                    sid: &sid,
                    cancel: &cancel,
                };
                let (name, value) = launcher.env.clone();
                let request = CreateTerminalRequest {
                    session_id: &sid,
                    command: &launcher.program,
                    args: &launcher.args,
                    cwd: dir.display().to_string(),
                    env: vec![NameValue { name, value }],
                    output_byte_limit: TERMINAL_OUTPUT_BYTE_LIMIT as u64,
                };
                let request = serde_json::to_value(&request).unwrap_or(Value::Null);
                run.go(&sessions, request, timeout, max_chars).await
            }
        };
        let t = output_table(&lua, out)?;
        t.set("terminal-id", terminal)?;
        Ok(t)
    }
}

/// One command in one terminal of the client.
struct Run<'a> {
    conn: &'a Connection,
    sid: &'a str,
    cancel: &'a CancelToken,
}

/// Releases the terminal when dropped before [`Release::done`]: the tool was interrupted.
struct Release {
    conn: Connection,
    params: Value,
    armed: bool,
}

impl Release {
    fn done(mut self) {
        self.armed = false;
    }
}

impl Drop for Release {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (conn, params) = (self.conn.clone(), self.params.clone());
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = conn
                    .request_with(
                        "terminal/release",
                        params,
                        Some(TERMINAL_CLEANUP_TIMEOUT),
                        None,
                    )
                    .await;
            });
        }
    }
}

/// Why the editor made no terminal.
#[derive(Debug, thiserror::Error)]
enum NotCreated {
    #[error(transparent)]
    Request(crate::jsonrpc::RequestError),
    /// The task that asked ended without an answer.
    #[error("the request was lost")]
    Lost,
}

impl Run<'_> {
    /// Create the terminal, show it, wait, clean up; the result and the terminal's id.
    async fn go(
        &self,
        sessions: &Sessions,
        request: Value,
        timeout: Duration,
        max_chars: usize,
    ) -> (ToolOutput, Option<String>) {
        let Some(created) = self.create(request).await else {
            return (ToolOutput::error("[cancelled]"), None);
        };
        let id = match created {
            Ok(v) => match TerminalParams::terminal_id(&v) {
                Some(id) => id,
                None => {
                    return (
                        ToolOutput::error("The editor made no terminal (no terminalId)"),
                        None,
                    );
                }
            },
            Err(e) => {
                let why = format!("Could not run the command in the editor's terminal: {e}");
                return (ToolOutput::error(why), None);
            }
        };
        let params = served::terminal_request(self.sid, &id);
        let release = Release {
            conn: self.conn.clone(),
            params: params.clone(),
            armed: true,
        };
        if let Some(call) = sessions
            .with(self.sid, |s| s.running_tool.clone())
            .flatten()
        {
            let card = SessionUpdate::ToolCallUpdate {
                tool_call_id: &call,
                status: None,
                content: vec![ToolCallContent::Terminal { terminal_id: &id }],
            };
            let params = UpdateParams {
                session_id: self.sid,
                update: card,
            };
            let _ = self.conn.notify("session/update", params).await;
        }
        let end = self.wait(&params, timeout).await;
        let output = self.cleanup("terminal/output", &params).await;
        let _ = self.cleanup("terminal/release", &params).await;
        release.done();
        (result(end, output, timeout, max_chars), Some(id))
    }

    /// `terminal/create`; `None` when the prompt is cancelled first. The request runs in a task
    /// of its own: the editor may make the terminal although the prompt was cancelled while it
    /// did, and the id that still arrives is then killed and released there, so no command is
    /// left running in it while the prompt answers at once.
    async fn create(&self, request: Value) -> Option<Result<Value, NotCreated>> {
        if self.cancel.is_cancelled() {
            return None;
        }
        let (conn, sid) = (self.conn.clone(), self.sid.to_owned());
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let created = conn
                .request_with("terminal/create", request, None, None)
                .await
                .map_err(NotCreated::Request);
            let Err(Ok(late)) = tx.send(created) else {
                return;
            };
            if let Some(id) = TerminalParams::terminal_id(&late) {
                let params = served::terminal_request(&sid, &id);
                for method in ["terminal/kill", "terminal/release"] {
                    let timeout = Some(TERMINAL_CLEANUP_TIMEOUT);
                    let _ = conn.request_with(method, &params, timeout, None).await;
                }
            }
        });
        tokio::select! {
            biased;
            created = rx => Some(created.unwrap_or(Err(NotCreated::Lost))),
            () = self.cancel.cancelled() => None,
        }
    }

    /// Wait for the command to exit, or kill it at the timeout or the cancel; how it ended
    /// (`None` when the client did not say).
    async fn wait(&self, params: &Value, timeout: Duration) -> Option<CommandEnd> {
        let wait = self
            .conn
            .request_with("terminal/wait_for_exit", params, None, None);
        tokio::pin!(wait);
        let stopped = tokio::select! {
            exited = &mut wait => return exited.ok().map(exit_end),
            () = tokio::time::sleep(timeout) => CommandEnd::TimedOut,
            () = self.cancel.cancelled() => CommandEnd::Cancelled,
        };
        let _ = self.cleanup("terminal/kill", params).await;
        let _ = tokio::time::timeout(TERMINAL_CLEANUP_TIMEOUT, &mut wait).await;
        Some(stopped)
    }

    async fn cleanup(&self, method: &str, params: &Value) -> Option<Value> {
        self.conn
            .request_with(method, params, Some(TERMINAL_CLEANUP_TIMEOUT), None)
            .await
            .ok()
    }
}

/// How the command ended, from a `TerminalExitStatus` `{exitCode?, signal?}`.
fn exit_end(status: Value) -> CommandEnd {
    let status = ExitRead::read(status);
    match (status.exit_code.0, status.signal.0) {
        (Some(code), _) => CommandEnd::Code(i32::try_from(code).unwrap_or(-1)),
        (None, Some(signal)) => CommandEnd::Signal(signal),
        (None, None) => CommandEnd::Code(-1),
    }
}

/// The tool result from how the command ended and the `terminal/output` answer.
fn result(
    end: Option<CommandEnd>,
    output: Option<Value>,
    timeout: Duration,
    max_chars: usize,
) -> ToolOutput {
    let output = OutputRead::read(output.unwrap_or(Value::Null));
    let text = output.output.get().map_or("", String::as_str);
    // The editor's terminal is a pty: `\r\n` line ends and carriage-return progress lines.
    let text = crate::tools::shown::as_shown(text);
    let mut text = cap_tail(text.trim_end(), max_chars);
    if output.truncated.get() == Some(&true) {
        text = format!("[earlier output was dropped by the editor]\n{text}");
    }
    let end = end.or_else(|| output.exit_status.map(exit_end));
    match end {
        Some(end) => outcome(end, text, timeout),
        None => ToolOutput::error(format!(
            "{text}\n[the editor did not say how the command ended]"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn results_read_like_a_local_commands() {
        let t = Duration::from_secs(2);
        let out = |s: &str| Some(json!({"output": s, "truncated": false}));
        let code = |n| Some(CommandEnd::Code(n));
        let ended = |o: ToolOutput, n| o.with_end(CommandEnd::Code(n));
        assert_eq!(
            result(code(0), out("hi\n"), t, 100),
            ended(ToolOutput::ok("hi"), 0)
        );
        assert_eq!(
            result(code(2), out("bad\n"), t, 100),
            ended(ToolOutput::error("bad\n[exit code 2]"), 2)
        );
        assert_eq!(
            result(Some(CommandEnd::TimedOut), out(""), t, 100),
            ToolOutput::error("[command timed out after 2s]").with_end(CommandEnd::TimedOut)
        );
        let signalled = json!({"output": "x", "truncated": true,
                               "exitStatus": {"exitCode": null, "signal": "SIGKILL"}});
        assert_eq!(
            result(None, Some(signalled), t, 100),
            ToolOutput::error("[earlier output was dropped by the editor]\nx\n[killed by SIGKILL]")
                .with_end(CommandEnd::Signal("SIGKILL".into()))
        );
        assert!(result(None, None, t, 100).is_error);
        // What Toad's pty gives: the model reads it as the terminal showed it.
        assert_eq!(
            result(code(0), out("early\r\n10%\r100%\r\nlate\r\n"), t, 100),
            ended(ToolOutput::ok("early\n100%\nlate"), 0)
        );
    }
}
