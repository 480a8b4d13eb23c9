//! The terminal chat (`oml` with no command) as a person uses it: the real binary on a
//! pseudo-terminal (`support::pty`), answered by the fake model over real TCP, every check made
//! on what the screen shows (or, piped, on what is printed) and on what the model was sent.
//!
//! Covered: a streamed answer styled as light Markdown and its status line; a tool card with
//! its live output; the one-key permission question (y, a, n, Esc; a huge line cut); Ctrl-C while the answer
//! streams and while a command runs; Fennel forms (one line, several lines, locals that
//! persist, errors); chat and slash commands; sessions (`-c`, `--session`, `--resume`);
//! `NO_COLOR` and `TERM=dumb`; a narrow terminal; piped stdin; and bad input: a model error
//! mid-stream or as HTTP 500, a pasted megabyte, a tool printing invalid UTF-8 or escape
//! sequences; typing while the agent works (a line queued, a line steered); a background task
//! waking the chat at its prompt. This file holds the
//! helpers, answers, cards, questions and Ctrl-C; `tests/chat/` the rest.

#![allow(clippy::print_stderr)] // the paste test reports how long the paste took

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::chat::{exit, wait_ready};
use support::fake_model::{
    FakeModel, Reply, Step, pieces, text_chunks, tool_call_chunks, usage_chunk,
};
use support::home::Env;
use support::pty::{DEADLINE, Term};

#[path = "chat/background.rs"]
mod background;
#[path = "chat/bad_input.rs"]
mod bad_input;
#[path = "chat/lisp_and_sessions.rs"]
mod lisp_and_sessions;
#[path = "chat/terminals.rs"]
mod terminals;
#[path = "chat/typing.rs"]
mod typing;

/// Rows and columns of the terminal unless a test says otherwise: wide enough that the
/// permission question's key line (66 columns) stays on one row.
const ROWS: u16 = 40;
const COLS: u16 = 110;

/// `oml --no-input ARGS…` (no offer to configure a discovered agent) on a terminal, pointed at
/// `fake`, with `vars` set; waits for the first prompt.
fn open(env: &Env, fake: Option<&FakeModel>, args: &[&str], vars: &[(&str, &str)]) -> Term {
    open_sized(env, fake, args, vars, ROWS, COLS)
}

fn open_sized(
    env: &Env,
    fake: Option<&FakeModel>,
    args: &[&str],
    vars: &[(&str, &str)],
    rows: u16,
    cols: u16,
) -> Term {
    let mut argv = vec!["--no-input"];
    argv.extend_from_slice(args);
    let mut cmd = env.command(fake, &argv);
    cmd.envs(vars.iter().copied());
    let term = Term::spawn(cmd, rows, cols);
    wait_ready(&term);
    term
}

/// Type `input`, wait for `marker` (text the input makes appear), then for the next prompt;
/// returns the screen then.
fn say(term: &Term, input: &str, marker: &str) -> String {
    term.type_line(input);
    term.wait_for(marker, DEADLINE);
    wait_ready(term)
}

/// A `bash` tool call running `command`.
fn bash_call(id: &str, command: &str) -> Reply {
    let args = json!({ "command": command }).to_string();
    Reply::Stream(tool_call_chunks(id, "bash", &[&args]))
}

/// A streamed text answer in these pieces.
fn answer(pieces: &[&str]) -> Reply {
    Reply::Stream(text_chunks(pieces))
}

/// Every message of a request, as one JSON text to search.
fn messages(body: &Value) -> String {
    body["messages"].to_string()
}

/// The tool results (role `tool`) of a request's messages.
fn tool_results(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// How many times `needle` is shown, on the screen and in the rows scrolled off it.
fn count(term: &Term, needle: &str) -> usize {
    term.text().matches(needle).count()
}

// --- a streamed answer

#[test]
fn a_streamed_answer_is_drawn_as_light_markdown_with_a_status_line() {
    let env = Env::new();
    let mut steps = text_chunks(&[
        "# Plan\n",
        "Use the **strong** tool and `cargo ",
        "test`.\n- first item\n- second",
        " item\n```sh\nls -la\n```\nDone.",
    ]);
    steps.insert(steps.len() - 1, usage_chunk(1200, 80));
    let fake = FakeModel::start([Reply::Stream(steps)]);
    let term = open(&env, Some(&fake), &[], &[]);
    let welcome = term.screen();
    let cwd = env.project.display().to_string();
    assert!(
        welcome.contains(&format!("oml 0.1.0  model fake/model · {cwd}")),
        "{welcome}"
    );
    assert!(welcome.contains("Ask anything"), "{welcome}");

    let screen = say(&term, "make a plan", "Done.");
    // The heading without its `#`, bold and coloured; bold text; code in colour; bullets.
    assert!(screen.contains("\nPlan\n"), "{screen}");
    assert!(!screen.contains("# Plan"), "{screen}");
    assert!(term.is_bold("Plan"), "{:?}", term.cell_attrs("Plan"));
    assert!(term.is_coloured("Plan"));
    assert!(
        screen.contains("Use the strong tool and cargo test."),
        "{screen}"
    );
    assert!(term.is_bold("strong"));
    assert!(!term.is_bold("Use the"));
    assert!(term.is_coloured("cargo test"));
    assert!(!term.is_coloured("tool and"));
    assert!(screen.contains("• first item\n• second item"), "{screen}");
    // A fenced block: its fences dimmed, its lines in the code colour.
    assert!(screen.contains("```sh\nls -la\n```"), "{screen}");
    assert!(term.is_coloured("ls -la"));
    // The status line: tokens, how full the context is, the time taken.
    assert!(
        screen.contains("1.3k tokens · context 1% of 128k · "),
        "{screen}"
    );
    let request = &fake.requests()[0].body;
    assert_eq!(request["model"], "fake/model");
    assert!(messages(request).contains("make a plan"));
    exit(&term);
}

#[test]
fn without_a_model_the_chat_says_how_to_configure_one_and_goes_on() {
    let env = Env::new();
    let term = open(&env, None, &[], &[]);
    assert!(term.screen().contains("no model yet"), "{}", term.screen());
    let screen = say(&term, "hello", "error: No model configured");
    assert!(term.is_coloured("error: No model configured"), "{screen}");
    say(&term, "(+ 40 2)", "42");
    exit(&term);
}

// --- tool cards and permission questions

#[test]
fn a_running_command_shows_its_output_live_under_its_card() {
    let env = Env::new();
    let command = "for i in 1 2 3; do echo line $i; sleep 0.3; done";
    let fake = FakeModel::start([bash_call("c1", command), answer(&["All three printed."])]);
    let term = open(&env, Some(&fake), &["--mode", "yolo"], &[]);
    term.type_line("count to three");
    let running = term.wait_for("│ line 1", DEADLINE);
    assert!(running.contains(&format!("● $ {command}")), "{running}");
    assert!(
        !running.contains("✓"),
        "the card is still running:\n{running}"
    );
    let screen = term.wait_for("All three printed.", DEADLINE);
    wait_ready(&term);
    assert!(
        screen.contains(&format!("✓ $ {command}  exit 0")),
        "{screen}"
    );
    // The live tail is gone; the first lines of the output stay under the card.
    assert!(!screen.contains("│ line"), "{screen}");
    assert!(screen.contains("  line 1\n  line 2\n  line 3"), "{screen}");
    assert!(!screen.contains("● $"), "{screen}");
    assert!(tool_results(&fake.requests()[1].body)[0].contains("line 3"));
    exit(&term);
}

#[test]
fn a_failing_command_gets_a_cross_and_its_exit_status() {
    let env = Env::new();
    let fake = FakeModel::start([
        bash_call("c1", "echo about to fail; exit 3"),
        answer(&["It failed."]),
    ]);
    let term = open(&env, Some(&fake), &["--mode", "yolo"], &[]);
    let screen = say(&term, "fail", "It failed.");
    assert!(
        screen.contains("✗ $ echo about to fail; exit 3  exit 3"),
        "{screen}"
    );
    assert!(screen.contains("  about to fail"), "{screen}");
    exit(&term);
}

/// How a command ended travels as data: a tool whose error text merely ends like a command's
/// (a `read` of a file named `[exit code 4]`) gets no exit status on its card.
#[test]
fn only_a_command_card_shows_an_exit_status() {
    let env = Env::new();
    let args = json!({ "path": "[exit code 4]" }).to_string();
    let fake = FakeModel::start([
        Reply::Stream(tool_call_chunks("r1", "read", &[&args])),
        answer(&["Not there."]),
    ]);
    let term = open(&env, Some(&fake), &["--mode", "yolo"], &[]);
    let screen = say(&term, "read it", "Not there.");
    assert!(screen.contains("File not found"), "{screen}");
    assert!(screen.contains("✗ "), "{screen}");
    assert!(!screen.contains("  exit 4"), "{screen}");
    exit(&term);
}

/// The question asked before `command` runs, as the screen shows it.
fn question_shown(screen: &str, cwd: &str, command: &str) {
    assert!(
        screen.contains(&format!("Run this command?  in {cwd}\n{command}\n")),
        "{screen}"
    );
    assert!(
        screen.contains("[y] yes (Enter)  [a] always: `"),
        "{screen}"
    );
    assert!(screen.contains("` commands  [n] no"), "{screen}");
}

#[test]
fn yes_runs_the_command_once() {
    let env = Env::new();
    let fake = FakeModel::start([bash_call("c1", "echo approved-run"), answer(&["Ran it."])]);
    let term = open(&env, Some(&fake), &[], &[]);
    term.type_line("run it");
    let screen = term.wait_for("[n] no", DEADLINE);
    question_shown(
        &screen,
        &env.project.display().to_string(),
        "echo approved-run",
    );
    // The model has not been told anything yet: the command waits for the answer.
    assert_eq!(fake.requests().len(), 1);
    term.write(b"y");
    let screen = term.wait_for("Ran it.", DEADLINE);
    wait_ready(&term);
    assert!(screen.contains("› yes"), "{screen}");
    assert!(screen.contains("✓ $ echo approved-run  exit 0"), "{screen}");
    assert!(tool_results(&fake.requests()[1].body)[0].contains("approved-run"));
    exit(&term);
}

#[test]
fn the_model_asks_a_question_with_choices_and_one_key_answers_it() {
    let env = Env::new();
    let args =
        json!({"question": "Which database?", "choices": ["postgres", "sqlite"]}).to_string();
    let fake = FakeModel::start([
        Reply::Stream(tool_call_chunks("c1", "ask_user", &[&args])),
        answer(&["Going with it."]),
    ]);
    let term = open(&env, Some(&fake), &[], &[]);
    term.type_line("set it up");
    let screen = term.wait_for("2) sqlite", DEADLINE);
    assert!(
        screen.contains("Which database?") && screen.contains("1) postgres"),
        "{screen}"
    );
    term.write(b"2");
    term.wait_for("Going with it.", DEADLINE);
    wait_ready(&term);
    assert_eq!(
        tool_results(&fake.requests()[1].body)[0],
        "The user answered: sqlite"
    );
    exit(&term);
}

#[test]
fn enter_answers_yes() {
    let env = Env::new();
    let fake = FakeModel::start([bash_call("c1", "echo via-enter"), answer(&["Done."])]);
    let term = open(&env, Some(&fake), &[], &[]);
    term.type_line("run it");
    term.wait_for("[n] no", DEADLINE);
    term.write(b"\r");
    let screen = term.wait_for("Done.", DEADLINE);
    assert!(screen.contains("✓ $ echo via-enter  exit 0"), "{screen}");
    exit(&term);
}

#[test]
fn always_lets_the_next_command_of_the_session_run_without_asking() {
    let env = Env::new();
    let fake = FakeModel::start([
        bash_call("c1", "echo same first-call"),
        bash_call("c2", "echo same second-call"),
        answer(&["Both ran."]),
    ]);
    let term = open(&env, Some(&fake), &[], &[]);
    term.type_line("run two");
    term.wait_for("[n] no", DEADLINE);
    // "Always" names the rule it adds: the command's first two words.
    assert!(
        term.screen().contains("[a] always: `echo same …` commands"),
        "{}",
        term.screen()
    );
    term.write(b"a");
    let screen = term.wait_for("Both ran.", DEADLINE);
    wait_ready(&term);
    assert!(screen.contains("› always"), "{screen}");
    assert!(
        screen.contains("✓ $ echo same first-call  exit 0"),
        "{screen}"
    );
    assert!(
        screen.contains("✓ $ echo same second-call  exit 0"),
        "{screen}"
    );
    assert_eq!(count(&term, "Run this command?"), 1, "{}", term.text());
    assert!(tool_results(&fake.requests()[2].body)[1].contains("second-call"));

    // And for the rest of the session: another turn, a command the rule covers, no question.
    fake.push(bash_call("c3", "echo same third-call"));
    fake.push(answer(&["Third ran."]));
    let screen = say(&term, "once more", "Third ran.");
    assert!(
        screen.contains("✓ $ echo same third-call  exit 0"),
        "{screen}"
    );
    assert_eq!(count(&term, "Run this command?"), 1, "{}", term.text());
    exit(&term);
}

#[test]
fn no_blocks_the_command_and_tells_the_model() {
    let env = Env::new();
    let marker = env.project.join("ran.txt");
    let command = format!("touch {}", marker.display());
    let fake = FakeModel::start([bash_call("c1", &command), answer(&["Understood."])]);
    let term = open(&env, Some(&fake), &[], &[]);
    term.type_line("touch it");
    term.wait_for("[n] no", DEADLINE);
    term.write(b"n");
    let screen = term.wait_for("Understood.", DEADLINE);
    wait_ready(&term);
    assert!(screen.contains("› no"), "{screen}");
    assert!(screen.contains(&format!("✗ $ {command}")), "{screen}");
    let results = tool_results(&fake.wait_for_requests(2, DEADLINE)[1].body);
    assert!(results[0].contains("Blocked"), "{results:?}");
    assert!(!marker.exists(), "a rejected command must not run");
    exit(&term);
}

#[test]
fn escape_at_the_question_cancels_the_turn() {
    let env = Env::new();
    let marker = env.project.join("ran.txt");
    let command = format!("touch {}", marker.display());
    let fake = FakeModel::start([bash_call("c1", &command)]);
    let term = open(&env, Some(&fake), &[], &[]);
    term.type_line("touch it");
    term.wait_for("[n] no", DEADLINE);
    term.write(b"\x1b");
    let screen = term.wait_for("stopped: cancelled", DEADLINE);
    wait_ready(&term);
    assert!(screen.contains("› cancelled"), "{screen}");
    assert!(!marker.exists(), "a cancelled command must not run");
    assert_eq!(fake.requests().len(), 1, "the turn ends there");
    exit(&term);
}

#[test]
fn an_edit_shows_its_diff() {
    let env = Env::new();
    env.file("notes.txt", "alpha\nbeta\ngamma\n");
    let args = json!({"path": "notes.txt", "old_text": "beta", "new_text": "BETA"}).to_string();
    let fake = FakeModel::start([
        Reply::Stream(tool_call_chunks("c1", "edit", &[&args])),
        answer(&["Edited."]),
    ]);
    let term = open(&env, Some(&fake), &[], &[]);
    term.type_line("shout beta");
    let question = term.wait_for("[n] no", DEADLINE);
    // The question names the file the edit would change: the path resolved, links followed.
    let real = env.project.join("notes.txt");
    let asked = format!("Edit {}?", real.display());
    assert!(question.contains(&asked), "{question}");
    assert!(question.contains("-beta\n+BETA"), "{question}");
    term.write(b"y");
    let screen = term.wait_for("Edited.", DEADLINE);
    assert!(screen.contains("✓ Edit notes.txt"), "{screen}");
    assert!(term.is_coloured("+BETA"));
    assert_eq!(
        std::fs::read_to_string(env.project.join("notes.txt")).unwrap(),
        "alpha\nBETA\ngamma\n"
    );
    exit(&term);
}

#[test]
fn a_write_of_one_huge_line_asks_with_the_line_cut_and_the_keys_on_screen() {
    let env = Env::new();
    let line = "y".repeat(2 << 20);
    let args = json!({"path": "big.txt", "content": line}).to_string();
    let fragments = pieces(&args, 64 << 10);
    let fake = FakeModel::start([
        Reply::Stream(tool_call_chunks("c1", "write", &fragments)),
        answer(&["Not written."]),
    ]);
    let term = open(&env, Some(&fake), &[], &[]);
    term.type_line("write a big file");
    let question = term.wait_for("[n] no", DEADLINE);
    let asked = format!("Write {}?", env.project.join("big.txt").display());
    assert!(question.contains(&asked), "{question}");
    // The diff's line is `+` and the content: its first 1000 characters are shown.
    let more = format!("… {} more characters", (2 << 20) + 1 - 1000);
    assert!(question.contains(&more), "{question}");
    // The line is shown up to chat.line-max-chars, not the 2 MB of it.
    let shown = term.text().matches('y').count();
    assert!((999..1100).contains(&shown), "{shown} y shown");
    term.write(b"n");
    let screen = term.wait_for("Not written.", DEADLINE);
    assert!(screen.contains("Blocked: the user rejected it"), "{screen}");
    assert!(!env.project.join("big.txt").exists());
    exit(&term);
}

// --- Ctrl-C

#[test]
fn ctrl_c_while_the_answer_streams_stops_the_turn_and_keeps_the_text() {
    let env = Env::new();
    let mut steps = text_chunks(&["The first half", " of the answer"]);
    steps.insert(1, Step::Hang);
    let fake = FakeModel::start([Reply::Stream(steps), answer(&["Next answer."])]);
    let term = open(&env, Some(&fake), &[], &[]);
    term.type_line("tell me");
    term.wait_for("The first half", DEADLINE);
    // The stream hangs: the turn stopping at all is the Ctrl-C's doing.
    term.ctrl_c();
    let screen = term.wait_for("stopped: cancelled", DEADLINE);
    wait_ready(&term);
    assert!(screen.contains("The first half"), "{screen}");
    assert!(!screen.contains("of the answer"), "{screen}");

    // The chat goes on, and the partial answer is part of the conversation.
    say(&term, "go on", "Next answer.");
    let second = &fake.wait_for_requests(2, DEADLINE)[1].body;
    assert!(messages(second).contains("The first half"), "{second}");
    exit(&term);
}

#[test]
fn ctrl_c_while_a_command_runs_kills_it_and_the_chat_goes_on() {
    let env = Env::new();
    let pid_file = env.project.join("sleep.pid");
    let background = env.project.join("background.pid");
    // The shell becomes `sleep 3600`, with another sleep in the background of its group:
    // neither ends by itself while the test runs.
    let command = format!(
        "sleep 3601 & echo $! > {}; echo $$ > {}; exec sleep 3600",
        background.display(),
        pid_file.display()
    );
    let fake = FakeModel::start([bash_call("c1", &command), answer(&["After."])]);
    let term = open(&env, Some(&fake), &["--mode", "yolo"], &[]);
    term.type_line("sleep");
    term.wait_for("● $ sleep 3601 &", DEADLINE);
    assert!(
        support::home::poll_until(DEADLINE, || std::fs::read_to_string(&pid_file)
            .is_ok_and(|s| s.ends_with('\n'))),
        "the command starts"
    );
    let pid_in = |file: &std::path::Path| -> i32 {
        std::fs::read_to_string(file)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let (pid, background) = (pid_in(&pid_file), pid_in(&background));
    term.ctrl_c();
    let screen = term.wait_for("stopped: cancelled", DEADLINE);
    wait_ready(&term);
    assert!(screen.contains("✗ $ sleep 3601 &"), "{screen}");
    for pid in [pid, background] {
        assert!(
            support::home::await_exit(pid, Duration::from_secs(5)),
            "the command's process {pid} still runs"
        );
    }
    assert_eq!(
        fake.requests().len(),
        1,
        "a cancelled turn asks the model nothing more"
    );
    say(&term, "still there?", "After.");
    exit(&term);
}

#[test]
fn ctrl_c_twice_on_an_empty_prompt_exits() {
    let env = Env::new();
    let term = open(&env, None, &[], &[]);
    term.ctrl_c();
    term.wait_for("Ctrl-C again or Ctrl-D to exit", DEADLINE);
    wait_ready(&term);
    term.ctrl_c();
    assert_eq!(term.wait_exit(DEADLINE), Some(0), "{}", term.text());
}
