//! A `command` hook: `bash -c COMMAND` in the session's directory, in a process group of its
//! own, the event's JSON on stdin, stdout and stderr read apart (each kept to
//! [`MAX_HOOK_OUTPUT_BYTES`]), killed with its group at its timeout or on cancel.

use std::path::Path;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use super::{End, HookRun, MAX_HOOK_OUTPUT_BYTES, text_of};
use crate::cancel::CancelToken;
use crate::sandbox::Prepared;

/// After the hook's shell exits, how long to keep reading what processes it left behind write.
pub const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(200);

/// One command hook to run.
pub struct CommandHook<'a> {
    pub command: &'a str,
    pub cwd: &'a Path,
    /// Variables set for it (`CLAUDE_PROJECT_DIR`, …), after the secrets are removed.
    pub env: Vec<(String, String)>,
    pub stdin: Vec<u8>,
    pub timeout: Duration,
}

/// Run `hook` with `environment` (an unconfined [`Prepared`] whose secrets are scrubbed); never
/// fails: a hook that cannot start ends [`End::Failed`].
pub async fn run(hook: CommandHook<'_>, environment: Prepared, cancel: &CancelToken) -> HookRun {
    let started = Instant::now();
    let mut cmd = std::process::Command::new("bash");
    cmd.arg("-c").arg(hook.command).current_dir(hook.cwd);
    if let Err(e) = environment.confine(&mut cmd) {
        return failed(started, e.to_string());
    }
    cmd.envs(hook.env)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut cmd = tokio::process::Command::from(cmd);
    cmd.kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => return failed(started, format!("cannot start bash: {e}")),
    };
    let group = child.id().and_then(|p| i32::try_from(p).ok());
    let (mut out, mut err) = (
        Pipe::new(child.stdout.take()),
        Pipe::new(child.stderr.take()),
    );
    let stdin = child.stdin.take();
    let input = hook.stdin;
    // A hook that never reads its stdin must not hold the write up: it is written alongside.
    let feed = async move {
        if let Some(mut stdin) = stdin {
            let _ = stdin.write_all(&input).await;
        }
    };
    tokio::pin!(feed);
    let mut fed = false;
    let deadline = tokio::time::sleep(hook.timeout);
    tokio::pin!(deadline);
    let end = loop {
        tokio::select! {
            biased;
            () = cancel.cancelled() => break End::Cancelled,
            () = &mut deadline => break End::TimedOut,
            () = &mut feed, if !fed => fed = true,
            status = child.wait() => break match status {
                Ok(s) => End::Exited(exit_code(s)),
                Err(e) => End::Failed(format!("cannot wait for it: {e}")),
            },
            () = out.read(), if !out.eof => {}
            () = err.read(), if !err.eof => {}
        }
    };
    if matches!(end, End::TimedOut | End::Cancelled) {
        kill_group(group);
        let _ = child.wait().await;
    }
    let drain = tokio::time::sleep(DRAIN_AFTER_EXIT);
    tokio::pin!(drain);
    while !(out.eof && err.eof) {
        tokio::select! {
            () = &mut drain => break,
            () = out.read(), if !out.eof => {}
            () = err.read(), if !err.eof => {}
        }
    }
    HookRun {
        end,
        stdout: text_of(&out.bytes),
        stderr: text_of(&err.bytes),
        duration: started.elapsed(),
    }
}

fn failed(started: Instant, why: String) -> HookRun {
    HookRun {
        end: End::Failed(why),
        stdout: String::new(),
        stderr: String::new(),
        duration: started.elapsed(),
    }
}

/// The exit code, or 128 + the signal that killed it.
fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt as _;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(-1)
}

/// SIGKILL the hook's process group (`confine`'s `setsid` made the shell its leader).
fn kill_group(group: Option<i32>) {
    if let Some(pid) = group.and_then(rustix::process::Pid::from_raw) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

/// One of the hook's output pipes, read a chunk at a time (cancel-safe) into a bounded buffer.
struct Pipe<R> {
    pipe: Option<R>,
    bytes: Vec<u8>,
    eof: bool,
}

impl<R: AsyncRead + Unpin> Pipe<R> {
    fn new(pipe: Option<R>) -> Self {
        let eof = pipe.is_none();
        Pipe {
            pipe,
            bytes: Vec::new(),
            eof,
        }
    }

    async fn read(&mut self) {
        let Some(pipe) = self.pipe.as_mut() else {
            self.eof = true;
            return;
        };
        let mut chunk = [0u8; 8192];
        match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => self.eof = true,
            Ok(n) => {
                // Past the cap the rest is read and dropped, so the hook never blocks on a
                // full pipe.
                let room = MAX_HOOK_OUTPUT_BYTES.saturating_sub(self.bytes.len());
                self.bytes.extend_from_slice(&chunk[..n.min(room)]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook<'a>(command: &'a str, dir: &'a Path, timeout: Duration) -> CommandHook<'a> {
        CommandHook {
            command,
            cwd: dir,
            env: vec![("HOOK_VAR".into(), "set".into())],
            stdin: br#"{"tool_name": "Bash"}"#.to_vec(),
            timeout,
        }
    }

    #[tokio::test]
    async fn stdin_stdout_stderr_and_status_are_apart_and_a_hang_is_killed_at_its_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let cancel = CancelToken::new();
        let run_it = |h| run(h, Prepared::unconfined(), &cancel);
        let done = run_it(hook(
            "cat; echo \" $HOOK_VAR\"; echo no >&2; exit 2",
            dir.path(),
            Duration::from_secs(20),
        ))
        .await;
        assert_eq!(done.end, End::Exited(2));
        assert_eq!(done.stdout, "{\"tool_name\": \"Bash\"} set\n");
        assert_eq!(done.stderr, "no\n");
        // It leaves a child behind that would outlive it: the group goes at the timeout.
        let hang = run_it(hook(
            "sleep 30 & sleep 30",
            dir.path(),
            Duration::from_millis(300),
        ))
        .await;
        assert_eq!(hang.end, End::TimedOut);
        assert!(
            hang.duration < Duration::from_secs(10),
            "{:?}",
            hang.duration
        );
    }
}
