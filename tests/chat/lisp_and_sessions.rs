//! The chat's Lisp and commands (Fennel forms in one conversation, `,help`, slash commands) and
//! its sessions (`-c`, `--session`, `--resume`, `--no-session`, `--model`).

use super::*;

// --- Fennel and commands

#[test]
fn fennel_forms_run_in_one_conversation_whose_locals_persist() {
    let env = Env::new();
    let term = open(&env, None, &[], &[]);
    say(&term, "(+ 1 2)", "\n3\n");
    // A form over several lines is read until it balances.
    term.type_line("(+ 100");
    term.wait_until("a second line for the form", DEADLINE, |screen| {
        let (row, col) = screen.cursor_position();
        let rows: Vec<String> = screen.rows(0, screen.size().1).collect();
        row > 0 && col == 0 && rows[usize::from(row) - 1].ends_with("(+ 100")
    });
    say(&term, "   23)", "\n123\n");
    // Locals and functions stay defined for the next forms.
    term.type_line("(local x 5)");
    term.wait_for("(local x 5)\n", DEADLINE);
    wait_ready(&term);
    say(&term, "(* x 10)", "\n50\n");
    term.type_line("(fn sq [n] (* n n))");
    term.wait_for("(fn sq [n] (* n n))\n", DEADLINE);
    wait_ready(&term);
    say(&term, "(sq 7)", "\n49\n");
    // The forms act on the chat's session.
    say(&term, "(.. :session- (session.current))", "\"session-");
    exit(&term);
}

#[test]
fn a_lisp_error_is_shown_in_red_and_the_chat_goes_on() {
    let env = Env::new();
    let term = open(&env, None, &[], &[]);
    let screen = say(&term, "(error \"boom\")", "boom");
    assert!(screen.contains("repl:1: boom"), "{screen}");
    let line = screen
        .lines()
        .find(|l| l.contains("repl:1: boom"))
        .unwrap()
        .to_owned();
    assert!(term.is_coloured(&line), "{:?}", term.cell_attrs(&line));
    // Unbalanced the other way: a parse error, not a wait for more lines.
    say(&term, "(+ 1 2))", "Parse error");
    say(&term, "(+ 20 22)", "\n42\n");
    exit(&term);
}

#[test]
fn comma_help_lists_the_keys_and_the_repl_commands_and_comma_exit_exits() {
    let env = Env::new();
    let term = open(&env, None, &[], &[]);
    let screen = say(&term, ",help", ",reload");
    assert!(screen.contains("Alt-Enter"), "{screen}");
    assert!(screen.contains("Ctrl-C        cancel the turn"), "{screen}");
    assert!(screen.contains(",doc"), "{screen}");
    term.type_line(",exit");
    assert_eq!(term.wait_exit(DEADLINE), Some(0), "{}", term.text());
}

#[test]
fn slash_commands_answer_without_the_model() {
    let env = Env::new();
    let fake = FakeModel::start(Vec::<Reply>::new());
    let term = open(&env, Some(&fake), &[], &[]);
    say(&term, "/settings", "tools.read-max-chars");
    // A Markdown list of `name` = `value`: bullets, the code spans in colour.
    let text = term.text();
    assert!(
        text.contains("• agent.permission-mode = \"ask\"\n"),
        "{text}"
    );
    assert!(term.is_coloured("tools.read-max-chars"));
    say(&term, "/model", "Model: fake/model");
    say(&term, "/model other/model", "Model set to other/model");
    assert!(fake.requests().is_empty(), "slash commands are not prompts");
    exit(&term);
}

// --- sessions

/// The id in the welcome's "resumed session <id>" line.
fn resumed_id(screen: &str) -> String {
    let line = screen
        .lines()
        .find_map(|l| l.strip_prefix("resumed session "))
        .unwrap_or_else(|| panic!("no `resumed session` line:\n{screen}"));
    line.trim().to_owned()
}

#[test]
fn dash_c_goes_on_with_the_latest_session_of_the_directory() {
    let env = Env::new();
    let fake = FakeModel::start([
        answer(&["Noted the word."]),
        answer(&["It was PAPAYA."]),
        answer(&["Still PAPAYA."]),
    ]);
    let term = open(&env, Some(&fake), &[], &[]);
    assert!(!term.screen().contains("resumed session"));
    say(&term, "remember the word PAPAYA", "Noted the word.");
    exit(&term);

    let term = open(&env, Some(&fake), &["-c"], &[]);
    let id = resumed_id(&term.screen());
    let listed = env.run(None, &["sessions"]);
    assert_eq!(listed.code, 0, "{listed:?}");
    assert!(listed.stdout.contains(&id), "{listed:?}");
    say(&term, "what was the word?", "It was PAPAYA.");
    let second = messages(&fake.wait_for_requests(2, DEADLINE)[1].body);
    assert!(second.contains("remember the word PAPAYA"), "{second}");
    assert!(second.contains("Noted the word."), "{second}");
    exit(&term);

    // --session ID names it; the three turns are one conversation.
    let term = open(&env, Some(&fake), &["--session", &id], &[]);
    assert_eq!(resumed_id(&term.screen()), id);
    say(&term, "and now?", "Still PAPAYA.");
    let third = messages(&fake.wait_for_requests(3, DEADLINE)[2].body);
    assert!(third.contains("what was the word?"), "{third}");
    exit(&term);
}

#[test]
fn a_chat_opened_and_closed_without_a_word_does_not_hide_the_conversation_from_dash_c() {
    let env = Env::new();
    let fake = FakeModel::start([answer(&["Noted KIWI."]), answer(&["It was KIWI."])]);
    let term = open(&env, Some(&fake), &[], &[]);
    say(&term, "remember KIWI", "Noted KIWI.");
    exit(&term);
    // Opened, and closed at once.
    let term = open(&env, Some(&fake), &[], &[]);
    exit(&term);

    let term = open(&env, Some(&fake), &["-c"], &[]);
    resumed_id(&term.screen());
    say(&term, "which fruit?", "It was KIWI.");
    let second = messages(&fake.wait_for_requests(2, DEADLINE)[1].body);
    assert!(second.contains("remember KIWI"), "{second}");
    exit(&term);
}

#[test]
fn slash_sessions_lists_them_and_slash_resume_goes_on_with_the_latest_conversation() {
    let env = Env::new();
    let fake = FakeModel::start([
        answer(&["Noted FIG."]),
        answer(&["It was FIG."]),
        answer(&["A fresh start."]),
    ]);
    let term = open(&env, Some(&fake), &[], &[]);
    say(&term, "remember FIG", "Noted FIG.");
    exit(&term);
    let first = env.run(None, &["sessions"]);

    // A new chat (its own session, still empty) lists both, and resumes the one with words.
    let term = open(&env, Some(&fake), &[], &[]);
    let screen = say(&term, "/sessions", "/resume ID goes on with one.");
    assert!(screen.contains("remember FIG"), "{screen}");
    assert!(!screen.contains("error"), "{screen}");
    let screen = say(&term, "/resume", "Resuming ");
    let id = screen
        .lines()
        .find_map(|l| l.strip_prefix("Resuming "))
        .expect("the id resumed")
        .trim_end_matches('.')
        .to_owned();
    assert!(first.stdout.contains(&id), "{first:?}");
    term.wait_for(&format!("session {id}"), DEADLINE);
    say(&term, "which fruit?", "It was FIG.");
    let second = messages(&fake.wait_for_requests(2, DEADLINE)[1].body);
    assert!(second.contains("remember FIG"), "{second}");

    // /new leaves it for a session of its own.
    term.type_line("/new");
    term.wait_for("Starting a new session.", DEADLINE);
    wait_ready(&term);
    say(&term, "hello", "A fresh start.");
    let third = messages(&fake.wait_for_requests(3, DEADLINE)[2].body);
    assert!(!third.contains("FIG"), "{third}");
    exit(&term);
}

#[test]
fn resume_lists_the_recent_sessions_and_asks_which() {
    let env = Env::new();
    let fake = FakeModel::start([answer(&["First."]), answer(&["Back again."])]);
    let term = open(&env, Some(&fake), &[], &[]);
    say(&term, "a session to pick", "First.");
    exit(&term);

    let term = env.terminal(Some(&fake), &["--no-input", "--resume"], ROWS, COLS);
    let screen = term.wait_for("Resume which (1-1, Enter: 1)? ", DEADLINE);
    assert!(
        screen.contains("Recent sessions of this directory:"),
        "{screen}"
    );
    assert!(screen.contains("  1  "), "{screen}");
    term.type_line("1");
    term.wait_for("resumed session ", DEADLINE);
    wait_ready(&term);
    say(&term, "again", "Back again.");
    assert!(messages(&fake.requests()[1].body).contains("a session to pick"));
    exit(&term);
}

#[test]
fn an_unknown_session_is_an_error_and_no_session_stores_nothing() {
    let env = Env::new();
    let term = env.terminal(None, &["--no-input", "--session", "nope"], ROWS, COLS);
    term.wait_for("no stored session nope", DEADLINE);
    assert_eq!(term.wait_exit(DEADLINE), Some(1), "{}", term.text());

    let fake = FakeModel::start([answer(&["Forgotten."])]);
    let term = open(&env, Some(&fake), &["--no-session"], &[]);
    say(&term, "do not keep this", "Forgotten.");
    exit(&term);
    let listed = env.run(None, &["sessions"]);
    assert_eq!(listed.code, 0, "{listed:?}");
    assert!(!listed.stdout.contains("do not keep"), "{listed:?}");
    let term = open(&env, Some(&fake), &["-c"], &[]);
    assert!(
        !term.screen().contains("resumed session"),
        "{}",
        term.screen()
    );
    exit(&term);
}

#[test]
fn the_model_flag_sets_the_model_of_the_chat() {
    let env = Env::new();
    let fake = FakeModel::start([answer(&["Hello from the other model."])]);
    let term = open(&env, Some(&fake), &["--model", "other/model"], &[]);
    assert!(
        term.screen().contains("model other/model · "),
        "{}",
        term.screen()
    );
    say(&term, "hi", "Hello from the other model.");
    assert_eq!(fake.requests()[0].body["model"], "other/model");
    exit(&term);
}
