//! Code a repository carries for oml or git to run: a confined command or the model's `write`
//! must not plant it, and oml's own `git status` must not run what a downloaded repository's
//! config names (`core.fsmonitor`) outside the sandbox.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use crate::common::Run;
use crate::support::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};

use super::harness::{Target, landlock_or_skip, tool_result};

/// `git init` in the project.
fn git_init(t: &Target) {
    let status = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&t.env.project)
        .status()
        .expect("run git");
    assert!(status.success());
}

#[test]
fn a_repositorys_config_cannot_make_omls_git_status_run_a_program_unconfined() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    git_init(&t);
    let marker = t.outside.join("ran-by-git");
    let hook = t.outside.join("fsmonitor.sh");
    std::fs::write(&hook, format!("#!/bin/sh\ntouch {}\n", marker.display())).expect("hook");
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    // What a repository unpacked from an archive can carry in .git/config.
    let config = t.env.project.join(".git/config");
    let mut text = std::fs::read_to_string(&config).expect("config");
    text.push_str(&format!("[core]\n\tfsmonitor = {}\n", hook.display()));
    std::fs::write(&config, text).expect("write config");
    let fake = FakeModel::start([Reply::Stream(text_chunks(&["hello"]))]);
    let run = Run::from(t.command(Some(&fake), &["-p", "hi"]).output().expect("oml"));
    assert_eq!(run.code, 0, "{run:?}");
    let system = fake.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(system.contains("branch"), "git status ran: {system}");
    assert!(
        !marker.exists(),
        "the repository's fsmonitor ran unconfined"
    );
}

#[test]
fn a_command_cannot_plant_git_hooks_git_config_or_project_init_code() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    git_init(&t);
    std::fs::create_dir_all(t.env.project.join(".oml/lisp")).expect("mkdir .oml");
    // Each way found to make the user's own git run a program: a hook, the config, a
    // commondir pointing at a config elsewhere, and .git renamed and copied afresh.
    let command = "echo 'touch /tmp/pwned' > .git/hooks/pre-commit; echo hook=$?; \
                   git config core.fsmonitor /tmp/x; echo config=$?; \
                   echo /tmp > .git/commondir; echo commondir=$?; \
                   mv .git .git-old; echo rename=$?; \
                   echo '(os.execute \"id\")' > .oml/init.fnl; echo init=$?; \
                   echo x > .oml/lisp/m.fnl; echo module=$?; echo ok > ok.txt; echo work=$?";
    let (run, result) = t.model_runs(command, &[]);
    assert_eq!(run.code, 0, "{run:?}");
    for refused in ["hook=1", "commondir=1", "rename=1", "init=1", "module=1"] {
        assert!(result.contains(refused), "{refused}: {result}");
    }
    assert!(!result.contains("config=0"), "{result}");
    assert!(
        result.contains("work=0"),
        "the rest of the workspace is writable: {result}"
    );
    assert!(!t.env.project.join(".git/hooks/pre-commit").exists());
    assert!(!t.env.project.join(".git/commondir").exists());
    assert!(!t.env.project.join(".git-old").exists());
    assert!(!t.env.project.join(".oml/init.fnl").exists());
    let config = std::fs::read_to_string(t.env.project.join(".git/config")).expect("config");
    assert!(!config.contains("fsmonitor"), "{config}");
}

#[test]
fn the_write_tool_asks_before_writing_where_oml_or_git_load_code_from() {
    let t = Target::new();
    git_init(&t);
    let calls = [
        (".git/hooks/pre-commit", "#!/bin/sh\ntouch /tmp/pwned\n"),
        (".oml/init.fnl", "(os.execute \"id\")"),
    ];
    let mut replies: Vec<Reply> = calls
        .iter()
        .enumerate()
        .map(|(i, (path, content))| {
            let args = serde_json::json!({ "path": path, "content": content }).to_string();
            Reply::Stream(tool_call_chunks(&format!("c{i}"), "write", &[&args]))
        })
        .collect();
    replies.push(Reply::Stream(text_chunks(&["done"])));
    let fake = FakeModel::start(replies);
    // Print mode's default, accept-edits: edits inside the workspace run without asking.
    let run = Run::from(
        t.command(Some(&fake), &["-p", "set up"])
            .output()
            .expect("oml"),
    );
    assert_eq!(run.code, 0, "{run:?}");
    for (i, (path, _)) in calls.iter().enumerate() {
        let result = tool_result(&fake, i + 1);
        let result = fake.requests()[i + 1].body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .and_then(|m| m["content"].as_str())
            .map_or(result, str::to_owned);
        assert!(
            result.contains("where oml or git load code from")
                && result.contains("needs permission"),
            "{path}: {result}"
        );
        assert!(!t.env.project.join(path).exists(), "{path} was written");
    }
}
