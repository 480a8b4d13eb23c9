//! A session's inbox end to end: messages posted with `session.post!` (here from an advice of
//! `agent.execute-tool`, as a background task would post its result) join the transcript before
//! the loop's next model call, once, and are shown; `session.take-posted!` empties the inbox.
//! The real `oml -p` binary against the fake model server.

mod support;

use support::fake_model::{FakeModel, text_chunks, tool_call_chunks};
use support::home::Env;
use support::model::*;

#[test]
fn a_message_posted_while_a_tool_runs_joins_before_the_next_model_call() {
    let env = Env::new();
    env.file("notes.txt", "hello\n");
    env.init(
        r#"(advise! agent.execute-tool :post
  (fn [execute ...]
    (session.post! {:role :user :content "dropped"})
    ;; Taken here, so never seen by the model.
    (assert (= 1 (length (session.take-posted!))))
    (assert (= 0 (length (session.take-posted!))))
    (session.post! {:role :user :content "posted while the tool ran"})
    (execute ...)))
"#,
    );
    let fake = FakeModel::start(replies(vec![
        tool_call_chunks("call_1", "read", &[r#"{"path":"notes.txt"}"#]),
        text_chunks(&["Noted."]),
    ]));
    let run = env.run(Some(&fake), &["-p", "read notes.txt"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(!run.stdout.contains("failed"), "{}", run.stdout);
    assert!(
        run.stdout
            .contains("> user: posted while the tool ran\nNoted.\n"),
        "{}",
        run.stdout
    );
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    let second = &requests[1].body;
    assert_eq!(
        roles(second),
        ["system", "user", "assistant", "tool", "user"]
    );
    assert_eq!(
        user_texts(second),
        ["read notes.txt", "posted while the tool ran"]
    );
}

#[test]
fn a_message_without_a_role_is_refused() {
    let env = Env::new();
    env.init(
        r#"(advise! agent.execute-tool :post
  (fn [execute ...]
    (let [(ok e) (pcall session.post! {:content "no role"})]
      (assert (not ok))
      (assert (string.find (tostring e) "a message is a table with :role" 1 true)))
    (execute ...)))
"#,
    );
    let fake = FakeModel::start(replies(vec![
        tool_call_chunks("call_1", "ls", &["{}"]),
        text_chunks(&["Listed."]),
    ]));
    let run = env.run(Some(&fake), &["-p", "list"]);
    assert_eq!(run.code, 0, "{run:?}");
    // The advice's assertions held: the tool ran and did not fail.
    assert!(run.stdout.contains("\n  ok: "), "{}", run.stdout);
    assert!(!run.stdout.contains("failed"), "{}", run.stdout);
    assert!(run.stdout.ends_with("Listed.\n"), "{}", run.stdout);
    assert_eq!(fake.requests().len(), 2);
    assert_eq!(user_texts(&fake.requests()[1].body), ["list"]);
}
