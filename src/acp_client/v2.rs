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
use std::sync::Arc;

use parking_lot::Mutex;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};

/// The size of the in-memory pipe between the JSON-RPC layer and the codec.
const PIPE_BYTES: usize = 1 << 16;

/// The longest line read from either side: the JSON-RPC layer's own cap.
const MAX_LINE_BYTES: usize = crate::jsonrpc::DEFAULT_MAX_LINE_BYTES;

/// Where the negotiation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `initialize` not answered yet.
    Asking,
    /// The agent speaks v1: lines pass untouched.
    V1,
    V2,
}

/// A prompt sent: its session, and whether the agent has acknowledged it (only then can an
/// `idle` state end it: one before is a snapshot of the state before the prompt).
struct Prompt {
    session: String,
    acknowledged: bool,
}

/// The codec's state.
pub(crate) struct Codec {
    mode: Mode,
    initialize_id: Option<String>,
    /// Prompts sent and not yet ended: request id (as written) → session.
    prompts: HashMap<String, Prompt>,
    /// Tool calls already shown (their first update was made a `tool_call`), by session and id.
    calls: HashSet<(String, String)>,
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
                    let session = sid.to_owned();
                    self.prompts.insert(
                        id,
                        Prompt {
                            session,
                            acknowledged: false,
                        },
                    );
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
            if let Some(prompt) = id.as_ref().and_then(|id| self.prompts.get_mut(id)) {
                if m.get("error").is_some() {
                    // Refused: the error is the prompt's answer, and no turn runs.
                    if let Some(id) = &id {
                        self.prompts.remove(id);
                    }
                    return vec![m];
                }
                // The acknowledgement: the answer is made when the turn ends.
                prompt.acknowledged = true;
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
                if self.calls.insert((sid.clone(), call.clone())) {
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

    /// A state update: `idle` ends the session's acknowledged prompt (its v1 answer; without a
    /// stop reason, `end_turn`); the rest has no v1 form.
    fn state(&mut self, sid: &str, u: &serde_json::Map<String, Value>) -> Vec<Value> {
        if u.get("state").and_then(Value::as_str) != Some("idle") {
            return Vec::new();
        }
        let stop = u
            .get("stopReason")
            .and_then(Value::as_str)
            .unwrap_or("end_turn");
        let Some(id) = self
            .prompts
            .iter()
            .find(|(_, p)| p.session == sid && p.acknowledged)
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
/// layer's side of the pipe is returned. Each direction runs in a task of its own, so an agent
/// that writes while it is being written to never waits on the codec.
pub(crate) fn wrap<R, W>(reader: R, writer: W) -> DuplexStream
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (ours, theirs) = tokio::io::duplex(PIPE_BYTES);
    let codec = Arc::new(Mutex::new(Codec::new()));
    let (from_client, to_client) = tokio::io::split(ours);
    tokio::spawn(to_agent(Arc::clone(&codec), from_client, writer));
    tokio::spawn(from_agent(codec, reader, to_client));
    theirs
}

/// The client's lines, encoded, to the agent.
async fn to_agent<R, W>(codec: Arc<Mutex<Codec>>, from_client: R, mut writer: W)
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send,
{
    let mut lines = BufReader::new(from_client);
    let mut line = Vec::new();
    while matches!(read_line_capped(&mut lines, &mut line, MAX_LINE_BYTES).await, Ok(n) if n > 0) {
        let out = match serde_json::from_slice::<Value>(&line) {
            Ok(m) if !codec.lock().passes() => {
                let m = codec.lock().outgoing(m);
                format!("{m}\n").into_bytes()
            }
            _ => std::mem::take(&mut line),
        };
        line.clear();
        if writer.write_all(&out).await.is_err() || writer.flush().await.is_err() {
            break;
        }
    }
    let _ = writer.shutdown().await;
}

/// The agent's lines, decoded, to the client. A line past [`MAX_LINE_BYTES`] ends the stream
/// (the JSON-RPC layer reports the connection closed).
async fn from_agent<R, W>(codec: Arc<Mutex<Codec>>, reader: R, mut to_client: W)
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send,
{
    let mut lines = BufReader::new(reader);
    let mut line = Vec::new();
    while matches!(read_line_capped(&mut lines, &mut line, MAX_LINE_BYTES).await, Ok(n) if n > 0) {
        let decoded: Vec<Vec<u8>> = match serde_json::from_slice::<Value>(&line) {
            Ok(m) if !codec.lock().passes() => {
                let ms = codec.lock().incoming(m);
                ms.into_iter()
                    .map(|m| format!("{m}\n").into_bytes())
                    .collect()
            }
            _ => vec![std::mem::take(&mut line)],
        };
        line.clear();
        for out in decoded {
            if to_client.write_all(&out).await.is_err() {
                return;
            }
        }
    }
    // The other half of the pipe is the other task's: only shutting this one down tells the
    // JSON-RPC layer that the agent is gone.
    let _ = to_client.shutdown().await;
}

/// Read one line (through its `\n`) into `buf`, at most `cap` bytes: an error past that, and
/// 0 at the end of the input.
pub(crate) async fn read_line_capped<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    buf: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<usize> {
    let start = buf.len();
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(buf.len() - start);
        }
        let (take, done) = match memchr::memchr(b'\n', available) {
            Some(at) => (at + 1, true),
            None => (available.len(), false),
        };
        buf.extend_from_slice(&available[..take]);
        reader.consume(take);
        if buf.len() - start > cap {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("a line longer than {cap} bytes"),
            ));
        }
        if done {
            return Ok(buf.len() - start);
        }
    }
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
    fn a_refused_prompt_is_answered_and_a_snapshot_ends_nothing() {
        let mut c = negotiated(2);
        c.outgoing(
            json!({"jsonrpc": "2.0", "id": 1, "method": "session/prompt",
                          "params": {"sessionId": "s"}}),
        );
        // An idle snapshot before the acknowledgement (a resume's) ends no prompt.
        let idle = update(
            "s",
            json!({"sessionUpdate": "state_update", "state": "idle"}),
        );
        assert!(c.incoming(idle.clone()).is_empty());
        let refused =
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "busy"}});
        assert_eq!(c.incoming(refused.clone()), vec![refused]);
        // The next prompt's end is its own.
        c.outgoing(
            json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                          "params": {"sessionId": "s"}}),
        );
        assert!(
            c.incoming(json!({"jsonrpc": "2.0", "id": 2, "result": {"messageId": "u"}}))
                .is_empty()
        );
        let end = c.incoming(idle);
        assert_eq!(end[0]["id"], 2);
        assert_eq!(end[0]["result"]["stopReason"], "end_turn");
    }

    #[test]
    fn a_failed_v2_turn_is_an_error_answer() {
        let mut c = negotiated(2);
        c.outgoing(
            json!({"jsonrpc": "2.0", "id": "p", "method": "session/prompt",
                          "params": {"sessionId": "s"}}),
        );
        c.incoming(json!({"jsonrpc": "2.0", "id": "p", "result": {"messageId": "u"}}));
        let end = c.incoming(update(
            "s",
            json!({"sessionUpdate": "state_update", "state": "idle",
            "stopReason": "error", "error": {"code": -32603, "message": "boom"}}),
        ));
        assert_eq!(end[0]["id"], "p");
        assert_eq!(end[0]["error"]["message"], "boom");
    }
}
