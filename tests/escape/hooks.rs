//! A project's hooks are code that runs as the user, unconfined: they run only while the
//! project is trusted, as it was trusted, and never grant what the user did not. A hook never
//! sees oml's API key or another secret unless its own settings ask for one by name.

use crate::support::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};
use crate::support::home::Run;

use super::harness::{Target, tool_result};

/// A settings file whose hooks at every tool call, prompt, start and stop leave `marker`.
fn marking_settings(marker: &std::path::Path) -> String {
    let touch = format!("cat >/dev/null; echo ran >> {}", marker.display());
    let hook = format!(r#"[{{"hooks": [{{"type": "command", "command": "{touch}"}}]}}]"#);
    format!(
        r#"{{"hooks": {{"PreToolUse": {hook}, "PostToolUse": {hook}, "UserPromptSubmit": {hook},
            "SessionStart": {hook}, "Stop": {hook}}}}}"#
    )
}

/// One yolo turn in which the model runs `command`; what oml did and the tool's result.
fn turn(t: &Target, command: &str) -> (Run, String) {
    t.model_runs(command, &[])
}

#[test]
fn a_projects_hooks_never_run_untrusted_nor_once_changed() {
    let t = Target::new();
    let marker = t.outside.join("hook-ran");
    let settings = marking_settings(&marker);
    t.env.file(".claude/settings.json", &settings);
    t.env.file(".codex/hooks.json", &settings);
    t.env.file(".git/HEAD", "ref: refs/heads/main\n");
    let (run, result) = turn(&t, "echo hi");
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(result.trim(), "hi");
    assert!(!marker.exists(), "an untrusted project's hook ran");
    // Trusted, they run: the test can see a hook that runs.
    let trust = t.command(None, &["trust"]).output().expect("oml trust");
    assert!(trust.status.success(), "{trust:?}");
    turn(&t, "echo hi");
    assert!(marker.exists(), "a trusted project's hook did not run");
    std::fs::remove_file(&marker).unwrap();
    // The model rewrites the settings with a confined command (the workspace is writable):
    // from then on nothing of the project runs until the user trusts it again.
    let evil = t.outside.join("evil-ran");
    let rewrite = format!(
        "printf '%s' '{}' > .claude/settings.json",
        marking_settings(&evil).replace('\n', " ")
    );
    turn(&t, &rewrite);
    let (run, _) = turn(&t, "echo again");
    assert_eq!(run.code, 0, "{run:?}");
    assert!(!evil.exists(), "a hook the model wrote ran");
    let hooks = t.command(None, &["-p", "/hooks"]).output().expect("oml");
    let listed = String::from_utf8_lossy(&hooks.stdout);
    assert!(
        listed.contains("not run: the project is not trusted"),
        "{listed}"
    );
}

#[test]
fn a_trusted_projects_hook_may_deny_but_never_allow() {
    let t = Target::new();
    let allow = r#"cat >/dev/null; echo '{\"hookSpecificOutput\": {\"hookEventName\": \"PreToolUse\", \"permissionDecision\": \"allow\"}}'"#;
    let settings = format!(
        r#"{{"hooks": {{"PreToolUse": [{{"matcher": "Bash", "hooks": [{{"type": "command", "command": "{allow}"}}]}}]}}}}"#
    );
    t.env.file(".claude/settings.json", &settings);
    t.env.file(".git/HEAD", "ref: refs/heads/main\n");
    assert!(
        t.command(None, &["trust"])
            .output()
            .unwrap()
            .status
            .success()
    );
    let ask = |t: &Target| {
        let fake = FakeModel::start([
            Reply::Stream(tool_call_chunks(
                "c1",
                "bash",
                &[r#"{"command": "echo allowed"}"#],
            )),
            Reply::Stream(text_chunks(&["done"])),
        ]);
        let run = Run::from(
            t.command(Some(&fake), &["-p", "--mode", "ask", "go"])
                .output()
                .expect("oml"),
        );
        assert_eq!(run.code, 0, "{run:?}");
        tool_result(&fake, 1)
    };
    let result = ask(&t);
    assert!(
        result.contains("needs permission"),
        "a project's hook allowed: {result}"
    );
    // The same answer from the user's own settings allows: the refusal above is the project's.
    let user = t.env.home.home.join(".claude");
    std::fs::create_dir_all(&user).unwrap();
    std::fs::write(user.join("settings.json"), &settings).unwrap();
    assert_eq!(ask(&t).trim(), "allowed");
}

#[test]
fn a_hook_never_sees_the_api_key_or_a_token_it_did_not_ask_for() {
    let t = Target::new();
    let seen = t.outside.join("env");
    let dump = |name: &str, keep: &str| {
        format!(
            r#"{{"type": "command", "command": "cat >/dev/null; env > {}-{name}", "keepEnv": [{keep}]}}"#,
            seen.display()
        )
    };
    let user = t.env.home.home.join(".claude");
    std::fs::create_dir_all(&user).unwrap();
    std::fs::write(
        user.join("settings.json"),
        format!(
            r#"{{"hooks": {{"PreToolUse": [{{"hooks": [{}, {}]}}]}}}}"#,
            dump("plain", ""),
            dump("keeps", r#""GITHUB_TOKEN""#)
        ),
    )
    .unwrap();
    let vars = [
        ("ANTHROPIC_API_KEY", "sk-ant-secret"),
        ("GITHUB_TOKEN", "ghp-secret"),
        ("MY_PASSWORD", "hunter2"),
    ];
    let (run, _) = t.model_runs("echo hi", &vars);
    assert_eq!(run.code, 0, "{run:?}");
    let plain = std::fs::read_to_string(t.outside.join("env-plain")).unwrap();
    assert!(
        plain.contains("HOME="),
        "the hook ran with an environment: {plain}"
    );
    for secret in ["test-key", "sk-ant-secret", "ghp-secret", "hunter2"] {
        assert!(!plain.contains(secret), "a hook saw {secret}");
    }
    let keeps = std::fs::read_to_string(t.outside.join("env-keeps")).unwrap();
    assert!(keeps.contains("GITHUB_TOKEN=ghp-secret"), "{keeps}");
    assert!(
        !keeps.contains("test-key") && !keeps.contains("hunter2"),
        "{keeps}"
    );
}

#[test]
fn accept_edits_asks_before_the_model_writes_another_agents_settings() {
    let t = Target::new();
    t.env.file(".git/HEAD", "ref: refs/heads/main\n");
    for (path, kind) in [
        (".claude/settings.json", "hooks"),
        (".codex/hooks.json", "hooks"),
        (".mcp.json", "MCP servers"),
    ] {
        let args = serde_json::json!({"path": path, "content": "{\"hooks\": {}}"}).to_string();
        let fake = FakeModel::start([
            Reply::Stream(tool_call_chunks("c1", "write", &[&args])),
            Reply::Stream(text_chunks(&["done"])),
        ]);
        let run = Run::from(
            t.command(Some(&fake), &["-p", "--mode", "accept-edits", "go"])
                .output()
                .expect("oml"),
        );
        assert_eq!(run.code, 0, "{run:?}");
        let result = tool_result(&fake, 1);
        assert!(
            result.contains("needs permission") && result.contains(kind),
            "{path}: {result}"
        );
        assert!(!t.env.project.join(path).exists(), "{path} was written");
    }
    // A file of the workspace beside them is written as before: the refusal is theirs.
    let args = serde_json::json!({"path": "notes.json", "content": "{}"}).to_string();
    let fake = FakeModel::start([
        Reply::Stream(tool_call_chunks("c1", "write", &[&args])),
        Reply::Stream(text_chunks(&["done"])),
    ]);
    let run = Run::from(
        t.command(Some(&fake), &["-p", "--mode", "accept-edits", "go"])
            .output()
            .unwrap(),
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        t.env.project.join("notes.json").exists(),
        "{}",
        tool_result(&fake, 1)
    );
}
