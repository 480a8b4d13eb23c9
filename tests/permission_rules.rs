//! "Always" adds a rule, not a blanket allowance: for a command its leading words, for an edit
//! the tool inside the workspace. Driven through print mode in `ask` mode, with the answers
//! scripted by redefining `agent.ask-permission` in the init file, against a fake model over TCP.

mod support;

use support::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};
use support::home::{Env, Run};

/// Run the tool calls in one print-mode turn in `ask` mode, answering the questions in order
/// with `answers`; the tool results, and the output of the slash command `last` run in the
/// same session afterwards.
fn run(env: &Env, answers: &str, calls: &[(&str, &str)], last: &str) -> (Vec<String>, String) {
    env.init(&format!(
        r#"(setq agent.print-mode-permission :ask)
(local answers [{answers}])
(set agent.ask-permission (fn [call] (table.remove answers 1)))"#
    ));
    let mut list: Vec<_> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| tool_call_chunks(&format!("call_{i}"), name, &[args]))
        .collect();
    list.push(text_chunks(&["done"]));
    let fake = FakeModel::start(list.into_iter().map(Reply::Stream));
    let out = Run::from(
        env.command(Some(&fake), &["-p", "go"])
            .output()
            .expect("oml"),
    );
    assert_eq!(out.code, 0, "{out:?}");
    let requests = fake.requests();
    let results = (1..=calls.len())
        .map(|i| {
            let msgs = requests[i].body["messages"].as_array().unwrap();
            msgs.last().unwrap()["content"].as_str().unwrap().to_owned()
        })
        .collect();
    let shown = Run::from(
        env.command(None, &["-p", "--continue", last])
            .output()
            .expect("oml"),
    );
    (results, shown.stdout)
}

#[test]
fn always_for_a_command_allows_its_leading_words_and_nothing_chained() {
    let env = Env::new();
    env.file("victim", "still here\n");
    let (results, rules) = run(
        &env,
        ":allow-always :reject-once :allow-once",
        &[
            ("bash", r#"{"command": "echo ok 1"}"#),
            ("bash", r#"{"command": "echo ok 2"}"#),
            ("bash", r#"{"command": "echo ok; rm -f victim"}"#),
            ("bash", r#"{"command": "echo other"}"#),
        ],
        "/permissions",
    );
    assert_eq!(results[0].trim(), "ok 1");
    // Covered by the rule `echo ok …`: not asked.
    assert_eq!(results[1].trim(), "ok 2");
    // Chained: the rule does not cover it, so it was asked, and rejected.
    assert_eq!(results[2], "Blocked: the user rejected it");
    assert!(env.project.join("victim").exists());
    assert_eq!(results[3].trim(), "other");
    assert_eq!(rules.trim(), "1. allow `echo ok …` commands");
}

#[test]
fn always_for_an_edit_covers_the_workspace_and_not_outside() {
    let env = Env::new();
    let outside = env.root.join("outside.txt");
    let outside_json = serde_json::to_string(&outside.display().to_string()).unwrap();
    let (results, rules) = run(
        &env,
        ":allow-always :reject-once",
        &[
            ("write", r#"{"path": "a.txt", "content": "a"}"#),
            ("write", r#"{"path": "sub/b.txt", "content": "b"}"#),
            (
                "write",
                &format!(r#"{{"path": {outside_json}, "content": "x"}}"#),
            ),
        ],
        "/permissions",
    );
    assert!(results[0].starts_with("Wrote"), "{results:?}");
    assert!(results[1].starts_with("Wrote"), "{results:?}");
    assert_eq!(results[2], "Blocked: the user rejected it");
    assert!(!outside.exists());
    let root = env.project.display().to_string();
    assert_eq!(rules.trim(), format!("1. allow write inside {root}"));
}

#[test]
fn accept_edits_runs_edits_inside_the_workspace_and_asks_outside() {
    let env = Env::new();
    env.init("(setq agent.print-mode-permission :accept-edits)");
    let outside = env.root.join("elsewhere.txt");
    let outside_json = serde_json::to_string(&outside.display().to_string()).unwrap();
    let calls = [
        tool_call_chunks(
            "call_0",
            "write",
            &[r#"{"path": "in.txt", "content": "in"}"#],
        ),
        tool_call_chunks(
            "call_1",
            "write",
            &[&format!(r#"{{"path": {outside_json}, "content": "out"}}"#)],
        ),
        text_chunks(&["done"]),
    ];
    let fake = FakeModel::start(calls.into_iter().map(Reply::Stream));
    let out = Run::from(
        env.command(Some(&fake), &["-p", "go"])
            .output()
            .expect("oml"),
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        std::fs::read_to_string(env.project.join("in.txt")).unwrap(),
        "in"
    );
    assert!(!outside.exists());
    let requests = fake.requests();
    let last = |i: usize| {
        requests[i].body["messages"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()["content"]
            .clone()
    };
    assert!(last(1).as_str().unwrap().starts_with("Wrote"));
    assert_eq!(
        last(2),
        format!(
            "Blocked: write of {} (outside the workspace {}) needs permission in accept-edits \
             mode and this frontend cannot ask; choose another mode (oml -p --mode, or \
             agent.permission-mode)",
            outside.display(),
            env.project.display()
        )
    );
}

#[test]
fn rules_saved_for_a_project_apply_to_new_sessions_while_it_is_trusted() {
    let env = Env::new();
    let (results, saved) = run(
        &env,
        ":allow-always",
        &[("bash", r#"{"command": "echo ok 1"}"#)],
        "/permissions save",
    );
    assert_eq!(results[0].trim(), "ok 1");
    assert!(saved.contains("Saved 1 rules for"), "{saved}");
    // A new session, nobody to ask: the saved rule does not apply until the project is trusted.
    let call = [("bash", r#"{"command": "echo ok 2"}"#)];
    let fresh = |env: &Env| {
        let list: Vec<_> = call
            .iter()
            .map(|(n, a)| tool_call_chunks("c1", n, &[a]))
            .chain([text_chunks(&["done"])])
            .collect();
        let fake = FakeModel::start(list.into_iter().map(Reply::Stream));
        let out = Run::from(
            env.command(Some(&fake), &["-p", "go"])
                .output()
                .expect("oml"),
        );
        assert_eq!(out.code, 0, "{out:?}");
        let msgs = fake.requests()[1].body["messages"].clone();
        msgs.as_array().unwrap().last().unwrap()["content"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    env.init("(setq agent.print-mode-permission :ask)");
    assert!(fresh(&env).starts_with("Blocked"));
    let trust = Run::from(env.command(None, &["trust"]).output().expect("oml trust"));
    assert_eq!(trust.code, 0, "{trust:?}");
    assert_eq!(fresh(&env).trim(), "ok 2");
    // Forgotten, it asks again.
    let forget = Run::from(
        env.command(None, &["-p", "/permissions forget"])
            .output()
            .expect("oml"),
    );
    assert!(forget.stdout.contains("Forgot"), "{forget:?}");
    assert!(fresh(&env).starts_with("Blocked"));
}
