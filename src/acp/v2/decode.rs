//! The v2 decoder, v2 → v1, for a client: the [`Codec`] between a v2 agent's messages and the
//! client's, so that the client (and the Lisp program above it) keeps seeing the v1 shapes it
//! knows. [`super::encode`] is the other direction, which the codec also uses for what the
//! client sends.
//!
//! When the client offers 2, `initialize` asks for 2 and carries both versions' members
//! (`capabilities`/`clientCapabilities`, `info`/`clientInfo`): a v1 agent answers 1 and the codec
//! steps aside for good; a v2 agent answers 2 and from then on the codec translates. Out:
//! `session/load` becomes `session/resume` with `replayFrom: {type: start}`, a config option
//! value says its `type`, `session/set_mode` sets the `mode` option. In: the v2 answer to
//! `initialize` in v1's shape (its version kept: 2); a prompt's acknowledgement is held, and its
//! `idle` state update becomes the v1 answer (`stopReason`, or the error); a tool call's first
//! `tool_call_update` becomes `tool_call`; `plan_update` becomes `plan`; `user_message` becomes
//! chunks; `configId` becomes `id`; a permission request's subject becomes its `toolCall`.
//! Other state updates are dropped. It knows the two versions' shapes, not the stream or Lisp.

use std::collections::{HashMap, HashSet};

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{
    Plan, State, Subject, V1_CONFIG_ID, V2_CONFIG_ID, client_capabilities_v2, kind_of,
    rename_config_ids,
};
use crate::acp::StopReason;
use crate::acp::initialize::{
    AgentCapabilities, InitializeAnswer, McpCapabilities, PromptCapabilities, SessionCapabilities,
    offered,
};

/// The version this codec asks a v2 agent for.
const V2: u64 = 2;

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
pub struct Codec {
    mode: Mode,
    initialize_id: Option<String>,
    /// Prompts sent and not yet ended: request id (as written) → session.
    prompts: HashMap<String, Prompt>,
    /// Tool calls already shown (their first update was made a `tool_call`), by session and id.
    calls: HashSet<(String, String)>,
}

/// What the codec reads of a JSON-RPC message: its id (as written), its method, and whether it
/// is an error answer.
#[derive(Deserialize)]
struct Head {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    error: Option<Value>,
}

impl Head {
    fn of(m: &Value) -> Head {
        Head::deserialize(m).unwrap_or(Head {
            id: None,
            method: None,
            error: None,
        })
    }

    fn id(&self) -> Option<String> {
        self.id.as_ref().map(Value::to_string)
    }
}

/// What the codec reads of a request's params.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ParamsHead {
    #[serde(default)]
    session_id: Option<String>,
}

impl Default for Codec {
    fn default() -> Self {
        Codec::new()
    }
}

impl Codec {
    pub fn new() -> Codec {
        Codec {
            mode: Mode::Asking,
            initialize_id: None,
            prompts: HashMap::new(),
            calls: HashSet::new(),
        }
    }

    /// Whether lines pass untouched (the agent answered v1).
    pub fn passes(&self) -> bool {
        self.mode == Mode::V1
    }

    /// A message from the client, as the agent gets it.
    pub fn outgoing(&mut self, mut m: Value) -> Value {
        let head = Head::of(&m);
        let method = head.method.clone().unwrap_or_default();
        let Some(Value::Object(message)) = Some(&mut m) else {
            return m;
        };
        if method == "initialize" {
            self.initialize_id = head.id();
            if let Some(Value::Object(p)) = message.get_mut("params") {
                initialize_params(p);
            }
            return m;
        }
        if self.mode != Mode::V2 {
            return m;
        }
        let renamed = match (method.as_str(), message.get_mut("params")) {
            ("session/load", Some(Value::Object(p))) => {
                p.insert("replayFrom".into(), json!({"type": "start"}));
                Some("session/resume")
            }
            ("session/prompt", Some(p)) => {
                let session = ParamsHead::deserialize(&*p).unwrap_or_default().session_id;
                if let Some(id) = head.id() {
                    let session = session.unwrap_or_default();
                    let prompt = Prompt {
                        session,
                        acknowledged: false,
                    };
                    self.prompts.insert(id, prompt);
                }
                None
            }
            ("session/set_config_option", Some(Value::Object(p))) => {
                let boolean = matches!(p.get("value"), Some(Value::Bool(_)));
                p.insert("type".into(), if boolean { "boolean" } else { "id" }.into());
                None
            }
            ("session/set_mode", Some(Value::Object(p))) => {
                let mode = p.remove("modeId").unwrap_or(Value::Null);
                p.insert("configId".into(), "mode".into());
                p.insert("type".into(), "id".into());
                p.insert("value".into(), mode);
                Some("session/set_config_option")
            }
            _ => None,
        };
        if let Some(method) = renamed {
            message.insert("method".into(), method.into());
        }
        m
    }

    /// A message from the agent, as the client gets it (none, or a replacement).
    pub fn incoming(&mut self, mut m: Value) -> Vec<Value> {
        let head = Head::of(&m);
        let id = head.id();
        let is_answer = head.method.is_none();
        if self.mode == Mode::Asking && is_answer && id.is_some() && id == self.initialize_id {
            let v2 = m.pointer("/result/protocolVersion").and_then(Value::as_u64) == Some(V2);
            self.mode = if v2 { Mode::V2 } else { Mode::V1 };
            if v2 && let Some(Value::Object(r)) = m.pointer_mut("/result") {
                *r = initialize_answer(r);
            }
            return vec![m];
        }
        if self.mode != Mode::V2 {
            return vec![m];
        }
        if is_answer {
            return self.answer(m, id, head.error.is_some());
        }
        match head.method.as_deref() {
            Some("session/update") => self.update(m),
            Some("session/request_permission") => {
                if let Some(Value::Object(p)) = m.pointer_mut("/params") {
                    permission_request(p);
                }
                vec![m]
            }
            _ => vec![m],
        }
    }

    /// An answer from the agent: a prompt's acknowledgement is held (the answer is made when
    /// the turn ends); a refusal is the prompt's answer, and no turn runs.
    fn answer(&mut self, mut m: Value, id: Option<String>, error: bool) -> Vec<Value> {
        if let Some(id) = id
            && let Some(prompt) = self.prompts.get_mut(&id)
        {
            if error {
                self.prompts.remove(&id);
                return vec![m];
            }
            prompt.acknowledged = true;
            return Vec::new();
        }
        if let Some(options) = m.pointer_mut("/result/configOptions") {
            *options = config_options(options.take());
        }
        vec![m]
    }

    fn update(&mut self, mut m: Value) -> Vec<Value> {
        let sid = m
            .pointer("/params/sessionId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let kind = m.pointer("/params/update").map(kind_of).unwrap_or_default();
        let Some(Value::Object(u)) = m.pointer_mut("/params/update") else {
            return vec![m];
        };
        match kind.as_str() {
            "state_update" => return self.state(&sid, u),
            "tool_call_update" => self.tool_call(&sid, u),
            "plan_update" => {
                let plan: Plan = u
                    .remove("plan")
                    .and_then(|p| serde_json::from_value(p).ok())
                    .unwrap_or_default();
                u.clear();
                u.insert("sessionUpdate".into(), "plan".into());
                u.insert("entries".into(), plan.entries);
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

    /// A tool call's update: its first one is its v1 card (`tool_call`, titled by its name or
    /// id when it has no title); its diffs gain v1's `path`.
    fn tool_call(&mut self, sid: &str, u: &mut Map<String, Value>) {
        let id = match u.get("toolCallId") {
            Some(Value::String(id)) => id.clone(),
            _ => String::new(),
        };
        if self.calls.insert((sid.to_owned(), id.clone())) {
            u.insert("sessionUpdate".into(), "tool_call".into());
            if !u.contains_key("title") {
                let title = u.get("name").cloned().unwrap_or(Value::String(id));
                u.insert("title".into(), title);
            }
        }
        if let Some(Value::Array(items)) = u.get_mut("content") {
            items.iter_mut().for_each(diff_path);
        }
    }

    /// A state update: `idle` ends the session's acknowledged prompt (its v1 answer; without a
    /// stop reason, `end_turn`); the rest has no v1 form.
    fn state(&mut self, sid: &str, u: &Map<String, Value>) -> Vec<Value> {
        let ending = match State::read(u) {
            State::Idle(stop) => Ok(stop.unwrap_or(StopReason::EndTurn)),
            State::Failed(error) => Err(error),
            _ => return Vec::new(),
        };
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
        match ending {
            Ok(stop) => vec![json!({"jsonrpc": "2.0", "id": id, "result": {"stopReason": stop}})],
            Err(error) => vec![json!({"jsonrpc": "2.0", "id": id, "error": error})],
        }
    }
}

/// A v1 client's `initialize` params, offering v2 as well: version 2, and v2's members beside
/// v1's.
fn initialize_params(p: &mut Map<String, Value>) {
    let caps = client_capabilities_v2(p.get("clientCapabilities").cloned());
    p.insert("capabilities".into(), caps);
    let info = p.get("clientInfo").cloned().unwrap_or_else(|| json!({}));
    p.insert("info".into(), info);
    p.insert("protocolVersion".into(), V2.into());
}

/// A v2 permission request's params in v1's shape: the tool call subject is its `toolCall`.
fn permission_request(p: &mut Map<String, Value>) {
    let subject = p.remove("subject");
    match subject.map(serde_json::from_value::<Subject>) {
        Some(Ok(Subject::ToolCall { tool_call })) => {
            p.insert("toolCall".into(), tool_call);
        }
        Some(Err(_)) | None => {}
    }
}

/// A v2 `initialize` result in v1's shape (its version kept).
fn initialize_answer(r: &Map<String, Value>) -> Map<String, Value> {
    let r = Value::Object(r.clone());
    let session = r
        .pointer("/capabilities/session")
        .cloned()
        .unwrap_or(Value::Null);
    let given = |v: Option<&Value>| v.is_some_and(|v| !v.is_null());
    let has = |k: &str| given(session.pointer(&format!("/{k}")));
    let prompt = |k: &str| given(session.pointer(&format!("/prompt/{k}")));
    let answer = InitializeAnswer {
        protocol_version: V2,
        agent_capabilities: AgentCapabilities {
            load_session: !session.is_null(),
            session_capabilities: SessionCapabilities {
                list: offered(true),
                resume: offered(true),
                close: offered(true),
                delete: offered(has("delete")),
                fork: None,
                additional_directories: offered(has("additionalDirectories")),
            },
            prompt_capabilities: PromptCapabilities {
                image: prompt("image"),
                audio: prompt("audio"),
                embedded_context: prompt("embeddedContext"),
            },
            mcp_capabilities: McpCapabilities {
                http: given(session.pointer("/mcp/http")),
                sse: false,
            },
        },
        auth_methods: r
            .pointer("/authMethods")
            .cloned()
            .unwrap_or_else(|| Value::Array(Vec::new())),
        agent_info: r.pointer("/info").cloned().unwrap_or(Value::Null),
    };
    let answer = answer.to_value();
    match answer {
        Value::Object(answer) => answer,
        _ => Map::new(),
    }
}

/// v2 config options (`configId`) as v1's (`id`).
fn config_options(options: Value) -> Value {
    rename_config_ids(options, V2_CONFIG_ID, V1_CONFIG_ID)
}

/// A v2 diff keeps its changes and patch, and gains the `path` of its first file, as v1 has.
fn diff_path(item: &mut Value) {
    #[derive(Deserialize)]
    struct Change {
        path: Value,
    }
    #[derive(Deserialize)]
    struct V2Diff {
        #[serde(rename = "type")]
        kind: String,
        #[serde(default)]
        path: Option<Value>,
        #[serde(default)]
        changes: Vec<Change>,
    }
    let Ok(diff) = V2Diff::deserialize(&*item) else {
        return;
    };
    if diff.kind == "diff"
        && diff.path.is_none()
        && let Some(first) = diff.changes.into_iter().next()
        && let Value::Object(item) = item
    {
        item.insert("path".into(), first.path);
    }
}

/// A whole v2 message as v1 chunks of kind `kind`, one per content block.
fn chunks(sid: &str, u: &Map<String, Value>, kind: &str) -> Vec<Value> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Message {
        #[serde(default)]
        message_id: Value,
        #[serde(default)]
        content: Vec<Value>,
    }
    let message = Message::deserialize(Value::Object(u.clone())).unwrap_or(Message {
        message_id: Value::Null,
        content: Vec::new(),
    });
    let id = message.message_id;
    message
        .content
        .into_iter()
        .map(|content| {
            json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid,
                   "update": {"sessionUpdate": kind, "messageId": id, "content": content}}})
        })
        .collect()
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
