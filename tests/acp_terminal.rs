//! `oml acp` end to end, continued: commands in the editor's terminal, images and attachments,
//! the model picker and the cost of a session.

mod support;

use std::process::Command;

use serde_json::{Value, json};
use support::acp::*;
use support::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks, usage_chunk};
use support::home::Env;

// --- the editor's terminal, images and attachments

/// A client that offers a terminal runs `bash` itself: oml asks for the command wrapped in its
/// sandbox launcher, with no environment of its own, shows the terminal in the card, waits,
/// reads the output and releases the terminal; the secrets of the editor's environment never
/// reach the command.
#[test]
fn bash_runs_in_the_clients_terminal_when_it_offers_one() {
    let env = Env::new();
    let command = "echo hi; echo \"key=$OPENAI_API_KEY token=$MY_TOKEN\"; exit 3";
    let args = json!({ "command": command }).to_string();
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks("c1", "bash", &[&args])),
        Reply::from(text_chunks(&["done"])),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    let sid = yolo_session(&mut c, &env, json!({"terminal": true}));
    let id = c.prompt(&sid, "run it");
    let create = c.until(|m| m["method"] == "terminal/create");
    let p = &create["params"];
    assert_eq!(p["sessionId"], sid.as_str());
    assert_eq!(p["command"], env!("CARGO_BIN_EXE_oml"));
    assert_eq!(p["cwd"], env.project.display().to_string().as_str());
    // The only variable passed is the sandbox's flags; the command line is short, and it is
    // what the editor's terminal title shows.
    let vars = p["env"].as_array().expect("env");
    assert_eq!(vars.len(), 1, "{create}");
    assert_eq!(vars[0]["name"], "OML_SANDBOX");
    let flags: Vec<String> = serde_json::from_str(vars[0]["value"].as_str().unwrap()).unwrap();
    assert_eq!(flags[..2], ["--mode", "workspace-write"]);
    let secrets = flags.iter().filter(|f| *f == "OPENAI_API_KEY").count();
    assert_eq!(secrets, 1, "the key's name is passed once: {flags:?}");
    assert!(p["outputByteLimit"].as_u64().unwrap() > 0);
    let argv: Vec<String> = serde_json::from_value(p["args"].clone()).unwrap();
    assert_eq!(argv, ["sandbox-exec", "--", "bash", "-c", command]);
    // The editor runs what it was asked, in an environment that has secrets of its own.
    let ran = Command::new(p["command"].as_str().unwrap())
        .args(&argv)
        .env("OML_SANDBOX", vars[0]["value"].as_str().unwrap())
        .current_dir(&env.project)
        .env("OPENAI_API_KEY", "sk-editor")
        .env("MY_TOKEN", "tok")
        .output()
        .expect("run the launcher");
    let output = String::from_utf8_lossy(&ran.stdout).into_owned();
    assert_eq!(output, "hi\nkey= token=\n", "secrets removed: {ran:?}");
    c.answer(&create["id"], json!({"terminalId": "term-1"}));
    let card = c.until(|m| update_kind(m).as_deref() == Some("tool_call_update"));
    assert_eq!(
        card["params"]["update"]["content"],
        json!([{"type": "terminal", "terminalId": "term-1"}]),
        "{card}"
    );
    let wait = c.until(|m| m["method"] == "terminal/wait_for_exit");
    assert_eq!(wait["params"]["terminalId"], "term-1");
    c.answer(&wait["id"], json!({"exitCode": ran.status.code()}));
    let out = c.until(|m| m["method"] == "terminal/output");
    c.answer(&out["id"], json!({"output": output, "truncated": false}));
    let release = c.until(|m| m["method"] == "terminal/release");
    c.answer(&release["id"], json!({}));
    let (updates, r) = c.until_response(id);
    assert_eq!(r["result"]["stopReason"], "end_turn");
    let end = updates
        .iter()
        .find(|m| m["params"]["update"]["status"] == "failed")
        .expect("the failed card");
    assert_eq!(
        end["params"]["update"]["content"],
        json!([{"type": "terminal", "terminalId": "term-1"},
               {"type": "content", "content": {"type": "text", "text": "[exit code 3]"}}])
    );
    let result = fake.requests()[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["content"]
        .clone();
    assert_eq!(result, "hi\nkey= token=\n[exit code 3]");
    // What the model got also goes to the client, for one that keeps text, not terminals.
    assert_eq!(end["params"]["update"]["rawOutput"], result);
}

/// A prompt whose `sleep 30` runs in the client's terminal, up to its `terminal/create`: the
/// client, the session, the prompt's id and the create request.
fn sleep_in_the_clients_terminal(env: &Env, fake: &FakeModel) -> (Client, String, u64, Value) {
    let mut c = Client::start(env, Some(fake));
    let sid = yolo_session(&mut c, env, json!({"terminal": true}));
    let id = c.prompt(&sid, "wait");
    let create = c.until(|m| m["method"] == "terminal/create");
    (c, sid, id, create)
}

/// A cancel while the editor runs the command kills it (terminal/kill), then the output is read
/// and the terminal released before the prompt answers `cancelled`.
#[test]
fn cancel_kills_the_command_in_the_clients_terminal() {
    let env = Env::new();
    let fake = FakeModel::start([Reply::from(tool_call_chunks(
        "c1",
        "bash",
        &[r#"{"command":"sleep 30"}"#],
    ))]);
    let (mut c, sid, id, create) = sleep_in_the_clients_terminal(&env, &fake);
    c.answer(&create["id"], json!({"terminalId": "t9"}));
    let wait = c.until(|m| m["method"] == "terminal/wait_for_exit");
    c.notify("session/cancel", json!({"sessionId": sid}));
    let kill = c.until(|m| m["method"] == "terminal/kill");
    assert_eq!(kill["params"]["terminalId"], "t9");
    c.answer(&kill["id"], json!({}));
    c.answer(&wait["id"], json!({"exitCode": null, "signal": "SIGKILL"}));
    let out = c.until(|m| m["method"] == "terminal/output");
    c.answer(&out["id"], json!({"output": "", "truncated": false}));
    let release = c.until(|m| m["method"] == "terminal/release");
    c.answer(&release["id"], json!({}));
    let (_, r) = c.until_response(id);
    assert_eq!(r["result"]["stopReason"], "cancelled", "{r}");
}

/// A cancel while the editor is still making the terminal: the terminal it makes anyway is
/// killed and released when its id arrives, so the command is not left running in it.
#[test]
fn a_terminal_made_after_a_cancel_is_killed_and_released() {
    let env = Env::new();
    let fake = FakeModel::start([Reply::from(tool_call_chunks(
        "c1",
        "bash",
        &[r#"{"command":"sleep 30"}"#],
    ))]);
    let (mut c, sid, id, create) = sleep_in_the_clients_terminal(&env, &fake);
    c.notify("session/cancel", json!({"sessionId": sid}));
    // The prompt ends as cancelled without waiting for the editor's slow answer...
    let (_, r) = c.until_response(id);
    assert_eq!(r["result"]["stopReason"], "cancelled", "{r}");
    // ...and the terminal that answer names is cleaned up.
    c.answer(&create["id"], json!({"terminalId": "late-1"}));
    let kill = c.until(|m| m["method"] == "terminal/kill");
    assert_eq!(kill["params"]["terminalId"], "late-1");
    assert_eq!(kill["params"]["sessionId"], sid.as_str());
    c.answer(&kill["id"], json!({}));
    let release = c.until(|m| m["method"] == "terminal/release");
    assert_eq!(release["params"]["terminalId"], "late-1");
    c.answer(&release["id"], json!({}));
}

/// Without the terminal capability, or with `acp.use-client-terminal?` false, commands run
/// locally as before (the output streams into the card).
#[test]
fn the_clients_terminal_can_be_turned_off() {
    let env = Env::new();
    env.init("(setq acp.use-client-terminal? false)");
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks(
            "c1",
            "bash",
            &[r#"{"command":"echo local"}"#],
        )),
        Reply::from(text_chunks(&["ok"])),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    let sid = yolo_session(&mut c, &env, json!({"terminal": true}));
    let id = c.prompt(&sid, "run");
    let (updates, r) = c.until_response(id);
    assert_eq!(r["result"]["stopReason"], "end_turn");
    assert!(
        updates
            .iter()
            .all(|m| m.get("method") != Some(&json!("terminal/create")))
    );
    let result = fake.requests()[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["content"]
        .clone();
    assert_eq!(result, "local");
}

/// While the network is held to named domains, a command does not run in the editor's terminal
/// (whose launcher cannot reach oml's proxy, and would run it with no network at all): oml runs
/// it and the proxy carries it.
#[test]
fn a_command_held_to_domains_runs_in_oml_not_the_clients_terminal() {
    let env = Env::new();
    env.init("(setq sandbox.network? true)\n(setq sandbox.allowed-domains [\"pypi.org\"])");
    let args = json!({ "command": "echo \"proxy=$HTTPS_PROXY\"" }).to_string();
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks("c1", "bash", &[&args])),
        Reply::from(text_chunks(&["ok"])),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    let sid = yolo_session(&mut c, &env, json!({"terminal": true}));
    let id = c.prompt(&sid, "run");
    let (updates, r) = c.until_response(id);
    assert_eq!(r["result"]["stopReason"], "end_turn");
    assert!(
        updates
            .iter()
            .all(|m| m.get("method") != Some(&json!("terminal/create"))),
        "{updates:?}"
    );
    let result = fake.requests()[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["content"]
        .clone();
    let result = result.as_str().unwrap_or_default();
    if !result.starts_with("the sandbox cannot be set up") {
        assert!(result.starts_with("proxy=http://127.0.0.1:"), "{result}");
    }
}

/// The smallest PNG header: what `oml.image-mime` recognises.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

/// An image block reaches the model as an `image_url` part with a data URL; every attachment is
/// labelled with its name and fenced; a binary resource is refused with a note; the stored
/// session (whose user message is a list of parts) replays the image.
#[test]
fn images_and_attachments_reach_the_model_labelled() {
    let env = Env::new();
    let fake = FakeModel::start([Reply::from(text_chunks(&["seen"]))]);
    let mut c = Client::start(&env, Some(&fake));
    let init = c.initialize();
    let caps = &init["agentCapabilities"]["promptCapabilities"];
    assert_eq!(
        (caps["image"].clone(), caps["embeddedContext"].clone()),
        (json!(true), json!(true))
    );
    let (sid, _) = c.new_session(&env.project);
    let prompt = json!([
        {"type": "text", "text": "what is this?"},
        {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo=", "uri": "file:///tmp/pic.png"},
        {"type": "resource", "resource": {"uri": "file:///src/main.rs", "text": "fn main() {}"}},
        {"type": "resource_link", "uri": "file:///src/lib.rs", "name": "lib.rs"},
        {"type": "resource", "resource": {"uri": "file:///a.pdf", "blob": "JVBERi0=", "mimeType": "application/pdf"}},
    ]);
    let id = c.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": prompt}),
    );
    let (_, r) = c.until_response(id);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    let body = &fake.requests()[0].body;
    let user = body["messages"].as_array().unwrap().last().unwrap();
    let parts = user["content"].as_array().expect("a list of parts");
    let text = parts[0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("what is this?\n(the image pic.png is attached)\n"),
        "{text}"
    );
    assert!(
        text.contains("<file name=\"main.rs\" path=\"/src/main.rs\">\nfn main() {}\n</file>"),
        "{text}"
    );
    assert!(
        text.contains(
            "<resource_link name=\"lib.rs\" uri=\"file:///src/lib.rs\" path=\"/src/lib.rs\"/>"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "(the binary resource a.pdf (application/pdf) was attached; it is not included"
        ),
        "{text}"
    );
    assert!(!text.contains("JVBERi0"));
    assert_eq!(
        parts[1],
        json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}})
    );
    // Stored and replayed: the text, then the image.
    drop(c);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (updates, _) = load_session(&mut c, "session/load", &sid, &env.project);
    let user: Vec<&Value> = updates
        .iter()
        .filter(|m| update_kind(m).as_deref() == Some("user_message_chunk"))
        .map(|m| &m["params"]["update"]["content"])
        .collect();
    assert_eq!(user.len(), 2, "{updates:?}");
    assert_eq!(
        user[1],
        &json!({"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="})
    );
}

/// `read` of an image file gives the model the image (after the tool results, as a user
/// message), and a note when `llm.images?` is false.
#[test]
fn read_of_an_image_gives_the_model_the_image() {
    let env = Env::new();
    std::fs::write(env.project.join("dot.png"), PNG).unwrap();
    let read = |id| Reply::from(tool_call_chunks(id, "read", &[r#"{"path":"dot.png"}"#]));
    let fake = FakeModel::start([
        read("c1"),
        Reply::from(text_chunks(&["a dot"])),
        read("c2"),
        Reply::from(text_chunks(&["no image"])),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let id = c.prompt(&sid, "look at dot.png");
    let (_, r) = c.until_response(id);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    let messages = fake.requests()[1].body["messages"]
        .as_array()
        .unwrap()
        .clone();
    let n = messages.len();
    assert_eq!(messages[n - 2]["role"], "tool");
    assert!(
        messages[n - 2]["content"]
            .as_str()
            .unwrap()
            .starts_with("Read the image dot.png (image/png, 16 bytes)")
    );
    assert_eq!(messages[n - 1]["role"], "user");
    assert_eq!(
        messages[n - 1]["content"][1]["image_url"]["url"],
        "data:image/png;base64,iVBORw0KGgoAAAANSUhEUg=="
    );
    let id = c.prompt(&sid, "/eval (setq llm.images? false)");
    c.until_response(id);
    let id = c.prompt(&sid, "again");
    let (_, r) = c.until_response(id);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    let messages = fake.requests()[3].body["messages"]
        .as_array()
        .unwrap()
        .clone();
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "tool");
    assert!(
        last["content"]
            .as_str()
            .unwrap()
            .contains("the model does not take images (llm.images? is false)"),
        "{last}"
    );
}

// --- the model picker and the cost of a session

/// The picker offers the current model, `acp.models` and the endpoint's own list (GET
/// …/models), asked once and then cached.
#[test]
fn the_model_picker_lists_the_endpoints_models() {
    let env = Env::new();
    env.init(r#"(setq acp.models ["mine/x"])"#);
    let fake = FakeModel::start(Vec::<Reply>::new());
    fake.serve_models(&["zeta/one", "fake/model", "alpha/two"]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let choices = |c: &mut Client| {
        let r = c.call(
            "session/new",
            json!({"cwd": env.project.display().to_string(), "mcpServers": []}),
        );
        let model = r["result"]["configOptions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["id"] == "model")
            .cloned()
            .unwrap();
        assert_eq!(model["currentValue"], "fake/model");
        model["options"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["value"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let expected = ["fake/model", "mine/x", "alpha/two", "zeta/one"];
    assert_eq!(choices(&mut c), expected);
    assert_eq!(choices(&mut c), expected);
    assert_eq!(fake.model_list_requests(), 1, "the list is cached");
}

/// With `llm.prices`, the usage_update carries the session's cost so far.
#[test]
fn prices_give_the_usage_update_a_cost() {
    let env = Env::new();
    env.init(r#"(setq llm.prices {"fake/model" {:input 1 :output 2}} llm.price-currency "EUR")"#);
    let turn = || {
        let mut steps = text_chunks(&["hi"]);
        steps.insert(steps.len() - 1, usage_chunk(1200, 34));
        Reply::from(steps)
    };
    let fake = FakeModel::start([turn(), turn()]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let mut costs = Vec::new();
    for _ in 0..2 {
        let id = c.prompt(&sid, "hello");
        let (updates, _) = c.until_response(id);
        let usage = updates.last().unwrap()["params"]["update"].clone();
        assert_eq!(usage["sessionUpdate"], "usage_update");
        assert_eq!(usage["cost"]["currency"], "EUR");
        costs.push(usage["cost"]["amount"].as_f64().unwrap());
    }
    let call = (1200.0 + 34.0 * 2.0) / 1e6;
    assert!((costs[0] - call).abs() < 1e-12, "{costs:?}");
    assert!((costs[1] - 2.0 * call).abs() < 1e-12, "{costs:?}");
}
