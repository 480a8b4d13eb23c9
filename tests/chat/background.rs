//! A background task that ends while the chat waits at its prompt wakes it: a turn with no
//! prompt of its own answers the result at once, without the user sending anything, and what
//! the user was typing comes back at the prompt after it.

use super::*;
use support::model::user_texts;

/// The line the cursor is on, trimmed at its end.
fn cursor_line(screen: &vt100::Screen) -> String {
    let (row, _) = screen.cursor_position();
    screen
        .rows(0, screen.size().1)
        .nth(usize::from(row))
        .unwrap_or_default()
        .trim_end()
        .to_owned()
}

#[test]
fn a_background_command_ending_at_the_prompt_wakes_a_turn_and_keeps_what_was_typed() {
    let env = Env::new();
    let args = json!({"command": "sleep 3; echo built", "background": true}).to_string();
    let fake = FakeModel::start([
        Reply::Stream(tool_call_chunks("c1", "bash", &[&args])),
        answer(&["Started the build."]),
        answer(&["The build is done."]),
        answer(&["Sent after all."]),
    ]);
    let term = open(&env, Some(&fake), &["--mode", "yolo"], &[]);
    term.type_line("build it in the background");
    term.wait_for("Started the build.", DEADLINE);
    wait_ready(&term);
    // Typed, not sent: the result comes meanwhile and a turn answers it.
    term.write(b"half typed");
    let screen = term.wait_for("The build is done.", DEADLINE);
    assert!(
        screen.contains("the line above is not sent, it comes back after"),
        "{screen}"
    );
    let requests = fake.wait_for_requests(3, DEADLINE);
    let woke = user_texts(&requests[2].body);
    let result = woke.last().cloned().unwrap_or_default();
    assert!(
        result.starts_with("[Background task task-1 (bash: sleep 3; echo built) has finished]"),
        "{woke:?}"
    );
    assert!(result.contains("built"), "{result}");
    // What was typed is back at the prompt, cursor at its end; Enter sends it.
    let screen = term.wait_until("the typed text back at the prompt", DEADLINE, |s| {
        s.contents().contains("The build is done.") && cursor_line(s) == "› half typed"
    });
    assert_eq!(fake.requests().len(), 3, "{screen}");
    term.write(b"\r");
    term.wait_for("Sent after all.", DEADLINE);
    let requests = fake.wait_for_requests(4, DEADLINE);
    let sent = user_texts(&requests[3].body);
    assert_eq!(
        sent.last().map(String::as_str),
        Some("half typed"),
        "{sent:?}"
    );
    exit(&term);
}

#[test]
fn a_result_too_late_for_the_last_turn_is_answered_before_the_next_line_is_read() {
    let env = Env::new();
    let args = json!({"command": "sleep 0.3; echo early", "background": true}).to_string();
    let fake = FakeModel::start([
        Reply::Stream(tool_call_chunks("c1", "bash", &[&args])),
        // The command ends while this, the turn's last model call, streams.
        Reply::Stream(vec![
            Step::Sleep(1500),
            Step::Chunk(support::fake_model::delta_chunk(
                json!({"content": "Started it."}),
                Some("stop"),
            )),
        ]),
        answer(&["It said early."]),
    ]);
    let term = open(&env, Some(&fake), &["--mode", "yolo"], &[]);
    term.type_line("start it");
    term.wait_for("It said early.", DEADLINE);
    let screen = wait_ready(&term);
    let requests = fake.wait_for_requests(3, DEADLINE);
    let woke = user_texts(&requests[2].body);
    assert!(
        woke.last().is_some_and(|t| t.contains("early")),
        "{woke:?}\n{screen}"
    );
    let started = screen.find("Started it.").expect("the first answer");
    let answered = screen.find("It said early.").expect("the woken answer");
    assert!(started < answered, "{screen}");
    exit(&term);
}
