//! Secrets stay unread: with the default `sandbox.deny-read`, a confined command that reads,
//! lists or copies the credentials planted in the home folder, or another project's session
//! transcript in oml's state folder, finds nothing; nor through `/proc/PID/root` of a process
//! outside the sandbox. A workspace inside a denied folder is refused with its reason, and the
//! same attack with the list emptied reads everything, so the test would see a leak.

use std::path::PathBuf;

use crate::support::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};
use crate::support::home::Run;

use super::harness::{Target, landlock_or_skip, tool_result};

/// The secret each planted file holds.
const SECRET: &str = "s3cr3t-planted";

/// Plant a secret in each default-denied file (relative to the home folder) and one session
/// transcript of another project; the planted paths.
fn plant(t: &Target) -> Vec<PathBuf> {
    let home = &t.env.home.home;
    let mut planted: Vec<PathBuf> = [
        ".ssh/id_ed25519",
        ".aws/credentials",
        ".netrc",
        ".git-credentials",
        ".docker/config.json",
        ".config/gh/hosts.yml",
        ".kube/config",
        ".npmrc",
        ".claude/projects/other/transcript.jsonl",
        ".codex/auth.json",
    ]
    .iter()
    .map(|name| home.join(name))
    .collect();
    planted.push(t.env.home.state.join("oml/sessions/other-project.jsonl"));
    for path in &planted {
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(path, format!("{SECRET} {}\n", path.display())).expect("plant");
    }
    planted
}

/// A command that reads, lists and copies each planted path, and reads the first through
/// `/proc/PID/root` of this test process (outside the sandbox).
fn attack(planted: &[PathBuf], copies: &std::path::Path) -> String {
    let mut command = format!("mkdir -p {}; ", copies.display());
    for (i, path) in planted.iter().enumerate() {
        let (p, dir) = (path.display(), path.parent().expect("parent").display());
        command.push_str(&format!(
            "cat {p}; ls -a {dir} | sed 's/^/listed:/'; cp {p} {}/{i} 2>&1; ",
            copies.display()
        ));
    }
    command.push_str(&format!(
        "cat /proc/{}/root{} 2>&1; echo end",
        std::process::id(),
        planted[0].display()
    ));
    command
}

#[test]
fn a_command_reads_lists_and_copies_no_secret_by_default() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    let planted = plant(&t);
    let copies = t.env.project.join("copies");
    let (run, result) = t.model_runs(&attack(&planted, &copies), &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        result.contains("end"),
        "the attack ran to its end: {result}"
    );
    assert!(!result.contains(SECRET), "a secret was read: {result}");
    for name in [
        "id_ed25519",
        "credentials",
        "hosts.yml",
        "other-project.jsonl",
    ] {
        let listed = format!("listed:{name}");
        assert!(!result.contains(&listed), "{name} was listed: {result}");
    }
    for copy in std::fs::read_dir(&copies).into_iter().flatten().flatten() {
        let text = std::fs::read_to_string(copy.path()).unwrap_or_default();
        assert!(!text.contains(SECRET), "copied: {}", copy.path().display());
    }

    // With the list emptied the same attack reads them: the test sees a leak when there is one.
    t.env.init("(setq sandbox.deny-read [])");
    let (run, result) = t.model_runs(&attack(&planted, &copies), &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(result.contains(SECRET), "{result}");
    assert!(result.contains("listed:id_ed25519"), "{result}");
}

#[test]
fn a_workspace_inside_a_denied_folder_is_refused_with_its_reason() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    let inside = t.env.home.home.join(".aws/project");
    std::fs::create_dir_all(inside.join(".git")).expect("mkdir");
    let args = serde_json::json!({ "command": "echo ran" }).to_string();
    let fake = FakeModel::start([
        Reply::Stream(tool_call_chunks("c1", "bash", &[&args])),
        Reply::Stream(text_chunks(&["done"])),
    ]);
    let run = Run::from(
        t.command(Some(&fake), &["-p", "--mode", "yolo", "do it"])
            .current_dir(&inside)
            .output()
            .expect("run oml"),
    );
    let result = tool_result(&fake, 1);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        !result.contains("\nran") && !result.starts_with("ran"),
        "{result}"
    );
    assert!(
        result.contains("which sandbox.deny-read keeps from commands"),
        "{result}"
    );
}

/// oml's own `read` runs outside the sandbox, so it asks before it looks inside a
/// `sandbox.deny-read` path: in print mode nobody answers, and the secret stays unread.
#[test]
fn omls_own_read_of_a_denied_path_asks_first() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    let planted = plant(&t);
    for (tool, path) in [
        ("read", planted[0].display().to_string()),
        ("ls", t.env.home.home.join(".ssh").display().to_string()),
        ("grep", t.env.home.home.join(".aws").display().to_string()),
    ] {
        let args = serde_json::json!({ "path": path, "pattern": "s3cr3t" }).to_string();
        let fake = FakeModel::start([
            Reply::Stream(tool_call_chunks("c1", tool, &[&args])),
            Reply::Stream(text_chunks(&["done"])),
        ]);
        let run = Run::from(
            t.command(Some(&fake), &["-p", "look"])
                .output()
                .expect("run oml"),
        );
        assert_eq!(run.code, 0, "{run:?}");
        let result = tool_result(&fake, 1);
        assert!(!result.contains(SECRET), "{tool}: {result}");
        assert!(!result.contains("id_ed25519"), "{tool} listed it: {result}");
    }
}

/// A search of a folder that holds a denied one (the home folder, `~/.config`) asks too: `grep`
/// walks beneath its path, so a question about the parent is a question about the secret.
#[test]
fn a_search_of_a_folder_holding_a_secret_asks_first() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    plant(&t);
    for path in ["~", "~/.config"] {
        let args = serde_json::json!({ "path": path, "pattern": "s3cr3t" }).to_string();
        let fake = FakeModel::start([
            Reply::Stream(tool_call_chunks("c1", "grep", &[&args])),
            Reply::Stream(text_chunks(&["done"])),
        ]);
        let run = Run::from(
            t.command(Some(&fake), &["-p", "look"])
                .output()
                .expect("oml"),
        );
        assert_eq!(run.code, 0, "{run:?}");
        let result = tool_result(&fake, 1);
        assert!(!result.contains(SECRET), "grep {path}: {result}");
    }
}

/// An edit of a denied file is never previewed before the question (the preview's error would
/// say whether a guessed text is in the file): it is asked about, and in print mode refused,
/// whatever its `old_text`.
#[test]
fn an_edit_of_a_secret_is_not_previewed_before_asking() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    let planted = plant(&t);
    let answers: Vec<String> = ["s3cr3t", "not-in-it"]
        .iter()
        .map(|guess| {
            let args = serde_json::json!({
                "path": planted[0].display().to_string(),
                "edits": [{"old_text": guess, "new_text": "x"}, {"old_text": "\u{1}nope", "new_text": "y"}],
            })
            .to_string();
            let fake = FakeModel::start([
                Reply::Stream(tool_call_chunks("c1", "edit", &[&args])),
                Reply::Stream(text_chunks(&["done"])),
            ]);
            let run = Run::from(t.command(Some(&fake), &["-p", "fix"]).output().expect("oml"));
            assert_eq!(run.code, 0, "{run:?}");
            tool_result(&fake, 1)
        })
        .collect();
    assert_eq!(
        answers[0], answers[1],
        "the answer tells a right guess from a wrong one"
    );
    assert!(!answers[0].contains("not found"), "{}", answers[0]);
}
