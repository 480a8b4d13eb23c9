//! The client's side of ACP's v2 draft (2026-07-15): a codec between the agent's stream and the
//! JSON-RPC layer, so that the rest of the client (and the Lisp program) keeps seeing the v1
//! shapes it knows. One internal model, two encodings.
//!
//! When `acp.protocol-versions` offers 2, `initialize` asks for 2 and carries both versions'
//! members (`capabilities`/`clientCapabilities`, `info`/`clientInfo`): a v1 agent answers 1 and
//! the codec steps aside for good; a v2 agent answers 2 and from then on the codec translates.
//! Out: `session/load` becomes `session/resume` with `replayFrom: {type: start}`, a config
//! option value says its `type`, `session/set_mode` sets the `mode` option. In: the v2 answer to
//! `initialize` in v1's shape (its version kept: 2); a prompt's acknowledgement is held, and its
//! `idle` state update becomes the v1 answer (`stopReason`, or the error); a tool call's first
//! `tool_call_update` becomes `tool_call`; `plan_update` becomes `plan`; `user_message` becomes
//! chunks; `configId` becomes `id`; a permission request's subject becomes its `toolCall`.
//! Other state updates are dropped. It knows the two versions' shapes, not the router or Lisp.

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};

/// The size of the in-memory pipe between the JSON-RPC layer and the codec.
const PIPE_BYTES: usize = 1 << 16;

/// Where the negotiation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `initialize` not answered yet.
    Asking,
    /// The agent speaks v1: lines pass untouched.
    V1,
    V2,
}

/// The codec's state.
pub(crate) struct Codec {
    mode: Mode,
    initialize_id: Option<String>,
    /// Prompts sent and not yet ended: request id (as written) → session.
    prompts: HashMap<String, String>,
    /// Tool calls already shown (their first update was made a `tool_call`).
    calls: HashSet<String>,
}

impl Codec {
    pub(crate) fn new() -> Codec {
        Codec {
            mode: Mode::Asking,
            initialize_id: None,
            prompts: HashMap::new(),
            calls: HashSet::new(),
        }
    }

    /// Whether lines pass untouched (the agent answered v1).
    pub(crate) fn passes(&self) -> bool {
        self.mode == Mode::V1
    }

    /// A message from the client, as the agent gets it.
    pub(crate) fn outgoing(&mut self, mut m: Value) -> Value {
        let method = m
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if method == "initialize" {
            self.initialize_id = m.get("id").map(Value::to_string);
            if let Some(p) = m.get_mut("params").and_then(Value::as_object_mut) {
                let mut caps = p
                    .get("clientCapabilities")
                    .cloned()
                    .unwrap_or_else(|| json!({}));
                if let Some(c) = caps.as_object_mut() {
                    c.remove("fs");
                    c.remove("terminal");
                }
                p.insert("capabilities".into(), caps);
                let info = p.get("clientInfo").cloned().unwrap_or_else(|| json!({}));
                p.insert("info".into(), info);
                p.insert("protocolVersion".into(), json!(2));
            }
            return m;
        }
        if self.mode != Mode::V2 {
            return m;
        }
        let id = m.get("id").map(Value::to_string);
        let params = m.get_mut("params").and_then(Value::as_object_mut);
        match (method.as_str(), params) {
            ("session/load", Some(p)) => {
                p.insert("replayFrom".into(), json!({"type": "start"}));
                m["method"] = json!("session/resume");
            }
            ("session/prompt", Some(p)) => {
                let sid = p
                    .get("sessionId")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if let Some(id) = id {
                    self.prompts.insert(id, sid.to_owned());
                }
            }
            ("session/set_config_option", Some(p)) => {
                let kind = if p.get("value").is_some_and(Value::is_boolean) {
                    "boolean"
                } else {
                    "id"
                };
                p.insert("type".into(), json!(kind));
            }
            ("session/set_mode", Some(p)) => {
                let mode = p.remove("modeId").unwrap_or(Value::Null);
                p.insert("configId".into(), json!("mode"));
                p.insert("type".into(), json!("id"));
                p.insert("value".into(), mode);
                m["method"] = json!("session/set_config_option");
            }
            _ => {}
        }
        m
    }

    /// A message from the agent, as the client gets it (none, or a replacement).
    pub(crate) fn incoming(&mut self, mut m: Value) -> Vec<Value> {
        let id = m.get("id").map(Value::to_string);
        let is_answer = m.get("method").is_none();
        if self.mode == Mode::Asking && is_answer && id.is_some() && id == self.initialize_id {
            let v2 = m.pointer("/result/protocolVersion").and_then(Value::as_u64) == Some(2);
            self.mode = if v2 { Mode::V2 } else { Mode::V1 };
            if v2 && let Some(r) = m.get_mut("result") {
                *r = initialize_answer(r);
            }
            return vec![m];
        }
        if self.mode != Mode::V2 {
            return vec![m];
        }
        if is_answer {
            if id.as_ref().is_some_and(|id| self.prompts.contains_key(id)) {
                // The acknowledgement: the answer is made when the turn ends.
                return Vec::new();
            }
            if let Some(options) = m.pointer_mut("/result/configOptions") {
                *options = config_options(options.take());
            }
            return vec![m];
        }
        match m.get("method").and_then(Value::as_str) {
            Some("session/update") => self.update(m),
            Some("session/request_permission") => {
                if let Some(p) = m.get_mut("params").and_then(Value::as_object_mut)
                    && let Some(Value::Object(mut subject)) = p.remove("subject")
                    && let Some(call) = subject.remove("toolCall")
                {
                    p.insert("toolCall".into(), call);
                }
                vec![m]
            }
            _ => vec![m],
        }
    }

    fn update(&mut self, mut m: Value) -> Vec<Value> {
        let sid = m
            .pointer("/params/sessionId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let Some(u) = m
            .pointer_mut("/params/update")
            .and_then(Value::as_object_mut)
        else {
            return vec![m];
        };
        let kind = u
            .get("sessionUpdate")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        match kind.as_str() {
            "state_update" => return self.state(&sid, u),
            "tool_call_update" => {
                let call = u
                    .get("toolCallId")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                if self.calls.insert(call.clone()) {
                    u.insert("sessionUpdate".into(), json!("tool_call"));
                    if !u.contains_key("title") {
                        let title = u.get("name").cloned().unwrap_or_else(|| json!(call));
                        u.insert("title".into(), title);
                    }
                }
                if let Some(Value::Array(items)) = u.get_mut("content") {
                    items.iter_mut().for_each(diff_path);
                }
            }
            "plan_update" => {
                let entries = u.get("plan").and_then(|p| p.get("entries")).cloned();
                u.clear();
                u.insert("sessionUpdate".into(), json!("plan"));
                u.insert("entries".into(), entries.unwrap_or_else(|| json!([])));
            }
            "user_message" => return chunks(&sid, u, "user_message_chunk"),
            "agent_message" | "agent_thought" => return Vec::new(),
            "config_option_update" => {
                if let Some(options) = u.get_mut("configOptions") {
                    *options = config_options(options.take());
                }
            }
            _ => {}
        }
        vec![m]
    }

    /// A state update: `idle` with a stop reason ends the session's prompt (its v1 answer);
    /// the rest has no v1 form.
    fn state(&mut self, sid: &str, u: &serde_json::Map<String, Value>) -> Vec<Value> {
        let (Some("idle"), Some(stop)) = (
            u.get("state").and_then(Value::as_str),
            u.get("stopReason").and_then(Value::as_str),
        ) else {
            return Vec::new();
        };
        let Some(id) = self
            .prompts
            .iter()
            .find(|(_, s)| *s == sid)
            .map(|(id, _)| id.clone())
        else {
            return Vec::new();
        };
        self.prompts.remove(&id);
        let id: Value = serde_json::from_str(&id).unwrap_or(Value::Null);
        if stop == "error" {
            let error = u
                .get("error")
                .cloned()
                .unwrap_or_else(|| json!({"code": -32603, "message": "the turn failed"}));
            return vec![json!({"jsonrpc": "2.0", "id": id, "error": error})];
        }
        vec![json!({"jsonrpc": "2.0", "id": id, "result": {"stopReason": stop}})]
    }
}

/// A v2 `initialize` result in v1's shape (its version kept).
fn initialize_answer(r: &Value) -> Value {
    let session = r
        .pointer("/capabilities/session")
        .cloned()
        .unwrap_or(Value::Null);
    let has = |k: &str| session.get(k).is_some_and(|v| !v.is_null());
    let prompt = |k: &str| {
        session
            .pointer(&format!("/prompt/{k}"))
            .is_some_and(|v| !v.is_null())
    };
    let mut sessions = json!({"list": {}, "resume": {}, "close": {}});
    for k in ["delete", "additionalDirectories"] {
        if has(k) {
            sessions[k] = json!({});
        }
    }
    json!({
        "protocolVersion": 2,
        "agentCapabilities": {
            "loadSession": !session.is_null(),
            "promptCapabilities": {"image": prompt("image"), "audio": prompt("audio"),
                                   "embeddedContext": prompt("embeddedContext")},
            "mcpCapabilities": {"http": session.pointer("/mcp/http").is_some_and(|v| !v.is_null()),
                                "sse": false},
            "sessionCapabilities": sessions,
        },
        "authMethods": r.get("authMethods").cloned().unwrap_or_else(|| json!([])),
        "agentInfo": r.get("info").cloned().unwrap_or(Value::Null),
    })
}

/// v2 config options (`configId`) as v1's (`id`).
fn config_options(options: Value) -> Value {
    match options {
        Value::Array(list) => Value::Array(
            list.into_iter()
                .map(|mut o| {
                    if let Some(o) = o.as_object_mut()
                        && let Some(id) = o.remove("configId")
                    {
                        o.insert("id".into(), id);
                    }
                    o
                })
                .collect(),
        ),
        other => other,
    }
}

/// A v2 diff keeps its changes and patch, and gains the `path` of its first file, as v1 has.
fn diff_path(item: &mut Value) {
    if item.get("type").and_then(Value::as_str) == Some("diff")
        && item.get("path").is_none()
        && let Some(path) = item.pointer("/changes/0/path").cloned()
    {
        item["path"] = path;
    }
}

/// A whole v2 message as v1 chunks of kind `kind`, one per content block.
fn chunks(sid: &str, u: &serde_json::Map<String, Value>, kind: &str) -> Vec<Value> {
    let id = u.get("messageId").cloned().unwrap_or(Value::Null);
    let blocks = u
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    blocks
        .into_iter()
        .map(|content| {
            json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid,
                   "update": {"sessionUpdate": kind, "messageId": id, "content": content}}})
        })
        .collect()
}

/// Put the codec between the agent's stream (`reader`, `writer`) and the JSON-RPC layer: the
/// layer's side of the pipe is returned.
pub(crate) fn wrap<R, W>(reader: R, writer: W) -> DuplexStream
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (ours, theirs) = tokio::io::duplex(PIPE_BYTES);
    tokio::spawn(pump(Codec::new(), reader, writer, ours));
    theirs
}

async fn pump<R, W>(mut codec: Codec, reader: R, mut writer: W, pipe: DuplexStream)
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send,
{
    let (from_client, mut to_client) = tokio::io::split(pipe);
    let mut from_client = BufReader::new(from_client);
    let mut from_agent = BufReader::new(reader);
    // Kept across turns of the loop: `read_until` is not cancel-safe, what it read of a line
    // when the other branch won stays in its buffer.
    let (mut out, mut inl) = (Vec::new(), Vec::new());
    loop {
        tokio::select! {
            n = from_client.read_until(b'\n', &mut out) => {
                if !matches!(n, Ok(n) if n > 0) { break }
                let line = std::mem::take(&mut out);
                let line = match serde_json::from_slice::<Value>(&line) {
                    Ok(m) if !codec.passes() => format!("{}\n", codec.outgoing(m)).into_bytes(),
                    _ => line,
                };
                if writer.write_all(&line).await.is_err() || writer.flush().await.is_err() { break }
            }
            n = from_agent.read_until(b'\n', &mut inl) => {
                if !matches!(n, Ok(n) if n > 0) { break }
                let line = std::mem::take(&mut inl);
                let lines = match serde_json::from_slice::<Value>(&line) {
                    Ok(m) if !codec.passes() => codec
                        .incoming(m)
                        .into_iter()
                        .map(|m| format!("{m}\n").into_bytes())
                        .collect(),
                    _ => vec![line],
                };
                for line in lines {
                    if to_client.write_all(&line).await.is_err() { return }
                }
            }
        }
    }
    let _ = writer.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(sid: &str, u: Value) -> Value {
        json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": u}})
    }

    fn negotiated(version: u64) -> Codec {
        let mut c = Codec::new();
        let init = c.outgoing(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": 1, "clientCapabilities": {"fs": {}, "elicitation": {"form": {}}},
                       "clientInfo": {"name": "oml"}}}));
        assert_eq!(init["params"]["protocolVersion"], 2);
        assert_eq!(
            init["params"]["capabilities"],
            json!({"elicitation": {"form": {}}})
        );
        assert_eq!(init["params"]["info"]["name"], "oml");
        let answer = c.incoming(json!({"jsonrpc": "2.0", "id": 0,
            "result": {"protocolVersion": version, "info": {"name": "a", "version": "1"},
                       "capabilities": {"session": {"prompt": {"image": {}}}}}}));
        assert_eq!(answer[0]["result"]["protocolVersion"], version);
        c
    }

    #[test]
    fn a_v1_agent_gets_and_gives_lines_untouched() {
        let mut c = negotiated(1);
        assert!(c.passes());
        let load = json!({"jsonrpc": "2.0", "id": 1, "method": "session/load", "params": {"sessionId": "s"}});
        assert_eq!(c.outgoing(load.clone()), load);
    }

    #[test]
    fn a_v2_turn_reads_as_a_v1_turn() {
        let mut c = negotiated(2);
        assert!(!c.passes());
        c.outgoing(
            json!({"jsonrpc": "2.0", "id": 7, "method": "session/prompt",
                          "params": {"sessionId": "s", "prompt": []}}),
        );
        assert!(
            c.incoming(json!({"jsonrpc": "2.0", "id": 7, "result": {"messageId": "u1"}}))
                .is_empty()
        );
        let first = c.incoming(update("s", json!({"sessionUpdate": "tool_call_update", "toolCallId": "c",
            "name": "write", "content": [{"type": "diff", "changes": [{"operation": "add", "path": "/p/a"}]}]})));
        assert_eq!(first[0]["params"]["update"]["sessionUpdate"], "tool_call");
        assert_eq!(first[0]["params"]["update"]["title"], "write");
        assert_eq!(first[0]["params"]["update"]["content"][0]["path"], "/p/a");
        let again = c.incoming(update(
            "s",
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c"}),
        ));
        assert_eq!(
            again[0]["params"]["update"]["sessionUpdate"],
            "tool_call_update"
        );
        let plan = c.incoming(update(
            "s",
            json!({"sessionUpdate": "plan_update",
            "plan": {"type": "items", "planId": "p", "entries": [{"content": "x"}]}}),
        ));
        assert_eq!(
            plan[0]["params"]["update"],
            json!({"sessionUpdate": "plan", "entries": [{"content": "x"}]})
        );
        assert!(
            c.incoming(update(
                "s",
                json!({"sessionUpdate": "state_update", "state": "running"})
            ))
            .is_empty()
        );
        let end = c.incoming(update(
            "s",
            json!({"sessionUpdate": "state_update", "state": "idle",
                                                "stopReason": "end_turn"}),
        ));
        assert_eq!(
            end,
            vec![json!({"jsonrpc": "2.0", "id": 7, "result": {"stopReason": "end_turn"}})]
        );
        let ask = c.incoming(json!({"jsonrpc": "2.0", "id": 3, "method": "session/request_permission",
            "params": {"sessionId": "s", "title": "t", "subject": {"type": "tool_call", "toolCall": {"toolCallId": "c"}},
                       "options": []}}));
        assert_eq!(ask[0]["params"]["toolCall"]["toolCallId"], "c");
        let load = c.outgoing(json!({"jsonrpc": "2.0", "id": 8, "method": "session/load",
                                     "params": {"sessionId": "s"}}));
        assert_eq!(load["method"], "session/resume");
        assert_eq!(load["params"]["replayFrom"], json!({"type": "start"}));
    }

    #[test]
    fn a_failed_v2_turn_is_an_error_answer() {
        let mut c = negotiated(2);
        c.outgoing(
            json!({"jsonrpc": "2.0", "id": "p", "method": "session/prompt",
                          "params": {"sessionId": "s"}}),
        );
        let end = c.incoming(update(
            "s",
            json!({"sessionUpdate": "state_update", "state": "idle",
            "stopReason": "error", "error": {"code": -32603, "message": "boom"}}),
        ));
        assert_eq!(end[0]["id"], "p");
        assert_eq!(end[0]["error"]["message"], "boom");
    }
}
