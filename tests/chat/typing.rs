//! Typing while the agent works: Enter queues the line for a turn of its own, Ctrl-S steers it
//! into the running turn (before its next model call), a steered line the turn did not take
//! runs next, and Ctrl-C still cancels the turn.

use super::*;
use support::model::user_texts;

/// A reply that says `text` and then takes `ms` before it ends.
fn slow(text: &str, ms: u64) -> Reply {
    Reply::Stream(vec![
        Step::Chunk(support::fake_model::delta_chunk(
            json!({"content": text}),
            None,
        )),
        Step::Sleep(ms),
        Step::Chunk(support::fake_model::delta_chunk(json!({}), Some("stop"))),
    ])
}

#[test]
fn enter_while_the_agent_works_queues_the_line_for_its_own_turn() {
    let env = Env::new();
    let fake = FakeModel::start([slow("First answer.", 1500), answer(&["Second answer."])]);
    let term = open(&env, Some(&fake), &[], &[]);
    term.type_line("first question");
    term.wait_for("First answer.", DEADLINE);
    term.type_line("second question");
    let screen = term.wait_for("queued › second question", DEADLINE);
    assert_eq!(fake.requests().len(), 1, "{screen}");
    term.wait_for("Second answer.", DEADLINE);
    let screen = wait_ready(&term);
    // It ran as its own turn, shown as typed, after the first.
    let first = screen.find("First answer.").expect("the first answer");
    // Once as queued, once as run.
    assert_eq!(screen.matches("› second question").count(), 2, "{screen}");
    let ran = screen
        .rfind("› second question")
        .expect("the queued line shown");
    let second = screen.find("Second answer.").expect("the second answer");
    assert!(first < ran && ran < second, "{screen}");
    let requests = fake.wait_for_requests(2, DEADLINE);
    assert_eq!(user_texts(&requests[0].body), ["first question"]);
    assert_eq!(
        user_texts(&requests[1].body),
        ["first question", "second question"]
    );
    exit(&term);
}

#[test]
fn ctrl_s_while_the_agent_works_steers_the_line_into_the_running_turn() {
    let env = Env::new();
    let args = json!({"command": "sleep 1; echo done"}).to_string();
    let fake = FakeModel::start([
        Reply::Stream(tool_call_chunks("c1", "bash", &[&args])),
        answer(&["Steered answer."]),
    ]);
    let term = open(&env, Some(&fake), &["--mode", "yolo"], &[]);
    term.type_line("run it");
    term.wait_for("sleep 1", DEADLINE);
    term.write(b"in French please\x13");
    term.wait_for("steering › in French please", DEADLINE);
    term.wait_for("Steered answer.", DEADLINE);
    let screen = wait_ready(&term);
    let requests = fake.wait_for_requests(2, DEADLINE);
    assert_eq!(requests.len(), 2, "no turn of its own: {screen}");
    assert_eq!(
        user_texts(&requests[1].body),
        ["run it", "in French please"]
    );
    // Shown as the user's where it joined the turn.
    assert!(screen.contains("› in French please"), "{screen}");
    exit(&term);
}

#[test]
fn a_steered_line_the_turn_did_not_take_runs_next_and_ctrl_c_still_cancels() {
    let env = Env::new();
    let fake = FakeModel::start([slow("Short answer.", 1500), answer(&["Its own turn."])]);
    let term = open(&env, Some(&fake), &[], &[]);
    term.type_line("first");
    term.wait_for("Short answer.", DEADLINE);
    term.write(b"too late\x13");
    term.wait_for("Its own turn.", DEADLINE);
    wait_ready(&term);
    let requests = fake.wait_for_requests(2, DEADLINE);
    assert_eq!(user_texts(&requests[1].body), ["first", "too late"]);

    // Ctrl-C, a key while the turn reads them, cancels it.
    fake.push(Reply::Stream(vec![
        Step::Chunk(support::fake_model::delta_chunk(
            json!({"content": "Hanging"}),
            None,
        )),
        Step::Hang,
    ]));
    term.type_line("hang");
    term.wait_for("Hanging", DEADLINE);
    term.ctrl_c();
    term.wait_for("stopped: cancelled", DEADLINE);
    exit(&term);
}

#[test]
fn with_the_setting_on_steer_enter_steers_and_a_slash_command_still_waits() {
    let env = Env::new();
    env.init("(setq agent.prompt-while-busy :steer)\n");
    let args = json!({"command": "sleep 1; echo done"}).to_string();
    let fake = FakeModel::start([
        Reply::Stream(tool_call_chunks("c1", "bash", &[&args])),
        answer(&["Steered answer."]),
    ]);
    let term = open(&env, Some(&fake), &["--mode", "yolo"], &[]);
    term.type_line("run it");
    term.wait_for("sleep 1", DEADLINE);
    term.type_line("and be brief");
    term.wait_for("steering › and be brief", DEADLINE);
    term.type_line("/usage");
    term.wait_for("queued › /usage", DEADLINE);
    term.wait_for("Steered answer.", DEADLINE);
    wait_ready(&term);
    let requests = fake.wait_for_requests(2, DEADLINE);
    assert_eq!(user_texts(&requests[1].body), ["run it", "and be brief"]);
    // The slash command ran after the turn, without the model.
    assert_eq!(fake.requests().len(), 2);
    exit(&term);
}
