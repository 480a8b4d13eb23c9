//! oml's git worktrees: a name from outside (a model's task, an agent's name) must not become a
//! path out of oml's worktrees folder or an option of git's; a repository's config must not make
//! the git that makes a worktree run a program unconfined or with the API key; and an agent
//! working in its worktree, which oml's protected state folder holds, writes there and nowhere
//! else of that folder.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::support::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};
use crate::support::home::Run;

use super::harness::{Target, landlock_or_skip};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run git");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The project as a repository with one commit of `files`.
fn repository(t: &Target, files: &[(&str, &str)]) {
    let dir = &t.env.project;
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["config", "user.name", "T"]);
    git(dir, &["config", "user.email", "t@example.com"]);
    for (name, text) in files {
        std::fs::write(dir.join(name), text).expect("write a file");
        git(dir, &["add", name]);
    }
    git(dir, &["commit", "-q", "-m", "start"]);
}

/// `(project.worktree-add project NAME)` for each name, through `oml eval`, as JSON.
fn add_all(t: &Target, names: &[&str], vars: &[(&str, &str)]) -> Vec<Value> {
    let calls: Vec<String> = names
        .iter()
        .map(|n| format!("(project.worktree-add {:?} {n:?})", t.env.project.display()))
        .collect();
    let form = format!("(print (json.encode [{}]))", calls.join(" "));
    let run = Run::from(
        t.command(None, &["eval", &form])
            .envs(vars.iter().copied())
            .output()
            .expect("oml eval"),
    );
    assert_eq!(run.code, 0, "{run:?}");
    let line = run.stdout.lines().next().unwrap_or_default();
    let all: Value = serde_json::from_str(line).expect("JSON");
    all.as_array().expect("a list").clone()
}

#[test]
fn hostile_names_become_one_folder_in_omls_worktrees_and_never_an_option() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    repository(&t, &[("a.txt", "a\n")]);
    let pwned = t.outside.join("pwned");
    let option = format!("--upload-pack=touch {}", pwned.display());
    let trees = add_all(&t, &["../../x", &option, "-b", "HEAD@{0}", ".."], &[]);
    let folder = t.env.home.state.join("oml/worktrees");
    let names: Vec<&str> = trees.iter().map(|w| w["name"].as_str().unwrap()).collect();
    assert_eq!(
        [names[0], names[2], names[3], names[4]],
        ["x", "b", "HEAD-0", "task"]
    );
    assert!(
        names[1].starts_with("upload-pack-touch-") && !names[1].contains('/'),
        "{names:?}"
    );
    for tree in &trees {
        let path = Path::new(tree["path"].as_str().unwrap());
        assert_eq!(path.parent().unwrap().parent().unwrap(), folder, "{tree}");
        assert_eq!(
            tree["branch"],
            format!("oml/{}", tree["name"].as_str().unwrap())
        );
    }
    assert!(!pwned.exists());
    assert!(!t.env.root.join("x").exists() && !t.env.project.join("x").exists());
    let branches = git(&t.env.project, &["branch", "--format=%(refname:short)"]);
    assert!(
        branches
            .lines()
            .all(|b| b == "main" || b.starts_with("oml/")),
        "{branches}"
    );
}

#[test]
fn a_repositorys_filter_runs_confined_and_without_the_key_when_a_worktree_is_made() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    repository(
        &t,
        &[("a.txt", "a\n"), (".gitattributes", "*.txt filter=evil\n")],
    );
    let marker = t.outside.join("smudged");
    // What a repository unpacked from an archive can carry in .git/config: a program git runs
    // on every checkout, here the worktree's.
    let config = t.env.project.join(".git/config");
    let mut text = std::fs::read_to_string(&config).expect("config");
    text.push_str(&format!(
        "[filter \"evil\"]\n\tsmudge = \"sh -c 'touch {}; printf %s \\\"$OPENAI_API_KEY\\\" > leaked; cat'\"\n",
        marker.display()
    ));
    std::fs::write(&config, text).expect("write config");
    let trees = add_all(&t, &["w"], &[("OPENAI_API_KEY", "sk-secret-key")]);
    let tree = Path::new(trees[0]["path"].as_str().unwrap());
    assert_eq!(std::fs::read_to_string(tree.join("a.txt")).unwrap(), "a\n");
    // The filter ran (it wrote in the worktree), but reached nothing outside and no key.
    assert_eq!(std::fs::read_to_string(tree.join("leaked")).unwrap(), "");
    assert!(!marker.exists());
}

#[test]
fn an_agent_in_its_worktree_writes_there_and_nowhere_else_in_omls_state() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    repository(&t, &[("a.txt", "a\n")]);
    let state = t.env.home.state.join("oml");
    std::fs::create_dir_all(&state).unwrap();
    let command = format!(
        "echo mine > in.txt; echo x > {s}/trusted.json; mkdir {s}/lisp; echo y > ../planted.txt; \
         echo z > ../other/stolen.txt; true",
        s = state.display()
    );
    let args = serde_json::json!({ "command": command }).to_string();
    let fake = FakeModel::start([
        Reply::Stream(tool_call_chunks("c1", "bash", &[&args])),
        Reply::Stream(text_chunks(&["done"])),
    ]);
    let oml = env!("CARGO_BIN_EXE_oml");
    t.env.init(&format!(
        "(client.defagent :one {{:command {oml:?} :args [\"acp\"] \
         :env {{:OPENAI_BASE_URL {:?} :OPENAI_MODEL \"fake/model\" :OPENAI_API_KEY \"k\"}}}})\n",
        fake.base_url()
    ));
    // A sibling worktree, which the agent must not reach either.
    let other = add_all(&t, &["other"], &[]);
    let other = Path::new(other[0]["path"].as_str().unwrap()).to_path_buf();
    let run = Run::from(
        t.command(
            None,
            &["compare", "--json", "--approve-all", "one", "--", "go"],
        )
        .output()
        .expect("oml compare"),
    );
    assert_eq!(run.code, 0, "{run:?}");
    let results: Value = serde_json::from_str(run.stdout.trim()).expect("JSON");
    let tree = Path::new(results[0]["worktree"].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(tree.join("in.txt")).unwrap(),
        "mine\n"
    );
    assert!(!state.join("trusted.json").exists());
    assert!(!state.join("lisp").exists());
    assert!(!tree.parent().unwrap().join("planted.txt").exists());
    assert!(!other.join("stolen.txt").exists());
}

#[test]
fn a_sub_agent_in_its_worktree_cannot_write_the_main_tree_nor_its_git() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    repository(&t, &[("a.txt", "a\n")]);
    let main = t.env.project.display().to_string();
    let command = format!(
        "echo mine > in.txt; echo x > {main}/escaped.txt; \
         echo 'touch {main}/hooked' > {main}/.git/hooks/post-merge; \
         echo y > {main}/.git/config; true"
    );
    let task = serde_json::json!({"agent": "general-purpose", "prompt": "go",
                                  "isolation": "worktree"})
    .to_string();
    let bash = serde_json::json!({ "command": command }).to_string();
    let fake = FakeModel::start([
        Reply::Stream(tool_call_chunks("c1", "task", &[&task])),
        Reply::Stream(tool_call_chunks("s1", "bash", &[&bash])),
        Reply::Stream(text_chunks(&["tried"])),
        Reply::Stream(text_chunks(&["done"])),
    ]);
    let run = Run::from(
        t.command(Some(&fake), &["-p", "--mode", "yolo", "go"])
            .output()
            .expect("oml -p"),
    );
    assert_eq!(run.code, 0, "{run:?}");
    let result = fake.requests()[3].body["messages"].to_string();
    let tree = result
        .split("[worktree: branch ")
        .nth(1)
        .and_then(|r| r.split(" in ").nth(1))
        .and_then(|r| r.split(']').next())
        .expect("the worktree in the task's result");
    assert_eq!(
        std::fs::read_to_string(Path::new(tree).join("in.txt")).unwrap(),
        "mine\n"
    );
    assert!(!t.env.project.join("escaped.txt").exists());
    assert!(!t.env.project.join(".git/hooks/post-merge").exists());
    let config = std::fs::read_to_string(t.env.project.join(".git/config")).unwrap();
    assert!(config.contains("[core]"), "{config}");
}
