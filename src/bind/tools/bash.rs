//! The commands' host functions: `oml.tool-bash`, behind the `bash` tool, and
//! `oml.run-process`, a program run without a shell for user tools. Both run in the sandbox
//! `crate::bind::sandbox` prepares from the `sandbox.*` settings for the session's scope
//! ([`super::scope_in`]), without secrets in their environment, in the session's directory,
//! and stop with the session's prompt.
//!
//! How a command is run and confined is `crate::tools::bash`'s and `crate::sandbox`'s; whether
//! it may run, the agent's.

use std::time::Duration;

use super::output::output_reporter;
use super::{descriptors, output_table, scope_in};
use crate::bind::rt;
use crate::bind::session::{cwd, session_cancel};
use crate::lisp::{HostFn, create_async_function};
use crate::tools::{self, ToolOutput};

pub(super) const COMMANDS: &[HostFn] = &[
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
                        let Some(_room) = descriptors::room(&cancel).await else {
                            let why = "[cancelled] before the command started";
                            return output_table(&lua, ToolOutput::error(why));
                        };
                        let scope = scope_in(&lua, cwd.clone());
                        let sandbox = match crate::bind::sandbox::prepare(&lua, &scope) {
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
                let sandbox = crate::bind::sandbox::prepare(&lua, &scope_in(&lua, cwd.clone()));
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
