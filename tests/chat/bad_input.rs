//! Bad input the chat must survive: a model error mid-stream or as HTTP 500, a pasted megabyte,
//! a tool printing invalid UTF-8 or escape sequences.

use super::*;

// --- bad input

#[test]
fn a_stream_that_breaks_off_is_an_error_and_the_chat_goes_on() {
    let env = Env::new();
    let mut broken = text_chunks(&["Half an answer"]);
    broken.insert(1, Step::Drop);
    let fake = FakeModel::start([Reply::Stream(broken), answer(&["Recovered."])]);
    let term = open(&env, Some(&fake), &[], &[]);
    let screen = say(&term, "start", "error: the model stream broke off");
    assert!(screen.contains("Half an answer\nerror: "), "{screen}");
    assert!(term.is_coloured("error: the model stream broke off"));
    say(&term, "again", "Recovered.");
    exit(&term);
}

#[test]
fn an_http_error_is_shown_and_the_chat_goes_on() {
    let env = Env::new();
    env.init("(setq llm.max-retries 0)");
    let fake = FakeModel::start([
        Reply::error(500, "the server is on fire"),
        answer(&["Back up."]),
    ]);
    let term = open(&env, Some(&fake), &[], &[]);
    let screen = say(&term, "start", "the server is on fire");
    assert!(screen.contains("error: "), "{screen}");
    say(&term, "again", "Back up.");
    exit(&term);
}

#[test]
fn a_pasted_megabyte_reaches_the_model_whole() {
    let env = Env::new();
    let fake = FakeModel::start([answer(&["Got it all."])]);
    let term = open(&env, Some(&fake), &[], &[]);
    assert!(
        term.with_screen(vt100::Screen::bracketed_paste),
        "bracketed paste is on"
    );
    let line = "the quick brown fox jumps over the lazy dog 0123456789 ".repeat(2);
    let mut pasted = String::new();
    let mut n = 0;
    while pasted.len() < 1024 * 1024 {
        pasted.push_str(&format!("{n:06} {line}\n"));
        n += 1;
    }
    let pasted = pasted.trim_end().to_owned();
    let mut keys = b"\x1b[200~".to_vec();
    keys.extend_from_slice(pasted.as_bytes());
    keys.extend_from_slice(b"\x1b[201~\r");
    term.write(&keys);
    let body = fake.wait_for_requests(1, DEADLINE)[0].body.clone();
    term.wait_for("Got it all.", DEADLINE);
    wait_ready(&term);
    let user = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .expect("a user message")["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(user.len(), pasted.len(), "the whole paste");
    assert!(user == pasted, "the paste arrives as it was");
    exit(&term);
}

#[test]
fn a_tool_printing_invalid_utf8_shows_replacement_characters() {
    let env = Env::new();
    let fake = FakeModel::start([
        bash_call("c1", r"printf '\xff\xfe ok\n'"),
        answer(&["Survived."]),
    ]);
    let term = open(&env, Some(&fake), &["--mode", "yolo"], &[]);
    let screen = say(&term, "print bytes", "Survived.");
    let line = screen
        .lines()
        .find(|l| l.starts_with("  ") && l.ends_with(" ok"))
        .unwrap_or_else(|| panic!("no output line:\n{screen}"));
    assert!(line.contains('\u{FFFD}'), "{line:?}");
    assert!(tool_results(&fake.requests()[1].body)[0].contains("\u{FFFD} ok"));
    exit(&term);
}

#[test]
fn a_tool_printing_escape_sequences_cannot_drive_the_terminal() {
    let env = Env::new();
    let command = r"printf '\033[2J\033[H\033[31mREDTEXT\033]0;title\007'; sleep 0.3";
    let fake = FakeModel::start([bash_call("c1", command), answer(&["Still here."])]);
    let term = open(&env, Some(&fake), &["--mode", "yolo"], &[]);
    let screen = say(&term, "print escapes", "Still here.");
    // The screen was not cleared: the welcome is still at the top.
    assert!(
        screen.starts_with("oml 0.1.0  model fake/model"),
        "{screen}"
    );
    assert!(screen.contains("\n  REDTEXT\n"), "{screen}");
    assert!(
        !term.is_coloured("  REDTEXT"),
        "{:?}",
        term.cell_attrs("  REDTEXT")
    );
    assert_eq!(term.with_screen(|s| s.title().to_owned()), "");
    exit(&term);
}
