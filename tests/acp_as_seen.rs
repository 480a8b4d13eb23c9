//! What editors showed wrong in use (issue 43), through `oml acp` driven by the scripted editor
//! against a scripted model: a fork that looked like its parent, a doomed edit that still asked,
//! a model change an editor's header missed, replays that showed what the user did not type, a
//! load refused for a live session with nothing to read, and the `/mode` command the docs named.

mod support;

use serde_json::{Value, json};
use support::acp::*;
use support::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};
use support::home::Env;

fn say(text: &str) -> Reply {
    Reply::from(text_chunks(&[text]))
}

/// The text the agent says in answer to `text` (a slash command's output), and its updates.
fn command(c: &mut Client, sid: &str, text: &str) -> (String, Vec<Value>) {
    let (updates, reason) = c.turn(sid, text);
    assert_eq!(reason, "end_turn", "{updates:?}");
    (texts(&updates), updates)
}

/// The updates of kind `kind` in `ms`, as their `update` objects.
fn of_kind(ms: &[Value], kind: &str) -> Vec<Value> {
    ms.iter()
        .filter(|m| update_kind(m).as_deref() == Some(kind))
        .map(|m| m["params"]["update"].clone())
        .collect()
}

/// The `currentValue` of config option `id` in a `config_option_update`.
fn option_value(update: &Value, id: &str) -> Value {
    update["configOptions"]
        .as_array()
        .and_then(|o| o.iter().find(|o| o["id"] == id))
        .map(|o| o["currentValue"].clone())
        .unwrap_or(Value::Null)
}

/// Now, as `updatedAt` is written (`YYYY-MM-DDTHH:MM:SSZ`, which sorts as it reads).
fn now_rfc3339() -> String {
    let out = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .expect("date");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// `/fork` and `session/fork` give the fork a title of its own (the parent's with " (fork)"),
/// in `session/list` and in the `session_info_update` a fork opened in the editor gets, and
/// the time it was made: agent-shell's picker showed one entry for the two.
#[test]
fn a_fork_has_a_title_and_a_time_of_its_own() {
    let env = Env::new();
    let fake = FakeModel::start([say("hello back")]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    c.turn(&sid, "say hello");
    let before = now_rfc3339();
    let (out, _) = command(&mut c, &sid, "/fork");
    let fork = out
        .split_whitespace()
        .nth(2)
        .map(|s| s.trim_end_matches(','))
        .unwrap_or_default()
        .to_owned();
    assert!(out.starts_with("Forked as s"), "{out}");

    let list = c.call("session/list", json!({}));
    let sessions = list["result"]["sessions"].as_array().cloned();
    let find = |id: &str| {
        sessions
            .iter()
            .flatten()
            .find(|s| s["sessionId"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("{id} listed: {list}"))
    };
    assert_eq!(find(&sid)["title"], "say hello", "{list}");
    assert_eq!(find(&fork)["title"], "say hello (fork)", "{list}");
    let updated = find(&fork)["updatedAt"].as_str().unwrap_or("").to_owned();
    assert!(
        updated >= before,
        "the fork's own time: {updated} < {before}"
    );

    // ACP's session/fork: answered like session/new, then the fork names itself.
    let r = c.call(
        "session/fork",
        json!({"sessionId": sid, "cwd": env.project.display().to_string(), "mcpServers": []}),
    );
    let other = r["result"]["sessionId"].as_str().unwrap_or("").to_owned();
    assert!(!other.is_empty() && other != sid, "{r}");
    while update_kind(&c.next()).as_deref() != Some("available_commands_update") {}
    let info = c
        .titles
        .iter()
        .find(|t| t["sessionId"] == other.as_str())
        .cloned()
        .unwrap_or_else(|| panic!("no session_info_update for the fork: {:?}", c.titles));
    assert_eq!(info["update"]["title"], "say hello (fork)", "{info}");
    assert!(info["update"]["updatedAt"].as_str() >= Some(before.as_str()));
}

/// An `edit` whose `old_text` is not in the file fails at once with the tool's message: no
/// permission question about a change that cannot be made.
#[test]
fn an_edit_that_cannot_apply_fails_without_asking() {
    let env = Env::new();
    let notes = env.file("notes.txt", "alpha\n");
    let args = json!({"path": "notes.txt", "old_text": "omega", "new_text": "beta"});
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks("call_1", "edit", &[&args.to_string()])),
        say("it was not there"),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let id = c.prompt(&sid, "edit it");
    let (mut asked, mut updates) = (Vec::new(), Vec::new());
    let answer = loop {
        let m = c.next();
        if m["method"] == "session/request_permission" {
            c.answer(
                &m["id"],
                json!({"outcome": {"outcome": "selected", "optionId": "reject_once"}}),
            );
            asked.push(m);
        } else if m.get("method").is_none() && m["id"] == json!(id) {
            break m;
        } else {
            updates.push(m);
        }
    };
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(asked.is_empty(), "asked about a doomed edit: {asked:?}");
    let failed: Vec<Value> = of_kind(&updates, "tool_call_update")
        .into_iter()
        .filter(|u| u["status"] == "failed")
        .collect();
    assert_eq!(failed.len(), 1, "{updates:?}");
    assert!(
        failed[0]["content"]
            .to_string()
            .contains("old_text not found"),
        "{failed:?}"
    );
    let requests = fake.requests();
    let tool = &requests[1].body["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "tool").cloned())
        .unwrap_or_default();
    let said = tool["content"].as_str().unwrap_or_default();
    assert!(said.starts_with("old_text not found"), "{tool}");
    assert_eq!(
        std::fs::read_to_string(notes).ok().as_deref(),
        Some("alpha\n")
    );
}

/// `/model NAME` and a mode change send `config_option_update` to a client that did not offer
/// `session.configOptions` (agent-shell handles it without offering it).
#[test]
fn every_client_hears_of_a_model_or_mode_change() {
    let env = Env::new();
    let mut c = Client::start(&env, None);
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let (out, updates) = command(&mut c, &sid, "/model other-model");
    assert!(out.contains("Model set to other-model"), "{out}");
    let config = of_kind(&updates, "config_option_update");
    assert_eq!(config.len(), 1, "{updates:?}");
    assert_eq!(option_value(&config[0], "model"), "other-model");

    let id = c.request(
        "session/set_mode",
        json!({"sessionId": sid, "modeId": "yolo"}),
    );
    let (updates, _) = c.until_response(id);
    assert_eq!(
        kinds(&updates),
        ["current_mode_update", "config_option_update"]
    );
    assert_eq!(
        option_value(&of_kind(&updates, "config_option_update")[0], "mode"),
        "yolo"
    );
}

/// `/mode` lists the modes; `/mode NAME` switches as the editor's mode picker does, and says so
/// with `current_mode_update` and `config_option_update`; nothing goes to the model.
#[test]
fn the_mode_command_lists_and_switches_modes() {
    let env = Env::new();
    let fake = FakeModel::start([say("the model was asked")]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let (out, _) = command(&mut c, &sid, "/mode");
    assert!(out.starts_with("Mode: ask"), "{out}");
    for mode in ["ask", "accept-edits", "yolo", "read-only"] {
        assert!(out.contains(&format!("- `{mode}`")), "{out}");
    }
    let (out, updates) = command(&mut c, &sid, "/mode yolo");
    assert!(out.contains("Mode set to yolo"), "{out}");
    let modes = of_kind(&updates, "current_mode_update");
    assert_eq!(modes.len(), 1, "{updates:?}");
    assert_eq!(modes[0]["currentModeId"], "yolo");
    let config = of_kind(&updates, "config_option_update");
    assert_eq!(config.len(), 1, "{updates:?}");
    assert_eq!(option_value(&config[0], "mode"), "yolo");
    let (out, updates) = command(&mut c, &sid, "/mode reckless");
    assert!(out.contains("Unknown mode reckless"), "{out}");
    assert!(of_kind(&updates, "current_mode_update").is_empty());
    assert!(
        fake.requests().is_empty(),
        "a /mode prompt reached the model"
    );
}

/// After a load, a markdown command replays as typed (not as its expansion), and a prompt that
/// failed replays with the error as its answer, the text the client was answered with live.
#[test]
fn a_replay_shows_commands_as_typed_and_failures_as_answers() {
    let env = Env::new();
    env.file(
        ".claude/commands/greet.md",
        "Say hello to $ARGUMENTS and nothing else.\n",
    );
    let fake = FakeModel::start([
        say("Hello, Bob!"),
        Reply::error(400, r#"{"error":{"message":"no such model"}}"#),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, _) = c.new_session(&env.project);
    let (_, reason) = c.turn(&sid, "/greet Bob");
    assert_eq!(reason, "end_turn");
    let id = c.prompt(&sid, "fail now");
    let (_, r) = c.until_response(id);
    let error = r["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(error.contains("400"), "{r}");
    let requests = fake.requests();
    assert_eq!(
        requests[0].body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .map(|m| m["content"].clone()),
        Some(json!("Say hello to Bob and nothing else.\n")),
        "the model still gets the expansion"
    );
    c.finish();

    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (before, r) = load_session(&mut c, "session/load", &sid, &env.project);
    assert!(r.get("result").is_some(), "{r}");
    let shown: Vec<(String, String)> = merged(&before)
        .iter()
        .filter_map(|m| {
            let kind = update_kind(m)?;
            let text = m["params"]["update"]["content"]["text"].as_str()?;
            Some((kind, text.to_owned()))
        })
        .collect();
    let expected = [
        ("user_message_chunk", "/greet Bob"),
        ("agent_message_chunk", "Hello, Bob!"),
        ("user_message_chunk", "fail now"),
        ("agent_message_chunk", error.as_str()),
    ]
    .map(|(k, t)| (k.to_owned(), t.to_owned()));
    assert_eq!(shown, expected);
}

/// `session/load` of a session another oml process has open is refused with its own code
/// (`SESSION_IN_USE`) and `data` naming that process, so the client can say why.
#[test]
fn a_session_open_elsewhere_is_refused_with_the_process_that_has_it() {
    let env = Env::new();
    let fake = FakeModel::start([say("hi")]);
    let mut first = Client::start(&env, Some(&fake));
    first.initialize();
    let (sid, _) = first.new_session(&env.project);
    first.turn(&sid, "hello");

    let mut second = Client::start(&env, Some(&fake));
    second.initialize();
    for method in ["session/load", "session/resume"] {
        let (_, r) = load_session(&mut second, method, &sid, &env.project);
        let error = &r["error"];
        assert_eq!(
            error["code"],
            json!(oml::front::acp::SESSION_IN_USE),
            "{method}: {r}"
        );
        assert_eq!(error["data"]["pid"], json!(first.pid()), "{method}: {r}");
        assert_eq!(error["data"]["sessionId"], sid.as_str(), "{r}");
        assert_eq!(error["data"]["category"], "busy", "{r}");
        let message = error["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(&format!(
                "is open in another oml process (pid {})",
                first.pid()
            )),
            "{r}"
        );
    }
}
