//! The command sandbox against the real binary and real processes: `oml eval` calling
//! `oml.tool-bash` (the bash tool's host function) and `oml.sandbox-status`, and `oml -p` with
//! the fake model asking for a bash call. What a confined command may write, the network,
//! `/dev/tty`, secrets in the environment, and background processes that must not outlive oml.
//!
//! These tests need Landlock (Linux 5.13, enabled); where it is missing they fail under CI and
//! skip elsewhere (`support::home::skip`). Which network test runs depends on the kernel's Landlock ABI:
//! from ABI 4 (Linux 6.7) a connect must fail, before it the status must say it is not enforced.

#![allow(clippy::print_stderr)] // the skip notice

mod support;

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use support::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};
use support::home::{
    DEADLINE, Env, Run, await_exit, landlock_or_skip, poll_until, process_runs, wait_for_pid,
};
use support::pty::Term;

/// The variable the tests pass the command in (so that no quoting reaches Fennel).
const COMMAND_VAR: &str = "SANDBOX_TEST_COMMAND";

/// Seconds the bash tool gives a command: only a hang reaches it, and then the result says so.
const TOOL_TIMEOUT_SECS: u32 = 30;

/// The size of the terminal oml runs on in the `/dev/tty` test.
const TERM_ROWS: u16 = 24;
const TERM_COLS: u16 = 100;

/// Whether a command's output says a write was refused: by Landlock ("Permission denied") or by
/// the read-only view of the file system outside the writable paths ("Read-only file system").
fn denied(output: &str) -> bool {
    output.contains("Permission denied") || output.contains("Read-only file system")
}

/// A throw-away home whose temp dir (`TMPDIR`) is its own folder, so that `outside` (under the
/// same `/tmp` folder, but neither in the project nor in the temp dir) is outside every writable
/// path.
struct Sandbox {
    env: Env,
    tmp: PathBuf,
    outside: PathBuf,
}

impl Sandbox {
    fn new() -> Sandbox {
        let env = Env::new();
        let tmp = env.root.join("tmp");
        let outside = env.root.join("outside");
        for dir in [&tmp, &outside] {
            std::fs::create_dir_all(dir).expect("create a folder");
        }
        Sandbox { env, tmp, outside }
    }

    /// `oml eval` running `command` with the bash tool, with `vars` in oml's environment.
    fn command(&self, command: &str, vars: &[(&str, &str)]) -> Command {
        let form = format!(
            "(print (. (oml.tool-bash (os.getenv \"{COMMAND_VAR}\") {TOOL_TIMEOUT_SECS} 100000) \
             :content))"
        );
        let mut cmd = self.env.command(None, &["eval", &form]);
        cmd.env("TMPDIR", &self.tmp)
            .env(COMMAND_VAR, command)
            .envs(vars.iter().copied());
        cmd
    }

    /// The bash tool's result text for `command`.
    fn bash(&self, command: &str) -> String {
        self.bash_with(command, &[])
    }

    fn bash_with(&self, command: &str, vars: &[(&str, &str)]) -> String {
        let run = Run::from(self.command(command, vars).output().expect("run oml"));
        assert_eq!(run.code, 0, "{run:?}");
        run.stdout.trim_end().to_owned()
    }

    /// What `oml eval` prints of FORM's value.
    fn eval(&self, form: &str) -> String {
        let form = format!("(print {form})");
        let mut cmd = self.env.command(None, &["eval", &form]);
        let run = Run::from(cmd.env("TMPDIR", &self.tmp).output().expect("run oml"));
        assert_eq!(run.code, 0, "{run:?}");
        run.stdout.trim_end().to_owned()
    }
}

#[test]
fn writes_go_only_to_the_workspace_the_temp_dir_and_listed_paths() {
    let Some(_) = landlock_or_skip() else { return };
    let s = Sandbox::new();
    let listed = s.env.root.join("listed");
    std::fs::create_dir_all(&listed).unwrap();
    s.env.init(&format!(
        "(setq sandbox.writable [\"{}\"])",
        listed.display()
    ));
    let outside = s.outside.join("escaped");
    let out = s.bash(&format!(
        "touch {}; echo outside=$?; touch in-project && touch \"$TMPDIR/in-tmp\" && touch {}/in-listed && echo inside=ok",
        outside.display(),
        listed.display()
    ));
    assert!(denied(&out), "{out}");
    assert!(
        out.contains("outside=1") && out.contains("inside=ok"),
        "{out}"
    );
    assert!(
        !outside.exists(),
        "the write outside the workspace happened"
    );
    for made in [
        s.env.project.join("in-project"),
        s.tmp.join("in-tmp"),
        listed.join("in-listed"),
    ] {
        assert!(made.exists(), "{} was not written: {out}", made.display());
    }
}

#[test]
fn read_only_writes_nowhere_and_off_writes_anywhere() {
    let Some(_) = landlock_or_skip() else { return };
    let s = Sandbox::new();
    s.env.init("(setq sandbox.mode :read-only)");
    let out = s.bash("touch in-project; echo rc=$?; cat /etc/hostname > /dev/null && echo read=ok");
    assert!(out.contains("rc=1") && out.contains("read=ok"), "{out}");
    assert!(!s.env.project.join("in-project").exists());

    s.env.init("(setq sandbox.mode :off)");
    let outside = s.outside.join("allowed");
    let out = s.bash(&format!("touch {} && echo ok", outside.display()));
    assert_eq!(out, "ok");
    assert!(outside.exists(), "mode :off let the command write outside");
    assert!(
        s.eval("(. (oml.sandbox-status) :enforced)").contains("off"),
        "the status says off"
    );
}

#[test]
fn tcp_is_denied_with_the_network_off_or_the_status_says_it_is_not() {
    let Some(abi) = landlock_or_skip() else {
        return;
    };
    let s = Sandbox::new();
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback listener");
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected; echo rc=$?");
    let status = s.eval("(let [s (oml.sandbox-status)] (.. s.enforced \"|\" (or s.reason \"\")))");
    if abi >= 4 {
        // Before ABI 6 the status is partial for the scopes, not for the network.
        assert!(
            status == "full|" || (abi < 6 && !status.contains("no TCP rules")),
            "{status}"
        );
        let out = s.bash(&connect);
        assert!(!out.contains("connected"), "{out}");
        assert!(
            listener.accept().is_err(),
            "the listener got a connection from the sandbox"
        );
    } else {
        assert!(
            status.starts_with("partial|") && status.contains("no TCP rules"),
            "{status}"
        );
    }
    s.env.init("(setq sandbox.network? true)");
    let out = s.bash(&connect);
    assert!(
        out.contains("connected"),
        "with sandbox.network? true: {out}"
    );
}

#[test]
fn reading_dev_tty_fails_at_once_in_every_mode() {
    let Some(_) = landlock_or_skip() else { return };
    let s = Sandbox::new();
    for mode in ["workspace-write", "off"] {
        s.env.init(&format!("(setq sandbox.mode :{mode})"));
        let result = s.env.project.join(format!("tty-{mode}"));
        let command = format!("read x < /dev/tty; echo rc=$? > {}", result.display());
        // oml runs on a terminal of its own, its controlling terminal: a command that could
        // open /dev/tty would wait there for a line until the tool's timeout.
        let term = Term::spawn(s.command(&command, &[]), TERM_ROWS, TERM_COLS);
        assert_eq!(term.wait_exit(DEADLINE), Some(0), "{}", term.screen());
        let text = std::fs::read_to_string(&result).expect("the command wrote its result");
        assert_eq!(text.trim(), "rc=1", "{mode}: {}", term.screen());
        assert!(!term.screen().contains("timed out"), "{}", term.screen());
    }
}

#[test]
fn secrets_are_not_in_the_environment_unless_kept() {
    let Some(_) = landlock_or_skip() else { return };
    let s = Sandbox::new();
    let vars = [
        ("OPENAI_API_KEY", "sk-test"),
        ("MY_TOKEN", "token-1"),
        ("KEPT_TOKEN", "token-2"),
        ("PLAIN_VALUE", "visible"),
        ("DROPPED", "gone"),
        ("SAME_AS_KEY", "sk-test"),
    ];
    s.env
        .init("(setq sandbox.keep-env [\"KEPT_TOKEN\"] sandbox.drop-env [\"DROPPED\"])");
    let out = s.bash_with("env | sort", &vars);
    assert!(out.contains("PLAIN_VALUE=visible"), "{out}");
    assert!(out.contains("KEPT_TOKEN=token-2"), "{out}");
    for hidden in ["sk-test", "token-1", "DROPPED", "SAME_AS_KEY"] {
        assert!(!out.contains(hidden), "{hidden} is visible:\n{out}");
    }
}

#[test]
fn a_background_process_dies_when_oml_is_killed() {
    let Some(_) = landlock_or_skip() else { return };
    let s = Sandbox::new();
    let pid_file = s.env.project.join("sleep.pid");
    // The form runs the tool, then waits on stdin, so oml is alive until it is killed.
    let form = format!(
        "(oml.tool-bash \"sleep 300 & echo $! > {}\" {TOOL_TIMEOUT_SECS} 1000) (io.read)",
        pid_file.display()
    );
    let mut oml = s
        .env
        .command(None, &["eval", &form])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn oml");
    let sleep = wait_for_pid(&pid_file);
    assert!(process_runs(sleep), "the background sleep did not start");
    oml.kill().expect("kill -9 oml");
    oml.wait().expect("reap oml");
    assert!(
        await_exit(sleep, DEADLINE),
        "the background sleep {sleep} outlived oml's kill -9"
    );
}

#[test]
fn a_background_process_dies_when_oml_exits_after_a_print_mode_turn() {
    let Some(_) = landlock_or_skip() else { return };
    let s = Sandbox::new();
    let pid_file = s.env.project.join("sleep.pid");
    let command = format!("sleep 300 & echo $! > {}", pid_file.display());
    let args = serde_json::json!({ "command": command }).to_string();
    let fake = FakeModel::start([
        Reply::Stream(tool_call_chunks("c1", "bash", &[&args])),
        Reply::Stream(text_chunks(&["done"])),
    ]);
    let run = s.env.run(Some(&fake), &["-p", "start a server"]);
    assert_eq!(run.code, 0, "{run:?}");
    let sleep = wait_for_pid(&pid_file);
    assert!(
        await_exit(sleep, DEADLINE),
        "the background sleep {sleep} outlived oml's normal exit"
    );
}

#[test]
fn the_model_reads_why_a_write_outside_was_refused() {
    let Some(_) = landlock_or_skip() else { return };
    let s = Sandbox::new();
    let outside = s.outside.join("from-the-model");
    let args = serde_json::json!({ "command": format!("echo x > {}", outside.display()) });
    let fake = FakeModel::start([
        Reply::Stream(tool_call_chunks("c1", "bash", &[&args.to_string()])),
        Reply::Stream(text_chunks(&["ok"])),
    ]);
    let mut cmd = s.env.command(Some(&fake), &["-p", "write it"]);
    let run = Run::from(cmd.env("TMPDIR", &s.tmp).output().expect("run oml"));
    assert_eq!(run.code, 0, "{run:?}");
    let requests = fake.requests();
    let tool = requests[1].body["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "tool"))
        .expect("the tool result went back to the model")
        .clone();
    let content = tool["content"].as_str().unwrap_or_default();
    assert!(denied(content), "{content}");
    assert!(!outside.exists());
}

#[test]
fn without_landlock_commands_are_refused_and_the_status_says_why() {
    let Some(_) = landlock_or_skip() else { return };
    let s = Sandbox::new();
    let marker = s.env.project.join("ran");
    let mut cmd = s.command(&format!("touch {}", marker.display()), &[]);
    deny_landlock(&mut cmd);
    let run = Run::from(cmd.output().expect("run oml"));
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout
            .contains("the sandbox cannot be set up here (this kernel has no Landlock")
            && run
                .stdout
                .contains("; set sandbox.mode to :off to run unconfined"),
        "{run:?}"
    );
    assert!(run.stderr.contains("WARN"), "a warning is logged: {run:?}");
    assert!(!marker.exists(), "the command ran unconfined");

    let mut cmd = s
        .env
        .command(None, &["eval", "(. (oml.sandbox-status) :enforced)"]);
    deny_landlock(&mut cmd);
    let run = Run::from(cmd.output().expect("run oml"));
    assert_eq!(run.stdout.trim(), "\"unavailable\"", "{run:?}");

    s.env.init("(setq sandbox.mode :off)");
    let mut cmd = s.command(&format!("touch {}", marker.display()), &[]);
    deny_landlock(&mut cmd);
    let run = Run::from(cmd.output().expect("run oml"));
    assert_eq!(run.code, 0, "{run:?}");
    assert!(marker.exists(), "mode :off runs the command: {run:?}");
}

// --- helpers

/// Run `cmd` under a seccomp filter that makes `landlock_create_ruleset` fail with ENOSYS, as on
/// a kernel without Landlock.
fn deny_landlock(cmd: &mut Command) {
    const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const RET_K: u16 = 0x06; // BPF_RET | BPF_K
    const RET_ERRNO: u32 = 0x0005_0000; // SECCOMP_RET_ERRNO
    const RET_ALLOW: u32 = 0x7fff_0000; // SECCOMP_RET_ALLOW
    let op = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let filter: &'static [libc::sock_filter] = Box::leak(Box::new([
        op(LD_W_ABS, 0, 0, 0), // seccomp_data.nr
        op(JEQ_K, 0, 1, libc::SYS_landlock_create_ruleset as u32),
        op(RET_K, 0, 0, RET_ERRNO | libc::ENOSYS as u32),
        op(RET_K, 0, 0, RET_ALLOW),
    ]));
    // The filter's address and length cross into the hook as integers (it is leaked, so it
    // stays valid); the program struct is built on the child's stack.
    let (addr, len) = (filter.as_ptr() as usize, filter.len() as u16);
    // SAFETY: the hook runs between fork and exec and only calls prctl with a filter that was
    // built before the fork and is never freed.
    unsafe {
        cmd.pre_exec(move || {
            let program = libc::sock_fprog {
                len,
                filter: addr as *mut libc::sock_filter,
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(libc::PR_SET_SECCOMP, 2, &program as *const _, 0, 0) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[test]
fn a_command_returns_when_it_exits_with_what_its_background_child_wrote_so_far() {
    let Some(_) = landlock_or_skip() else { return };
    let s = Sandbox::new();
    let pid_file = s.env.project.join("late.pid");
    // The background child keeps the output pipe open past the command's exit; the result
    // comes after the bounded drain with what it wrote by then, and it is left running.
    let out = s.bash(&format!(
        "echo early; (echo from-the-child; sleep 300; echo never) & echo $! > {}",
        pid_file.display()
    ));
    assert!(
        out.contains("early") && out.contains("from-the-child"),
        "{out}"
    );
    assert!(!out.contains("never"), "{out}");
    let child = wait_for_pid(&pid_file);
    // SAFETY: kill with integers: the test's own background process.
    unsafe { libc::kill(child, libc::SIGKILL) };
}

#[test]
fn the_watcher_holds_none_of_the_commands_descriptors() {
    let Some(_) = landlock_or_skip() else { return };
    let s = Sandbox::new();
    let report = s.env.project.join("watcher");
    // The command names its shell's children (the watcher is one) and its own output pipe,
    // then waits, so that the watcher can be looked at from outside while it lives. (oml and
    // its watcher are not dumpable: reading their descriptors takes root, as CI runs.)
    let command = format!(
        "readlink /proc/$$/fd/1 > {r}.pipe; cat /proc/$$/task/*/children > {r}.tmp; \
         mv {r}.tmp {r}; sleep 2",
        r = report.display()
    );
    let mut oml = s.command(&command, &[]).spawn().expect("spawn oml");
    let mut children = String::new();
    let seen = poll_until(DEADLINE, || {
        children = std::fs::read_to_string(&report).unwrap_or_default();
        !children.is_empty()
    });
    assert!(seen, "the command did not report its children");
    let pipe = std::fs::read_to_string(report.with_extension("pipe")).unwrap_or_default();
    assert!(pipe.trim().starts_with("pipe:"), "{pipe}");
    let watchers: Vec<Vec<String>> = children
        .split_whitespace()
        .filter_map(|pid| {
            let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
            let links = fds
                .flatten()
                .filter_map(|fd| std::fs::read_link(fd.path()).ok())
                .map(|l| l.display().to_string())
                .collect();
            Some(links)
        })
        .collect();
    assert!(!watchers.is_empty(), "no watcher among {children}");
    for links in &watchers {
        assert!(
            !links.iter().any(|l| l == pipe.trim()),
            "a child of the command holds its output pipe {pipe}: {links:?}"
        );
        // Its lifeline (a pipe) and the pidfd of the command it watches.
        let others = links.iter().filter(|l| *l != "anon_inode:[pidfd]").count();
        assert!(
            others <= 1,
            "the watcher holds only its lifeline: {links:?}"
        );
    }
    assert!(oml.wait().expect("oml").success());
}

#[test]
fn the_editor_terminal_launcher_ends_its_command_when_its_shell_is_killed() {
    let Some(_) = landlock_or_skip() else { return };
    let s = Sandbox::new();
    let pid_file = s.env.project.join("sleep.pid");
    // What Toad's terminal does: a shell runs the launcher; Esc Esc kills the shell.
    let launcher = format!(
        "{} sandbox-exec --mode workspace-write --writable {} -- bash -c 'sleep 300 & echo $! > {}; wait'",
        env!("CARGO_BIN_EXE_oml"),
        s.env.project.display(),
        pid_file.display()
    );
    let mut shell = Command::new("bash")
        .args(["-c", &format!("{launcher}; true")])
        .current_dir(&s.env.project)
        .spawn()
        .expect("spawn the shell");
    let sleep = wait_for_pid(&pid_file);
    assert!(process_runs(sleep), "the command did not start");
    shell.kill().expect("kill -9 the shell");
    shell.wait().expect("reap the shell");
    assert!(
        await_exit(sleep, DEADLINE),
        "the command {sleep} outlived the shell that started its launcher"
    );
}

/// `oml eval FORM`, whose first command prints its parent's pid and which then waits for a
/// line on stdin: the process, its stdout, and that parent (the spawn helper).
fn first_command_from_helper(
    s: &Sandbox,
    form: &str,
) -> (
    std::process::Child,
    std::io::BufReader<std::process::ChildStdout>,
    i32,
) {
    let mut oml = s
        .env
        .command(None, &["eval", form])
        .env("TMPDIR", &s.tmp)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn oml");
    let mut out = std::io::BufReader::new(oml.stdout.take().expect("stdout"));
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).expect("the first command's output");
    let helper: i32 = line.trim().parse().expect("the helper's pid");
    (oml, out, helper)
}

/// Let the `oml eval` of [`first_command_from_helper`] go on: what it printed after its first
/// command, once it exited successfully.
fn go_on(
    mut oml: std::process::Child,
    mut out: std::io::BufReader<std::process::ChildStdout>,
) -> String {
    std::io::Write::write_all(oml.stdin.as_mut().expect("stdin"), b"go\n").expect("go on");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).expect("the other commands' output");
    assert!(oml.wait().expect("oml").success(), "{rest}");
    rest
}

#[test]
fn the_spawn_helper_holds_only_its_socket_and_a_killed_one_is_replaced() {
    let s = Sandbox::new();
    let bash = |command: &str| format!("(print (. (oml.tool-bash {command:?} 30 1000) :content))");
    let form = format!(
        "{} (io.stdout:flush) (io.read) {}",
        bash("echo $PPID"),
        bash("echo $PPID; echo hi")
    );
    let (oml, out, helper) = first_command_from_helper(&s, &form);
    let name = std::fs::read(format!("/proc/{helper}/cmdline")).unwrap_or_default();
    assert!(
        String::from_utf8_lossy(&name).contains("__spawn-helper"),
        "the command's parent is not the helper: {name:?}"
    );
    // Its socket to oml, and /dev/null twice; nothing of oml's and no environment (and, for a
    // moment after a command ends, that command's pidfd; and the user and network namespaces
    // that commands with the network off join, which it made itself). (Reading a process that
    // is not dumpable takes root, as CI runs.)
    let links: Vec<String> = std::fs::read_dir(format!("/proc/{helper}/fd"))
        .expect("the helper's descriptors")
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .map(|l| l.display().to_string())
        .filter(|l| l != "anon_inode:[pidfd]")
        .filter(|l| !l.starts_with("net:[") && !l.starts_with("user:["))
        .collect();
    assert_eq!(links.len(), 3, "{links:?}");
    assert_eq!(
        links.iter().filter(|l| l.starts_with("socket:")).count(),
        1,
        "{links:?}"
    );
    assert_eq!(
        links.iter().filter(|l| *l == "/dev/null").count(),
        2,
        "{links:?}"
    );
    let environ = std::fs::read(format!("/proc/{helper}/environ")).expect("environ");
    assert!(environ.is_empty(), "{}", String::from_utf8_lossy(&environ));
    // SAFETY: kill with integers, on the helper this test just identified.
    unsafe { libc::kill(helper, libc::SIGKILL) };
    assert!(await_exit(helper, DEADLINE), "the helper did not end");
    let rest = go_on(oml, out);
    let second: i32 = rest
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .parse()
        .expect("a pid");
    assert_ne!(second, helper, "{rest}");
    assert!(rest.contains("hi"), "{rest}");
}

#[test]
fn a_stopped_spawn_helper_is_given_up_and_the_next_command_gets_a_new_one() {
    let s = Sandbox::new();
    let bash = |command: &str| format!("(print (. (oml.tool-bash {command:?} 30 1000) :content))");
    let form = format!(
        "{} (io.stdout:flush) (io.read) {} {}",
        bash("echo $PPID"),
        bash("echo never"),
        bash("echo $PPID")
    );
    let (oml, out, helper) = first_command_from_helper(&s, &form);
    // SAFETY: kill with integers, on the helper this test just identified.
    unsafe { libc::kill(helper, libc::SIGSTOP) };
    let rest = go_on(oml, out);
    // The stopped helper never said whether it started the command, which is not run again.
    assert!(!rest.contains("never"), "{rest}");
    assert!(rest.contains("spawn helper ended"), "{rest}");
    let last: i32 = rest
        .trim_end()
        .lines()
        .last()
        .unwrap_or_default()
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("a pid last: {rest:?}"));
    assert_ne!(last, helper, "{rest}");
    assert!(
        await_exit(helper, DEADLINE),
        "the stopped helper was not killed"
    );
}
