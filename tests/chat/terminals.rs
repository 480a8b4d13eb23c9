//! The chat on other terminals and none: `NO_COLOR`, `TERM=dumb`, a narrow window, and stdin
//! piped with no terminal at all.

use super::*;

// --- no colour, a dumb terminal, a narrow one

const MARKDOWN: &[&str] = &[
    "# Title\nSome **bold** and `code`.\n",
    "- item one\n- item two",
];

#[test]
fn no_color_draws_no_colour_and_leaves_markdown_as_written() {
    let env = Env::new();
    let fake = FakeModel::start([
        answer(MARKDOWN),
        bash_call("c1", "echo plain"),
        answer(&["Ok."]),
    ]);
    let term = open(&env, Some(&fake), &["--mode", "yolo"], &[("NO_COLOR", "1")]);
    let screen = say(&term, "show markdown", "- item two");
    assert!(
        screen.contains("# Title\nSome **bold** and `code`.\n- item one\n- item two"),
        "{screen}"
    );
    let screen = say(&term, "run", "Ok.");
    assert!(screen.contains("✓ $ echo plain  exit 0"), "{screen}");
    assert!(!term.screen_has_colour(), "{screen}");
    assert!(!term.is_bold("Title"));
    assert!(!term.is_bold("oml 0.1.0"));
    exit(&term);
}

#[test]
fn a_dumb_terminal_gets_plain_text_and_cards_without_a_live_tail() {
    let env = Env::new();
    let command = "for i in 1 2 3; do echo tick $i; sleep 0.2; done";
    let fake = FakeModel::start([answer(MARKDOWN), bash_call("c1", command), answer(&["Ok."])]);
    let term = open(&env, Some(&fake), &["--mode", "yolo"], &[("TERM", "dumb")]);
    let screen = say(&term, "show markdown", "- item two");
    assert!(
        screen.contains("# Title\nSome **bold** and `code`.\n- item one\n- item two"),
        "{screen}"
    );
    let screen = say(&term, "run", "Ok.");
    // Nothing drawn in place: the card once when it starts and once when it ends.
    assert!(screen.contains(&format!("● $ {command}\n")), "{screen}");
    assert!(
        screen.contains(&format!("✓ $ {command}  exit 0\n  tick 1")),
        "{screen}"
    );
    assert!(!term.text().contains("│"), "{}", term.text());
    assert!(!term.screen_has_colour());
    // No SGR or cursor movement at all in what the chat wrote.
    let raw = String::from_utf8_lossy(&term.raw()).into_owned();
    assert!(
        !raw.contains("\x1b[1m") && !raw.contains("\x1b[2K"),
        "{raw:?}"
    );
    exit(&term);
}

#[test]
fn a_narrow_terminal_gets_cards_cut_to_its_width() {
    let env = Env::new();
    let long = "abcdefghij".repeat(6);
    let command = format!("echo {long}; echo short; sleep 0.6");
    let fake = FakeModel::start([bash_call("c1", &command), answer(&["Narrow done."])]);
    let term = open_sized(&env, Some(&fake), &["--mode", "yolo"], &[], 30, 40);
    term.type_line("go");
    let running = term.wait_for("│ short", DEADLINE);
    assert!(running.contains("● $ echo abcdefghij"), "{running}");
    assert!(running.contains("  │ abcdefghij"), "{running}");
    term.wait_for("Narrow done.", DEADLINE);
    wait_ready(&term);
    let (rows, wrapped) = term.with_screen(|s| {
        let rows: Vec<String> = s.rows(0, s.size().1).collect();
        let wrapped: Vec<bool> = (0..s.size().0).map(|r| s.row_wrapped(r)).collect();
        (rows, wrapped)
    });
    let header = rows
        .iter()
        .position(|r| r.starts_with("✓ $ echo"))
        .unwrap_or_else(|| panic!("no finished card:\n{}", rows.join("\n")));
    let end = rows
        .iter()
        .position(|r| r.starts_with("Narrow done."))
        .expect("the answer");
    assert!(rows[header].ends_with('…'), "{:?}", rows[header]);
    for row in header..end {
        assert!(
            !wrapped[row] && rows[row].chars().count() < 40,
            "row {row} of the card does not fit:\n{}",
            rows.join("\n")
        );
    }
    assert!(
        rows[header..end].iter().any(|r| r.trim() == "short"),
        "{rows:?}"
    );
    exit(&term);
}

// --- piped stdin

/// `oml` with `input` piped to it (no terminal at all): (exit code, stdout, stderr).
fn piped(env: &Env, fake: Option<&FakeModel>, input: &str) -> (i32, String, String) {
    use std::io::{Read as _, Write as _};
    use std::process::Stdio;
    let mut child = env
        .command(fake, &[])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn oml");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input.as_bytes()).expect("write stdin");
    drop(stdin);
    let read = |mut pipe: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            pipe.read_to_string(&mut text).expect("read a pipe");
            text
        })
    };
    let out = read(Box::new(child.stdout.take().expect("stdout")));
    let err = read(Box::new(child.stderr.take().expect("stderr")));
    let status = support::home::wait_within(&mut child, DEADLINE).unwrap_or_else(|| {
        let _ = child.kill();
        panic!("oml with piped stdin did not end within {DEADLINE:?}")
    });
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    (status.code().expect("an exit code"), out, err)
}

#[test]
fn piped_lines_run_by_the_same_rules_without_decoration() {
    let env = Env::new();
    let fake = FakeModel::start([answer(&["The repo is **small**."])]);
    let (code, out, err) = piped(&env, Some(&fake), "explain this repo\n(+ 1\n 2)\n/model\n");
    assert_eq!(code, 0, "{out}\n--- stderr\n{err}");
    assert!(out.contains("The repo is **small**."), "{out}");
    assert!(out.contains("\n3\n"), "{out}");
    assert!(out.contains("Model: fake/model"), "{out}");
    for absent in ["oml 0.1.0", "\x1b[", "›", "tokens", "Ask anything"] {
        assert!(!out.contains(absent), "{absent:?} in {out:?}");
        assert!(!err.contains(absent), "{absent:?} in {err:?}");
    }
    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    assert!(messages(&requests[0].body).contains("explain this repo"));
}

/// With nobody at a terminal a question cannot be asked: the call is refused with the reason
/// (not reported as a cancel), and nothing drawn carries escape codes.
#[test]
fn a_piped_chat_cannot_ask_and_says_so() {
    let env = Env::new();
    let fake = FakeModel::start([bash_call("c1", "echo hi"), answer(&["Refused."])]);
    let (code, out, err) = piped(&env, Some(&fake), "run it\n");
    assert_eq!(code, 0, "{out}\n--- stderr\n{err}");
    let result = tool_results(&fake.requests()[1].body)[0].clone();
    assert_eq!(
        result,
        "Blocked: bash needs permission in ask mode and this frontend cannot ask; choose \
         another mode (oml -p --mode, or agent.permission-mode)"
    );
    assert!(!out.contains('\x1b'), "{out:?}");
}

#[test]
fn piped_input_that_fails_exits_1() {
    let env = Env::new();
    env.init("(setq llm.max-retries 0)");
    let fake = FakeModel::start([Reply::error(500, "the server is on fire")]);
    let (code, out, err) = piped(&env, Some(&fake), "hi\n(+ 1 1)\n");
    assert_eq!(code, 1, "{out}\n--- stderr\n{err}");
    assert!(
        err.contains("error:") && err.contains("the server is on fire"),
        "{err}"
    );
    assert!(out.contains('2'), "the next line still runs: {out}");

    let (code, out, err) = piped(&env, None, "(error \"boom\")\n");
    assert_eq!(code, 1, "{out}\n--- stderr\n{err}");
    assert!(
        format!("{out}{err}").contains("repl:1: boom"),
        "{out}\n{err}"
    );

    let (code, out, err) = piped(&env, None, "(+ 2 2)\n");
    assert_eq!(code, 0, "{out}\n--- stderr\n{err}");
    assert!(out.contains('4'), "{out}");
}

/// A form's outcome is told by its type, never by its text: an error whose message ends in
/// "interrupted" is an error, shown whole, and a printed line that looks like an error is output.
#[test]
fn piped_forms_are_judged_by_their_outcome_not_their_text() {
    let env = Env::new();
    let (code, out, err) = piped(&env, None, "(error \"the download was interrupted\")\n");
    assert_eq!(code, 1, "{out}\n--- stderr\n{err}");
    assert!(
        format!("{out}{err}").contains("the download was interrupted"),
        "{out}\n{err}"
    );

    let (code, out, err) = piped(&env, None, "(print \"parse error: not really\")\n");
    assert_eq!(code, 0, "{out}\n--- stderr\n{err}");
    assert!(out.contains("parse error: not really"), "{out}\n{err}");
}
