//! The pseudo-terminal harness itself (`support::pty`): what a program run on it sees (a terminal
//! of the given size, typed keys, Ctrl-C as `SIGINT`, `SIGWINCH` on a resize) and what the test
//! reads back (the rendered screen, bold and colour, the rows scrolled off, the exit status).

mod support;

use std::process::Command;

use support::home::Home;
use support::pty::{DEADLINE, Term};

/// `sh -c SCRIPT`.
fn sh(script: &str) -> Command {
    let mut cmd = Command::new("/bin/sh");
    cmd.args(["-c", script]);
    cmd
}

#[test]
fn the_screen_shows_text_with_its_attributes_and_typed_lines_reach_the_program() {
    let term = Term::spawn(
        sh(r#"printf '\033[1mbold\033[0m plain \033[31mred\033[0m\n'; read x; echo "got:$x""#),
        24,
        80,
    );
    term.wait_for("bold plain red", DEADLINE);
    assert!(term.is_bold("bold"), "{:?}", term.cell_attrs("bold"));
    assert!(!term.is_bold("plain"), "{:?}", term.cell_attrs("plain"));
    assert!(!term.is_coloured("bold plain"));
    assert!(term.is_coloured("red"), "{:?}", term.cell_attrs("red"));
    assert!(term.screen_has_colour());

    term.type_line("hello");
    term.wait_for("got:hello", DEADLINE);
    assert_eq!(term.wait_exit(DEADLINE), Some(0), "{}", term.screen());
    // The echo of the typed line, then the program's answer.
    assert_eq!(term.screen(), "bold plain red\nhello\ngot:hello");
    assert!(
        term.raw().windows(4).any(|w| w == b"\x1b[1m"),
        "the raw bytes keep the escape sequences"
    );
}

#[test]
fn the_program_sees_the_window_size_and_a_resize() {
    let term = Term::spawn(
        sh("stty size; trap 'stty size; exit 0' WINCH; echo ready; while :; do sleep 0.1; done"),
        30,
        100,
    );
    term.wait_for("ready", DEADLINE);
    assert!(term.screen().starts_with("30 100\n"), "{}", term.screen());

    term.resize(40, 120);
    term.wait_for("40 120", DEADLINE);
    assert_eq!(term.with_screen(vt100::Screen::size), (40, 120));
    assert_eq!(term.wait_exit(DEADLINE), Some(0), "{}", term.screen());
}

#[test]
fn ctrl_c_reaches_the_program_as_sigint() {
    let term = Term::spawn(
        sh(r#"trap "echo caught; exit 3" INT; echo ready; while :; do sleep 0.1; done"#),
        24,
        80,
    );
    term.wait_for("ready", DEADLINE);
    term.ctrl_c();
    term.wait_for("caught", DEADLINE);
    assert_eq!(term.wait_exit(DEADLINE), Some(3), "{}", term.screen());
}

#[test]
fn a_program_ended_by_a_signal_exits_with_128_plus_its_number() {
    let term = Term::spawn(sh("echo ready; exec sleep 600"), 24, 80);
    term.wait_for("ready", DEADLINE);
    term.ctrl_c();
    assert_eq!(term.wait_exit(DEADLINE), Some(128 + libc::SIGINT));
}

#[test]
fn term_is_xterm_unless_the_command_sets_it() {
    let term = Term::spawn(sh(r#"echo "term:$TERM""#), 24, 80);
    term.wait_for("term:xterm-256color", DEADLINE);
    assert!(!term.screen_has_colour());
    let mut dumb = sh(r#"echo "term:$TERM""#);
    dumb.env("TERM", "dumb");
    let term = Term::spawn(dumb, 24, 80);
    term.wait_for("term:dumb", DEADLINE);
}

#[test]
fn the_terminal_answers_where_the_cursor_is() {
    // Raw input, so the answer is read as it comes (it ends in no newline), and not echoed.
    let term = Term::spawn(
        sh(r#"stty -icanon -echo min 6
printf 'ab\033[6n'
reply=$(dd bs=6 count=1 2>/dev/null)
stty sane
printf '\nreply:%s\n' "$(printf %s "$reply" | tr -d '\033')""#),
        24,
        80,
    );
    term.wait_for("reply:[1;3R", DEADLINE);
    assert_eq!(term.wait_exit(DEADLINE), Some(0));
}

#[test]
fn rows_scrolled_off_the_screen_are_kept_as_text() {
    let term = Term::spawn(sh("seq 1 300; echo done"), 24, 80);
    term.wait_for("done", DEADLINE);
    assert_eq!(term.wait_exit(DEADLINE), Some(0));
    let lines: Vec<String> = (1..=300)
        .map(|n| n.to_string())
        .chain(["done".into()])
        .collect();
    assert_eq!(term.text().lines().collect::<Vec<_>>(), lines);
    // The screen itself holds only the last 24 rows.
    assert_eq!(term.screen().lines().next(), Some("279"));
    // A line scrolled off long ago is still found.
    term.wait_for("\n7\n", DEADLINE);
}

#[test]
fn the_alternate_screen_adds_no_rows_to_the_text() {
    // A full-screen program's rows scroll within its own screen; the main one is back after it.
    let term = Term::spawn(
        sh(r"echo before; printf '\033[?1049h'; seq 1 50; printf '\033[?1049l'; echo after"),
        10,
        80,
    );
    term.wait_for("after", DEADLINE);
    assert_eq!(term.wait_exit(DEADLINE), Some(0));
    assert_eq!(term.text(), "before\nafter");
}

#[test]
fn the_lisp_repl_evaluates_a_typed_form() {
    let home = Home::new();
    // Bare `oml` is the chat; `oml repl` is the pure Fennel REPL.
    let term = home.terminal(&["repl", "--no-init"], 24, 80);
    term.wait_for(">> ", DEADLINE);
    term.type_line("(+ 1 2)");
    // The result on a row of its own, then the next prompt; only then Ctrl-D, as a person would.
    // Typed ahead, between two lines (the terminal in cooked mode, where the line discipline
    // takes Ctrl-D as an end of file rather than a byte), it is lost once the line editor puts
    // the terminal in raw mode, and the REPL waits on.
    term.wait_until("3, then the next prompt", DEADLINE, |screen| {
        let contents = screen.contents();
        let mut after = contents.lines().skip_while(|row| row.trim_end() != "3");
        after.next().is_some() && after.next().is_some_and(|row| row.starts_with(">>"))
    });
    term.ctrl_d();
    assert_eq!(term.wait_exit(DEADLINE), Some(0), "{}", term.screen());
}
