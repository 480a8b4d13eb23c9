//! The model asks the user through `oml acp`: the `ask_user` tool over the editor's ACP
//! elicitation (`elicitation/create`, form mode), and the model told when nobody can be asked.

mod support;

use serde_json::json;
use support::acp::Client;
use support::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};
use support::home::Env;

/// The content of the last tool message in the fake model's request number `n`.
fn last_tool_result(fake: &FakeModel, n: usize) -> String {
    fake.requests()[n].body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "tool"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn the_model_asks_the_user_through_the_editors_elicitation() {
    let env = Env::new();
    let args = r#"{"question": "Which database?", "choices": ["postgres", "sqlite"]}"#;
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks("c1", "ask_user", &[args])),
        Reply::from(text_chunks(&["ok"])),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    let sid = support::acp::yolo_session(&mut c, &env, json!({"elicitation": {"form": {}}}));
    let id = c.prompt(&sid, "set it up");
    let ask = c.until(|m| m["method"] == "elicitation/create");
    let p = &ask["params"];
    assert_eq!(p["mode"], "form");
    assert_eq!(p["sessionId"], json!(sid));
    assert_eq!(p["message"], "Which database?");
    assert_eq!(
        p["requestedSchema"]["properties"]["answer"]["enum"],
        json!(["postgres", "sqlite"])
    );
    assert_eq!(p["requestedSchema"]["required"], json!(["answer"]));
    c.answer(
        &ask["id"],
        json!({"action": "accept", "content": {"answer": "sqlite"}}),
    );
    let (_, r) = c.until_response(id);
    assert_eq!(r["result"]["stopReason"], "end_turn");
    assert_eq!(last_tool_result(&fake, 1), "The user answered: sqlite");
    let offered = fake.requests()[0].body["tools"].to_string();
    assert!(
        offered.contains("\"ask_user\""),
        "offered with elicitation: {offered}"
    );
}

#[test]
fn without_elicitation_the_model_is_not_offered_ask_user() {
    let env = Env::new();
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks(
            "c1",
            "ask_user",
            &[r#"{"question": "Which?"}"#],
        )),
        Reply::from(text_chunks(&["ok"])),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    let sid = support::acp::yolo_session(&mut c, &env, json!({}));
    let (updates, stop) = c.turn(&sid, "go");
    assert_eq!(stop, "end_turn");
    assert!(updates.iter().all(|m| m["method"] != "elicitation/create"));
    let offered: Vec<String> = fake.requests()[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap_or("").to_owned())
        .collect();
    assert!(
        !offered.contains(&"ask_user".to_owned()),
        "not offered: {offered:?}"
    );
    assert_eq!(last_tool_result(&fake, 1), "Unknown tool: ask_user");
}
