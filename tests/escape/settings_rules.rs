//! A repository's `.claude/settings.json` (and `settings.local.json`, which a checkout can ship
//! too) may carry `permissions` rules: they must never let a session do more than the user
//! allows. A project's allow rules are never used, even in a trusted project; its deny and ask
//! rules narrow only while it is trusted; the user's deny wins over anything a project says.
//! Print mode, where nobody can be asked, against a scripted model.

use crate::support::home::{Env, Run};
use crate::support::turns;

/// Write the `permissions` of the settings file NAME (relative to the home folder, or to the
/// project with `project`).
fn settings(env: &Env, project: bool, name: &str, permissions: serde_json::Value) {
    let base = if project {
        &env.project
    } else {
        &env.home.home
    };
    turns::write_permissions(&base.join(name), permissions);
}

/// One print-mode turn of the tool CALLS in permission MODE; the tool results.
fn turn(env: &Env, mode: &str, calls: &[(&str, serde_json::Value)]) -> Vec<String> {
    env.init(&format!("(setq agent.print-mode-permission :{mode})"));
    let calls: Vec<(&str, String)> = calls.iter().map(|(n, a)| (*n, a.to_string())).collect();
    let fake = turns::calling(&calls);
    let out = Run::from(
        env.command(Some(&fake), &["-p", "go"])
            .output()
            .expect("oml"),
    );
    assert_eq!(out.code, 0, "{out:?}");
    turns::results(&fake, calls.len())
}

fn trust(env: &Env) {
    let out = Run::from(env.command(None, &["trust"]).output().expect("oml trust"));
    assert_eq!(out.code, 0, "{out:?}");
}

#[test]
fn a_trusted_projects_allow_rules_let_nothing_run_without_asking() {
    let env = Env::new();
    let allow = serde_json::json!({"allow": ["Bash", "Edit", "Write", "Bash(touch:*)"]});
    settings(&env, true, ".claude/settings.json", allow.clone());
    settings(&env, true, ".claude/settings.local.json", allow);
    trust(&env);
    let calls = [
        ("bash", serde_json::json!({"command": "touch pwned"})),
        (
            "write",
            serde_json::json!({"path": "pwned.txt", "content": "x"}),
        ),
    ];
    for r in turn(&env, "ask", &calls) {
        assert!(r.contains("needs permission in ask mode"), "{r}");
    }
    assert!(!env.project.join("pwned").exists());
    assert!(!env.project.join("pwned.txt").exists());
    let listed = Run::from(
        env.command(
            None,
            &[
                "eval",
                "(. (agent.setting-rules (os.getenv :PWD)) :rules 1 :why)",
            ],
        )
        .env("PWD", &env.project)
        .output()
        .expect("oml eval"),
    );
    assert!(
        listed
            .stdout
            .contains("a project may only narrow what the user allows"),
        "{listed:?}"
    );
}

#[test]
fn an_untrusted_projects_rules_are_never_applied() {
    let env = Env::new();
    settings(
        &env,
        true,
        ".claude/settings.json",
        serde_json::json!({"deny": ["Bash(echo:*)"], "ask": ["Read"]}),
    );
    env.file("notes.txt", "hello\n");
    let calls = [
        ("bash", serde_json::json!({"command": "echo ran"})),
        ("read", serde_json::json!({"path": "notes.txt"})),
    ];
    // Untrusted: neither rule is used (nor, with it, anything else the file says).
    let results = turn(&env, "yolo", &calls);
    assert_eq!(results[0].trim(), "ran", "{results:?}");
    assert!(results[1].contains("hello"), "{results:?}");
    // Trusted, they narrow.
    trust(&env);
    let results = turn(&env, "yolo", &calls);
    assert!(
        results[0].contains("`Bash(echo:*)`") && results[0].contains("denies it"),
        "{results:?}"
    );
    assert!(
        results[1].contains("`Read`") && results[1].contains("asks about"),
        "{results:?}"
    );
    // Changed after it was trusted: not used until trusted again.
    settings(
        &env,
        true,
        ".claude/settings.json",
        serde_json::json!({"deny": ["Bash(echo:*)"]}),
    );
    let results = turn(&env, "yolo", &calls);
    assert_eq!(results[0].trim(), "ran", "{results:?}");
}

#[test]
fn a_projects_allow_never_beats_the_users_deny() {
    let env = Env::new();
    settings(
        &env,
        false,
        ".claude/settings.json",
        serde_json::json!({"deny": ["Bash(touch:*)"]}),
    );
    settings(
        &env,
        true,
        ".claude/settings.json",
        serde_json::json!({"allow": ["Bash(touch:*)", "Bash"]}),
    );
    trust(&env);
    for mode in ["yolo", "ask", "accept-edits"] {
        let calls = [(
            "bash",
            serde_json::json!({"command": "sudo touch pwned; touch pwned"}),
        )];
        let results = turn(&env, mode, &calls);
        assert!(
            results[0].contains("`Bash(touch:*)`") && results[0].contains("denies it"),
            "{mode}: {results:?}"
        );
    }
    assert!(!env.project.join("pwned").exists());
}
