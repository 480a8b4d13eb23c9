//! `client.connect`'s `:terminal`: oml's client serves the agent's `terminal/*` (create, output,
//! wait_for_exit, kill, release), so that a sub-agent without a shell of its own runs commands,
//! and every one of them runs where the program allows, confined as oml's own commands are.
//!
//! A command's folder (`cwd`, default the session's) must be inside the session's folders,
//! compared as real paths. The program's function (when `:terminal` is one) is asked with
//! `{:command :args :env :cwd :session-id}`: nil or true runs it, false or a string refuses. The
//! command then runs in oml's sandbox (`bind::sandbox::roots_policy`: exactly the session's
//! folders writable, never their enclosing project, their `.git` and `.oml` read-only, and
//! confined even when `sandbox.mode` is off), with the secrets scrubbed from
//! its environment, in a process group of its own, its output kept up to `outputByteLimit` (the
//! end of it, at most [`MAX_OUTPUT_BYTES`]), at most [`MAX_TERMINALS`] at once. A terminal the
//! agent never releases is killed when the connection closes (`client.close`, or the program
//! letting go of it).

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mlua::{Function, LuaSerdeExt as _, Value};
use parking_lot::Mutex;
use serde_json::Value as Json;
use tokio::io::AsyncReadExt;
use tokio::sync::watch;

use crate::acp::NameValue;
use crate::acp::served::{self, CreateTerminalParams, ExitStatus, SessionHead, TerminalParams};
use crate::acp_client::{FsCall, FsHandler};
use crate::lisp::Lisp;
use crate::sandbox::{Launch, Launched};

/// The output kept when the agent names no `outputByteLimit`.
pub const DEFAULT_OUTPUT_BYTES: usize = 1024 * 1024;
/// The most output kept, whatever `outputByteLimit` the agent names.
pub const MAX_OUTPUT_BYTES: usize = 16 * 1024 * 1024;
/// The most terminals an agent has at once on one connection.
pub const MAX_TERMINALS: usize = 32;
/// What the client's close asks the handler: release every terminal.
use crate::acp_client::RELEASE_TERMINALS as RELEASE_ALL;

/// How a command ended: `exitCode` and `signal` as ACP has them.
type Exit = Option<ExitStatus>;

/// One terminal: its output, its end, and its process group.
struct Term {
    output: Arc<Mutex<(Vec<u8>, bool)>>,
    exit: watch::Receiver<Exit>,
    group: Option<u32>,
}

impl Term {
    fn kill(&self) {
        if let Some(pid) = self
            .group
            .and_then(|g| rustix::process::Pid::from_raw(g as i32))
        {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

/// A connection's terminals; dropping it kills those still running.
#[derive(Default)]
struct Terms {
    all: Mutex<HashMap<String, Term>>,
    next: std::sync::atomic::AtomicU64,
    /// Terminals being started: they count against [`MAX_TERMINALS`] already.
    starting: std::sync::atomic::AtomicUsize,
    /// The connection closed (release-all): a terminal started after is killed at once.
    closed: std::sync::atomic::AtomicBool,
}

impl Drop for Terms {
    fn drop(&mut self) {
        for term in self.all.lock().values() {
            if term.exit.borrow().is_none() {
                term.kill();
            }
        }
    }
}

/// The handler for `:terminal` (`true`, or a function).
pub(super) fn terminal_handler(lisp: &Lisp, decide: Option<Function>) -> mlua::Result<FsHandler> {
    let key = match decide {
        Some(f) => Some(Arc::new(lisp.lua().create_registry_value(f)?)),
        None => None,
    };
    let (lisp, terms) = (lisp.clone(), Arc::new(Terms::default()));
    Ok(Arc::new(move |call: FsCall| {
        let (lisp, key, terms) = (lisp.clone(), key.clone(), Arc::clone(&terms));
        Box::pin(async move {
            let id = TerminalParams::terminal_id(&call.params);
            match (call.method.as_str(), id) {
                (RELEASE_ALL, _) => {
                    terms
                        .closed
                        .store(true, std::sync::atomic::Ordering::SeqCst);
                    for (_, term) in terms.all.lock().drain() {
                        if term.exit.borrow().is_none() {
                            term.kill();
                        }
                    }
                    Ok(Json::Null)
                }
                ("terminal/create", _) => create(&lisp, key.as_deref(), &terms, &call)
                    .await
                    .map_err(|e| e.to_string()),
                (method, Some(id)) => use_term(&terms, method, &id)
                    .await
                    .map_err(|e| e.to_string()),
                (method, None) => Err(TermRefused::NoId(method.to_owned()).to_string()),
            }
        })
    }))
}

/// Why a `terminal/*` call of the agent's is not served; its text is the error the agent
/// reads.
#[derive(Debug, thiserror::Error)]
enum TermRefused {
    #[error("{0} needs a terminalId")]
    NoId(String),
    #[error("no terminal {0}")]
    NoTerminal(String),
    /// The terminal's exit can no longer be told (its watcher is gone).
    #[error(transparent)]
    ExitLost(tokio::sync::watch::error::RecvError),
    #[error("terminal/create needs a command")]
    NoCommand,
    #[error("at most {MAX_TERMINALS} terminals at once: release one first")]
    TooMany,
    #[error("the connection is closing")]
    Closing,
    #[error("no session folder to run in")]
    NoFolder,
    #[error("the cwd must be absolute: {}", .0.display())]
    NotAbsolute(PathBuf),
    #[error(transparent)]
    Unresolvable(crate::tools::ToolError),
    #[error("{} is outside the session's folders", .0.display())]
    Outside(PathBuf),
    #[error(transparent)]
    Lua(mlua::Error),
    #[error("the terminal handler failed: {0}")]
    HandlerFailed(crate::lisp::LispError),
    /// The program refused, with its reason (or "refused by the client").
    #[error("{0}")]
    Refused(String),
    /// A sandbox setting could not be read.
    #[error(transparent)]
    Setting(crate::lisp::LispError),
    #[error("the sandbox is not available here: {0}")]
    NoSandbox(String),
    #[error(transparent)]
    Pipe(std::io::Error),
    #[error(transparent)]
    Launch(crate::sandbox::LaunchError),
}

/// `terminal/output`, `wait_for_exit`, `kill` and `release` of terminal `id`.
async fn use_term(terms: &Terms, method: &str, id: &str) -> Result<Json, TermRefused> {
    let (output, mut exit) = {
        let all = terms.all.lock();
        let term = all
            .get(id)
            .ok_or_else(|| TermRefused::NoTerminal(id.to_owned()))?;
        (Arc::clone(&term.output), term.exit.clone())
    };
    match method {
        "terminal/output" => {
            let (bytes, truncated) = &*output.lock();
            let text = String::from_utf8_lossy(bytes).into_owned();
            Ok(served::output_answer(
                text,
                *truncated,
                exit.borrow().as_ref(),
            ))
        }
        "terminal/wait_for_exit" => {
            let end = exit
                .wait_for(Option::is_some)
                .await
                .map_err(TermRefused::ExitLost)?;
            Ok(end.as_ref().map_or(Json::Null, ExitStatus::to_value))
        }
        "terminal/kill" => {
            // Only a running group: a group id is reused once its processes are gone.
            if let Some(term) = terms.all.lock().get(id)
                && term.exit.borrow().is_none()
            {
                term.kill();
            }
            Ok(crate::acp::rpc::empty_result())
        }
        _ => {
            if let Some(term) = terms.all.lock().remove(id)
                && term.exit.borrow().is_none()
            {
                term.kill();
            }
            Ok(crate::acp::rpc::empty_result())
        }
    }
}

/// `terminal/create`: checked, asked, started in the sandbox.
async fn create(
    lisp: &Lisp,
    key: Option<&mlua::RegistryKey>,
    terms: &Terms,
    call: &FsCall,
) -> Result<Json, TermRefused> {
    let p = CreateTerminalParams::read(&call.params);
    let command = p.command.get().ok_or(TermRefused::NoCommand)?;
    let cwd = checked_cwd(p.cwd.get().map(String::as_str), &call.roots)?;
    if let Some(key) = key {
        ask(lisp, key, call, &p, &cwd).await?;
    }
    let (program, args) = with_env(command, p.args(), p.env());
    let limit = (p.output_byte_limit.get()).map_or(DEFAULT_OUTPUT_BYTES, |n| {
        (*n).min(MAX_OUTPUT_BYTES as u64) as usize
    });
    use std::sync::atomic::Ordering::SeqCst;
    {
        let all = terms.all.lock();
        if all.len() + terms.starting.load(SeqCst) >= MAX_TERMINALS {
            return Err(TermRefused::TooMany);
        }
        terms.starting.fetch_add(1, SeqCst);
    }
    let starting = Starting(&terms.starting);
    let launched = start(lisp, &call.roots, &cwd, program, args).await;
    drop(starting);
    let term = launched?.collect(limit);
    if terms.closed.load(SeqCst) {
        term.kill();
        return Err(TermRefused::Closing);
    }
    let id = format!(
        "term-{}",
        terms
            .next
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1
    );
    terms.all.lock().insert(id.clone(), term);
    Ok(served::create_terminal_answer(id))
}

/// One terminal being started, counted in [`Terms::starting`] until it is (or is given up).
struct Starting<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for Starting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The command's folder: `given` (absolute) or the session's first folder, real, inside one of
/// the session's folders.
fn checked_cwd(given: Option<&str>, roots: &[PathBuf]) -> Result<PathBuf, TermRefused> {
    let dir = match given {
        Some(d) => PathBuf::from(d),
        None => roots.first().cloned().ok_or(TermRefused::NoFolder)?,
    };
    if !dir.is_absolute() {
        return Err(TermRefused::NotAbsolute(dir));
    }
    let real = crate::tools::path::real_path(&dir).map_err(TermRefused::Unresolvable)?;
    let inside = roots
        .iter()
        .any(|r| crate::tools::path::real_path(r).is_ok_and(|r| real.starts_with(&r)));
    if inside {
        Ok(real)
    } else {
        Err(TermRefused::Outside(dir))
    }
}

/// What the program's function is asked with.
#[derive(serde::Serialize)]
struct Shown<'a> {
    command: Option<&'a String>,
    args: Vec<String>,
    env: Vec<NameValue>,
    cwd: &'a Path,
    #[serde(rename = "session-id")]
    session_id: Option<String>,
}

/// Asks the program's function; a refusal is the error.
async fn ask(
    lisp: &Lisp,
    key: &mlua::RegistryKey,
    call: &FsCall,
    params: &CreateTerminalParams,
    cwd: &Path,
) -> Result<(), TermRefused> {
    let lua = lisp.lua();
    let (f, arg) = (|| -> mlua::Result<(Function, Value)> {
        let shown = Shown {
            command: params.command.get(),
            args: params.args(),
            env: params.env(),
            cwd,
            session_id: SessionHead::session_id(&call.params),
        };
        Ok((lua.registry_value(key)?, lua.to_value(&shown)?))
    })()
    .map_err(TermRefused::Lua)?;
    let answer: Value = lisp
        .run(f, arg, &call.cancel)
        .await
        .map_err(TermRefused::HandlerFailed)?;
    match answer {
        Value::Nil | Value::Boolean(true) => Ok(()),
        Value::String(s) => Err(TermRefused::Refused(s.to_string_lossy())),
        _ => Err(TermRefused::Refused("refused by the client".into())),
    }
}

/// The program and its arguments, through `env NAME=VALUE …` when the agent gave variables.
fn with_env(command: &str, args: Vec<String>, env: Vec<NameValue>) -> (String, Vec<String>) {
    let vars: Vec<String> = env
        .into_iter()
        .filter(|v| is_name(v.name.split('=').next().unwrap_or_default()))
        .map(|v| format!("{}={}", v.name, v.value))
        .collect();
    if vars.is_empty() {
        return (command.to_owned(), args);
    }
    let mut all = vars;
    all.push(command.to_owned());
    all.extend(args);
    ("env".to_owned(), all)
}

/// A variable name `env` takes as one (not an option of its own, like `-S`).
fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Start the command in oml's sandbox, the session's folders its workspace.
async fn start(
    lisp: &Lisp,
    roots: &[PathBuf],
    cwd: &Path,
    program: String,
    args: Vec<String>,
) -> Result<Started, TermRefused> {
    let roots: Vec<PathBuf> = roots
        .iter()
        .filter_map(|r| crate::tools::path::real_path(r).ok())
        .collect();
    let policy = crate::bind::sandbox::roots_policy(lisp, &roots).map_err(TermRefused::Setting)?;
    let secrets = crate::bind::sandbox::secrets(lisp).map_err(TermRefused::Setting)?;
    let prepared = crate::sandbox::prepare(&policy);
    if let crate::sandbox::Status::Unavailable(reason) = prepared.status() {
        return Err(TermRefused::NoSandbox(reason.clone()));
    }
    let (reader, writer) = std::io::pipe().map_err(TermRefused::Pipe)?;
    let launch = Launch {
        program: program.into(),
        args: args.into_iter().map(Into::into).collect(),
        cwd: cwd.to_path_buf(),
        stdout: OwnedFd::from(writer.try_clone().map_err(TermRefused::Pipe)?),
        stderr: OwnedFd::from(writer),
    };
    let child = prepared
        .scrub_env(&secrets)
        .launch(launch)
        .await
        .map_err(TermRefused::Launch)?;
    Ok(Started { child, reader })
}

struct Started {
    child: Launched,
    reader: std::io::PipeReader,
}

impl Started {
    /// Keep the last `limit` bytes of the output and note the end, in a task of their own.
    fn collect(self, limit: usize) -> Term {
        let Started { mut child, reader } = self;
        let group = child.id();
        let output = Arc::new(Mutex::new((Vec::new(), false)));
        let (exit_tx, exit) = watch::channel(None);
        let kept = Arc::clone(&output);
        tokio::spawn(async move {
            if let Ok(mut pipe) =
                tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(reader))
            {
                let mut chunk = vec![0u8; 8192];
                while let Ok(n) = pipe.read(&mut chunk).await {
                    if n == 0 {
                        break;
                    }
                    keep(&kept, &chunk[..n], limit);
                }
            }
            let status = child.wait().await.ok();
            let end = status.map(|s| {
                use std::os::unix::process::ExitStatusExt;
                ExitStatus {
                    exit_code: s.code(),
                    signal: Some(s.signal().map(signal_name)),
                }
            });
            let _ = exit_tx.send(Some(end.unwrap_or_else(ExitStatus::unknown)));
        });
        Term {
            output,
            exit,
            group,
        }
    }
}

/// Append `bytes`, keeping the last `limit` (cut at a character's start).
fn keep(output: &Mutex<(Vec<u8>, bool)>, bytes: &[u8], limit: usize) {
    let (buf, truncated) = &mut *output.lock();
    buf.extend_from_slice(bytes);
    if buf.len() > limit {
        let mut cut = buf.len() - limit;
        while cut < buf.len() && (buf[cut] & 0xC0) == 0x80 {
            cut += 1;
        }
        buf.drain(..cut);
        *truncated = true;
    }
}

fn signal_name(n: i32) -> String {
    match n {
        libc::SIGKILL => "SIGKILL".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGINT => "SIGINT".into(),
        other => format!("SIG{other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The variables of a `terminal/create` whose `env` is `env`.
    fn vars(env: Json) -> Vec<NameValue> {
        CreateTerminalParams::read(&json!({ "env": env })).env()
    }

    #[test]
    fn output_keeps_its_end_within_the_limit() {
        let out = Mutex::new((Vec::new(), false));
        keep(&out, b"hello ", 8);
        keep(&out, "wörld".as_bytes(), 8);
        let (buf, truncated) = &*out.lock();
        assert_eq!(String::from_utf8_lossy(buf), "o wörld");
        assert!(*truncated);
        assert_eq!(
            with_env("ls", vec!["-a".into()], Vec::new()),
            ("ls".into(), vec!["-a".into()])
        );
        let env = json!([{"name": "A", "value": "1"}]);
        assert_eq!(
            with_env("ls", vec![], vars(env)).1,
            vec!["A=1".to_owned(), "ls".to_owned()]
        );
        let sneaky = json!([{"name": "-S", "value": "sh -c id"}]);
        assert_eq!(with_env("ls", vec![], vars(sneaky)), ("ls".into(), vec![]));
    }
}
