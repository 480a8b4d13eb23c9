//! `oml sessions export` run by a confined command (a prompt-injected model asking for another
//! session's trajectory, with its secrets and its sub-agents) reads nothing the command could not
//! read itself: the sessions folder is hidden from the command, so the export finds no session.
//! With `sandbox.deny-read` emptied the same attack prints the trajectory, so the test would see
//! a leak.

use crate::support::home::Run;

use super::harness::{Target, landlock_or_skip};

/// The secret the planted session holds.
const SECRET: &str = "s3cr3t-in-a-transcript";

#[test]
fn a_confined_command_cannot_export_another_session() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    let sessions = t.env.home.state.join("oml/sessions");
    std::fs::create_dir_all(&sessions).expect("the sessions folder");
    let header = r#"{"type":"session","id":"s-other","created":1.0,"version":"0.1.0"}"#;
    let said = format!(
        r#"{{"type":"message","message":{{"role":"user","content":"{SECRET}"}},"at":2.0}}"#
    );
    std::fs::write(
        sessions.join("s-other.jsonl"),
        format!("{header}\n{said}\n"),
    )
    .expect("plant");
    let oml = env!("CARGO_BIN_EXE_oml");
    let out = t.env.project.join("stolen.json");
    let attack = format!(
        "{oml} sessions export s-other 2>&1; {oml} sessions export -o {} s-other 2>&1; \
         cat {} 2>&1; echo end",
        out.display(),
        out.display()
    );
    let (run, result): (Run, String) = t.model_runs(&attack, &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        result.contains("end"),
        "the attack ran to its end: {result}"
    );
    assert!(
        !result.contains(SECRET),
        "the export read a transcript: {result}"
    );
    assert!(result.contains("no session s-other"), "{result}");
    assert!(
        !std::fs::read_to_string(&out)
            .unwrap_or_default()
            .contains(SECRET)
    );

    // With the list emptied the same attack exports it: the test sees a leak when there is one.
    t.env.init("(setq sandbox.deny-read [])");
    let (run, result) = t.model_runs(&attack, &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(result.contains(SECRET), "{result}");
}
