//! Rewinds: a rewind writes back files oml changed earlier, so a model that plants a link where
//! such a file was, or a command that edits the checkpoint store or the session file, could try
//! to turn `/rewind` into a write or a removal outside the workspace. Each attack runs real
//! `oml -p` turns (`-c` goes on with the session), or `oml acp` turns through an editor that
//! serves `fs`, against a scripted model and real links.

use std::fs;

use serde_json::json;

use super::harness::{Target, landlock_or_skip};
use crate::support::editor::{Editor, update};
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

/// One turn through `oml acp` served as an editor that offers `fs` and saves what it is sent,
/// following links as editors do; the params of each `fs/write_text_file`, and the answer's text.
fn editor_turn(ed: &mut Editor, sid: &str, text: &str) -> (Vec<serde_json::Value>, String) {
    let id = ed.prompt(sid, text);
    let (mut writes, mut said) = (Vec::new(), String::new());
    loop {
        let m = ed.next();
        let path = m["params"]["path"].as_str().unwrap_or_default().to_owned();
        match m["method"].as_str() {
            Some("fs/read_text_file") => match fs::read_to_string(&path) {
                Ok(content) => ed.answer(&m["id"], json!({"content": content})),
                Err(_) => ed.answer_error(&m["id"], -32002, "Resource not found"),
            },
            Some("fs/write_text_file") => {
                let content = m["params"]["content"].as_str().unwrap_or_default();
                fs::write(&path, content).expect("the editor saves");
                ed.answer(&m["id"], json!({}));
                writes.push(m["params"].clone());
            }
            _ if update(&m) == "agent_message_chunk" => {
                said.push_str(
                    m["params"]["update"]["content"]["text"]
                        .as_str()
                        .unwrap_or(""),
                );
            }
            None if m["id"] == json!(id) => return (writes, said),
            _ => {}
        }
    }
}

/// A rewind through an editor that offers `fs` (issue 43 item 4): the editor follows links,
/// so a file whose folder a command swapped for a link is not handed to it; the rewind stays
/// on the disk's path, where no link is followed, and says it could not put the file back.
#[test]
fn a_link_planted_where_a_file_was_does_not_lead_the_editors_write_outside() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    let victim = t.outside.join(".bashrc");
    let setup = "the user's shell setup\n";
    fs::write(&victim, setup).expect("write");
    t.env.file("sub/.bashrc", "the project's own\n");
    // The model writes the victim's content where the project's file is, then swaps its
    // folder for a link to the victim's: a rewind that writes the file back through the
    // editor, which follows the link, would overwrite the victim.
    let write = json!({"path": "sub/.bashrc", "content": setup});
    let swap = format!("rm -r sub && ln -s {} sub", t.outside.display());
    let fake = FakeModel::start([
        Reply::Stream(tool_call_chunks("c1", "write", &[&write.to_string()])),
        Reply::Stream(text_chunks(&["wrote"])),
        Reply::Stream(tool_call_chunks(
            "c2",
            "bash",
            &[&json!({"command": swap}).to_string()],
        )),
        Reply::Stream(text_chunks(&["swapped"])),
    ]);
    let mut ed = Editor::spawn(t.command(Some(&fake), &["acp"]));
    let fs_caps = json!({"fs": {"readTextFile": true, "writeTextFile": true}});
    let sid = crate::support::acp::yolo_session(&mut ed, &t.env, fs_caps);
    let (writes, _) = editor_turn(&mut ed, &sid, "write it");
    assert_eq!(writes.len(), 1, "the write went through the editor");
    editor_turn(&mut ed, &sid, "swap it");
    assert!(t.env.project.join("sub").is_symlink());

    let (writes, said) = editor_turn(&mut ed, &sid, "/rewind 1 files force");
    assert_eq!(writes, Vec::<serde_json::Value>::new(), "{said}");
    assert!(said.contains("Could not be put back:"), "{said}");
    assert_eq!(
        fs::read_to_string(&victim).ok().as_deref(),
        Some(setup),
        "the file outside is untouched: {said}"
    );
}
