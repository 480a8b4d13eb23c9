//! The pieces every part of the headline benchmark uses: a throw-away home (XDG folders and a
//! git-initialised project) for one binary, the scripted ACP client that drives `oml acp` over
//! pipes, and the readings of `/proc` (resident sizes, CPU time).
//!
//! It knows the ACP wire format and the `/proc` files, not what any part measures.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::fake_model::FakeModel;

/// The longest the client waits for one line from the agent before it gives up (a hang).
pub const LINE_WAIT: Duration = Duration::from_secs(120);
/// How long a closed agent may take to exit before it is killed.
const EXIT_WAIT: Duration = Duration::from_secs(30);
/// The ticks per second in which `/proc` counts CPU time: 100 by Linux's ABI.
const USER_HZ: f64 = 100.0;

/// The answer that allows one tool call once, so that every turn asks again.
pub fn allow_once() -> Value {
    json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}})
}

/// A fresh home for one binary: XDG folders, `HOME`, and a project that is a git repository with
/// one commit (the working directory of every session and command).
pub struct Home {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub project: PathBuf,
}

impl Home {
    pub fn new() -> Home {
        let dir = tempfile::Builder::new()
            .prefix("oml-bench")
            .tempdir_in("/tmp")
            .expect("a temp dir");
        let root = std::fs::canonicalize(dir.path()).expect("canonical temp dir");
        for d in ["config/oml", "state", "cache", "runtime", "home", "project"] {
            std::fs::create_dir_all(root.join(d)).expect("mkdir");
        }
        // `OML_BENCH_INIT`: an init file for every agent of the run, to measure a setting's
        // effect (wrap what a baseline lacks in `pcall`).
        if let Ok(init) = std::env::var("OML_BENCH_INIT") {
            std::fs::write(root.join("config/oml/init.fnl"), init).expect("write init");
        }
        let project = root.join("project");
        std::fs::write(project.join("README.md"), "A project to benchmark in.\n").expect("write");
        for args in [
            &["init", "-q"][..],
            &["add", "."],
            &["commit", "-qm", "start"],
        ] {
            let ok = Command::new("git")
                .args(args)
                .current_dir(&project)
                .env("GIT_AUTHOR_NAME", "b")
                .env("GIT_AUTHOR_EMAIL", "b@example.com")
                .env("GIT_COMMITTER_NAME", "b")
                .env("GIT_COMMITTER_EMAIL", "b@example.com")
                .output()
                .expect("git")
                .status
                .success();
            assert!(ok, "git {args:?}");
        }
        Home {
            _dir: dir,
            root,
            project,
        }
    }

    /// `BIN ARGS…` in the project with only this home's environment (and `PATH`), pointed at
    /// `fake` when given; stdin, stdout and stderr are the caller's to set.
    pub fn command(&self, bin: &Path, args: &[&str], fake: Option<&FakeModel>) -> Command {
        let mut cmd = Command::new(bin);
        cmd.args(args)
            .current_dir(&self.project)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.root.join("home"))
            .env("XDG_CONFIG_HOME", self.root.join("config"))
            .env("XDG_STATE_HOME", self.root.join("state"))
            .env("XDG_CACHE_HOME", self.root.join("cache"))
            .env("XDG_RUNTIME_DIR", self.root.join("runtime"));
        if let Some(fake) = fake {
            cmd.env("OPENAI_BASE_URL", fake.base_url())
                .env("OPENAI_MODEL", "fake/model")
                .env("OPENAI_API_KEY", "k");
        }
        cmd
    }
}

/// `oml acp` over pipes: lines in, lines out (read on a thread of their own, so the agent never
/// blocks on a full pipe).
pub struct Agent {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    next: u64,
}

impl Agent {
    /// `BIN acp` in `home`, pointed at `fake` when given.
    pub fn spawn(home: &Home, bin: &Path, fake: Option<&FakeModel>) -> Agent {
        Agent::over(home.command(bin, &["acp"], fake))
    }

    /// Any ACP agent's `command`, over pipes.
    pub fn over(mut command: Command) -> Agent {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the agent");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Agent {
            stdin: child.stdin.take(),
            child,
            lines: rx,
            next: 0,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        writeln!(stdin, "{message}").expect("write to the agent");
        stdin.flush().expect("flush");
    }

    /// The id of the next request.
    pub fn next_id(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// Send a request; its id.
    pub fn request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id();
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// Answer the agent's request `id`.
    pub fn answer(&mut self, id: &Value, result: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    /// The next line the agent writes.
    pub fn line(&mut self) -> String {
        self.lines
            .recv_timeout(LINE_WAIT)
            .expect("a line from the agent in time")
    }

    /// Read up to the response to `id`, answering permission questions with `allow_once`;
    /// returns the response. Updates are only recognised, not parsed, as a client that shows
    /// them would not parse them twice.
    pub fn until_response(&mut self, id: u64) -> Value {
        loop {
            let line = self.line();
            if is_update(&line) {
                continue;
            }
            let v: Value = serde_json::from_str(&line).expect("a JSON line");
            if v["method"] == "session/request_permission" {
                self.answer(&v["id"], allow_once());
            } else if v["id"] == json!(id) && v.get("method").is_none() {
                return v;
            }
        }
    }

    pub fn initialize(&mut self) {
        let id = self.request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        );
        self.until_response(id);
    }

    /// `session/new` in `cwd`; the session id.
    pub fn new_session(&mut self, cwd: &Path) -> String {
        let id = self.request(
            "session/new",
            json!({"cwd": cwd.display().to_string(), "mcpServers": []}),
        );
        let r = self.until_response(id);
        r["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session id in {r}"))
            .to_owned()
    }

    /// Send a one-text prompt to `sid`; the request's id.
    pub fn prompt(&mut self, sid: &str, text: &str) -> u64 {
        self.request(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": text}]}),
        )
    }
}

impl Drop for Agent {
    /// Closes stdin, which ends `oml acp`; kills it only if it has not exited in time.
    fn drop(&mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + EXIT_WAIT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `line` is a `session/update` notification.
pub fn is_update(line: &str) -> bool {
    line.contains(r#""method":"session/update""#)
}

/// A field of `/proc/PID/status` in bytes (`VmRSS`, `VmHWM`); zero where it cannot be read.
pub fn status_bytes(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    kib * 1024.0
}

/// The user plus system CPU time the process `pid` has used so far (all its threads), from
/// `/proc/PID/stat`, good to 10 ms; zero where it cannot be read.
pub fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i)?.parse::<u64>().ok())
        .sum();
    Duration::from_secs_f64(ticks as f64 / USER_HZ)
}
