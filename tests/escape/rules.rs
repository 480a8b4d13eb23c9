//! "Always" rules name the program: a rule the user gave for one harmless command must not
//! cover another program the model puts behind the same leading words (variable assignments,
//! `timeout N`, `sudo`). Print mode in `ask` mode, the answers scripted in the init file. And a
//! question shows what it allows: a command padded past the card's cap is asked about whole, and
//! a write too large to show as a diff names the file it really changes.

use crate::support::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};
use crate::support::home::{Env, Run};
use crate::support::turns;

/// Run the `bash` COMMANDS in one print-mode turn in `ask` mode, answering the questions in
/// order with ANSWERS; the tool results and the words of each question's "always" rule.
fn run(env: &Env, answers: &str, commands: &[&str]) -> (Vec<String>, String) {
    env.init(&format!(
        r#"(setq agent.print-mode-permission :ask)
(local answers [{answers}])
(var asked "")
(set agent.ask-permission
     (fn [call]
       (set asked (.. asked (agent.describe-rule (agent.permission-rule call)) "\n"))
       (table.remove answers 1)))
(advise! agent.run :asked (fn [run ...] (let [r (run ...)] (io.stderr:write asked) r)))"#
    ));
    let calls: Vec<(&str, String)> = commands
        .iter()
        .map(|command| {
            (
                "bash",
                serde_json::json!({ "command": command }).to_string(),
            )
        })
        .collect();
    let fake = turns::calling(&calls);
    let out = Run::from(
        env.command(Some(&fake), &["-p", "go"])
            .output()
            .expect("oml"),
    );
    assert_eq!(out.code, 0, "{out:?}");
    let results = turns::results(&fake, commands.len());
    (results, out.stderr)
}

#[test]
fn always_for_a_command_after_assignments_covers_that_command_only() {
    let env = Env::new();
    let (results, asked) = run(
        &env,
        ":allow-always :reject-once",
        &["A=1 B=2 echo hi", "A=1 B=2 touch victim"],
    );
    assert_eq!(results[0].trim(), "hi");
    assert_eq!(results[1], "Blocked: the user rejected it", "{asked}");
    assert!(!env.project.join("victim").exists());
    assert!(
        asked.starts_with("the command `A=1 B=2 echo hi`"),
        "{asked}"
    );
}

#[test]
fn always_under_a_wrapper_names_the_program_behind_it() {
    let env = Env::new();
    let (results, asked) = run(
        &env,
        ":allow-always :reject-once",
        &[
            "timeout 5 echo hi",
            "timeout 5 echo again",
            "timeout 5 touch victim",
        ],
    );
    assert_eq!(results[0].trim(), "hi");
    // The rule is `echo hi …`, which `echo again` is not: asked, and rejected.
    assert_eq!(results[1], "Blocked: the user rejected it", "{asked}");
    assert!(asked.starts_with("`echo hi …` commands"), "{asked}");
    let (results, _) = run(
        &env,
        ":allow-always :reject-once",
        &[
            "nice npm test",
            "timeout 5 npm test -- --watch",
            "timeout 5 touch victim",
        ],
    );
    // `npm test` ran (it fails: there is no package), the wrapped one was covered, the
    // other program was asked and rejected.
    assert!(!results[1].starts_with("Blocked"), "{results:?}");
    assert_eq!(results[2], "Blocked: the user rejected it");
    assert!(!env.project.join("victim").exists());
}

#[test]
fn sudo_is_never_covered_by_a_rule() {
    let env = Env::new();
    let (_, asked) = run(
        &env,
        ":reject-once :reject-once",
        &["sudo ls", "env A=1 ls"],
    );
    let lines: Vec<&str> = asked.lines().collect();
    assert_eq!(
        lines,
        ["the command `sudo ls`", "the command `env A=1 ls`"],
        "{asked}"
    );
}

#[test]
fn always_for_a_program_that_runs_its_arguments_covers_that_command_only() {
    let env = Env::new();
    let (results, asked) = run(
        &env,
        ":allow-always :reject-once :allow-always :reject-once",
        &[
            "eval echo hi",
            "eval echo hi; touch victim",
            "find . -name x",
            "find . -maxdepth 0 -exec touch victim ;",
        ],
    );
    assert_eq!(results[0].trim(), "hi");
    assert!(results[1].starts_with("Blocked"), "{results:?}");
    assert!(results[3].starts_with("Blocked"), "{results:?}");
    assert!(!env.project.join("victim").exists());
    let lines: Vec<&str> = asked.lines().collect();
    assert_eq!(lines[0], "the command `eval echo hi`", "{asked}");
    assert_eq!(lines[2], "the command `find . -name x`", "{asked}");
}

/// A model that hides the tail of a command behind more characters than a card shows
/// (`agent.card-arg-max-chars`) does not hide it from the question: the editor's permission
/// question carries the whole command as its title, and its `rawInput` says that it was cut.
#[test]
fn a_command_padded_past_the_cards_cap_is_asked_about_whole() {
    use crate::support::acp::Client;
    let env = Env::new();
    env.init("(setq agent.card-arg-max-chars 64)");
    let tail = "; touch pwned";
    let command = format!("echo harmless{}{tail}", " ".repeat(200));
    let args = serde_json::json!({ "command": &command }).to_string();
    let fake = FakeModel::start([
        Reply::Stream(tool_call_chunks("c1", "bash", &[&args])),
        Reply::Stream(text_chunks(&["done"])),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let id = c.prompt(&sid, "go");
    let ask = c.until(|m| m["method"] == "session/request_permission");
    let tool_call = &ask["params"]["toolCall"];
    let title = tool_call["title"].as_str().unwrap_or_default();
    assert!(title.ends_with(tail), "the question's title: {title:?}");
    let shown = tool_call["rawInput"]["command"]
        .as_str()
        .unwrap_or_default();
    assert!(
        shown.contains("[output truncated: ") && !shown.contains(tail),
        "the input says it was cut: {shown:?}"
    );
    c.answer(
        &ask["id"],
        serde_json::json!({"outcome": {"outcome": "selected", "optionId": "reject_once"}}),
    );
    c.until_response(id);
    assert!(!env.project.join("pwned").exists());
}

/// A model that writes more than a question shows as a diff (`acp.diff-max-bytes`) through a
/// link in the workspace that leads outside it: the question, which then shows no diff, names
/// the file the write would really change (the link followed), and a rejection writes nothing.
#[test]
fn a_write_too_large_to_show_names_the_real_target_of_a_link() {
    use crate::support::acp::Client;
    let env = Env::new();
    env.init("(setq acp.diff-max-bytes 16)");
    let outside = env.root.join("outside");
    std::fs::create_dir_all(&outside).expect("mkdir");
    std::os::unix::fs::symlink(&outside, env.project.join("docs")).expect("symlink");
    let args = serde_json::json!({"path": "docs/notes.txt", "content": "x".repeat(64)});
    let fake = FakeModel::start([
        Reply::Stream(tool_call_chunks("c1", "write", &[&args.to_string()])),
        Reply::Stream(text_chunks(&["done"])),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let id = c.prompt(&sid, "go");
    let ask = c.until(|m| m["method"] == "session/request_permission");
    let text = ask["params"]["toolCall"]["content"][0]["content"]["text"]
        .as_str()
        .unwrap_or_default();
    let real = std::fs::canonicalize(&outside)
        .expect("real path")
        .join("notes.txt");
    assert!(
        text.contains(&real.display().to_string()),
        "the question names {}: {text:?}",
        real.display()
    );
    c.answer(
        &ask["id"],
        serde_json::json!({"outcome": {"outcome": "selected", "optionId": "reject_once"}}),
    );
    c.until_response(id);
    assert!(
        !outside.join("notes.txt").exists(),
        "nothing was written outside"
    );
}
