//! `oml ask` for real: the binary in a throw-away home, its session owners as real background
//! processes on real sockets, the scripted agent (`oml-fake-agent`) over pipes, and `oml acp`
//! itself against the fake model. Every test stops the owners it started.

mod support;

#[path = "ask/flows.rs"]
mod flows;
#[path = "ask/output.rs"]
mod output;
#[path = "ask/owner.rs"]
mod owner;

use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use support::home::{Home, poll_until};

const FAKE: &str = env!("CARGO_BIN_EXE_oml-fake-agent");

/// A home whose `oml ask --agent '<fake> MODE'` commands share owners, which it stops when
/// dropped.
pub struct Shell {
    pub home: Home,
    pub agent: String,
}

impl Shell {
    pub fn new(mode: &str) -> Shell {
        Shell {
            home: Home::new(),
            agent: format!("{FAKE} {mode}"),
        }
    }

    /// `oml ask --agent AGENT ARGS…`, not started.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = self.home.blocking_command(&["ask", "--agent", &self.agent]);
        cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd
    }

    /// Runs it to the end (a minute at most).
    pub fn run(&self, args: &[&str]) -> Ran {
        let child = self.command(args).spawn().expect("start oml ask");
        finish(child)
    }

    /// `status --json`'s status object.
    pub fn status(&self) -> Value {
        let ran = self.run(&["--json", "status"]);
        let v: Value = serde_json::from_str(&ran.stdout).expect("status is JSON");
        v["status"].clone()
    }

    /// The owner's pid while one runs.
    pub fn owner_pid(&self) -> Option<i32> {
        self.status()["owner_pid"].as_i64().map(|p| p as i32)
    }
}

impl Drop for Shell {
    /// Every owner of this home (found by its sockets) is killed, whatever its agent.
    fn drop(&mut self) {
        use std::io::{BufRead as _, Write as _};
        let sockets = std::fs::read_dir(self.home.runtime.join("oml/ask"))
            .into_iter()
            .flatten();
        for entry in sockets.flatten() {
            let Ok(mut s) = std::os::unix::net::UnixStream::connect(entry.path()) else {
                continue;
            };
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            let _ = s.write_all(b"{\"op\":\"status\"}\n");
            let mut line = String::new();
            let _ = std::io::BufReader::new(s).read_line(&mut line);
            let status: Value = serde_json::from_str(&line).unwrap_or_default();
            if let Some(pid) = status["owner_pid"].as_i64() {
                // SAFETY: kill with a pid this home's owner reported.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
        }
    }
}

/// What one `oml ask` did.
#[derive(Debug)]
pub struct Ran {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Waits for `child` (a minute at most) and collects what it wrote.
pub fn finish(child: Child) -> Ran {
    let pid = child.id() as i32;
    let waiter = std::thread::spawn(move || child.wait_with_output());
    let deadline = std::time::Instant::now() + support::home::DEADLINE;
    while !waiter.is_finished() {
        assert!(std::time::Instant::now() < deadline, "oml ask {pid} hangs");
        std::thread::sleep(Duration::from_millis(10));
    }
    let out: Output = waiter.join().expect("waiter").expect("wait");
    Ran {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Whether process `pid` is gone (or a zombie).
pub fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => true,
    }
}

/// Polls `status` until `state`.
pub fn wait_for_state(shell: &Shell, state: &str) -> Value {
    let mut last = Value::Null;
    let reached = poll_until(Duration::from_secs(20), || {
        last = shell.status();
        last["state"] == state
    });
    assert!(reached, "the owner never became {state}: {last}");
    last
}
