//! `oml acp` answers `initialize` while its image is still being built (the user init file still
//! running), and serves what the editor sent meanwhile once it is built, in line order, with the
//! client's capabilities from that early `initialize` known to Lisp.

mod support;

use std::io::Write as _;

use serde_json::json;
use support::editor::Editor;
use support::home::Env;

/// An init file that waits until the test opens `fifo` for writing, then installs an extension
/// method that reports what Lisp knows of the client.
fn init_waiting_on(fifo: &std::path::Path) -> String {
    format!(
        r#"(with-open [f (io.open "{}" :r)] (f:read :a))
(tset acp.methods "_test/booted"
      (fn [_] {{:terminal (. acp.client-capabilities :terminal)}}))
"#,
        fifo.display()
    )
}

#[test]
fn initialize_is_answered_while_the_init_file_runs_and_the_rest_waits_for_it() {
    let env = Env::new();
    let fifo = env.home.root.join("boot.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    env.init(&init_waiting_on(&fifo));
    let mut editor = Editor::spawn(env.home.blocking_command(&["acp"]));

    let init = editor.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"terminal": true}}),
    );
    let probe = editor.request("_test/booted", json!({}));
    // The init file is blocked on the FIFO: only `initialize` can be answered now.
    let answer = editor.next();
    assert_eq!(answer["id"], json!(init), "first answer: {answer}");
    assert_eq!(answer["result"]["protocolVersion"], 1);

    let mut writer = std::fs::OpenOptions::new()
        .write(true)
        .open(&fifo)
        .expect("open the FIFO");
    writer.write_all(b"go").unwrap();
    drop(writer);
    // Sent before the init file had defined it, served after: it exists, and Lisp knows the
    // capabilities of the `initialize` answered early.
    let (_, booted) = editor.until_response(probe);
    assert_eq!(booted["result"], json!({"terminal": true}), "{booted}");
    let stderr = editor.finish();
    assert_eq!(stderr, "", "oml wrote to stderr");
}

#[test]
fn a_malformed_initialize_while_booting_gets_its_error_and_the_next_one_its_answer() {
    let env = Env::new();
    let mut editor = Editor::spawn(env.home.blocking_command(&["acp"]));
    let bad = editor.request("initialize", json!({"protocolVersion": "one"}));
    let (_, refused) = editor.until_response(bad);
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let good = editor.initialize_message();
    assert_eq!(good["result"]["protocolVersion"], 1, "{good}");
    editor.finish();
}
