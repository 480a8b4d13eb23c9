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
    // Without XDG_RUNTIME_DIR the socket is in the state folder, which commands can see (the
    // runtime folder is hidden from them): the peer check itself is what is attacked here.
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
    assert!(
        result.contains("refused") && result.contains("no_new_privs"),
        "the command is told why: {result}"
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
