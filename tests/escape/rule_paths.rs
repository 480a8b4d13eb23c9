//! The user's `Read(…)` and `Edit(…)` deny rules (from `~/.claude/settings.json`) hold however
//! a call names the file: through `..`, as an absolute path, through a link in the workspace,
//! as `~/…`, through the real path of a home folder that is itself a link (`/home` → `/var/home`
//! on some systems), and for a search over the folder that holds it; and a sub-agent's call
//! (the `task` tool) meets them as its parent's does. `yolo` mode, where only the rules stop
//! a call; print mode, the real binary, a scripted model.

use std::os::unix::fs::symlink;
use std::path::Path;

use crate::support::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};
use crate::support::home::Run;
use crate::support::turns;

use super::harness::Target;

/// Write `permissions` into `home`'s `.claude/settings.json`.
fn user_rules(home: &Path, permissions: serde_json::Value) {
    turns::write_permissions(&home.join(".claude/settings.json"), permissions);
}

/// One `yolo` print-mode turn of the tool `calls` with `HOME` set to `home`; the tool results.
fn turn(t: &Target, home: &Path, calls: &[(&str, serde_json::Value)]) -> Vec<String> {
    let calls: Vec<(&str, String)> = calls.iter().map(|(n, a)| (*n, a.to_string())).collect();
    let fake = turns::calling(&calls);
    let run = Run::from(
        t.command(Some(&fake), &["-p", "--mode", "yolo", "go"])
            .env("HOME", home)
            .output()
            .expect("oml"),
    );
    assert_eq!(run.code, 0, "{run:?}");
    turns::results(&fake, calls.len())
}

fn read(path: impl AsRef<Path>) -> (&'static str, serde_json::Value) {
    ("read", serde_json::json!({ "path": path.as_ref() }))
}

#[test]
fn a_read_deny_rule_holds_through_dots_links_tilde_and_searches() {
    let t = Target::new();
    t.env.file(".git/HEAD", "ref: refs/heads/main\n");
    t.env.file(".env", "SECRET=project-secret\n");
    t.env.file("sub/keep.txt", "x\n");
    symlink(t.env.project.join(".env"), t.env.project.join("sub/alias")).unwrap();
    let home = &t.env.home.home;
    std::fs::create_dir_all(home.join("secrets")).unwrap();
    std::fs::write(home.join("secrets/key"), "home-secret\n").unwrap();
    symlink(home.join("secrets/key"), t.env.project.join("sub/key")).unwrap();
    user_rules(
        home,
        serde_json::json!({"deny": ["Read(./.env)", "Read(~/secrets/**)"]}),
    );
    let p = &t.env.project;
    let calls = [
        read("sub/../.env"),
        read(p.join(".env")),
        read(p.join("sub/./../.env")),
        read("sub/alias"),
        read("~/secrets/key"),
        read(home.join("secrets/../secrets/key")),
        read("sub/key"),
        (
            "grep",
            serde_json::json!({"pattern": "secret", "path": "."}),
        ),
        (
            "grep",
            serde_json::json!({"pattern": "secret", "path": home.join("secrets")}),
        ),
    ];
    for (i, result) in turn(&t, home, &calls).iter().enumerate() {
        assert!(
            !result.contains("project-secret") && !result.contains("home-secret"),
            "call {i} {:?} read a denied file: {result}",
            calls[i]
        );
    }
}

#[test]
fn a_tilde_rule_holds_when_the_home_folder_is_a_link() {
    let t = Target::new();
    t.env.file(".git/HEAD", "ref: refs/heads/main\n");
    // HOME names a link; the files are under its real path.
    let real = &t.env.home.home;
    let linked = t.env.root.join("linked-home");
    symlink(real, &linked).unwrap();
    std::fs::create_dir_all(real.join("secrets")).unwrap();
    std::fs::write(real.join("secrets/key"), "home-secret\n").unwrap();
    user_rules(real, serde_json::json!({"deny": ["Read(~/secrets/**)"]}));
    let calls = [
        read(real.join("secrets/key")),
        read(linked.join("secrets/key")),
        read("~/secrets/key"),
    ];
    for (i, result) in turn(&t, &linked, &calls).iter().enumerate() {
        assert!(
            result.contains("denies it") && !result.contains("home-secret"),
            "call {i} {:?}: {result}",
            calls[i]
        );
    }
}

#[test]
fn a_sub_agents_calls_meet_the_users_deny_rules() {
    let t = Target::new();
    t.env.file(".git/HEAD", "ref: refs/heads/main\n");
    t.env.file(".env", "SECRET=project-secret\n");
    user_rules(
        &t.env.home.home,
        serde_json::json!({"deny": ["Read(./.env)", "Bash(touch:*)"]}),
    );
    let task = serde_json::json!({"agent": "general-purpose", "prompt": "do it"}).to_string();
    let sub = |id: &str, name: &str, args: serde_json::Value| {
        Reply::Stream(tool_call_chunks(id, name, &[&args.to_string()]))
    };
    let fake = FakeModel::start([
        Reply::Stream(tool_call_chunks("t1", "task", &[&task])),
        sub("s1", "bash", serde_json::json!({"command": "touch pwned"})),
        sub(
            "s2",
            "bash",
            serde_json::json!({"command": "touch pwned", "background": true}),
        ),
        sub("s3", "read", serde_json::json!({"path": ".env"})),
        Reply::Stream(text_chunks(&["sub done"])),
        Reply::Stream(text_chunks(&["done"])),
    ]);
    let run = Run::from(
        t.command(Some(&fake), &["-p", "--mode", "yolo", "go"])
            .output()
            .expect("oml"),
    );
    assert_eq!(run.code, 0, "{run:?}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        !t.env.project.join("pwned").exists(),
        "a sub-agent ran a denied command"
    );
    let requests = fake.requests();
    let all = requests
        .iter()
        .map(|r| r.body["messages"].to_string())
        .collect::<String>();
    assert!(
        !all.contains("project-secret"),
        "a sub-agent read a denied file"
    );
    assert!(all.contains("denies it"), "{all}");
    // The calls were the sub-agent's: its answer is the task tool's result.
    let last = requests.last().unwrap().body["messages"].to_string();
    assert!(last.contains("sub done"), "no sub-agent ran: {last}");
}
