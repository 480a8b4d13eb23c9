//! stderr stays silent in ACP mode: acp.el-based clients show any stderr as an error notice,
//! so answers a real editor gives by design are not warnings. Toad answers oml's
//! `$/cancel_request` with -32601 and rejects `session_info_update` with -32602, both as
//! id-less error responses.

mod support;

use serde_json::json;
use support::editor::{Editor, update};
use support::fake_model::{FakeModel, Reply, text_chunks};
use support::home::{Env, use_fake_model};

#[test]
fn an_editor_refusing_our_notifications_leaves_stderr_silent() {
    let env = Env::new();
    let fake = FakeModel::start([Reply::Stream(text_chunks(&["hi"]))]);
    let mut cmd = env.home.blocking_command(&["acp"]);
    use_fake_model(&mut cmd, &fake.base_url());
    let mut editor = Editor::spawn(cmd);
    editor.initialize();
    let (sid, _) = editor.new_session_with(&env.project, json!([]));
    let id = editor.prompt(&sid, "hello");
    let mut refused = 0;
    editor.until(|m| {
        if update(m) == "session_info_update" {
            refused += 1;
        }
        m["id"] == json!(id)
    });
    assert_eq!(refused, 1, "the prompt announced the session's title");
    for (code, message) in [(-32602, "Invalid params"), (-32601, "Method not found")] {
        editor.send(&json!({
            "jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}
        }));
        editor.send(&json!({
            "jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}
        }));
    }
    let stderr = editor.finish();
    assert_eq!(stderr, "", "oml wrote to stderr");
}
