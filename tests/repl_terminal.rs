//! The interactive REPL on a real terminal: Ctrl-C interrupts a running form without leaving, and
//! an agent driven without a permission handler asks the user on the terminal. Runs `oml` under a
//! pseudo-terminal made by util-linux `script`; where it is missing, [`support::home::skip`] rules.

mod support;

use std::process::Stdio;
use std::time::Duration;

use support::home::{DEADLINE, Home};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Read from `out` into `seen` until it contains `needle`.
async fn read_until(out: &mut tokio::process::ChildStdout, seen: &mut String, needle: &str) {
    let mut buf = [0u8; 4096];
    let found = tokio::time::timeout(DEADLINE, async {
        while !seen.contains(needle) {
            let n = out.read(&mut buf).await.expect("read the terminal");
            assert!(
                n > 0,
                "the REPL ended before printing {needle:?}; it printed:\n{seen}"
            );
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    })
    .await;
    assert!(
        found.is_ok(),
        "no {needle:?} within {DEADLINE:?}; the REPL printed:\n{seen}"
    );
}

/// `oml repl --no-init` on a fresh pseudo-terminal, or `None` when util-linux `script` is not
/// installed and [`support::home::skip`] lets the test skip. The child's stdin and stdout are the terminal's keyboard and screen.
fn terminal_repl(home: &Home) -> Option<tokio::process::Child> {
    if !support::home::script_available() {
        support::home::skip("util-linux `script`", support::home::INSTALL_SCRIPT);
        return None;
    }
    let oml = env!("CARGO_BIN_EXE_oml");
    let mut cmd = home.command(&[]);
    let std_cmd = cmd.as_std_mut();
    let envs: Vec<(String, String)> = std_cmd
        .get_envs()
        .filter_map(|(k, v)| Some((k.to_str()?.to_owned(), v?.to_str()?.to_owned())))
        .collect();
    let mut script = tokio::process::Command::new("script");
    // `script -c` runs the command through `$SHELL -c`. A shell that waits for oml instead of
    // becoming it (dash does) is itself in the terminal's foreground group, so Ctrl-C would kill
    // the shell and `script -e` would report 130 although oml went on. `exec` makes oml the
    // terminal's only process, whatever the shell.
    script
        .args(["-qfec", &format!("exec {oml} repl --no-init"), "/dev/null"])
        .envs(envs)
        .env("SHELL", "/bin/sh")
        .env("TERM", "dumb")
        .current_dir(std_cmd.get_current_dir().expect("the project dir"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    Some(script.spawn().expect("spawn script"))
}

/// Type `form`, which prints `marker` and then never ends by itself; once `marker` is printed,
/// press Ctrl-C and check that the REPL says `interrupted`, evaluates the next form, and exits at
/// Ctrl-D.
async fn ctrl_c_stops(form: &str, marker: &str) {
    let home = Home::new();
    let Some(mut child) = terminal_repl(&home) else {
        return;
    };
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut seen = String::new();
    read_until(&mut stdout, &mut seen, ">> ").await;
    stdin
        .write_all(format!("{form}\r").as_bytes())
        .await
        .expect("type the form");
    // The printed line, not the echo of the typed form: the form is running.
    read_until(&mut stdout, &mut seen, &format!("\n{marker}")).await;
    stdin.write_all(b"\x03").await.expect("Ctrl-C");
    read_until(&mut stdout, &mut seen, "interrupted").await;
    stdin.write_all(b"(+ 40 2)\r").await.expect("type");
    read_until(&mut stdout, &mut seen, "42").await;
    stdin.write_all(b"\x04").await.expect("Ctrl-D");
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the REPL exits at Ctrl-D")
        .expect("wait");
    assert!(status.success(), "{status:?}\n{seen}");
}

#[tokio::test]
async fn ctrl_c_interrupts_a_running_form_and_the_repl_goes_on() {
    ctrl_c_stops("(do (print :looping) (while true nil))", "looping").await;
}

#[tokio::test]
async fn ctrl_c_interrupts_a_form_waiting_in_a_host_function() {
    // A form blocked in an async host function (a sleep here; an agent's turn or a model call
    // alike) runs no Lisp for the instruction hook to stop: the wait itself must end.
    ctrl_c_stops("(do (print :waiting) (oml.sleep 600000))", "waiting").await;
}

#[tokio::test]
async fn the_repl_asks_on_the_terminal_when_no_handler_is_given() {
    let home = Home::new();
    let Some(mut child) = terminal_repl(&home) else {
        return;
    };
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut seen = String::new();
    read_until(&mut stdout, &mut seen, ">> ").await;

    let form = format!(
        "(let [c (client.connect {:?} [:prompt-permission]) s (client.new-session c) r (client.prompt c s.session-id \"go\")] (client.close c) (.. \"RESULT \" (. r.updates (length r.updates) :content :text)))\r",
        env!("CARGO_BIN_EXE_oml-fake-agent")
    );
    stdin
        .write_all(form.as_bytes())
        .await
        .expect("type the form");
    read_until(&mut stdout, &mut seen, "Choose 1-2").await;
    assert!(
        seen.contains("The agent asks permission for: Write notes.txt (edit)"),
        "{seen}"
    );
    stdin.write_all(b"1\r").await.expect("answer");
    read_until(&mut stdout, &mut seen, "RESULT selected allow").await;

    stdin.write_all(b"\x04").await.expect("Ctrl-D");
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the REPL exits at Ctrl-D")
        .expect("wait");
    assert!(status.success(), "{status:?}\n{seen}");
}
