//! oml's git worktrees through the real binary: the `project.worktree-*` functions' shapes
//! (`oml eval`), and `/worktrees` listing them with their diff stats, in print mode (which has
//! nobody to ask, so merges nothing), in the chat on a pseudo-terminal and in an editor over ACP,
//! where merging and removing ask first and a no leaves everything as it was; and a `task` with
//! `isolation: worktree`, whose sub-agent's command writes in its worktree, not the main tree.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use support::chat::{exit, wait_ready};
use support::home::{Env, landlock_or_skip};
use support::pty::{DEADLINE, Term};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// The project as a repository with one commit, and its identity for merges.
fn repository(env: &Env) {
    git(&env.project, &["init", "-q", "-b", "main"]);
    git(&env.project, &["config", "user.name", "T"]);
    git(&env.project, &["config", "user.email", "t@example.com"]);
    env.file("a.txt", "a\n");
    git(&env.project, &["add", "a.txt"]);
    git(&env.project, &["commit", "-q", "-m", "start"]);
}

/// The value of `(json.encode FORM)` through `oml eval`.
fn eval(env: &Env, form: &str) -> Value {
    let run = env.run(None, &["eval", &format!("(print (json.encode {form}))")]);
    assert_eq!(run.code, 0, "{run:?}");
    serde_json::from_str(run.stdout.lines().next().unwrap_or_default()).expect("JSON")
}

/// A worktree named `name` with a new file `file` in it; its folder.
fn worktree_with(env: &Env, name: &str, file: &str) -> PathBuf {
    let dir = env.project.display().to_string();
    let tree = eval(env, &format!("(project.worktree-add {dir:?} {name:?})"));
    let path = PathBuf::from(tree["path"].as_str().unwrap());
    std::fs::write(path.join(file), "new\n").unwrap();
    path
}

#[test]
fn the_lisp_functions_make_list_diff_merge_and_remove_worktrees() {
    if landlock_or_skip().is_none() {
        return;
    }
    let env = Env::new();
    repository(&env);
    let head = git(&env.project, &["rev-parse", "HEAD"]).trim().to_owned();
    let dir = format!("{:?}", env.project.display().to_string());
    let tree = eval(&env, &format!("(project.worktree-add {dir} \"feature x\")"));
    assert_eq!(tree["name"], "feature-x");
    assert_eq!(tree["branch"], "oml/feature-x");
    assert_eq!(tree["base"], head.as_str());
    let path = tree["path"].as_str().unwrap();
    let nothing = eval(
        &env,
        &format!("(project.worktree-diffstat {path:?} {head:?})"),
    );
    assert_eq!(nothing, "");
    std::fs::write(Path::new(path).join("b.txt"), "b\n").unwrap();
    let stat = eval(
        &env,
        &format!("(project.worktree-diffstat {path:?} {head:?})"),
    );
    assert!(stat.as_str().unwrap().contains("b.txt | 1 +"), "{stat}");
    let listed = eval(&env, &format!("(project.worktrees {dir})"));
    assert_eq!(listed, Value::Array(vec![tree.clone()]));
    let merged = eval(
        &env,
        &format!("(project.worktree-merge {dir} \"feature-x\")"),
    );
    assert_eq!(merged["ok"], true, "{merged}");
    assert!(merged["output"].is_string());
    assert_eq!(
        std::fs::read_to_string(env.project.join("b.txt")).unwrap(),
        "b\n"
    );
    let removed = eval(
        &env,
        &format!("(project.worktree-remove {dir} \"feature-x\")"),
    );
    assert_eq!(removed["ok"], true, "{removed}");
    assert!(!Path::new(path).exists());
    assert_eq!(
        eval(&env, &format!("(project.worktrees {dir})")),
        Value::Array(vec![])
    );
    // Outside a repository: an error that says so.
    let run = env.run(
        None,
        &[
            "eval",
            &format!("(project.worktree-add {:?} \"w\")", env.root.display()),
        ],
    );
    assert_ne!(run.code, 0, "{run:?}");
    assert!(run.stderr.contains("is not in a git repository"), "{run:?}");
}

#[test]
fn print_mode_lists_them_with_their_changes_and_merges_nothing_without_asking() {
    if landlock_or_skip().is_none() {
        return;
    }
    let env = Env::new();
    repository(&env);
    worktree_with(&env, "w", "new.txt");
    let listed = env.run(None, &["-p", "/worktrees"]);
    assert_eq!(listed.code, 0, "{listed:?}");
    assert!(
        listed.stdout.contains("`w` on `oml/w`") && listed.stdout.contains("1 file changed"),
        "{listed:?}"
    );
    let merge = env.run(None, &["-p", "/worktrees merge w"]);
    assert!(merge.stdout.contains("nobody can be asked"), "{merge:?}");
    assert!(!env.project.join("new.txt").exists());
    let unknown = env.run(None, &["-p", "/worktrees remove ../../w"]);
    assert!(
        unknown
            .stdout
            .contains("no worktree of oml's has that name"),
        "{unknown:?}"
    );
}

fn chat(env: &Env) -> Term {
    let term = Term::spawn(env.command(None, &["--no-input"]), 40, 110);
    wait_ready(&term);
    term
}

#[test]
fn in_the_chat_a_merge_asks_first_and_yes_merges_into_the_work_tree() {
    if landlock_or_skip().is_none() {
        return;
    }
    let env = Env::new();
    repository(&env);
    worktree_with(&env, "w", "new.txt");
    let term = chat(&env);
    term.type_line("/worktrees merge w");
    let screen = term.wait_for("[n] no", DEADLINE);
    assert!(screen.contains("oml/w"), "{screen}");
    assert!(
        !env.project.join("new.txt").exists(),
        "nothing before the answer"
    );
    term.write(b"y");
    term.wait_for("Merged oml/w.", DEADLINE);
    wait_ready(&term);
    assert_eq!(
        std::fs::read_to_string(env.project.join("new.txt")).unwrap(),
        "new\n"
    );
    exit(&term);
}

#[test]
fn in_the_chat_a_remove_refused_keeps_the_worktree_and_one_allowed_removes_it() {
    if landlock_or_skip().is_none() {
        return;
    }
    let env = Env::new();
    repository(&env);
    let path = worktree_with(&env, "w", "new.txt");
    let term = chat(&env);
    term.type_line("/worktrees remove w");
    term.wait_for("[n] no", DEADLINE);
    term.write(b"n");
    term.wait_for("not confirmed", DEADLINE);
    wait_ready(&term);
    assert!(path.join("new.txt").exists());
    term.type_line("/worktrees remove w");
    // The first question is still on the screen: wait for the second.
    term.wait_until("the second question", DEADLINE, |screen| {
        screen.contents().matches("[n] no").count() == 2
    });
    term.write(b"y");
    term.wait_for("Removed w.", DEADLINE);
    wait_ready(&term);
    assert!(!path.exists());
    assert_eq!(git(&env.project, &["branch", "--list", "oml/*"]), "");
    exit(&term);
}

#[test]
fn a_task_in_a_worktree_works_there_and_the_main_tree_stays_as_it_was() {
    if landlock_or_skip().is_none() {
        return;
    }
    use support::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};
    let env = Env::new();
    repository(&env);
    let task = serde_json::json!({"agent": "general-purpose", "prompt": "add x",
                                  "isolation": "worktree"});
    let bash = serde_json::json!({"command": "echo x > x.txt"});
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks("t1", "task", &[&task.to_string()])),
        Reply::from(tool_call_chunks("b1", "bash", &[&bash.to_string()])),
        Reply::from(text_chunks(&["added x"])),
        Reply::from(text_chunks(&["done"])),
    ]);
    let run = env.run(Some(&fake), &["-p", "--mode", "yolo", "go"]);
    assert_eq!(run.code, 0, "{run:?}");
    let requests = fake.requests();
    let tool_result = |i: usize| {
        requests[i].body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find(|m| m["role"] == "tool")
            .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
            .unwrap_or_default()
    };
    // The sub-agent's command wrote in its worktree (oml's state folder, which is otherwise
    // read-only for commands).
    assert!(!tool_result(2).contains("Read-only"), "{}", tool_result(2));
    let result = tool_result(3);
    assert!(
        result.contains("added x") && result.contains("branch oml/"),
        "{result}"
    );
    assert!(result.contains("x.txt"), "the diff stat: {result}");
    assert!(!env.project.join("x.txt").exists());
    assert_eq!(git(&env.project, &["status", "--porcelain"]), "");
    let listed = eval(
        &env,
        &format!("(project.worktrees {:?})", env.project.display()),
    );
    let path = PathBuf::from(listed[0]["path"].as_str().unwrap());
    assert_eq!(std::fs::read_to_string(path.join("x.txt")).unwrap(), "x\n");
}

#[test]
fn in_an_editor_a_merge_is_a_permission_request_and_allowing_it_merges() {
    if landlock_or_skip().is_none() {
        return;
    }
    use support::editor::{Editor, chunks};
    let env = Env::new();
    repository(&env);
    worktree_with(&env, "w", "new.txt");
    let mut ed = Editor::spawn(env.command(None, &["acp"]));
    ed.initialize();
    let (sid, _) = ed.new_session_with(&env.project, serde_json::json!([]));
    let id = ed.prompt(&sid, "/worktrees merge w");
    let ask = ed.until(|m| m["method"] == "session/request_permission");
    let call = &ask["params"]["toolCall"];
    assert!(
        call.to_string().contains("git merge --no-edit oml/w"),
        "{ask}"
    );
    assert!(
        !env.project.join("new.txt").exists(),
        "nothing before the answer"
    );
    ed.answer(
        &ask["id"],
        serde_json::json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}}),
    );
    let (updates, answer) = ed.until_response(id);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(chunks(&updates).contains("Merged oml/w."), "{updates:?}");
    assert_eq!(
        std::fs::read_to_string(env.project.join("new.txt")).unwrap(),
        "new\n"
    );
}
