//! Commands in the background: `oml.bash-start` runs a command exactly as the bash tool does
//! (the session's sandbox and directory, no secrets in its environment) but returns at once
//! with a job; what it writes is kept (its last [`JOB_TAIL_BYTES`]) for `oml.bash-job`, and
//! `oml.bash-job-stop` ends it. A job does not stop with the prompt that started it (a dev
//! server outlives the turn); it stops when told, at its timeout, or when oml ends (its process
//! group goes with oml, as every command's does).
//!
//! What a job is for (the `bash` tool's `background` argument, `task_output`, `/tasks`) is
//! Lisp's; this module keeps processes and their output.

use std::sync::Arc;
use std::time::Duration;

use mlua::{Lua, Table, UserData, UserDataRef};
use parking_lot::Mutex;
use tokio::sync::watch;

use super::{descriptors, output_table, scope_in};
use crate::bind::session::cwd;
use crate::cancel::CancelToken;
use crate::lisp::{HostFn, create_async_function};
use crate::tools::{self, ToolOutput};

/// Bytes of a background command's output kept for `oml.bash-job`: its tail.
pub const JOB_TAIL_BYTES: usize = 64 * 1024;

/// One command running (or run) in the background.
#[derive(Clone)]
struct Job {
    tail: Arc<Mutex<Vec<u8>>>,
    /// `None` while it runs, then how it ended.
    done: watch::Receiver<Option<ToolOutput>>,
    stop: CancelToken,
}

impl UserData for Job {}

pub(super) const BACKGROUND: &[HostFn] = &[
    HostFn {
        name: "bash-start",
        args: "command timeout max-chars",
        doc: "Start COMMAND as the bash tool runs it (the session's directory and sandbox, no \
              secrets in its environment), in the background: returns a job at once for \
              `oml.bash-job`, `oml.bash-job-wait` and `oml.bash-job-stop`. It does not stop with \
              the prompt; it is killed after TIMEOUT seconds, when stopped, or when oml ends. \
              Its result keeps the last MAX-CHARS characters of output.",
        make: |lua| lua.create_function(start),
    },
    HostFn {
        name: "bash-job",
        args: "job",
        doc: "What the background JOB has written so far (its last JOB_TAIL_BYTES), and how it \
              ended: {:output :result}, :result nil while it runs, else the bash tool's \
              {:content :error? :exit}.",
        make: |lua| lua.create_function(|lua, job: UserDataRef<Job>| state(lua, &job)),
    },
    HostFn {
        name: "bash-job-wait",
        args: "job ?seconds",
        doc: "`oml.bash-job` once the background JOB has ended, or after ?SECONDS (default: \
              until it ends).",
        make: |lua| {
            create_async_function(
                lua,
                |lua, (job, seconds): (UserDataRef<Job>, Option<f64>)| {
                    let job = job.clone();
                    async move {
                        let mut done = job.done.clone();
                        let ended = done.wait_for(Option::is_some);
                        match seconds {
                            None => drop(ended.await),
                            Some(s) => {
                                let wait = Duration::try_from_secs_f64(s.max(0.0))
                                    .unwrap_or(Duration::ZERO);
                                drop(tokio::time::timeout(wait, ended).await);
                            }
                        }
                        state(&lua, &job)
                    }
                },
            )
        },
    },
    HostFn {
        name: "bash-job-stop",
        args: "job",
        doc: "Stop the background JOB (its process group is killed); returns nil.",
        make: |lua| {
            lua.create_function(|_, job: UserDataRef<Job>| {
                job.stop.cancel();
                Ok(())
            })
        },
    },
];

/// `oml.bash-start`.
fn start(lua: &Lua, (command, timeout, max_chars): (String, f64, usize)) -> mlua::Result<Job> {
    let cwd = cwd(lua);
    let scope = scope_in(lua, cwd.clone());
    let sandbox = crate::bind::sandbox::prepare(lua, &scope);
    let (tx, done) = watch::channel(None);
    let job = Job {
        tail: Arc::default(),
        done,
        stop: CancelToken::new(),
    };
    let (tail, stop) = (job.tail.clone(), job.stop.clone());
    tokio::spawn(async move {
        let out = match sandbox {
            Err(why) => ToolOutput::error(why),
            Ok(sandbox) => match descriptors::room(&stop).await {
                None => ToolOutput::error("[cancelled] before the command started"),
                Some(_room) => {
                    let keep = |bytes: &[u8]| {
                        let mut t = tail.lock();
                        t.extend_from_slice(bytes);
                        let over = t.len().saturating_sub(JOB_TAIL_BYTES);
                        t.drain(..over);
                    };
                    let timeout = Duration::from_secs_f64(timeout.clamp(0.0, 1e9));
                    tools::bash_with_progress(
                        &command,
                        &cwd,
                        timeout,
                        max_chars,
                        &stop,
                        Some(&keep),
                        sandbox,
                    )
                    .await
                }
            },
        };
        let _ = tx.send(Some(out));
    });
    Ok(job)
}

/// `{:output :result}` of `job` now.
fn state(lua: &Lua, job: &Job) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let tail = job.tail.lock().clone();
    t.set("output", lua.create_string(&tail)?)?;
    if let Some(out) = job.done.borrow().clone() {
        t.set("result", output_table(lua, out)?)?;
    }
    Ok(t)
}
