//! The live REPL server (`oml repl --listen`) driven over its Unix socket by plain line clients,
//! as `socat` or `nc -U` would: answers, multi-line forms, several clients at once, clients that
//! vanish mid-form or while a form loops forever, the socket's permissions and its clean-up.

mod support;

use std::os::unix::fs::PermissionsExt;

use support::home::{Client, Home, Prompt, Server};
use tokio::io::AsyncWriteExt;

#[tokio::test]
async fn a_client_gets_the_value_of_each_form() {
    let home = Home::new();
    let socket = home.root.join("repl.sock");
    let server = Server::start(&home, Some(&socket)).await;
    assert_eq!(
        server.socket, socket,
        "it prints the socket path it listens on"
    );
    let mut c = server.connect().await;
    assert_eq!(c.eval("(+ 1 2)").await, "3\n");
    assert_eq!(c.eval("{:a [1 2]}").await, "{:a [1 2]}\n");
    assert_eq!(c.eval("(values 1 :two)").await, "1\t\"two\"\n");
    // A form with no values writes nothing but the next prompt.
    assert_eq!(c.eval("(values)").await, "");
    // Printed output goes to the client, before the value.
    assert_eq!(c.eval("(do (print :side) 4)").await, "side\n4\n");
    assert_eq!(server.stop().await, 0);
}

#[tokio::test]
async fn a_form_over_several_lines_gets_the_continuation_prompt() {
    let home = Home::new();
    let server = Server::start(&home, Some(&home.root.join("repl.sock"))).await;
    let mut c = server.connect().await;
    c.send("(let [x 40]").await;
    assert_eq!(c.read_to_prompt().await, (String::new(), Prompt::More));
    c.send("  (+ x").await;
    assert_eq!(c.read_to_prompt().await, (String::new(), Prompt::More));
    c.send("     2))").await;
    assert_eq!(
        c.read_to_prompt().await,
        ("42\n".to_string(), Prompt::Ready)
    );
    assert_eq!(server.stop().await, 0);
}

#[tokio::test]
async fn an_error_is_reported_to_the_client_and_the_session_goes_on() {
    let home = Home::new();
    let server = Server::start(&home, Some(&home.root.join("repl.sock"))).await;
    let mut c = server.connect().await;
    let answer = c.eval("(error \"boom\")").await;
    assert!(
        answer.starts_with("Runtime error: ") && answer.ends_with("boom\n"),
        "{answer:?}"
    );
    let answer = c.eval("(+ 1 2))").await;
    assert!(answer.starts_with("3\nParse error: "), "{answer:?}");
    assert_eq!(
        c.eval("(setq repl.history-size :x)").await.lines().count(),
        1
    );
    let answer = c.eval("(setq agent.nope 1)").await;
    assert!(
        answer.starts_with("Runtime error: ")
            && answer.ends_with("setq: unknown setting agent.nope\n"),
        "{answer:?}"
    );
    assert_eq!(c.eval("(* 6 7)").await, "42\n");
    assert_eq!(server.stop().await, 0);
}

#[tokio::test]
async fn two_clients_interleaved_each_get_their_own_answers_and_share_globals() {
    let home = Home::new();
    let server = Server::start(&home, Some(&home.root.join("repl.sock"))).await;
    let mut a = server.connect().await;
    let mut b = server.connect().await;

    // Interleaved: both send before either reads.
    a.send("(do (print :from-a) (+ 1 1))").await;
    b.send("(do (print :from-b) (+ 2 2))").await;
    assert_eq!(
        b.read_to_prompt().await,
        ("from-b\n4\n".into(), Prompt::Ready)
    );
    assert_eq!(
        a.read_to_prompt().await,
        ("from-a\n2\n".into(), Prompt::Ready)
    );

    // A function defined by one client is callable by the other, which was already connected.
    a.eval("(fn _G.triple [x] \"Triple X.\" (* 3 x))").await;
    assert_eq!(b.eval("(triple 5)").await, "15\n");
    b.eval("(set _G.shared {:n 1})").await;
    a.eval("(set shared.n (+ shared.n 10))").await;
    assert_eq!(b.eval("shared.n").await, "11\n");
    // Settings are shared too.
    a.eval("(setq repl.history-size 12)").await;
    assert_eq!(b.eval("repl.history-size").await, "12\n");

    // A half-finished form in one client does not disturb the other.
    a.send("(+ 100").await;
    assert_eq!(a.read_to_prompt().await, (String::new(), Prompt::More));
    assert_eq!(b.eval("(triple 7)").await, "21\n");
    a.send("1)").await;
    assert_eq!(a.read_to_prompt().await, ("101\n".into(), Prompt::Ready));
    assert_eq!(server.stop().await, 0);
}

#[tokio::test]
async fn repl_locals_stay_with_their_client() {
    // A plain `local` (and a plain `fn`) at the REPL is the client's own, as in Fennel's REPL;
    // globals and namespace tables are what clients share.
    let home = Home::new();
    let server = Server::start(&home, Some(&home.root.join("repl.sock"))).await;
    let mut a = server.connect().await;
    let mut b = server.connect().await;
    a.eval("(local mine 1)").await;
    assert_eq!(a.eval("mine").await, "1\n");
    assert_eq!(b.eval("(= nil _G.mine)").await, "true\n");
    assert_eq!(server.stop().await, 0);
}

#[tokio::test]
async fn a_client_that_disconnects_mid_form_does_not_stop_the_server() {
    let home = Home::new();
    let mut server = Server::start(&home, Some(&home.root.join("repl.sock"))).await;
    let mut watcher = server.connect().await;

    let mut quitter = server.connect().await;
    quitter.send("(set _G.half-sent").await;
    assert_eq!(
        quitter.read_to_prompt().await,
        (String::new(), Prompt::More)
    );
    drop(quitter);

    // Another client that was already connected keeps being served, and so does a new one.
    assert_eq!(watcher.eval("(+ 1 2)").await, "3\n");
    let mut fresh = server.connect().await;
    assert_eq!(fresh.eval("(+ 3 4)").await, "7\n");
    // Half a form was never run.
    assert_eq!(fresh.eval("(rawget _G :half-sent)").await, "nil\n");
    assert!(server.is_running());
    assert_eq!(server.stop().await, 0);
}

#[tokio::test]
async fn a_client_that_half_closes_still_gets_its_answers() {
    // `nc -N` and `socat` close their sending side at the end of their input, then read.
    let home = Home::new();
    let server = Server::start(&home, Some(&home.root.join("repl.sock"))).await;
    let mut c = server.connect().await;
    c.stream
        .write_all(b"(+ 1 2)\n(do (print :done) 10)\n")
        .await
        .expect("send");
    c.stream.shutdown().await.expect("half-close");
    let rest = read_to_end(&mut c).await;
    assert_eq!(rest, "3\n>> done\n10\n>> ");
    assert_eq!(server.stop().await, 0);
}

#[tokio::test]
async fn a_form_that_loops_forever_is_interrupted_when_its_client_disconnects() {
    let home = Home::new();
    let mut server = Server::start(&home, Some(&home.root.join("repl.sock"))).await;
    let mut stayer = server.connect().await;
    assert_eq!(stayer.eval("(+ 1 1)").await, "2\n");

    for round in 0..2 {
        let mut looper = server.connect().await;
        looper
            .send(&format!(
                "(do (print :looping) (while true nil) (set _G.loop-ended-{round} true))"
            ))
            .await;
        // The form is running once its print has arrived.
        looper.read_until("looping\n").await;
        drop(looper);

        // While the loop runs it holds the Lisp state, so these answer only once it has been
        // interrupted; it did not run to its end. A client that was connected all along and a
        // new one both get answers.
        assert_eq!(
            stayer.eval(&format!("(= nil _G.loop-ended-{round})")).await,
            "true\n",
            "round {round}"
        );
        let mut fresh = server.connect().await;
        assert_eq!(fresh.eval("(+ 1 2)").await, "3\n", "round {round}");
    }
    assert_eq!(stayer.eval("(* 6 7)").await, "42\n");
    assert!(server.is_running());
    assert_eq!(server.stop().await, 0);
}

#[tokio::test]
async fn what_a_running_form_prints_reaches_its_client_while_it_runs() {
    let home = Home::new();
    let server = Server::start(&home, Some(&home.root.join("repl.sock"))).await;
    let stop_file = home.root.join("stop");
    let mut c = server.connect().await;
    // The form prints, then spins (never yielding) until the test creates a file.
    c.send(&format!(
        "(do (print :working) (while (not (io.open {:?})) nil) (print :stopped) :done)",
        stop_file.display().to_string()
    ))
    .await;
    c.read_until("working\n").await;
    support::home::write(&stop_file, "");
    assert_eq!(
        c.read_to_prompt().await,
        ("working\nstopped\n\"done\"\n".to_string(), Prompt::Ready)
    );
    assert_eq!(server.stop().await, 0);
}

#[tokio::test]
async fn the_default_socket_is_private_and_recorded_for_connect() {
    let home = Home::new();
    let server = Server::start(&home, None).await;
    let dir = home.runtime.join("oml");
    assert_eq!(server.socket.parent(), Some(dir.as_path()));
    let name = server
        .socket
        .file_name()
        .and_then(|n| n.to_str())
        .expect("a file name");
    assert!(
        name.starts_with("repl-") && name.ends_with(".sock"),
        "{name}"
    );
    let mode = |p: &std::path::Path| {
        std::fs::symlink_metadata(p)
            .expect("metadata")
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode(&server.socket), 0o600, "the socket");
    assert_eq!(mode(&dir), 0o700, "its directory");
    let recorded = std::fs::read_to_string(home.state.join("oml/repl-socket")).expect("the record");
    assert_eq!(recorded.trim(), server.socket.display().to_string());

    // `oml repl --connect` with no socket named finds it, and works with piped input.
    let out = home
        .oml_with_stdin(&["repl", "--connect"], "(+ 20 22)\n")
        .await;
    assert_eq!((out.code, out.stdout.as_str()), (0, "42\n"), "{out:?}");
    assert_eq!(server.stop().await, 0);
}

#[tokio::test]
async fn a_socket_given_with_socket_is_private_too() {
    let home = Home::new();
    let socket = home.root.join("s.sock");
    let server = Server::start(&home, Some(&socket)).await;
    let mode = std::fs::symlink_metadata(&socket)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    let out = home
        .oml_with_stdin(
            &["repl", "--connect", socket.to_str().expect("utf-8")],
            "(fn _G.f [x] (* x 2))\n(f 4)\n",
        )
        .await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.ends_with("8\n"), "{:?}", out.stdout);
    assert_eq!(server.stop().await, 0);
}

#[tokio::test]
async fn the_server_removes_its_socket_when_its_stdin_closes() {
    let home = Home::new();
    let socket = home.root.join("repl.sock");
    let server = Server::start(&home, Some(&socket)).await;
    assert!(socket.exists());
    let mut c = server.connect().await;
    assert_eq!(c.eval("(+ 1 2)").await, "3\n");
    assert_eq!(server.stop().await, 0);
    assert!(!socket.exists(), "the socket file is gone");
    assert!(tokio::net::UnixStream::connect(&socket).await.is_err());
}

#[tokio::test]
async fn the_server_replaces_a_stale_socket_file() {
    let home = Home::new();
    let socket = home.root.join("repl.sock");
    // A socket left behind by a process that died without cleaning up.
    drop(std::os::unix::net::UnixListener::bind(&socket).expect("bind"));
    assert!(socket.exists());
    let server = Server::start(&home, Some(&socket)).await;
    let mut c = server.connect().await;
    assert_eq!(c.eval("(+ 1 2)").await, "3\n");
    assert_eq!(server.stop().await, 0);
}

#[tokio::test]
async fn connecting_to_a_socket_where_nothing_listens_fails_with_a_message() {
    let home = Home::new();
    let socket = home.root.join("nobody.sock");
    let out = home
        .oml_with_stdin(&["repl", "--connect", socket.to_str().expect("utf-8")], "")
        .await;
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr
            .starts_with(&format!("oml: cannot connect to {}: ", socket.display())),
        "{:?}",
        out.stderr
    );
    let out = home.oml_with_stdin(&["repl", "--connect"], "").await;
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr
            .starts_with("oml: no running oml REPL server found"),
        "{:?}",
        out.stderr
    );
}

/// Everything the server writes until it closes the connection.
async fn read_to_end(c: &mut Client) -> String {
    use tokio::io::AsyncReadExt as _;
    let mut rest = Vec::new();
    tokio::time::timeout(support::home::DEADLINE, c.stream.read_to_end(&mut rest))
        .await
        .expect("the server closes the connection")
        .expect("read");
    String::from_utf8(rest).expect("utf-8")
}

/// A runtime folder that others can use is refused, as ssh-agent and tmux refuse theirs: the
/// socket goes to `<state>/run` instead, and stderr says why.
#[test]
fn a_runtime_folder_others_can_use_is_refused() {
    use std::io::BufRead as _;
    let home = Home::new();
    let shared = home.runtime.join("oml");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let mut child = home
        .blocking_command(&["repl", "--listen"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let socket = std::path::PathBuf::from(line.trim_end());
    assert!(
        socket.starts_with(home.state.join("oml").join("run")),
        "{socket:?}; stderr: {stderr}"
    );
    assert!(
        stderr.contains("not using") && stderr.contains("its mode is 777"),
        "{stderr}"
    );
    assert!(std::fs::read_dir(&shared).unwrap().next().is_none());
}
