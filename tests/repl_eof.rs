//! The interactive REPL (`oml` with no command) ends at the end of its input (Ctrl-D on a
//! terminal, or the end of a pipe) and at `,exit`. It used to print the last value and then hang,
//! because its output task and its line editor waited for channels whose senders Lisp closures
//! keep alive until a garbage collection.

mod support;

use std::io::Write as _;
use std::process::Stdio;
use std::time::Duration;

#[test]
fn the_repl_exits_when_its_input_ends() {
    let output = run_repl(b"(+ 1 2)\n(print \"done\")\n");
    assert!(output.status.success(), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "3\ndone\n");
}

#[test]
fn the_repl_exits_at_the_exit_command() {
    let output = run_repl(b"(+ 1 2)\n,exit\n(print \"not evaluated\")\n");
    assert!(output.status.success(), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "3\n");
}

/// Run `oml repl --no-init` with `input` on stdin; fail if it has not exited 30 s later.
fn run_repl(input: &[u8]) -> std::process::Output {
    let home = support::home::Home::new();
    let mut child = home
        .blocking_command(&["repl", "--no-init"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("oml starts");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(input)
        .expect("write the forms");

    if support::home::wait_within(&mut child, Duration::from_secs(30)).is_none() {
        let _ = child.kill();
        panic!("oml did not exit within 30 s of the end of its input");
    }
    child.wait_with_output().expect("collect output")
}
