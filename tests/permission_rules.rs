//! "Always" adds a rule, not a blanket allowance: for a command its leading words, for an edit
//! the tool inside the workspace. Driven through print mode in `ask` mode, with the answers
//! scripted by redefining `agent.ask-permission` in the init file, against a fake model over TCP.
//! And the rules of the user's Claude Code settings file: allow, ask and deny in each mode.

mod support;

use support::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};
use support::home::{Env, Run};
use support::turns;

/// Run the tool calls in one print-mode turn in `ask` mode, answering the questions in order
/// with `answers`; the tool results, and the output of the slash command `last` run in the
/// same session afterwards.
fn run(env: &Env, answers: &str, calls: &[(&str, &str)], last: &str) -> (Vec<String>, String) {
    env.init(&format!(
        r#"(setq agent.print-mode-permission :ask)
(local answers [{answers}])
(set agent.ask-permission (fn [call] (table.remove answers 1)))"#
    ));
    let fake = turns::calling(calls);
    let out = Run::from(
        env.command(Some(&fake), &["-p", "go"])
            .output()
            .expect("oml"),
    );
    assert_eq!(out.code, 0, "{out:?}");
    let results = turns::results(&fake, calls.len());
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

// The rules of the settings files users already keep (Claude Code's `permissions`).

/// Write the user's `~/.claude/settings.json` with these `permissions`.
fn user_settings(env: &Env, permissions: serde_json::Value) -> std::path::PathBuf {
    let file = env.home.home.join(".claude/settings.json");
    turns::write_permissions(&file, permissions);
    file
}

/// One print-mode turn of the tool CALLS in permission MODE, answering the questions in order
/// with ANSWERS (none: nobody can be asked); the tool results, and the names of the tools asked
/// about, one a line.
fn turn(
    env: &Env,
    mode: &str,
    answers: Option<&str>,
    calls: &[(&str, &str)],
) -> (Vec<String>, String) {
    turn_with(env, "", mode, answers, calls)
}

/// [`turn`] with the Lisp EXTRA in the init file too.
fn turn_with(
    env: &Env,
    extra: &str,
    mode: &str,
    answers: Option<&str>,
    calls: &[(&str, &str)],
) -> (Vec<String>, String) {
    let asking = answers.map_or(String::new(), |answers| {
        format!(
            r#"(local answers [{answers}])
(set agent.ask-permission
     (fn [call] (set asked (.. asked call.name "\n")) (table.remove answers 1)))"#
        )
    });
    env.init(&format!(
        r#"(setq agent.print-mode-permission :{mode})
(var asked "")
{asking}
{extra}
(advise! agent.run :asked (fn [run ...] (let [r (run ...)] (io.stderr:write asked) r)))"#
    ));
    let fake = turns::calling(calls);
    let out = Run::from(
        env.command(Some(&fake), &["-p", "go"])
            .output()
            .expect("oml"),
    );
    assert_eq!(out.code, 0, "{out:?}");
    let results = turns::results(&fake, calls.len());
    (results, out.stderr)
}

fn bash(command: &str) -> (&'static str, String) {
    (
        "bash",
        serde_json::json!({ "command": command }).to_string(),
    )
}

#[test]
fn a_settings_allow_rule_runs_its_commands_without_asking_and_names_the_program() {
    let env = Env::new();
    env.file("victim", "still here\n");
    let file = user_settings(
        &env,
        serde_json::json!({"allow": ["Bash(echo ok:*)", "Bash(pwd)", "WebFetch(domain:x.org)", "Frob"]}),
    );
    let calls = [
        bash("echo ok 1"),
        bash("pwd"),
        bash("A=1 echo ok 2"),
        bash("echo ok; rm -f victim"),
        bash("echo ok > victim"),
        bash("pwd -P"),
    ];
    let calls: Vec<(&str, &str)> = calls.iter().map(|(n, a)| (*n, a.as_str())).collect();
    let (results, asked) = turn(
        &env,
        "ask",
        Some(":reject-once :reject-once :reject-once :reject-once"),
        &calls,
    );
    assert_eq!(results[0].trim(), "ok 1");
    assert_eq!(results[1].trim(), env.project.display().to_string());
    for r in &results[2..] {
        assert_eq!(r, "Blocked: the user rejected it", "{results:?}");
    }
    assert_eq!(asked, "bash\nbash\nbash\nbash\n");
    // /permissions lists them, with what is not used and why, and the rule that is no rule.
    let listed = Run::from(
        env.command(None, &["-p", "/permissions"])
            .output()
            .expect("oml"),
    );
    let f = file.display();
    assert_eq!(
        listed.stdout.trim(),
        format!(
            "No session permission rules yet (mode ask).\nFrom settings files:\n\
             - allow `Bash(echo ok:*)` ({f})\n\
             - allow `Bash(pwd)` ({f})\n\
             - allow `WebFetch(domain:x.org)` ({f}): not used, oml has no WebFetch tool\n\
             - problem in {f}: `permissions.allow[3]` \"Frob\": unknown tool `Frob`"
        )
    );
    assert_eq!(
        std::fs::read_to_string(env.project.join("victim")).unwrap(),
        "still here\n"
    );
}

#[test]
fn a_settings_deny_rule_wins_over_yolo_and_over_an_allow_rule() {
    let env = Env::new();
    env.file("victim", "still here\n");
    let file = user_settings(
        &env,
        serde_json::json!({"allow": ["Bash"], "deny": ["Bash(rm:*)", "Read(./.env)"]}),
    );
    env.file(".env", "SECRET=1\n");
    let calls = [
        bash("rm -f victim"),
        bash("echo a; rm -f victim"),
        bash("A=1 /bin/rm -f victim"),
        bash("echo fine"),
        ("read", r#"{"path": ".env"}"#.to_owned()),
        ("grep", r#"{"pattern": "SECRET"}"#.to_owned()),
    ];
    let calls: Vec<(&str, &str)> = calls.iter().map(|(n, a)| (*n, a.as_str())).collect();
    for mode in ["yolo", "ask"] {
        let (results, asked) = turn(&env, mode, Some(":allow-always"), &calls);
        let denied =
            |text: &str| format!("Blocked: the rule `{text}` of {} denies it", file.display());
        assert_eq!(results[0], denied("Bash(rm:*)"), "{mode}");
        assert_eq!(results[1], denied("Bash(rm:*)"), "{mode}");
        assert_eq!(results[2], denied("Bash(rm:*)"), "{mode}");
        assert_eq!(results[3].trim(), "fine", "{mode}");
        assert_eq!(results[4], denied("Read(./.env)"), "{mode}");
        assert_eq!(results[5], denied("Read(./.env)"), "{mode}");
        assert_eq!(asked, "", "the allow rule covers the rest");
    }
    assert!(env.project.join("victim").exists());
}

#[test]
fn a_settings_deny_rule_wins_over_the_sessions_always_answer() {
    let env = Env::new();
    let file = user_settings(&env, serde_json::json!({"deny": ["Bash(echo hi there)"]}));
    let calls = [bash("echo hi"), bash("echo hi you"), bash("echo hi there")];
    let calls: Vec<(&str, &str)> = calls.iter().map(|(n, a)| (*n, a.as_str())).collect();
    let (results, asked) = turn(&env, "ask", Some(":allow-always"), &calls);
    assert_eq!(results[0].trim(), "hi");
    // Covered by the session's new rule `echo hi …`, not asked.
    assert_eq!(results[1].trim(), "hi you");
    assert_eq!(asked, "bash\n");
    assert_eq!(
        results[2],
        format!(
            "Blocked: the rule `Bash(echo hi there)` of {} denies it",
            file.display()
        )
    );
}

#[test]
fn a_settings_ask_rule_asks_where_the_mode_would_run_the_call() {
    let env = Env::new();
    let file = user_settings(
        &env,
        serde_json::json!({"ask": ["Edit(notes/)", "Bash(echo:*)"]}),
    );
    let calls = [
        ("write", r#"{"path": "in.txt", "content": "in"}"#),
        ("write", r#"{"path": "notes/a.txt", "content": "a"}"#),
        ("bash", r#"{"command": "echo hi"}"#),
    ];
    for mode in ["accept-edits", "yolo"] {
        let (results, asked) = turn(&env, mode, Some(":allow-once :reject-once"), &calls);
        assert!(results[0].starts_with("Wrote"), "{mode}: {results:?}");
        assert!(results[1].starts_with("Wrote"), "{mode}: {results:?}");
        assert_eq!(results[2], "Blocked: the user rejected it", "{mode}");
        assert_eq!(asked, "write\nbash\n", "{mode}");
    }
    // Where nobody can be asked, it is refused, saying which rule asks.
    let (results, _) = turn(&env, "yolo", None, &calls[1..2]);
    assert_eq!(
        results[0],
        format!(
            "Blocked: write is one the rule `Edit(notes/)` of {} asks about, and this frontend \
             cannot ask; run it where you can answer",
            file.display()
        )
    );
}

#[test]
fn a_settings_edit_rule_covers_the_real_paths_its_glob_matches() {
    let env = Env::new();
    user_settings(
        &env,
        serde_json::json!({"allow": ["Edit(src/**)", "Write(.oml/**)", "Edit(.claude/)"]}),
    );
    std::fs::create_dir_all(env.project.join("src")).unwrap();
    let outside = env.root.join("outside.txt");
    std::os::unix::fs::symlink(&outside, env.project.join("src/link")).unwrap();
    let calls = [
        ("write", r#"{"path": "src/deep/a.rs", "content": "a"}"#),
        (
            "edit",
            r#"{"path": "src/deep/a.rs", "old_text": "a", "new_text": "b"}"#,
        ),
        ("write", r#"{"path": "top.rs", "content": "t"}"#),
        ("write", r#"{"path": "src/link", "content": "x"}"#),
        (
            "write",
            r#"{"path": ".oml/init.fnl", "content": "(os.exit 1)"}"#,
        ),
        (
            "write",
            r#"{"path": ".claude/settings.json", "content": "{}"}"#,
        ),
    ];
    let (results, asked) = turn(
        &env,
        "ask",
        Some(":reject-once :reject-once :reject-once :reject-once"),
        &calls,
    );
    assert!(results[0].starts_with("Wrote"), "{results:?}");
    assert!(!results[1].starts_with("Blocked"), "{results:?}");
    assert_eq!(results[2], "Blocked: the user rejected it");
    // The link leads out of src/: its real path is not covered.
    assert_eq!(results[3], "Blocked: the user rejected it");
    // No allow rule covers the files oml loads code from.
    assert_eq!(results[4], "Blocked: the user rejected it");
    assert_eq!(results[5], "Blocked: the user rejected it");
    assert_eq!(asked, "write\nwrite\nwrite\nwrite\n");
    assert!(!env.project.join(".oml/init.fnl").exists());
    assert!(!env.project.join(".claude/settings.json").exists());
    assert!(!outside.exists());
    assert_eq!(
        std::fs::read_to_string(env.project.join("src/deep/a.rs")).unwrap(),
        "b"
    );
}

#[test]
fn settings_rules_name_an_mcp_tool_or_every_tool_of_its_server() {
    let python = std::process::Command::new("python3")
        .arg("--version")
        .output();
    if !python.is_ok_and(|o| o.status.success()) {
        support::home::skip("python3", "apt-get install python3");
        return;
    }
    let env = Env::new();
    let server = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/fake_server.py");
    let declare = format!(
        "(mcp.defserver :fake {{:command \"python3\" :args [{:?} \"normal\"]}})",
        server.display().to_string()
    );
    let calls = [
        ("mcp__fake__wipe", "{}"),
        ("mcp__fake__echo", r#"{"text": "hi"}"#),
    ];
    // Allowed by name: the destructive tool runs where nobody can be asked.
    user_settings(&env, serde_json::json!({"allow": ["mcp__fake__wipe"]}));
    let (results, _) = turn_with(&env, &declare, "ask", None, &calls);
    assert_eq!(results, ["wiped", "echo: hi"]);
    // Every tool of the server denied, in yolo too.
    let file = user_settings(&env, serde_json::json!({"deny": ["mcp__fake"]}));
    let (results, _) = turn_with(&env, &declare, "yolo", None, &calls);
    let denied = format!(
        "Blocked: the rule `mcp__fake` of {} denies it",
        file.display()
    );
    assert_eq!(results, [denied.clone(), denied]);
}
