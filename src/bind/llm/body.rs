//! The request of an `llm.chat` call as Lisp gives it, checked once into a [`LispRequest`], and
//! its HTTP body encoded straight from the Lua tables.
//!
//! The messages are never copied into JSON values first: the transcript already lives in Rust
//! (the session) and again in Lisp (the table the loop built for this call), and one message
//! can be as large as a file the model wrote. Serializing the tables directly keeps a 20 MB
//! `write` at three copies during a model call (session, Lisp, body) instead of four. The
//! messages are serialized by mlua's own serializer with the options [`from_lua`] uses, so the
//! body says what a conversion to JSON would: `json.array` tables and sequences are arrays,
//! `json.null` is null, functions and userdata are left out, a table that contains itself is an
//! error. Assistant messages get the reasoning field the call's policy gives them
//! (`crate::llm::request` explains it).
//!
//! It knows nothing of the network, settings or sessions.

use mlua::{Lua, LuaSerdeExt, Table, Value};
use serde::Serialize;
use serde::ser::{Error as _, SerializeMap};
use serde_json::{Map, Value as Json, json};

use crate::lisp::{from_lua, serializable};
use crate::llm::provider::{REASONING_KEYS, ReasoningPolicy};
use crate::llm::request::encode_body_with;
use crate::llm::{LlmConfig, LlmError, ToolSpec, model_for};

/// `{:messages [...] :tools [...] :model "..."}`, checked: tools are `{:name :description
/// :parameters}`, or in the wire form `{:type "function" :function {...}}`.
pub(super) struct LispRequest {
    /// The messages table, `None` for an empty list.
    messages: Option<Table>,
    tools: Vec<ToolSpec>,
    model: Option<String>,
}

impl LispRequest {
    /// The request table `request`, or what is wrong with it.
    pub(super) fn parse(lua: &Lua, request: Value) -> Result<Self, String> {
        let Value::Table(request) = request else {
            return Err(format!(
                "the request must be a table {{:messages [...]}}, got {}",
                request.type_name()
            ));
        };
        let field = |name: &str| request.get::<Value>(name).map_err(|e| e.to_string());
        let messages = messages(lua, field("messages")?)?;
        let tools = match json_of(lua, field("tools")?)? {
            Json::Null => Vec::new(),
            Json::Object(empty) if empty.is_empty() => Vec::new(),
            Json::Array(tools) => tools.into_iter().map(tool_spec).collect::<Result<_, _>>()?,
            other => return Err(format!(":tools must be a list of tools, got {other}")),
        };
        let model = match json_of(lua, field("model")?)? {
            Json::Null => None,
            Json::String(model) => Some(model).filter(|model| !model.is_empty()),
            other => return Err(format!(":model must be a string, got {other}")),
        };
        Ok(Self {
            messages,
            tools,
            model,
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
fn messages(lua: &Lua, value: Value) -> Result<Option<Table>, String> {
    match value {
        Value::Nil => Err("the request needs :messages, a list of messages".to_owned()),
        Value::LightUserData(u) if u.0.is_null() => {
            Err("the request needs :messages, a list of messages".to_owned())
        }
        Value::Table(t) if t.raw_len() > 0 || is_array(lua, &t) => Ok(Some(t)),
        Value::Table(t) if t.is_empty() => Ok(None),
        other => Err(format!(
            ":messages must be a list of messages, got {}",
            json_of(lua, other)?
        )),
    }
}

fn is_array(lua: &Lua, t: &Table) -> bool {
    t.metatable() == Some(lua.array_metatable())
}

/// A (small) Lua value as JSON, for checking and for error texts.
fn json_of(lua: &Lua, value: Value) -> Result<Json, String> {
    from_lua(lua, value).map_err(|error| error.to_string())
}

fn tool_spec(tool: Json) -> Result<ToolSpec, String> {
    let Json::Object(mut tool) = tool else {
        return Err(format!(
            "a tool must be a table {{:name :description :parameters}}, got {tool}"
        ));
    };
    if let Some(Json::Object(function)) = tool.remove("function") {
        tool = function;
    }
    let name = match tool.remove("name") {
        Some(Json::String(name)) if !name.is_empty() => name,
        _ => return Err("every tool needs a :name".to_owned()),
    };
    let description = match tool.remove("description") {
        None | Some(Json::Null) => String::new(),
        Some(Json::String(description)) => description,
        Some(other) => {
            return Err(format!(
                "the description of tool {name} must be a string, got {other}"
            ));
        }
    };
    let parameters = match tool.remove("parameters") {
        None | Some(Json::Null) => json!({"type": "object", "properties": {}}),
        Some(parameters @ Json::Object(_)) => parameters,
        Some(other) => {
            return Err(format!(
                "the parameters of tool {name} must be a JSON schema table, got {other}"
            ));
        }
    };
    Ok(ToolSpec {
        name,
        description,
        parameters,
    })
}

// --- private: the messages as the body's list

/// The messages table serialized in place, each assistant message's reasoning as the policy
/// says.
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
        // As mlua serializes a list: its raw length, the values JSON cannot hold left out.
        let items = (1..=messages.raw_len())
            .map(|i| messages.raw_get::<Value>(i))
            .filter(|item| !item.as_ref().is_ok_and(skipped))
            .collect::<mlua::Result<Vec<Value>>>()
            .map_err(S::Error::custom)?;
        serializer.collect_seq(items.iter().map(|message| LuaMessage {
            lua: self.lua,
            message,
            policy: self.policy,
        }))
    }
}

struct LuaMessage<'a> {
    lua: &'a Lua,
    message: &'a Value,
    policy: &'a ReasoningPolicy,
}

impl Serialize for LuaMessage<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let assistant = match self.message {
            Value::Table(t) if t.get::<String>("role").ok().as_deref() == Some("assistant") => t,
            other => return serializable(other).serialize(serializer),
        };
        let mut reasoning = Map::new();
        let mut map = serializer.serialize_map(None)?;
        for pair in assistant.pairs::<Value, Value>() {
            let (key, value) = pair.map_err(S::Error::custom)?;
            if skipped(&key) || skipped(&value) {
                continue;
            }
            match key.as_string().and_then(|k| k.to_str().ok()) {
                Some(k) if REASONING_KEYS.contains(&&*k) => {
                    let value = from_lua(self.lua, value).map_err(S::Error::custom)?;
                    reasoning.insert(k.to_string(), value);
                }
                _ => map.serialize_entry(&serializable(&key), &serializable(&value))?,
            }
        }
        let has_calls = matches!(assistant.get::<Value>("tool_calls"),
            Ok(Value::Table(calls)) if calls.raw_len() > 0);
        if let Some((key, value)) = self.policy.outgoing_for(has_calls, &reasoning) {
            map.serialize_entry(key, &value)?;
        }
        map.end()
    }
}

/// Whether a table entry's key or value is one a conversion to JSON leaves out.
fn skipped(value: &Value) -> bool {
    match value {
        Value::LightUserData(u) => !u.0.is_null(),
        // oml makes no serializable userdata; mlua would serialize one nested deeper.
        Value::UserData(_)
        | Value::Function(_)
        | Value::Thread(_)
        | Value::Error(_)
        | Value::Other(_) => true,
        Value::Nil
        | Value::Boolean(_)
        | Value::Integer(_)
        | Value::Number(_)
        | Value::String(_)
        | Value::Table(_) => false,
    }
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
    fn a_request_without_a_model_fails_as_the_call() {
        let lua = Lua::new();
        let request: Table = lua.load("return {messages = {}}").eval().unwrap();
        let parsed = LispRequest::parse(&lua, Value::Table(request)).unwrap();
        let encoded = parsed.encode(&lua, &LlmConfig::default()).unwrap();
        assert!(matches!(encoded, Err(LlmError::NoModel)), "{encoded:?}");
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
