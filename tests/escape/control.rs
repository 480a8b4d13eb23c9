//! Control channels: no socket oml listens on is reachable from a confined command. The live
//! REPL evaluates any form it is sent, unconfined; its socket is 0600, which keeps other users
//! out but not the user's own confined commands.

use crate::support::editor::Editor;
use crate::support::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};
use crate::support::home::use_fake_model;

use super::harness::{Target, landlock_or_skip, tool_result};

/// Python that reads the REPL socket's path where oml records it, connects, sends FORM (from
/// the environment) and prints what comes back.
const DRIVE_THE_REPL: &str = r#"
import os, socket, time
path = open(os.environ["XDG_STATE_HOME"] + "/oml/repl-socket").read().strip()
s = socket.socket(socket.AF_UNIX)
s.connect(path)
s.settimeout(5)
got = s.recv(4096)
if b"refused" not in got:
    s.sendall((os.environ["FORM"] + "\n").encode())
try:
    while b"wrote" not in got:
        chunk = s.recv(4096)
        if not chunk:
            break
        got += chunk
except socket.timeout:
    pass
print("repl said:", got.decode(errors="replace"))
"#;

#[test]
fn a_confined_command_cannot_drive_the_live_repl() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    let marker = t.outside.join("written-by-the-repl");
    std::fs::write(t.env.root.join("drive.py"), DRIVE_THE_REPL).expect("write the script");
    t.env.init("(setq agent.permission-mode :yolo)");
    let form = format!(
        "(with-open [f (io.open {:?} :w)] (f:write :pwned)) (print :wrote)",
        marker.display().to_string()
    );
    let command = format!(
        "FORM='{form}' python3 {}",
        t.env.root.join("drive.py").display()
    );
    let args = serde_json::json!({ "command": command }).to_string();
    let fake = FakeModel::start([
        Reply::Stream(tool_call_chunks("c1", "bash", &[&args])),
        Reply::Stream(text_chunks(&["done"])),
    ]);
    let mut cmd = t.command(None, &["acp"]);
    // Without XDG_RUNTIME_DIR the socket is in the state folder, whose `run` folder is hidden
    // from commands too.
    cmd.env_remove("XDG_RUNTIME_DIR");
    use_fake_model(&mut cmd, &fake.base_url());
    let mut editor = Editor::spawn(cmd);
    editor.initialize();
    let (sid, _) = editor.new_session(&t.env.project);
    let (_, stop) = editor.turn(&sid, "look around");
    assert_eq!(stop, "end_turn");
    let result = tool_result(&fake, 1);
    assert!(
        !marker.exists(),
        "a form sent by a confined command ran unconfined: {result}"
    );
    // The runtime folder, wherever it is, is hidden from commands; were it not, the peer
    // check would refuse them (a_peer_with_no_new_privs_is_refused_by_an_oml_ask_owner).
    assert!(
        (result.contains("refused") && result.contains("no_new_privs"))
            || result.contains("FileNotFoundError"),
        "the command does not reach the socket: {result}"
    );
    editor.finish();
}

#[test]
fn a_confined_command_cannot_reach_unix_sockets_in_the_runtime_folder() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    // A server of the user's that runs what it is sent (the session bus, systemd --user, tmux).
    let socket = t.env.home.runtime.join("bus");
    let listener = std::os::unix::net::UnixListener::bind(&socket).expect("listen");
    listener.set_nonblocking(true).expect("nonblocking");
    let command = format!(
        "python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect(\"{}\"); print(\"connected\")'",
        socket.display()
    );
    let (run, result) = t.model_runs(&command, &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(!result.contains("connected"), "{result}");
    assert!(
        listener.accept().is_err(),
        "the server got a connection: {result}"
    );
}

/// Python that finds every `oml ask` owner socket under ROOT (from the environment), connects,
/// and asks for a prompt with every permission allowed; prints what it reached.
const DRIVE_AN_ASK_OWNER: &str = r#"
import glob, os, socket
request = b'{"op":"prompt","prompt":[{"type":"text","text":"injected"}],"wait":true,"policy":"approve-all","ttl":30}\n'
paths = glob.glob(os.environ["ROOT"] + "/**/ask/*.sock", recursive=True)
print("sockets seen:", paths)
for path in paths:
    try:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(5)
        s.connect(path)
        # A refused peer is told at once; only a silent owner is sent the request.
        s.settimeout(0.5)
        try:
            early = s.recv(4096)
        except socket.timeout:
            early = b""
        s.settimeout(5)
        if not early:
            s.sendall(request)
            early = s.recv(4096)
        print("owner said:", early.decode(errors="replace"))
    except Exception as e:
        print("refused:", type(e).__name__, e)
"#;

/// An `oml ask` owner for the scripted agent in `t`'s home, with `XDG_RUNTIME_DIR` set or not;
/// then a confined command hunts for its socket. The owner keeps the agent, which would run a
/// prompt sent to it with every permission allowed, outside the sandbox.
fn an_ask_owner_is_out_of_reach(runtime_var: bool) {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    let agent = format!("{} ok", env!("CARGO_BIN_EXE_oml-fake-agent"));
    let ask = |words: &[&str]| {
        let mut cmd = t.command(None, &["ask", "--agent", &agent, "--ttl", "60"]);
        cmd.args(words);
        if !runtime_var {
            cmd.env_remove("XDG_RUNTIME_DIR");
        }
        cmd.output().expect("run oml ask")
    };
    let first = ask(&["hello"]);
    assert_eq!(first.status.code(), Some(0), "{first:?}");
    let script = t.env.project.join("drive.py");
    std::fs::write(&script, DRIVE_AN_ASK_OWNER).expect("write the script");
    let command = format!("ROOT={} python3 {}", t.env.root.display(), script.display());
    let (run, result) = if runtime_var {
        t.model_runs(&command, &[])
    } else {
        let args = serde_json::json!({ "command": command }).to_string();
        let fake = FakeModel::start([
            Reply::Stream(tool_call_chunks("c1", "bash", &[&args])),
            Reply::Stream(text_chunks(&["done"])),
        ]);
        let mut cmd = t.command(Some(&fake), &["-p", "--mode", "yolo", "do it"]);
        cmd.env_remove("XDG_RUNTIME_DIR");
        let run = crate::support::home::Run::from(cmd.output().expect("run oml"));
        (run, tool_result(&fake, 1))
    };
    assert_eq!(run.code, 0, "{run:?}");
    assert!(result.contains("sockets seen"), "the script ran: {result}");
    assert!(
        !result.contains("owner said"),
        "a confined command reached the owner: {result}"
    );
    let history = ask(&["--json", "sessions", "history"]);
    let history: serde_json::Value = serde_json::from_slice(&history.stdout).expect("JSON");
    assert_eq!(
        history.as_array().map(Vec::len),
        Some(1),
        "only our prompt ran: {history}"
    );
    let closed = ask(&["sessions", "close"]);
    assert_eq!(String::from_utf8_lossy(&closed.stdout), "closed\n");
}

#[test]
fn a_confined_command_cannot_reach_an_oml_ask_owner() {
    an_ask_owner_is_out_of_reach(true);
}

#[test]
fn a_confined_command_cannot_reach_an_oml_ask_owner_without_a_runtime_folder() {
    an_ask_owner_is_out_of_reach(false);
}

/// The second wall: a process with `no_new_privs` (as every confined command has) that reaches
/// an owner's socket directly is refused by the owner itself.
#[test]
fn a_peer_with_no_new_privs_is_refused_by_an_oml_ask_owner() {
    if !std::path::Path::new("/usr/bin/setpriv").exists() {
        panic!("setpriv is missing: it is in util-linux, which every Debian system has");
    }
    let t = Target::new();
    let agent = format!("{} ok", env!("CARGO_BIN_EXE_oml-fake-agent"));
    let ask = |words: &[&str]| {
        let mut cmd = t.command(None, &["ask", "--agent", &agent, "--ttl", "60"]);
        cmd.args(words).output().expect("run oml ask")
    };
    assert_eq!(ask(&["hello"]).status.code(), Some(0));
    let script = t.env.project.join("drive.py");
    std::fs::write(&script, DRIVE_AN_ASK_OWNER).expect("write the script");
    let out = std::process::Command::new("/usr/bin/setpriv")
        .args(["--no-new-privs", "python3"])
        .arg(&script)
        .env("ROOT", &t.env.root)
        .output()
        .expect("run the script");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("owner said"),
        "the script reached the socket: {said}"
    );
    assert!(
        said.contains("refused: the peer") && said.contains("no_new_privs"),
        "{said}"
    );
    assert!(!said.contains("queued"), "{said}");
    let closed = ask(&["sessions", "close"]);
    assert_eq!(String::from_utf8_lossy(&closed.stdout), "closed\n");
}

/// Python that hunts for `oml acp --listen` token files under ROOT, then asks the listener at
/// URL to open a connection with whatever token it found (none: no header). A connection
/// would let it start a session in any folder and run the agent outside the sandbox.
const DRIVE_THE_LISTENER: &str = r#"
import glob, os, urllib.request
found = []
for path in glob.glob(os.environ["ROOT"] + "/**/*.token", recursive=True):
    try:
        found.append(open(path).read().strip())
    except Exception as e:
        print("unreadable:", type(e).__name__)
print("tokens read:", len(found))
body = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}'
for token in found or [None]:
    req = urllib.request.Request(os.environ["URL"], data=body, method="POST")
    req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            print("status", r.status, r.read().decode())
    except urllib.error.HTTPError as e:
        print("status", e.code)
    except Exception as e:
        print("refused:", type(e).__name__, e)
"#;

/// `oml acp --listen` serves the agent to whoever holds its token, on a TCP port any local
/// process can reach: a command the agent runs, even with the network on, finds no token (it is
/// in no file: oml printed it to its user) and is refused without one.
#[test]
fn a_confined_command_with_the_network_on_cannot_open_a_connection_to_oml_acp_listen() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    t.env.init("(setq sandbox.network? true)");
    let mut listener = t.command(None, &["acp", "--listen", "127.0.0.1:0"]);
    listener
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut listener = KillOnDrop(listener.spawn().expect("start the listener"));
    let mut out = std::io::BufReader::new(listener.0.stdout.take().expect("stdout"));
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).expect("the listener says where");
    let url = line
        .trim()
        .strip_prefix("listening ")
        .expect("a URL")
        .to_owned();
    let script = t.env.project.join("drive.py");
    std::fs::write(&script, DRIVE_THE_LISTENER).expect("write the script");
    let command = format!(
        "ROOT={} URL={url} python3 {}",
        t.env.root.display(),
        script.display()
    );
    let (run, result) = t.model_runs(&command, &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(result.contains("tokens read: 0"), "{result}");
    assert!(
        result.contains("status 401"),
        "the listener was reached and refused: {result}"
    );
    assert!(!result.contains("status 200"), "{result}");
}

struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Anyone who can reach the port, token or not, may open connections and send nothing: idle
/// connections are dropped after the header timeout and at most a fixed number are served at
/// once, so a real client still gets in.
#[test]
fn idle_connections_do_not_starve_oml_acp_listen() {
    let t = Target::new();
    let mut listener = t.command(None, &["acp", "--listen", "127.0.0.1:0"]);
    listener
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut listener = KillOnDrop(listener.spawn().expect("start the listener"));
    let mut out = std::io::BufReader::new(listener.0.stdout.take().expect("stdout"));
    let mut read = || {
        let mut line = String::new();
        std::io::BufRead::read_line(&mut out, &mut line).expect("a line");
        line.split_whitespace().nth(1).expect("a value").to_owned()
    };
    let (url, token) = (read(), read());
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/acp")
        .to_owned();
    let idle: Vec<std::net::TcpStream> = (0..300)
        .filter_map(|_| std::net::TcpStream::connect(&addr).ok())
        .collect();
    assert!(
        idle.len() >= 256,
        "the idle connections were made: {}",
        idle.len()
    );
    let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}"#;
    // curl gives up after a minute: idle connections that held every slot would keep it out.
    let answer = std::process::Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "60",
            "-H",
            "Content-Type: application/json",
        ])
        .args([
            "-H",
            &format!("Authorization: Bearer {token}"),
            "--data",
            init,
            &url,
        ])
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&answer.stdout);
    assert!(
        text.contains(r#""protocolVersion":1"#),
        "a real client got in: {text}"
    );
    drop(idle);
}
