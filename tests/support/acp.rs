//! The `oml acp` tests' client (tests/acp*.rs): the scripted editor of `tests/support/editor.rs`
//! started in a test home, and the helpers that read updates and requests.

use std::path::Path;

use serde_json::{Value, json};

use super::home::Env;
use crate::support::fake_model::{FakeModel, Reply, Step, delta_chunk, tool_call_chunks};

pub use crate::support::editor::Editor as Client;

/// How `oml acp` starts in a test home.
impl Client {
    /// `oml acp` in `env`, pointed at `fake` when given.
    pub fn start(env: &Env, fake: Option<&FakeModel>) -> Client {
        Client::start_with(env, fake, &[])
    }

    /// `oml acp` in `env` with the extra environment variables `vars`.
    pub fn start_with(env: &Env, fake: Option<&FakeModel>, vars: &[(&str, &str)]) -> Client {
        let mut cmd = env.command(fake, &["acp"]);
        cmd.envs(vars.iter().copied());
        Client::spawn(cmd).titles_apart()
    }
}

pub fn update_kind(m: &Value) -> Option<String> {
    (m["method"] == "session/update").then(|| {
        m["params"]["update"]["sessionUpdate"]
            .as_str()
            .unwrap_or("?")
            .to_owned()
    })
}

/// `ms` with each run of text (or thought) chunks of one session as one chunk, their text
/// joined: how many updates carry a stream's deltas depends on timing (oml merges the deltas
/// queued together), what they say does not.
pub fn merged(ms: &[Value]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for m in ms {
        let kind = update_kind(m);
        let joinable = matches!(
            kind.as_deref(),
            Some("agent_message_chunk" | "agent_thought_chunk")
        );
        if let Some(last) = out.last_mut()
            && joinable
            && update_kind(last) == kind
            && last["params"]["sessionId"] == m["params"]["sessionId"]
            && last["params"]["update"]["messageId"] == m["params"]["update"]["messageId"]
        {
            let text = |v: &Value| {
                v["params"]["update"]["content"]["text"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned()
            };
            let joined = text(last) + &text(m);
            last["params"]["update"]["content"]["text"] = json!(joined);
            continue;
        }
        out.push(m.clone());
    }
    out
}

/// The kinds of the updates in `ms`, runs of chunks counted once (see [`merged`]).
pub fn kinds(ms: &[Value]) -> Vec<String> {
    merged(ms).iter().filter_map(update_kind).collect()
}

pub fn texts(ms: &[Value]) -> String {
    ms.iter()
        .filter(|m| update_kind(m).as_deref() == Some("agent_message_chunk"))
        .map(|m| {
            m["params"]["update"]["content"]["text"]
                .as_str()
                .unwrap_or("")
        })
        .collect()
}

/// A model reply that says `text` and then calls `tool` with `args`.
pub fn text_then_tool(text: &str, id: &str, tool: &str, args: &str) -> Vec<Step> {
    let mut steps = vec![Step::Chunk(delta_chunk(json!({"content": text}), None))];
    steps.extend(tool_call_chunks(id, tool, &[args]));
    steps
}

/// A model reply that sends `text` and then hangs until the fake is dropped: a turn that runs
/// until something stops it.
pub fn partial_then_hang(text: &str) -> Reply {
    Reply::from(vec![
        Step::Chunk(delta_chunk(json!({"content": text}), None)),
        Step::Hang,
    ])
}

pub fn normalise(ms: &[Value], sid: &str, env: &Env) -> String {
    // Message ids are opaque: numbered by first appearance, so that which chunks share one
    // still shows.
    let mut ids: Vec<String> = Vec::new();
    merged(ms)
        .iter()
        .map(|m| {
            let mut m = m.clone();
            if m["params"]["update"].get("updatedAt").is_some() {
                m["params"]["update"]["updatedAt"] = json!("TIME");
            }
            if let Some(id) = m["params"]["update"]["messageId"]
                .as_str()
                .map(str::to_owned)
            {
                let n = ids.iter().position(|i| *i == id).unwrap_or_else(|| {
                    ids.push(id);
                    ids.len() - 1
                });
                m["params"]["update"]["messageId"] = json!(format!("MESSAGE{}", n + 1));
            }
            m.to_string()
                .replace(sid, "SESSION")
                .replace(&env.root.display().to_string(), "ROOT")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn load_session(c: &mut Client, method: &str, sid: &str, cwd: &Path) -> (Vec<Value>, Value) {
    let id = c.request(
        method,
        json!({"sessionId": sid, "cwd": cwd.display().to_string(), "mcpServers": []}),
    );
    c.until_response(id)
}

/// Initialize offering `caps`, open a session in yolo mode (nothing asks).
pub fn yolo_session(c: &mut Client, env: &Env, caps: Value) -> String {
    c.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": caps}),
    );
    let (sid, _) = c.new_session(&env.project);
    c.call(
        "session/set_mode",
        json!({"sessionId": sid, "modeId": "yolo"}),
    );
    sid
}
