//! `oml compare` for real: the binary in a throw-away home and git repository, two agents that
//! are both `oml acp` itself, each against a scripted fake model of its own (so which agent gets
//! which reply does not depend on timing), each writing a different file in its own worktree.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use support::fake_model::{
    FakeModel, Reply, Step, delta_chunk, text_chunks, tool_call_chunks, usage_chunk,
};
use support::home::{Env, Run, landlock_or_skip};

/// `git ARGS…` in `dir`, which must succeed; its stdout.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// The project as a git repository with one commit.
fn repository(env: &Env) {
    git(&env.project, &["init", "-q", "-b", "main"]);
    git(&env.project, &["config", "user.name", "T"]);
    git(&env.project, &["config", "user.email", "t@example.com"]);
    env.file("README.md", "hello\n");
    git(&env.project, &["add", "README.md"]);
    git(&env.project, &["commit", "-q", "-m", "start"]);
}

/// A fake model that has its agent write `file` and then say it did, reporting 30 + 12 tokens.
fn writer(file: &str) -> FakeModel {
    let args = format!(r#"{{"path":"{file}","content":"written by {file}\n"}}"#);
    let mut done = text_chunks(&["wrote ", file]);
    done.push(usage_chunk(30, 12));
    FakeModel::start([
        Reply::from(tool_call_chunks("c1", "write", &[&args])),
        Reply::from(done),
    ])
}

/// Agents `one` and `two`: `oml acp` against their own fake models.
fn define_agents(env: &Env, models: &[(&str, &FakeModel)]) {
    let oml = env!("CARGO_BIN_EXE_oml");
    let mut init = String::new();
    for (name, fake) in models {
        init.push_str(&format!(
            "(client.defagent :{name} {{:command {oml:?} :args [\"acp\"] \
             :env {{:OPENAI_BASE_URL {:?} :OPENAI_MODEL \"fake/model\" \
             :OPENAI_API_KEY \"test-key\"}}}})\n",
            fake.base_url()
        ));
    }
    env.init(&init);
}

fn compare(env: &Env, args: &[&str]) -> Run {
    let mut all = vec!["compare"];
    all.extend_from_slice(args);
    env.run(None, &all)
}

/// The worktrees' folder of the state directory, where every path of a worktree must be.
fn worktrees_dir(env: &Env) -> PathBuf {
    env.home.state.join("oml/worktrees")
}

#[test]
fn two_agents_work_in_worktrees_of_their_own_and_the_main_tree_stays_as_it_was() {
    if landlock_or_skip().is_none() {
        return;
    }
    let env = Env::new();
    repository(&env);
    let (a, b) = (writer("one.txt"), writer("two.txt"));
    define_agents(&env, &[("one", &a), ("two", &b)]);
    let ran = compare(
        &env,
        &[
            "--json",
            "--approve-all",
            "one",
            "two",
            "--",
            "write",
            "your",
            "file",
        ],
    );
    assert_eq!(ran.code, 0, "{ran:?}");
    let results: Value = serde_json::from_str(ran.stdout.trim()).expect("one JSON value");
    let results = results.as_array().expect("an array");
    assert_eq!(results.len(), 2, "{ran:?}");
    for (result, (name, file, other)) in results
        .iter()
        .zip([("one", "one.txt", "two.txt"), ("two", "two.txt", "one.txt")])
    {
        assert_eq!(result["agent"], name, "{result}");
        assert_eq!(result["stop_reason"], "end_turn", "{result}");
        assert!(result["duration_ms"].is_u64(), "{result}");
        assert_eq!(result["usage"]["used"], 42, "{result}");
        assert_eq!(result["branch"], format!("oml/{name}"), "{result}");
        let tree = PathBuf::from(result["worktree"].as_str().unwrap());
        assert!(tree.starts_with(worktrees_dir(&env)), "{result}");
        assert_eq!(
            std::fs::read_to_string(tree.join(file)).unwrap(),
            format!("written by {file}\n")
        );
        assert!(!tree.join(other).exists(), "{result}");
        let stat = result["diffstat"].as_str().unwrap();
        assert!(
            stat.contains(file) && stat.contains("1 file changed"),
            "{stat}"
        );
    }
    // Nothing reached the main tree: no file, no change, the same branch.
    assert_eq!(git(&env.project, &["status", "--porcelain"]), "");
    assert!(!env.project.join("one.txt").exists() && !env.project.join("two.txt").exists());
    assert_eq!(
        git(&env.project, &["branch", "--show-current"]).trim(),
        "main"
    );
    let branches = git(&env.project, &["branch", "--list", "oml/*"]);
    assert!(
        branches.contains("oml/one") && branches.contains("oml/two"),
        "{branches}"
    );
}

#[test]
fn the_table_names_each_agent_and_keeps_the_worktrees_and_a_failed_agent_fails_the_run() {
    if landlock_or_skip().is_none() {
        return;
    }
    let env = Env::new();
    repository(&env);
    let a = writer("one.txt");
    // The second model has nothing scripted: its agent's turn fails.
    let broken = FakeModel::start(Vec::<Reply>::new());
    define_agents(&env, &[("one", &a), ("two", &broken)]);
    let ran = compare(&env, &["--approve-all", "one", "two", "--", "go"]);
    assert_ne!(ran.code, 0, "{ran:?}");
    let lines: Vec<&str> = ran.stdout.lines().collect();
    assert!(
        lines[0].starts_with("agent") && lines[0].contains("changed"),
        "{ran:?}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("one ")
            && l.contains("end_turn")
            && l.contains(" 42 ")
            && l.contains("1 file changed")),
        "{ran:?}"
    );
    assert!(lines.iter().any(|l| l.starts_with("two ")), "{ran:?}");
    assert!(
        ran.stdout.contains("kept for you to inspect and merge"),
        "{ran:?}"
    );
    assert!(ran.stdout.contains("oml/two"), "{ran:?}");
}

#[test]
fn oml_itself_twice_gets_two_worktrees() {
    if landlock_or_skip().is_none() {
        return;
    }
    let env = Env::new();
    repository(&env);
    // `oml` is oml's own agent (`oml acp`, this binary); both share this model, whose replies
    // each end a turn whichever agent gets them.
    let fake = FakeModel::start([
        Reply::from(text_chunks(&["first"])),
        Reply::from(text_chunks(&["second"])),
    ]);
    let ran = env.run(
        Some(&fake),
        &[
            "compare",
            "--json",
            "--approve-all",
            "oml",
            "oml",
            "--",
            "go",
        ],
    );
    assert_eq!(ran.code, 0, "{ran:?}");
    let results: Value = serde_json::from_str(ran.stdout.trim()).unwrap();
    let branches: Vec<&str> = results
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["branch"].as_str().unwrap())
        .collect();
    assert_eq!(branches, ["oml/oml", "oml/oml-2"], "{ran:?}");
    assert_eq!(fake.requests().len(), 2);
}

#[test]
fn outside_a_git_repository_it_says_so_and_starts_nothing() {
    let env = Env::new();
    let fake = FakeModel::start(Vec::<Reply>::new());
    define_agents(&env, &[("one", &fake)]);
    let ran = compare(&env, &["one", "--", "go"]);
    assert_eq!(ran.code, 1, "{ran:?}");
    assert!(ran.stderr.contains("is not in a git repository"), "{ran:?}");
    assert_eq!(ran.stdout, "", "{ran:?}");
    assert!(fake.requests().is_empty());
    assert!(!worktrees_dir(&env).exists());
}

#[test]
fn without_a_prompt_it_is_a_usage_error() {
    let env = Env::new();
    let ran = compare(&env, &["one", "two"]);
    assert_eq!(ran.code, 2, "{ran:?}");
    assert!(ran.stderr.contains("the prompt is empty"), "{ran:?}");
}

#[test]
fn an_agent_that_stops_at_its_output_limit_makes_the_status_3() {
    if landlock_or_skip().is_none() {
        return;
    }
    let env = Env::new();
    repository(&env);
    let a = writer("one.txt");
    let cut = FakeModel::start([Reply::from(vec![
        Step::Chunk(delta_chunk(
            serde_json::json!({"content": "I was cut"}),
            None,
        )),
        Step::Chunk(delta_chunk(serde_json::json!({}), Some("length"))),
    ])]);
    define_agents(&env, &[("one", &a), ("two", &cut)]);
    let ran = compare(&env, &["--json", "--approve-all", "one", "two", "--", "go"]);
    assert_eq!(ran.code, 3, "{ran:?}");
    let results: Value = serde_json::from_str(ran.stdout.trim()).unwrap();
    assert_eq!(results[0]["stop_reason"], "end_turn", "{ran:?}");
    assert_eq!(results[1]["stop_reason"], "max_tokens", "{ran:?}");
    assert_eq!(results[1]["diffstat"], "", "{ran:?}");
}
