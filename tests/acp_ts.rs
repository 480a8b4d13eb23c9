//! `oml acp` driven by the official ACP TypeScript SDK (`tests/interop/ts`, pinned, installed by
//! `scripts/setup-mcp.sh`), whose schemas check every message oml sends: the stabilized v1
//! features of 2026 as a real client uses them.

mod support;

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use support::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};
use support::home::{Env, use_fake_model};

#[test]
fn the_typescript_sdk_drives_oml_acp_through_elicitation_message_ids_and_cancel_request() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/ts");
    if !dir.join("node_modules/@agentclientprotocol/sdk").exists() {
        return support::home::skip(
            "the ACP TypeScript SDK",
            "scripts/setup-mcp.sh installs it (npm ci in tests/interop/ts)",
        );
    }
    let env = Env::new();
    let extra = env.root.join("extra");
    std::fs::create_dir_all(&extra).unwrap();
    let ask = r#"{"question": "Which database?", "choices": ["postgres", "sqlite"]}"#;
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks("c1", "ask_user", &[ask])),
        Reply::from(text_chunks(&["Using ", "sqlite."])),
        support::acp::partial_then_hang("working"),
    ]);
    let mut cmd = Command::new("node");
    cmd.arg(dir.join("drive_oml.mjs"))
        .arg(env!("CARGO_BIN_EXE_oml"))
        .arg(&env.project)
        .arg(&extra)
        .current_dir(&dir)
        .env("XDG_CONFIG_HOME", &env.home.config)
        .env("XDG_STATE_HOME", &env.home.state)
        .env("XDG_CACHE_HOME", &env.home.cache)
        .env("XDG_RUNTIME_DIR", &env.home.runtime)
        .env("HOME", &env.home.home);
    use_fake_model(&mut cmd, &fake.base_url());
    let out = cmd.output().expect("run node");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The SDK drops a notification its schema refuses, saying so on stderr.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("Error handling"), "{stderr}");
    let seen: Value = serde_json::from_slice(out.stdout.trim_ascii()).expect("one JSON line");
    assert_eq!(seen["protocolVersion"], 1);
    assert_eq!(seen["additionalDirectories"], serde_json::json!({}));
    assert_eq!(seen["elicitations"][0]["mode"], "form", "{seen}");
    assert_eq!(seen["elicitations"][0]["message"], "Which database?");
    assert_eq!(seen["firstStop"], "end_turn");
    let chunks = seen["firstChunks"].as_array().unwrap();
    let text: String = chunks.iter().map(|c| c["text"].as_str().unwrap()).collect();
    assert_eq!(text, "Using sqlite.");
    assert!(
        chunks
            .iter()
            .all(|c| c["messageId"] == chunks[0]["messageId"] && c["messageId"].is_string()),
        "{seen}"
    );
    assert_eq!(seen["secondStop"], "cancelled", "{seen}");
    let asked = fake.requests()[1].body["messages"].to_string();
    assert!(asked.contains("The user answered: sqlite"), "{asked}");
}
