//! Helpers shared by the tests that run the real `oml` binary: a throw-away home for it, running
//! it (async with a deadline, blocking with a clean environment, or on a pseudo-terminal), the
//! blocking [`Env`] that points it at the fake model, and a line client for the REPL socket.

#![allow(clippy::print_stdout, clippy::print_stderr)] // test and tool output
#![allow(dead_code)]

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::process::{Child, ChildStdin, Command};

use super::fake_model::FakeModel;
use super::pty::Term;

/// Generous: a debug binary on a loaded 2-core machine. Only a hang ever reaches it.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// A fresh set of XDG directories, a home and a project directory (the working directory of every
/// command), all under one temp dir in `/tmp` so that socket paths stay short.
pub struct Home {
    _root: tempfile::TempDir,
    pub root: PathBuf,
    pub config: PathBuf,
    pub state: PathBuf,
    pub cache: PathBuf,
    pub runtime: PathBuf,
    pub home: PathBuf,
    /// The working directory of the commands; where a project `.oml/` goes.
    pub project: PathBuf,
}

/// What a finished command did.
#[derive(Debug)]
pub struct Outcome {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Home {
    pub fn new() -> Home {
        let dir = tempfile::Builder::new()
            .prefix("oml")
            .tempdir_in("/tmp")
            .expect("temp dir");
        // Canonical, so paths in messages (which oml canonicalises) compare equal.
        let root = std::fs::canonicalize(dir.path()).expect("canonical temp dir");
        let sub = |name: &str| {
            let p = root.join(name);
            std::fs::create_dir_all(&p).expect("create dir");
            p
        };
        Home {
            config: sub("config"),
            state: sub("state"),
            cache: sub("cache"),
            runtime: sub("run"),
            home: sub("home"),
            project: sub("project"),
            root,
            _root: dir,
        }
    }

    /// `$XDG_CONFIG_HOME/oml/init.fnl`.
    pub fn user_init(&self) -> PathBuf {
        self.config.join("oml/init.fnl")
    }

    /// The project's `.oml/init.fnl`.
    pub fn project_init(&self) -> PathBuf {
        self.project.join(".oml/init.fnl")
    }

    /// `$XDG_CACHE_HOME/oml/fennel/`.
    pub fn fennel_cache(&self) -> PathBuf {
        self.cache.join("oml/fennel")
    }

    /// The compiled files in the Fennel cache, sorted.
    pub fn cached_files(&self) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = match std::fs::read_dir(self.fennel_cache()) {
            Ok(rd) => rd
                .map(|e| e.expect("dir entry").path())
                .filter(|p| p.extension().is_some_and(|e| e == "lua"))
                .collect(),
            Err(_) => Vec::new(),
        };
        files.sort();
        files
    }

    /// `oml ARGS…` with this home's environment, run from the project directory.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_oml"));
        cmd.args(args)
            .current_dir(&self.project)
            .env("XDG_CONFIG_HOME", &self.config)
            .env("XDG_STATE_HOME", &self.state)
            .env("XDG_CACHE_HOME", &self.cache)
            .env("XDG_RUNTIME_DIR", &self.runtime)
            .env("HOME", &self.home)
            .env_remove("XDG_DATA_HOME")
            .env_remove("CLAUDE_CONFIG_DIR")
            .env_remove("OML_LOG")
            .env_remove("NO_COLOR")
            .kill_on_drop(true);
        cmd
    }

    /// `oml ARGS…` as a blocking command with only this home's environment (everything else is
    /// cleared but `PATH`), run from the project directory with stdin closed.
    pub fn blocking_command(&self, args: &[&str]) -> std::process::Command {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_oml"));
        cmd.args(args)
            .current_dir(&self.project)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", &self.config)
            .env("XDG_STATE_HOME", &self.state)
            .env("XDG_CACHE_HOME", &self.cache)
            .env("XDG_RUNTIME_DIR", &self.runtime)
            .stdin(Stdio::null());
        cmd
    }

    /// `oml ARGS…` on a new `rows` x `cols` pseudo-terminal ([`Term::spawn`]), with
    /// [`Home::blocking_command`]'s environment: the terminal is its stdin, stdout and stderr.
    pub fn terminal(&self, args: &[&str], rows: u16, cols: u16) -> Term {
        Term::spawn(self.blocking_command(args), rows, cols)
    }

    /// Write the user init file (`$XDG_CONFIG_HOME/oml/init.fnl`).
    pub fn write_user_init(&self, text: &str) {
        write_file(&self.user_init(), text);
    }

    /// Write `name` (a relative path) in the project directory; returns its path.
    pub fn write_project_file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.project.join(name);
        write_file(&path, text);
        path
    }

    /// Run `oml ARGS…` with empty stdin and wait for it.
    pub async fn oml(&self, args: &[&str]) -> Outcome {
        self.oml_with_stdin(args, "").await
    }

    /// Run `oml ARGS…` with `input` on stdin (then end of file) and wait for it.
    pub async fn oml_with_stdin(&self, args: &[&str], input: &str) -> Outcome {
        finish(self.command(args), args, input).await
    }

    /// Run `oml ARGS…` from `dir` instead of the project directory, with empty stdin.
    pub async fn oml_in(&self, dir: &Path, args: &[&str]) -> Outcome {
        let mut cmd = self.command(args);
        cmd.current_dir(dir);
        finish(cmd, args, "").await
    }

    /// `oml eval EXPR`, asserting that it succeeds; returns its stdout without the final newline.
    pub async fn eval(&self, expr: &str) -> String {
        let out = self.oml(&["eval", expr]).await;
        assert_eq!(out.code, 0, "oml eval {expr:?} failed: {out:?}");
        out.stdout
            .strip_suffix('\n')
            .unwrap_or_else(|| panic!("no final newline: {out:?}"))
            .to_string()
    }
}

/// Spawn `cmd` with `input` on stdin, wait for it within the deadline and collect its output.
async fn finish(mut cmd: Command, args: &[&str], input: &str) -> Outcome {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn oml");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.to_string();
    let feed = tokio::spawn(async move {
        // The process may exit before reading everything; that is its business.
        let _ = stdin.write_all(input.as_bytes()).await;
    });
    let out = tokio::time::timeout(DEADLINE, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("oml {args:?} did not finish within {DEADLINE:?}"))
        .expect("wait for oml");
    let _ = feed.await;
    Outcome {
        code: out.status.code().expect("exited, not killed by a signal"),
        stdout: String::from_utf8(out.stdout).expect("utf-8 stdout"),
        stderr: String::from_utf8(out.stderr).expect("utf-8 stderr"),
    }
}

impl Default for Home {
    fn default() -> Self {
        Home::new()
    }
}

/// Write `text` to `path`, creating its parent directories.
pub fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("create parent");
    std::fs::write(path, text).expect("write file");
}

/// `oml repl --listen` running in the background; its stdin is held open until `stop`.
pub struct Server {
    pub child: Child,
    stdin: Option<ChildStdin>,
    pub socket: PathBuf,
}

impl Server {
    /// Start a server; with `socket` it listens there, else at its default place. Waits until
    /// it has printed the socket path (it listens before printing).
    pub async fn start(home: &Home, socket: Option<&Path>) -> Server {
        let mut args = vec!["repl", "--listen"];
        let socket_arg;
        if let Some(s) = socket {
            socket_arg = s.display().to_string();
            args.extend(["--socket", socket_arg.as_str()]);
        }
        let mut child = home
            .command(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn oml repl --listen");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        tokio::time::timeout(DEADLINE, BufReader::new(stdout).read_line(&mut line))
            .await
            .expect("the server prints its socket path in time")
            .expect("read the socket path");
        assert!(
            line.ends_with('\n'),
            "the socket path is one line: {line:?}"
        );
        Server {
            child,
            stdin,
            socket: PathBuf::from(line.trim_end()),
        }
    }

    pub async fn connect(&self) -> Client {
        Client::connect(&self.socket).await
    }

    /// Whether the server process is still running.
    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }

    /// Close the server's stdin and wait for it to exit; returns its status.
    pub async fn stop(mut self) -> i32 {
        drop(self.stdin.take());
        let status = tokio::time::timeout(DEADLINE, self.child.wait())
            .await
            .expect("the server exits once its stdin is closed")
            .expect("wait for the server");
        status.code().expect("exited, not killed by a signal")
    }
}

/// Which prompt the server wrote after its output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prompt {
    /// `>> `: ready for a new form.
    Ready,
    /// `.. `: inside an unfinished form.
    More,
}

/// A line client of the REPL socket, as `socat` would be.
pub struct Client {
    pub stream: UnixStream,
    pending: Vec<u8>,
}

impl Client {
    /// Connect and read the first prompt.
    pub async fn connect(socket: &Path) -> Client {
        let stream = tokio::time::timeout(DEADLINE, UnixStream::connect(socket))
            .await
            .expect("connect in time")
            .unwrap_or_else(|e| panic!("connect to {}: {e}", socket.display()));
        let mut client = Client {
            stream,
            pending: Vec::new(),
        };
        let (greeting, prompt) = client.read_to_prompt().await;
        assert_eq!((greeting.as_str(), prompt), ("", Prompt::Ready));
        client
    }

    /// Send one line (a newline is added).
    pub async fn send(&mut self, line: &str) {
        self.stream
            .write_all(format!("{line}\n").as_bytes())
            .await
            .expect("send a line");
    }

    /// Read until the server's next prompt; returns the text before it and the prompt.
    pub async fn read_to_prompt(&mut self) -> (String, Prompt) {
        tokio::time::timeout(DEADLINE, async {
            loop {
                if let Some(found) = self.take_to_prompt() {
                    return found;
                }
                let mut buf = [0u8; 4096];
                let n = self.stream.read(&mut buf).await.expect("read");
                assert!(
                    n > 0,
                    "the server closed the connection; unanswered: {:?}",
                    String::from_utf8_lossy(&self.pending)
                );
                self.pending.extend_from_slice(&buf[..n]);
            }
        })
        .await
        .unwrap_or_else(|_| {
            panic!(
                "no prompt within {DEADLINE:?}; got {:?}",
                String::from_utf8_lossy(&self.pending)
            )
        })
    }

    /// Read until at least `text` has arrived (it must come before any prompt is complete).
    pub async fn read_until(&mut self, text: &str) {
        tokio::time::timeout(DEADLINE, async {
            while !String::from_utf8_lossy(&self.pending).contains(text) {
                let mut buf = [0u8; 4096];
                let n = self.stream.read(&mut buf).await.expect("read");
                assert!(n > 0, "the server closed the connection before {text:?}");
                self.pending.extend_from_slice(&buf[..n]);
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{text:?} did not arrive within {DEADLINE:?}"));
    }

    /// A prompt at the end of what has arrived: `>> ` or `.. ` alone or after a newline.
    fn take_to_prompt(&mut self) -> Option<(String, Prompt)> {
        for (p, kind) in [(&b">> "[..], Prompt::Ready), (&b".. "[..], Prompt::More)] {
            let at_start = self.pending == p;
            let after_newline = self.pending.ends_with(p)
                && self.pending[..self.pending.len() - 3].ends_with(b"\n");
            if at_start || after_newline {
                let text = String::from_utf8(self.pending[..self.pending.len() - 3].to_vec())
                    .expect("utf-8 from the server");
                self.pending.clear();
                return Some((text, kind));
            }
        }
        None
    }

    /// Send one complete form on one line; returns what the server wrote before the next `>> `.
    pub async fn eval(&mut self, form: &str) -> String {
        self.send(form).await;
        let (text, prompt) = self.read_to_prompt().await;
        assert_eq!(prompt, Prompt::Ready, "{form:?} left the form unfinished");
        text
    }
}

/// How often [`poll_until`] looks again. Only for state with no event to wait on (a file
/// appearing, a count of requests, a process in `/proc`); never as a guess that something is done.
const POLL_INTERVAL: Duration = Duration::from_millis(10);

/// Wait until `ready()` holds, looking again every few milliseconds, for at most `within`;
/// whether it held. The caller asserts with its own message.
pub fn poll_until(within: Duration, mut ready: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if ready() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// [`poll_until`] for async tests: waits with the runtime's timer, so other tasks run meanwhile.
pub async fn poll_until_async(within: Duration, mut ready: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if ready() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Wait until process `pid` has ended (a zombie has), at most `within`; whether it has. Waits on
/// a pidfd (Linux 5.3), so it wakes the moment the process ends; a pid that is gone has ended.
pub fn await_exit(pid: i32, within: Duration) -> bool {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        let error = std::io::Error::last_os_error();
        assert_eq!(
            error.raw_os_error(),
            Some(libc::ESRCH),
            "pidfd_open({pid}): {error}"
        );
        return true;
    }
    // SAFETY: the descriptor is new and ours alone.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut poll = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: one valid pollfd.
        match unsafe { libc::poll(&mut poll, 1, ms) } {
            0 => return false,
            n if n > 0 => return true,
            _ => {
                let error = std::io::Error::last_os_error();
                assert_eq!(
                    error.kind(),
                    std::io::ErrorKind::Interrupted,
                    "poll: {error}"
                );
            }
        }
    }
}

/// Wait for `child` to exit, at most `within`; its status, or `None` if it still runs then.
pub fn wait_within(child: &mut std::process::Child, within: Duration) -> Option<ExitStatus> {
    if let Some(status) = child.try_wait().expect("try_wait") {
        return Some(status);
    }
    let pid = i32::try_from(child.id()).expect("a pid fits an i32");
    await_exit(pid, within).then(|| child.wait().expect("wait for the child"))
}

/// The variable that lets a test skip under CI when a prerequisite is missing: set it to `1`.
pub const ALLOW_SKIP: &str = "OML_TEST_ALLOW_SKIP";

/// How to get what the Python SDK interop tests need.
pub const INSTALL_PYTHON_SDK: &str = "apt-get install -y python3 python3-venv (or run \
    scripts/setup.sh), and let pip reach PyPI (the test installs agent-client-protocol)";

/// How to get util-linux `script`, the pseudo-terminal of the terminal tests.
pub const INSTALL_SCRIPT: &str =
    "apt-get install -y bsdutils (it has util-linux's script on Debian; or run scripts/setup.sh)";

/// A test cannot run here because `missing` is not available; `install` says how to get it.
///
/// The rule for every such test, so that none passes by skipping where its check matters:
/// - outside CI the test is skipped: this prints `skipped: …` and returns, and the caller
///   returns (`return support::home::skip(…)`);
/// - under CI (`CI` set and not empty, `0` or `false`, as CI services set it) this fails the
///   test with what is missing and how to install it, unless `OML_TEST_ALLOW_SKIP=1`
///   ([`ALLOW_SKIP`]) opts out, on a CI machine that cannot have the prerequisite.
pub fn skip(missing: &str, install: &str) {
    let ci = std::env::var("CI").is_ok_and(|v| !matches!(v.as_str(), "" | "0" | "false"));
    let allowed = std::env::var(ALLOW_SKIP).is_ok_and(|v| v == "1");
    if ci && !allowed {
        panic!(
            "a prerequisite is missing: {missing}\n  to install it: {install}\n  \
             (under CI this fails instead of skipping; set {ALLOW_SKIP}=1 to let it skip)"
        );
    }
    eprintln!("skipped ({missing}); to run it: {install}");
}

/// Whether util-linux `script` runs here.
pub fn script_available() -> bool {
    std::process::Command::new("script")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A throw-away virtualenv in `dir` with the official ACP Python SDK (PyPI
/// `agent-client-protocol`, pinned) installed; returns its `python`. `Err` says why it cannot be
/// had here (no `venv` module, or pip cannot reach the index), for [`skip`] with
/// [`INSTALL_PYTHON_SDK`].
pub fn python_sdk_venv(dir: &Path) -> Result<PathBuf, String> {
    let venv = dir.join("venv");
    let made = std::process::Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .output()
        .map_err(|e| format!("cannot run python3: {e}"))?;
    if !made.status.success() {
        return Err("python3 -m venv is not available".into());
    }
    let pip = std::process::Command::new(venv.join("bin/pip"))
        .args(["install", "-q", "agent-client-protocol==0.12.1"])
        .output()
        .map_err(|e| format!("cannot run pip: {e}"))?;
    if !pip.status.success() {
        return Err(format!(
            "pip could not install agent-client-protocol: {}",
            String::from_utf8_lossy(&pip.stderr)
                .lines()
                .last()
                .unwrap_or("")
        ));
    }
    Ok(venv.join("bin/python"))
}

/// Write `text` to `path`, creating its directory.
pub fn write_file(path: &Path, text: &str) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).expect("create the file's directory");
    }
    std::fs::write(path, text).expect("write the file");
}

/// Point `cmd` at a fake model server at `base_url`, with the model `fake/model` and a test key.
pub fn use_fake_model(cmd: &mut std::process::Command, base_url: &str) {
    cmd.env("OPENAI_BASE_URL", base_url)
        .env("OPENAI_MODEL", "fake/model")
        .env("OPENAI_API_KEY", "test-key");
}

/// A throw-away [`Home`] for blocking runs of the real binary, optionally against a fake model
/// server; `root` and `project` are the home's, at hand.
pub struct Env {
    pub home: Home,
    pub root: PathBuf,
    pub project: PathBuf,
}

impl Env {
    pub fn new() -> Env {
        let home = Home::new();
        Env {
            root: home.root.clone(),
            project: home.project.clone(),
            home,
        }
    }

    /// Write the user init file.
    pub fn init(&self, text: &str) {
        self.home.write_user_init(text);
    }

    /// Write `name` (relative) in the project directory; returns its path.
    pub fn file(&self, name: &str, text: &str) -> PathBuf {
        self.home.write_project_file(name, text)
    }

    /// `oml ARGS…` ([`Home::blocking_command`]), pointed at `fake` when given.
    pub fn command(&self, fake: Option<&FakeModel>, args: &[&str]) -> std::process::Command {
        let mut cmd = self.home.blocking_command(args);
        if let Some(fake) = fake {
            use_fake_model(&mut cmd, &fake.base_url());
        }
        cmd
    }

    /// `oml ARGS…` ([`Env::command`]) on a new `rows` x `cols` pseudo-terminal ([`Term::spawn`]).
    pub fn terminal(&self, fake: Option<&FakeModel>, args: &[&str], rows: u16, cols: u16) -> Term {
        Term::spawn(self.command(fake, args), rows, cols)
    }

    /// Run `oml ARGS…` to its end.
    pub fn run(&self, fake: Option<&FakeModel>, args: &[&str]) -> Run {
        self.run_with(fake, &[], args)
    }

    /// Run `oml ARGS…` to its end with the extra environment variables `vars`.
    pub fn run_with(&self, fake: Option<&FakeModel>, vars: &[(&str, &str)], args: &[&str]) -> Run {
        let out = self
            .command(fake, args)
            .envs(vars.iter().copied())
            .output()
            .expect("run the oml binary");
        Run::from(out)
    }
}

impl Default for Env {
    fn default() -> Self {
        Env::new()
    }
}

/// What a blocking run did; its `Debug` shows both streams in full.
pub struct Run {
    /// The exit code, or -1 when killed by a signal.
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(out: Output) -> Run {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// How to get Landlock, for [`skip`].
pub const INSTALL_LANDLOCK: &str = "a Linux kernel 5.13 or later with Landlock enabled \
    (CONFIG_SECURITY_LANDLOCK=y and landlock in the lsm= boot parameter)";

/// The kernel's Landlock ABI version, asked of the kernel directly (not through oml), or `None`
/// after [`skip`] said why a test that needs it cannot run.
pub fn landlock_or_skip() -> Option<i64> {
    // SAFETY: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION) only returns
    // the ABI version or an error.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32,
        )
    };
    if v <= 0 {
        skip("Landlock", INSTALL_LANDLOCK);
        return None;
    }
    Some(v)
}

/// Wait for a command to have written a pid into `file`; the pid.
pub fn wait_for_pid(file: &Path) -> i32 {
    let mut pid = None;
    let found = poll_until(DEADLINE, || {
        pid = std::fs::read_to_string(file)
            .ok()
            .and_then(|t| t.trim().parse().ok());
        pid.is_some()
    });
    assert!(found, "no pid in {}", file.display());
    pid.unwrap_or_default()
}

/// Whether process `pid` exists and is not a zombie.
pub fn process_runs(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rsplit(')')
        .next()
        .and_then(|r| r.split_whitespace().next());
    state.is_some_and(|s| s != "Z")
}
