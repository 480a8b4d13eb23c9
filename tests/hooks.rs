//! Claude Code's hooks as users have them: real hook scripts in the settings files, run by the
//! real binary in print mode against a scripted fake model over TCP. Each test reads what the
//! model was sent next (the tool result, the context) and what the hook was given.

mod support;

use std::path::Path;

use support::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};
use support::home::{Env, Run};

/// Write the user's `~/.claude/settings.json` with `hooks` (a JSON object of events).
fn user_hooks(env: &Env, hooks: &str) {
    let dir = env.home.home.join(".claude");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("settings.json"),
        format!(r#"{{"hooks": {hooks}}}"#),
    )
    .unwrap();
}

/// A hook script in the test's root, executable; returns its path.
fn script(env: &Env, name: &str, body: &str) -> String {
    let path = env.root.join(name);
    std::fs::write(&path, format!("#!/bin/bash\n{body}\n")).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

/// One print-mode turn in MODE making `calls`, then "done"; returns the run and every request.
fn turn(env: &Env, mode: &str, calls: &[(&str, &str)], prompt: &str) -> (Run, FakeModel) {
    let mut list: Vec<_> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| {
            Reply::Stream(tool_call_chunks(&format!("call_{i}"), name, &[args]))
        })
        .collect();
    list.push(Reply::Stream(text_chunks(&["done"])));
    let fake = FakeModel::start(list);
    let out = env.run(Some(&fake), &["-p", "--mode", mode, prompt]);
    (out, fake)
}

/// The content of the last message of request `i`.
fn last_content(fake: &FakeModel, i: usize) -> String {
    let requests = fake.requests();
    let msgs = requests[i].body["messages"].as_array().unwrap();
    msgs.last().unwrap()["content"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn exit_2_blocks_the_command_and_the_model_reads_the_reason() {
    let env = Env::new();
    env.file("victim", "still here\n");
    let guard = script(
        &env,
        "guard.sh",
        r#"input=$(cat); case "$input" in *'rm '*) echo "no rm in this project" >&2; exit 2;; esac; exit 0"#,
    );
    user_hooks(
        &env,
        &format!(
            r#"{{"PreToolUse": [{{"matcher": "Bash", "hooks": [{{"type": "command", "command": "{guard}"}}]}}]}}"#
        ),
    );
    let (out, fake) = turn(
        &env,
        "yolo",
        &[
            ("bash", r#"{"command": "rm -f victim"}"#),
            ("bash", r#"{"command": "echo fine"}"#),
        ],
        "go",
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        last_content(&fake, 1),
        "Blocked by a hook: no rm in this project"
    );
    assert!(env.project.join("victim").exists());
    assert_eq!(last_content(&fake, 2).trim(), "fine");
}
