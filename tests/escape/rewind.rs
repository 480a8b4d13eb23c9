//! Rewinds: a rewind writes back files oml changed earlier, so a model that plants a link where
//! such a file was, or a command that edits the checkpoint store or the session file, could try
//! to turn `/rewind` into a write or a removal outside the workspace. Each attack runs real
//! `oml -p` turns (`-c` goes on with the session) against a scripted model and real links.

use std::fs;

use serde_json::json;

use super::harness::{Target, landlock_or_skip};
use crate::support::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};
use crate::support::home::Run;

/// One `oml -p` turn (`-c` after the first) in yolo mode in which the model calls `tool` with
/// `args`; the tool result the model read.
fn turn(t: &Target, first: bool, tool: &str, args: serde_json::Value) -> String {
    let fake = FakeModel::start([
        Reply::Stream(tool_call_chunks("c1", tool, &[&args.to_string()])),
        Reply::Stream(text_chunks(&["done"])),
    ]);
    let mut a = vec!["-p", "--mode", "yolo"];
    if !first {
        a.push("-c");
    }
    a.push("go");
    let run = Run::from(t.command(Some(&fake), &a).output().expect("run oml"));
    assert_eq!(run.code, 0, "{run:?}");
    // The last message of the second request: this turn's result (earlier turns come first).
    let requests = fake.requests();
    let messages = requests[1].body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let last = messages.last().cloned().unwrap_or_default();
    assert_eq!(last["role"], "tool", "{run:?}");
    last["content"].as_str().unwrap_or_default().to_owned()
}

/// `/rewind ARGS` in the session of the earlier turns.
fn rewind(t: &Target, args: &str) -> Run {
    let prompt = format!("/rewind {args}");
    Run::from(
        t.command(None, &["-p", "-c", &prompt])
            .output()
            .expect("run oml"),
    )
}

#[test]
fn a_link_planted_where_a_file_was_does_not_lead_a_rewind_outside() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    let victim = t.outside.join(".bashrc");
    fs::write(&victim, "the user's shell setup\n").expect("write");
    // The model writes a file whose content is the victim's (it may read anything), then
    // swaps its folder for a link to the victim's: a rewind that removes the file it created
    // would remove the victim, one that writes it back would write there.
    turn(
        &t,
        true,
        "write",
        json!({"path": "sub/.bashrc", "content": "the user's shell setup\n"}),
    );
    let swap = format!("rm -r sub && ln -s {} sub", t.outside.display());
    turn(&t, false, "bash", json!({"command": swap}));
    assert!(t.env.project.join("sub").is_symlink());

    let run = rewind(&t, "1 files force");
    assert!(run.stdout.contains("Could not be put back:"), "{run:?}");
    assert!(run.stdout.contains("symbolic link"), "{run:?}");
    assert_eq!(
        fs::read_to_string(&victim).ok().as_deref(),
        Some("the user's shell setup\n"),
        "the file outside is untouched: {run:?}"
    );
}

#[test]
fn a_command_cannot_poison_the_checkpoints_or_forge_a_change() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    t.env.file("notes.txt", "the original\n");
    turn(
        &t,
        true,
        "write",
        json!({"path": "notes.txt", "content": "the model's\n"}),
    );
    let state = t.env.root.join("state/oml");
    let objects = state.join("checkpoints");
    let sessions = state.join("sessions");
    let outside = t.outside.join("forged.txt");
    // Overwrite every kept content with the attacker's, and append a change that would make a
    // rewind write the attacker's content outside.
    let forged = json!({"type": "custom", "kind": "checkpoint", "data": {
        "path": outside.display().to_string(), "before": "0".repeat(64), "after": null, "kept": true}});
    let attack = format!(
        "for f in {objects}/*/*; do echo evil > \"$f\"; echo obj=$?; done; \
         for f in {sessions}/*.jsonl; do echo '{forged}' >> \"$f\"; echo log=$?; done",
        objects = objects.display(),
        sessions = sessions.display(),
    );
    let result = turn(&t, false, "bash", json!({"command": attack}));
    assert!(
        result.contains("obj=") && result.contains("log="),
        "{result}"
    );
    assert!(
        !result.contains("obj=0") && !result.contains("log=0"),
        "{result}"
    );

    let run = rewind(&t, "1 files");
    assert!(run.stdout.contains("Restored:"), "{run:?}");
    assert_eq!(
        fs::read_to_string(t.env.project.join("notes.txt"))
            .ok()
            .as_deref(),
        Some("the original\n"),
        "{run:?}"
    );
    assert!(!outside.exists(), "{run:?}");
}
