//! The request of an `llm.chat` call as Lisp gives it, checked once into a [`LispRequest`], and
//! its HTTP body encoded straight from the Lua tables.
//!
//! The messages are never copied into JSON values first: the transcript already lives in Rust
//! (the session) and again in Lisp (the table the loop built for this call), and one message
//! can be as large as a file the model wrote. Serializing the tables directly keeps a 20 MB
//! `write` at three copies during a model call (session, Lisp, body) instead of four. The
//! messages are written by `crate::lisp::encode`'s rules, those of a conversion to JSON:
//! `json.array` tables and sequences are arrays, `json.null` is null, functions and userdata
//! are left out, keys must be strings and strings UTF-8, and a table that contains itself is an
//! error. Assistant messages get the reasoning field the call's policy gives them
//! (`crate::llm::request` explains it).
//!
//! It knows nothing of the network, settings or sessions.

use std::cell::RefCell;
use std::ffi::c_void;

use mlua::{Lua, LuaSerdeExt, Table, Value};
use serde::Serialize;
use serde::ser::{Error as _, SerializeMap, SerializeSeq};
use serde_json::{Map, Value as Json, json};

use crate::lisp::encode::{Field, Nested, array_len, object_entries, on_path, skipped};
use crate::lisp::from_lua;
use crate::llm::provider::{REASONING_KEYS, ReasoningPolicy};
use crate::llm::request::encode_body_with;
use crate::llm::{Api, LlmConfig, LlmError, ToolSpec, model_for};

/// `{:messages [...] :tools [...] :model "..."}`, checked: tools are `{:name :description
/// :parameters}`, or in the wire form `{:type "function" :function {...}}`.
pub(super) struct LispRequest {
    /// The messages table, `None` for an empty list.
    messages: Option<Table>,
    tools: Vec<ToolSpec>,
    model: Option<String>,
    /// The request's own protocol (`:api`): `Some(None)` for `:auto`.
    api: Option<Option<Api>>,
}

/// What is wrong with the request table of an `llm.chat` call; its `Display` is the problem
/// the call gives back to Lisp.
#[derive(Debug, thiserror::Error)]
pub(super) enum RequestError {
    /// The request is not a table.
    #[error("the request must be a table {{:messages [...]}}, got {0}")]
    NotATable(&'static str),
    /// `:messages` is missing (nil or `json.null`).
    #[error("the request needs :messages, a list of messages")]
    NoMessages,
    /// `:messages` is not a list.
    #[error(":messages must be a list of messages, got {0}")]
    MessagesNotAList(Json),
    /// `:tools` is not a list.
    #[error(":tools must be a list of tools, got {0}")]
    ToolsNotAList(Json),
    /// `:model` is not a string.
    #[error(":model must be a string, got {0}")]
    ModelNotAString(Json),
    /// `:api` is not a string.
    #[error(":api must be a string, got {0}")]
    ApiNotAString(Json),
    /// `:api` names no protocol.
    #[error(":api must be one of {names}, got {name:?}", names = api_names())]
    UnknownApi { name: String },
    /// A tool is not a table.
    #[error("a tool must be a table {{:name :description :parameters}}, got {0}")]
    ToolNotATable(Json),
    /// A tool has no name.
    #[error("every tool needs a :name")]
    ToolWithoutName,
    /// A tool's `:description` is not a string.
    #[error("the description of tool {name} must be a string, got {got}")]
    Description { name: String, got: Json },
    /// A tool's `:parameters` is not a table.
    #[error("the parameters of tool {name} must be a JSON schema table, got {got}")]
    Parameters { name: String, got: Json },
    /// Reading the table failed, or a value in it is not one JSON can hold.
    #[error(transparent)]
    Lisp(#[from] mlua::Error),
}

impl LispRequest {
    /// The request's own model, which wins over `llm.model`.
    pub(super) fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }

    /// `config` with the request's own protocol (when it names one) in place of `llm.api`, its
    /// endpoint, key and model then those of that protocol's provider where they were the
    /// environment's defaults ([`super::settle`]), and the protocol fixed for the request's
    /// model ([`LlmConfig::pinned`]).
    pub(super) fn configure(&self, mut config: LlmConfig) -> LlmConfig {
        if let Some(api) = self.api {
            config.api = api;
        }
        super::settle(config).pinned(self.model())
    }

    /// The request table `request`, or what is wrong with it.
    pub(super) fn parse(lua: &Lua, request: Value) -> Result<Self, RequestError> {
        let Value::Table(request) = request else {
            return Err(RequestError::NotATable(request.type_name()));
        };
        let field = |name: &str| request.get::<Value>(name);
        let messages = messages(lua, field("messages")?)?;
        let tools = match from_lua(lua, field("tools")?)? {
            Json::Null => Vec::new(),
            Json::Object(empty) if empty.is_empty() => Vec::new(),
            Json::Array(tools) => tools.into_iter().map(tool_spec).collect::<Result<_, _>>()?,
            other => return Err(RequestError::ToolsNotAList(other)),
        };
        let model = match from_lua(lua, field("model")?)? {
            Json::Null => None,
            Json::String(model) => Some(model).filter(|model| !model.is_empty()),
            other => return Err(RequestError::ModelNotAString(other)),
        };
        let api = match from_lua(lua, field("api")?)? {
            Json::Null => None,
            Json::String(name) if name == "auto" => Some(None),
            Json::String(name) => match Api::from_name(&name) {
                Some(api) => Some(Some(api)),
                None => return Err(RequestError::UnknownApi { name }),
            },
            other => return Err(RequestError::ApiNotAString(other)),
        };
        Ok(Self {
            messages,
            tools,
            model,
            api,
        })
    }

    /// The body for `config`: `Ok(Err(NoModel))` when neither the request nor the settings name
    /// a model (the call fails with it, as a call without one does), `Err` when a message
    /// cannot be encoded.
    pub(super) fn encode(
        &self,
        lua: &Lua,
        config: &LlmConfig,
    ) -> Result<Result<Vec<u8>, LlmError>, String> {
        let model = match model_for(self.model.as_deref(), config) {
            Ok(model) => model,
            Err(error) => return Ok(Err(error)),
        };
        let policy = config.reasoning_policy();
        let list = LuaMessages {
            lua,
            messages: self.messages.as_ref(),
            policy: &policy,
        };
        encode_body_with(model, &list, &self.tools, config)
            .map(Ok)
            .map_err(|error| format!("cannot encode the request: {error}"))
    }
}

/// The `:messages` field: a list (a sequence, a `json.array` table or an empty table).
fn messages(lua: &Lua, value: Value) -> Result<Option<Table>, RequestError> {
    match value {
        Value::Nil => Err(RequestError::NoMessages),
        Value::LightUserData(u) if u.0.is_null() => Err(RequestError::NoMessages),
        Value::Table(t) if t.raw_len() > 0 || is_array(lua, &t) => Ok(Some(t)),
        Value::Table(t) if t.is_empty() => Ok(None),
        other => Err(RequestError::MessagesNotAList(from_lua(lua, other)?)),
    }
}

fn is_array(lua: &Lua, t: &Table) -> bool {
    t.metatable() == Some(lua.array_metatable())
}

/// One tool of `:tools`, checked.
fn tool_spec(tool: Json) -> Result<ToolSpec, RequestError> {
    let Json::Object(mut tool) = tool else {
        return Err(RequestError::ToolNotATable(tool));
    };
    if let Some(Json::Object(function)) = tool.remove("function") {
        tool = function;
    }
    let name = match tool.remove("name") {
        Some(Json::String(name)) if !name.is_empty() => name,
        _ => return Err(RequestError::ToolWithoutName),
    };
    let description = match tool.remove("description") {
        None | Some(Json::Null) => String::new(),
        Some(Json::String(description)) => description,
        Some(got) => return Err(RequestError::Description { name, got }),
    };
    let parameters = match tool.remove("parameters") {
        None | Some(Json::Null) => json!({"type": "object", "properties": {}}),
        Some(parameters @ Json::Object(_)) => parameters,
        Some(got) => return Err(RequestError::Parameters { name, got }),
    };
    Ok(ToolSpec {
        name,
        description,
        parameters,
    })
}

// --- private: the messages as the body's list

/// The messages table serialized in place (by `crate::lisp::encode`'s rules), each assistant
/// message's reasoning as the policy says.
struct LuaMessages<'a> {
    lua: &'a Lua,
    messages: Option<&'a Table>,
    policy: &'a ReasoningPolicy,
}

impl Serialize for LuaMessages<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Some(messages) = self.messages else {
            return serializer.collect_seq(std::iter::empty::<Json>());
        };
        let path = RefCell::new(vec![messages.to_pointer()]);
        let mut seq = serializer.serialize_seq(Some(messages.raw_len()))?;
        for i in 1..=messages.raw_len() {
            let message: Value = messages.raw_get(i).map_err(S::Error::custom)?;
            if skipped(&message) {
                continue;
            }
            match assistant(self.lua, &message) {
                Some(t) => seq.serialize_element(&Assistant {
                    lua: self.lua,
                    message: t,
                    policy: self.policy,
                    path: &path,
                })?,
                None => seq.serialize_element(&Nested {
                    lua: self.lua,
                    value: &message,
                    path: &path,
                    sorted: false,
                })?,
            }
        }
        seq.end()
    }
}

/// `message` when it is an assistant message: a table that is an object, with role
/// `"assistant"`.
fn assistant<'v>(lua: &Lua, message: &'v Value) -> Option<&'v Table> {
    match message {
        Value::Table(t)
            if array_len(lua, t).is_none()
                && t.get::<String>("role").ok().as_deref() == Some("assistant") =>
        {
            Some(t)
        }
        _ => None,
    }
}

/// An assistant message: its fields but the reasoning ones, then the one the policy gives it.
struct Assistant<'a> {
    lua: &'a Lua,
    message: &'a Table,
    policy: &'a ReasoningPolicy,
    path: &'a RefCell<Vec<*const c_void>>,
}

impl Serialize for Assistant<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        on_path(self.path, self.message, || self.fields(serializer))
    }
}

impl Assistant<'_> {
    fn fields<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let entries = object_entries(self.message).map_err(S::Error::custom)?;
        let mut reasoning = Map::new();
        let mut has_calls = false;
        let mut map = serializer.serialize_map(None)?;
        for (key, value) in &entries {
            if REASONING_KEYS.contains(&key.as_str()) {
                let value = value.to_json(self.lua).map_err(S::Error::custom)?;
                reasoning.insert(key.clone(), value);
                continue;
            }
            if self.policy.drops(key) {
                continue;
            }
            let value = match value {
                Field::Lua(value) => value,
                Field::Stored(object, field) => {
                    let value = &object[field.as_str()];
                    if key == "tool_calls" {
                        has_calls = value.as_array().is_some_and(|calls| !calls.is_empty());
                    }
                    map.serialize_entry(key, value)?;
                    continue;
                }
            };
            if key == "tool_calls" {
                has_calls = is_nonempty_array(self.lua, value);
            }
            let value = Nested {
                lua: self.lua,
                value,
                path: self.path,
                sorted: false,
            };
            map.serialize_entry(key, &value)?;
        }
        if let Some((key, value)) = self.policy.outgoing_for(has_calls, &reasoning) {
            map.serialize_entry(key, &value)?;
        }
        map.end()
    }
}

/// Whether `value` converts to a JSON array with at least one element.
fn is_nonempty_array(lua: &Lua, value: &Value) -> bool {
    let Value::Table(t) = value else {
        return false;
    };
    array_len(lua, t)
        .is_some_and(|len| (1..=len).any(|i| t.raw_get::<Value>(i).is_ok_and(|v| !skipped(&v))))
}

/// The names `:api` takes.
fn api_names() -> String {
    let mut names: Vec<&str> = Api::ALL.iter().map(|api| api.name()).collect();
    names.push("auto");
    names.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ChatRequest;
    use crate::llm::provider::{Provider, SendReasoning};
    use crate::llm::request::encode_body;

    /// Plain Lua requests (`null` is json.null, `array_mt` the array mark) whose bodies must be
    /// what converting them to JSON and encoding that gives.
    const REQUESTS: &[&str] = &[
        r#"return {messages = {{role = "user", content = "hi"}}}"#,
        r#"return {messages = setmetatable({}, array_mt)}"#,
        r#"return {messages = {}, model = "m2", tools = {{name = "t", description = "d"}}}"#,
        r#"return {messages = {
            {role = "system", content = "s"},
            {role = "user", content = {{type = "text", text = "a"}, {type = "image_url",
              image_url = {url = "data:image/png;base64,AAAA"}}}},
            {role = "assistant", content = null, reasoning_content = "why",
              tool_calls = {{id = "c1", type = "function",
                ["function"] = {name = "write", arguments = "{\"path\":\"a\"}"}}}},
            {role = "tool", tool_call_id = "c1", content = "ok", skip = function() end},
            {role = "assistant", content = "done", reasoning = "r",
              reasoning_details = {{type = "reasoning.text", text = "r"}}},
            {role = "assistant", content = "", extra = setmetatable({}, array_mt), n = 1.5},
            {role = "assistant", content = "x", [null] = 1, skip = function() end},
            {role = "assistant", content = "x", "an array part makes it a list"},
            {role = "assistant", content = null, reasoning_content = "r",
              tool_calls = {function() end}},
        }}"#,
    ];

    fn configs() -> Vec<LlmConfig> {
        let of = |provider, send| LlmConfig {
            model: Some("m".into()),
            provider: Some(provider),
            send_reasoning: send,
            ..LlmConfig::default()
        };
        vec![
            of(Provider::Generic, None),
            of(Provider::DeepSeek, Some(SendReasoning::Always)),
            of(Provider::OpenRouter, Some(SendReasoning::ToolTurns)),
            of(Provider::Moonshot, None),
        ]
    }

    /// The body the JSON path gives for `request`.
    fn through_json(lua: &Lua, request: &Table, config: &LlmConfig) -> Json {
        let parsed = LispRequest::parse(lua, Value::Table(request.clone())).unwrap();
        let messages = match from_lua(lua, request.get::<Value>("messages").unwrap()).unwrap() {
            Json::Array(messages) => messages,
            _ => Vec::new(),
        };
        let request = ChatRequest {
            messages,
            tools: parsed.tools.clone(),
            model: parsed.model.clone(),
        };
        let model = model_for(request.model.as_deref(), config).unwrap();
        serde_json::from_slice(&encode_body(model, &request, config).unwrap()).unwrap()
    }

    #[test]
    fn bodies_from_lua_tables_are_the_bodies_of_their_json() {
        let lua = Lua::new();
        lua.globals().set("null", lua.null()).unwrap();
        lua.globals()
            .set("array_mt", lua.array_metatable())
            .unwrap();
        for source in REQUESTS {
            let request: Table = lua.load(*source).eval().unwrap();
            for config in configs() {
                let parsed = LispRequest::parse(&lua, Value::Table(request.clone())).unwrap();
                let body = parsed.encode(&lua, &config).unwrap().unwrap();
                let direct: Json = serde_json::from_slice(&body).unwrap();
                assert_eq!(
                    direct,
                    through_json(&lua, &request, &config),
                    "{source} with {:?}",
                    config.provider
                );
            }
        }
    }

    #[test]
    fn another_protocols_kept_reasoning_is_left_out_and_the_own_kept() {
        let lua = Lua::new();
        let request: Table = lua
            .load(
                r#"return {messages = {{role = "assistant", content = "x",
                     thought_signatures = {text = "c2ln"}, thinking_blocks = {{type = "t"}}}}}"#,
            )
            .eval()
            .unwrap();
        let body = |api| {
            let config = LlmConfig {
                model: Some("m".into()),
                api: Some(api),
                ..LlmConfig::default()
            };
            let parsed = LispRequest::parse(&lua, Value::Table(request.clone())).unwrap();
            let bytes = parsed.encode(&lua, &config).unwrap().unwrap();
            String::from_utf8(bytes).unwrap()
        };
        let chat = body(Api::Chat);
        assert!(
            !chat.contains("c2ln") && !chat.contains("thinking_blocks"),
            "{chat}"
        );
        assert!(body(Api::Gemini).contains("c2ln"));
    }

    #[test]
    fn a_request_without_a_model_fails_as_the_call() {
        let lua = Lua::new();
        let request: Table = lua.load("return {messages = {}}").eval().unwrap();
        let parsed = LispRequest::parse(&lua, Value::Table(request)).unwrap();
        let encoded = parsed.encode(&lua, &LlmConfig::default()).unwrap();
        assert!(
            matches!(encoded, Err(LlmError::NoModel { .. })),
            "{encoded:?}"
        );
    }

    #[test]
    fn what_json_cannot_hold_is_an_error_of_the_request() {
        let lua = Lua::new();
        let config = LlmConfig {
            model: Some("m".into()),
            ..LlmConfig::default()
        };
        let cases = [
            ("{role = 'user', content = 'caf\\233'}", "UTF-8"),
            ("{role = 'assistant', content = 'caf\\233'}", "UTF-8"),
            (
                "{role = 'user', [2] = 'x'}",
                "must be a string, got integer 2",
            ),
            (
                "{role = 'assistant', [true] = 1}",
                "must be a string, got boolean true",
            ),
        ];
        for (message, expected) in cases {
            let request: Table = lua
                .load(format!("return {{messages = {{{message}}}}}"))
                .eval()
                .unwrap();
            let parsed = LispRequest::parse(&lua, Value::Table(request)).unwrap();
            let error = parsed.encode(&lua, &config).unwrap_err();
            assert!(error.contains(expected), "{message}: {error}");
        }
    }

    #[test]
    fn a_table_that_contains_itself_is_an_error_of_the_request() {
        let lua = Lua::new();
        let request: Table = lua
            .load("local m = {role = 'user'}; m.self = m; return {messages = {m}}")
            .eval()
            .unwrap();
        let parsed = LispRequest::parse(&lua, Value::Table(request)).unwrap();
        let config = LlmConfig {
            model: Some("m".into()),
            ..LlmConfig::default()
        };
        let error = parsed.encode(&lua, &config).unwrap_err();
        assert!(error.contains("recursive"), "{error}");
    }
}
