//! ACP features stabilized in 2026, through `oml acp`: the model asks the user with the
//! `ask_user` tool over the editor's elicitation (`elicitation/create`, form mode), offered only
//! when the editor can answer; and the boolean config option `network`, offered to a client that
//! takes boolean options, switching the session's commands' network for real.

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

/// A bash call as a model reply.
fn bash(command: &str) -> Reply {
    let args = json!({ "command": command }).to_string();
    Reply::from(tool_call_chunks("c1", "bash", &[&args]))
}

#[test]
fn a_client_that_takes_boolean_options_switches_the_sessions_network() {
    let Some(abi) = support::home::landlock_or_skip() else {
        return;
    };
    if abi < 4 {
        return support::home::skip("Landlock ABI 4 (network rules)", "Linux 6.7 or later");
    }
    let env = Env::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback listener");
    let port = listener.local_addr().unwrap().port();
    let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected; echo rc=$?");
    let fake = FakeModel::start([
        bash(&connect),
        Reply::from(text_chunks(&["a"])),
        bash(&connect),
        Reply::from(text_chunks(&["b"])),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    let caps = json!({"session": {"configOptions": {"boolean": {}}}});
    c.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": caps}),
    );
    let r = c.call(
        "session/new",
        json!({"cwd": env.project.display().to_string(), "mcpServers": []}),
    );
    let sid = r["result"]["sessionId"].as_str().unwrap().to_owned();
    let network = r["result"]["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "network")
        .cloned()
        .expect("the network switch is offered");
    assert_eq!(network["type"], "boolean");
    assert_eq!(network["currentValue"], false);
    c.call(
        "session/set_mode",
        json!({"sessionId": sid, "modeId": "yolo"}),
    );
    let (_, stop) = c.turn(&sid, "try");
    assert_eq!(stop, "end_turn");
    assert!(
        !last_tool_result(&fake, 1).contains("connected"),
        "the network is off by default"
    );
    let set = c.call(
        "session/set_config_option",
        json!({"sessionId": sid, "configId": "network", "value": true}),
    );
    let now = set["result"]["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "network")
        .cloned()
        .unwrap();
    assert_eq!(now["currentValue"], true, "{set}");
    let (_, stop) = c.turn(&sid, "again");
    assert_eq!(stop, "end_turn");
    assert!(
        last_tool_result(&fake, 3).contains("connected"),
        "{}",
        last_tool_result(&fake, 3)
    );
    let bad = c.call(
        "session/set_config_option",
        json!({"sessionId": sid, "configId": "network", "value": "yes"}),
    );
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("boolean"),
        "{bad}"
    );
}

#[test]
fn a_client_without_boolean_options_is_not_offered_the_switch() {
    let env = Env::new();
    let mut c = Client::start(&env, None);
    c.initialize();
    let r = c.call(
        "session/new",
        json!({"cwd": env.project.display().to_string(), "mcpServers": []}),
    );
    let ids: Vec<&str> = r["result"]["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["mode", "model"]);
}

#[test]
fn ask_user_with_a_url_sends_the_user_there_through_url_mode_elicitation() {
    let env = Env::new();
    env.init(
        r#"(fn tools.login []
  "Sign the user in."
  (let [(answer why) (ask-user {:message "Sign in to the registry" :url "https://example.com/login"})]
    (if answer (.. "the user said " answer.action) (.. "no: " why))))"#,
    );
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks("c1", "login", &["{}"])),
        Reply::from(text_chunks(&["ok"])),
        Reply::from(tool_call_chunks("c2", "login", &["{}"])),
        Reply::from(text_chunks(&["ok"])),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    let sid = support::acp::yolo_session(&mut c, &env, json!({"elicitation": {"url": {}}}));
    let id = c.prompt(&sid, "log in");
    let ask = c.until(|m| m["method"] == "elicitation/create");
    let p = &ask["params"];
    assert_eq!(p["mode"], "url", "{ask}");
    assert_eq!(p["url"], "https://example.com/login");
    assert_eq!(p["message"], "Sign in to the registry");
    assert!(p["elicitationId"].is_string(), "{ask}");
    assert_eq!(p["sessionId"], json!(sid));
    c.answer(&ask["id"], json!({"action": "accept"}));
    let (_, r) = c.until_response(id);
    assert_eq!(r["result"]["stopReason"], "end_turn");
    assert_eq!(last_tool_result(&fake, 1), "the user said accept");
    c.finish();
    // An editor with form elicitation only: the tool hears why nobody was sent.
    let mut c = Client::start(&env, Some(&fake));
    let sid = support::acp::yolo_session(&mut c, &env, json!({"elicitation": {"form": {}}}));
    c.turn(&sid, "log in again");
    assert!(
        last_tool_result(&fake, 3).contains("no URL elicitation"),
        "{}",
        last_tool_result(&fake, 3)
    );
}
