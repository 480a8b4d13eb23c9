//! Additional workspace roots (ACP `additionalDirectories`): the editor names another folder as
//! part of the session's workspace, so commands may write there and edits there ask as little
//! as edits in the project. A model then tries to use that root to reach further: a link in it
//! that leads out, its `.git/hooks` (code git runs), and a plain write beside it. Each is run
//! for real through `oml acp` with a scripted model.

use std::fs;
use std::os::unix::fs::symlink;

use serde_json::{Value, json};

use crate::support::editor::{Editor, update};
use crate::support::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};
use crate::support::home::{Env, use_fake_model};

use super::harness::{Target, landlock_or_skip};

/// `oml acp` in accept-edits mode with a session whose additional root is `extra`; the model
/// makes each of `calls` (tool name, arguments) in turn; returns the tool results it read and
/// the permission questions the editor was asked (each answered with a rejection).
fn session_with_root(
    t: &Target,
    extra: &std::path::Path,
    calls: &[(&str, Value)],
) -> (Vec<String>, Vec<Value>) {
    let env = &t.env;
    env.init("(setq agent.permission-mode :accept-edits)");
    let mut replies: Vec<Reply> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| {
            Reply::from(tool_call_chunks(
                &format!("c{i}"),
                name,
                &[&args.to_string()],
            ))
        })
        .collect();
    replies.push(Reply::from(text_chunks(&["done"])));
    let fake = FakeModel::start(replies);
    let mut cmd = t.command(None, &["acp"]);
    use_fake_model(&mut cmd, &fake.base_url());
    let mut ed = Editor::spawn(cmd);
    let init = ed.initialize();
    assert_eq!(
        init["agentCapabilities"]["sessionCapabilities"]["additionalDirectories"],
        json!({})
    );
    let r = ed.call(
        "session/new",
        json!({"cwd": env.project.display().to_string(), "mcpServers": [],
               "additionalDirectories": [extra.display().to_string()]}),
    );
    let sid = r["result"]["sessionId"]
        .as_str()
        .expect("a session")
        .to_owned();
    let id = ed.prompt(&sid, "go");
    let mut asked = Vec::new();
    loop {
        let m = ed.next();
        if m["method"] == "session/request_permission" {
            asked.push(m["params"]["toolCall"].clone());
            let reject = m["params"]["options"]
                .as_array()
                .and_then(|o| o.iter().find(|o| o["kind"] == "reject_once"))
                .map(|o| o["optionId"].clone())
                .expect("a reject option");
            ed.answer(
                &m["id"],
                json!({"outcome": {"outcome": "selected", "optionId": reject}}),
            );
        } else if m["id"] == json!(id) {
            break;
        }
        let _ = update(&m);
    }
    ed.finish();
    let results = fake
        .requests()
        .iter()
        .skip(1)
        .map(|r| {
            r.body["messages"]
                .as_array()
                .and_then(|m| m.iter().rev().find(|m| m["role"] == "tool"))
                .and_then(|m| m["content"].as_str())
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    (results, asked)
}

#[test]
fn an_additional_root_is_writable_but_a_link_out_of_it_and_its_git_hooks_are_not() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    let env = &t.env;
    fs::create_dir_all(env.project.join(".git")).unwrap();
    let extra = env.root.join("extra");
    let outside = t.outside.clone();
    fs::create_dir_all(extra.join(".git/hooks")).unwrap();
    symlink(&outside, extra.join("out")).unwrap();
    let script = format!(
        "cd {extra} && echo in > inside.txt && echo ok-inside; \
         echo x > out/escaped.txt || echo link-refused; \
         echo '#!/bin/sh' > .git/hooks/pre-commit || echo hook-refused; \
         echo y > {outside}/beside.txt || echo beside-refused",
        extra = extra.display(),
        outside = outside.display()
    );
    let edit_inside =
        json!({"path": extra.join("notes.md").display().to_string(), "content": "edited\n"});
    let edit_outside =
        json!({"path": outside.join("notes.md").display().to_string(), "content": "no\n"});
    let (results, asked) = session_with_root(
        &t,
        &extra,
        &[
            ("bash", json!({"command": script})),
            ("write", edit_inside),
            ("write", edit_outside),
        ],
    );
    let bash = &results[0];
    assert!(
        bash.contains("ok-inside") && bash.contains("link-refused"),
        "{bash}"
    );
    assert!(
        bash.contains("hook-refused") && bash.contains("beside-refused"),
        "{bash}"
    );
    assert_eq!(
        fs::read_to_string(extra.join("inside.txt")).unwrap(),
        "in\n"
    );
    assert!(!outside.join("escaped.txt").exists() && !outside.join("beside.txt").exists());
    assert!(!extra.join(".git/hooks/pre-commit").exists());
    // accept-edits: the write in the additional root goes ahead; the one outside is asked.
    assert_eq!(
        fs::read_to_string(extra.join("notes.md")).unwrap(),
        "edited\n",
        "{results:?}"
    );
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(
        asked[0]["rawInput"]["path"]
            .as_str()
            .unwrap()
            .contains("outside"),
        "{asked:?}"
    );
    assert!(!outside.join("notes.md").exists());
}

#[test]
fn additional_directories_must_be_absolute_existing_folders() {
    let env = Env::new();
    let mut ed = Editor::spawn(env.command(None, &["acp"]));
    ed.initialize();
    for (dirs, said) in [
        (json!(["relative/dir"]), "absolute"),
        (
            json!([env.root.join("missing").display().to_string()]),
            "does not exist",
        ),
        (json!("not a list"), "list of paths"),
    ] {
        let r = ed.call(
            "session/new",
            json!({"cwd": env.project.display().to_string(), "mcpServers": [], "additionalDirectories": dirs}),
        );
        assert_eq!(r["error"]["code"], -32602, "{r}");
        assert!(
            r["error"]["message"].as_str().unwrap().contains(said),
            "{r}"
        );
    }
    ed.finish();
}
