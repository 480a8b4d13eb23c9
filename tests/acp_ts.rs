//! `oml acp` driven by the official ACP TypeScript SDK (`tests/interop/ts`, pinned, installed by
//! `scripts/setup-mcp.sh`), whose schemas check every message oml sends: the stabilized v1
//! features of 2026 as a real client uses them.

mod support;

use support::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};
use support::home::Env;

#[test]
fn the_typescript_sdk_drives_oml_acp_through_elicitation_message_ids_and_cancel_request() {
    let env = Env::new();
    let extra = env.root.join("extra");
    std::fs::create_dir_all(&extra).unwrap();
    let ask = r#"{"question": "Which database?", "choices": ["postgres", "sqlite"]}"#;
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks("c1", "ask_user", &[ask])),
        Reply::from(text_chunks(&["Using ", "sqlite."])),
        support::acp::partial_then_hang("working"),
    ]);
    let Some(mut cmd) = support::sdk::driver(&[], "drive_oml.mjs", &env, &fake) else {
        return;
    };
    cmd.arg(env!("CARGO_BIN_EXE_oml"))
        .arg(&env.project)
        .arg(&extra);
    let seen = support::sdk::seen(&mut cmd);
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

#[test]
fn the_typescript_sdk_shows_a_sub_agent_s_task_card_with_its_progress_and_its_session() {
    let env = Env::new();
    let notes = env.file("notes.txt", "alpha\n");
    let task = r#"{"agent": "explore", "prompt": "read the notes", "description": "notes"}"#;
    let read = serde_json::json!({"path": notes}).to_string();
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks("call_t", "task", &[task])),
        Reply::from(tool_call_chunks("sub_1", "read", &[&read])),
        Reply::from(text_chunks(&["The notes say alpha."])),
        Reply::from(text_chunks(&["Done."])),
    ]);
    let Some(mut cmd) = support::sdk::driver(&[], "drive_oml_task.mjs", &env, &fake) else {
        return;
    };
    cmd.arg(env!("CARGO_BIN_EXE_oml")).arg(&env.project);
    let seen = support::sdk::seen(&mut cmd);
    assert_eq!(seen["stop"], "end_turn", "{seen}");
    let card = &seen["cards"]["call_t"];
    assert_eq!(card["titles"][0], "explore: notes", "{seen}");
    assert_eq!(
        card["statuses"].as_array().and_then(|s| s.last()),
        Some(&"completed".into())
    );
    let texts = card["texts"].to_string();
    assert!(texts.contains("**explore**: read the notes"), "{texts}");
    assert!(texts.contains("Read "), "{texts}");
    assert!(texts.contains("The notes say alpha."), "{texts}");
    let link = &card["meta"]["oml"]["subagent"];
    assert_eq!(link["parentSessionId"], seen["sessionId"], "{seen}");
    assert_eq!(link["agent"], "explore");
    // The sub-agent's own cards stay in its session; the list shows the user's session only.
    assert!(seen["cards"].get("sub_1").is_none(), "{seen}");
    assert_eq!(
        seen["sessions"],
        serde_json::json!([seen["sessionId"]]),
        "{seen}"
    );
}

#[test]
fn the_typescript_sdk_sees_the_terminal_auth_method_and_authenticates_once_a_model_is_set() {
    let env = Env::new();
    let fake = FakeModel::start(Vec::<Reply>::new());
    let Some(mut cmd) = support::sdk::driver(&[], "drive_oml_auth.mjs", &env, &fake) else {
        return;
    };
    cmd.arg(env!("CARGO_BIN_EXE_oml")).arg(&env.project);
    let seen = support::sdk::seen(&mut cmd);
    for run in ["withModel", "withoutModel"] {
        let method = &seen[run]["authMethods"][0];
        assert_eq!(method["type"], "terminal", "{seen}");
        assert_eq!(method["id"], "oml-setup", "{seen}");
        assert_eq!(method["args"], serde_json::json!(["setup"]), "{seen}");
    }
    assert_eq!(seen["withModel"]["result"], serde_json::json!({}), "{seen}");
    assert_eq!(seen["withoutModel"]["error"]["code"], -32000, "{seen}");
}
