//! The request a call sends: its URL and its JSON body. Pure functions.
//!
//! The body is `{model, messages, stream: true, stream_options: {include_usage: true}}`, plus
//! `tools: [{type: "function", function: {name, description, parameters}}]` only when there are
//! tools, plus the fields of `llm.extra-body`. The client owns the fields listed in
//! [`RESERVED_BODY_KEYS`]: an extra field of the same name is dropped with a warning, because
//! overriding them would break the call (`stream: false`), silently change the model or the
//! transcript, or bypass the tool table. There is no `tool_choice`, temperature or token limit
//! unless `extra_body` adds one.
//!
//! Messages are sent as they are, except the reasoning of assistant messages: every field of
//! [`REASONING_KEYS`](super::REASONING_KEYS) (and, on the chat protocol, of
//! [`NATIVE_KEYS`](super::NATIVE_KEYS)) is left out, and the one field the call's [`ReasoningPolicy`] gives the
//! message (the provider's name for it, `""` where the provider insists) goes last. So a
//! transcript that kept reasoning for one provider is safe to send to another, and a field the
//! provider does not know never reaches it.
//!
//! It knows nothing of headers, keys or the network.
//!
//! Compare with pi: the OpenAI-completions provider builds the same body, adjusted by per-model
//! `compat` flags; here such adjustments go through `extra_body`.
//! Compare with oml.clj: `oml.llm/request-body` (same shape; `extra_body` is new).

use serde::Serialize;
use serde::ser::SerializeMap;
use serde_json::{Map, Value};

use super::provider::ReasoningPolicy;
use super::{ChatRequest, LlmConfig, LlmError, ToolSpec};

/// Top-level body fields the client always sets itself and `extra_body` cannot replace.
pub const RESERVED_BODY_KEYS: [&str; 5] =
    ["model", "messages", "stream", "stream_options", "tools"];

/// `POST` target for a base URL: trailing slashes removed, `/chat/completions` appended.
pub fn chat_completions_url(base_url: &str) -> String {
    super::Api::Chat.call_url(base_url, "")
}

/// The model a call uses: the request's own, else `config`'s; [`LlmError::NoModel`] when
/// neither names one.
pub fn model_for<'a>(
    requested: Option<&'a str>,
    config: &'a LlmConfig,
) -> Result<&'a str, LlmError> {
    requested
        .or(config.model.as_deref())
        .filter(|model| !model.is_empty())
        .ok_or_else(LlmError::no_model)
}

/// The JSON body for `model` and `request`, with `config`'s extra body merged in after the
/// client's fields, and the reasoning of assistant messages as its reasoning policy says.
pub fn encode_body(
    model: &str,
    request: &ChatRequest,
    config: &LlmConfig,
) -> Result<Vec<u8>, serde_json::Error> {
    let messages = Messages {
        messages: &request.messages,
        reasoning: &config.reasoning_policy(),
    };
    encode_body_with(model, &messages, &request.tools, config)
}

/// [`encode_body`] for messages held elsewhere (the Lisp binding serializes its tables
/// directly, without a copy as JSON values first). `messages` must serialize as the list of
/// messages with the reasoning policy applied, as [`encode_body`]'s do.
pub fn encode_body_with<M: Serialize>(
    model: &str,
    messages: &M,
    tools: &[ToolSpec],
    config: &LlmConfig,
) -> Result<Vec<u8>, serde_json::Error> {
    let extra = &config.extra_body;
    let ignored: Vec<&str> = extra
        .keys()
        .map(String::as_str)
        .filter(|key| RESERVED_BODY_KEYS.contains(key))
        .collect();
    if !ignored.is_empty() {
        tracing::warn!(
            ?ignored,
            "llm.extra-body cannot replace fields the client sets; ignored"
        );
    }
    let body = Body {
        model,
        messages,
        stream: true,
        stream_options: StreamOptions {
            include_usage: true,
        },
        tools: (!tools.is_empty()).then(|| tools.iter().map(WireTool::from).collect()),
        extra: Extra(extra),
    };
    // In a buffer of exactly its size: grown by doubling, the buffer of a large body (a big
    // file in the conversation) would reach twice its size.
    crate::sized::to_vec_exact(&body, 0)
}

// --- private: wire shapes

#[derive(Serialize)]
struct Body<'a, M: Serialize> {
    model: &'a str,
    messages: &'a M,
    stream: bool,
    stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Vec<WireTool<'a>>>,
    #[serde(flatten)]
    extra: Extra<'a>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

impl<'a> From<&'a ToolSpec> for WireTool<'a> {
    fn from(tool: &'a ToolSpec) -> Self {
        Self {
            kind: "function",
            function: WireFunction {
                name: &tool.name,
                description: &tool.description,
                parameters: &tool.parameters,
            },
        }
    }
}

/// The messages, each assistant message's reasoning as the policy says.
struct Messages<'a> {
    messages: &'a [Value],
    reasoning: &'a ReasoningPolicy,
}

impl Serialize for Messages<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.messages.iter().map(|message| match message {
            Value::Object(fields)
                if fields.get("role").and_then(Value::as_str) == Some("assistant") =>
            {
                Outgoing::Assistant(fields, self.reasoning)
            }
            other => Outgoing::AsIs(other),
        }))
    }
}

enum Outgoing<'a> {
    AsIs(&'a Value),
    Assistant(&'a Map<String, Value>, &'a ReasoningPolicy),
}

impl Serialize for Outgoing<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (fields, policy) = match self {
            Outgoing::AsIs(value) => return value.serialize(serializer),
            Outgoing::Assistant(fields, policy) => (fields, policy),
        };
        let mut map = serializer.serialize_map(None)?;
        for (key, value) in fields.iter() {
            if !policy.drops(key) {
                map.serialize_entry(key, value)?;
            }
        }
        if let Some((key, value)) = policy.outgoing(fields) {
            map.serialize_entry(key, &value)?;
        }
        map.end()
    }
}

/// The extra fields without the reserved ones.
struct Extra<'a>(&'a Map<String, Value>);

impl Serialize for Extra<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        for (key, value) in self.0 {
            if !RESERVED_BODY_KEYS.contains(&key.as_str()) {
                map.serialize_entry(key, value)?;
            }
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::provider::{Provider, SendReasoning};
    use serde_json::json;

    fn config(
        extra: Map<String, Value>,
        provider: Provider,
        send: Option<SendReasoning>,
    ) -> LlmConfig {
        LlmConfig {
            extra_body: extra,
            provider: Some(provider),
            send_reasoning: send,
            ..LlmConfig::default()
        }
    }

    fn body(request: &ChatRequest, extra: Value) -> Value {
        let extra = extra.as_object().cloned().unwrap_or_default();
        let bytes =
            encode_body("m", request, &config(extra, Provider::Generic, None)).expect("encodes");
        serde_json::from_slice(&bytes).expect("valid JSON")
    }

    #[test]
    fn urls_lose_trailing_slashes() {
        for base in ["http://h/v1", "http://h/v1/", "http://h/v1//"] {
            assert_eq!(chat_completions_url(base), "http://h/v1/chat/completions");
        }
    }

    #[test]
    fn the_body_in_field_order_without_tools() {
        let request = ChatRequest {
            messages: vec![json!({"role": "user", "content": "hi"})],
            ..ChatRequest::default()
        };
        let encoded = encode_body("m", &request, &config(Map::new(), Provider::Generic, None))
            .expect("encodes");
        assert_eq!(
            String::from_utf8(encoded).expect("utf-8"),
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}"#
        );
    }

    #[test]
    fn tools_are_wrapped_as_functions() {
        let request = ChatRequest {
            tools: vec![ToolSpec {
                name: "read".into(),
                description: "Read a file.".into(),
                parameters: json!({"type": "object"}),
            }],
            ..ChatRequest::default()
        };
        assert_eq!(
            body(&request, json!({}))["tools"],
            json!([{"type": "function", "function": {"name": "read", "description": "Read a file.", "parameters": {"type": "object"}}}])
        );
    }

    #[test]
    fn extra_fields_are_merged_but_cannot_replace_ours() {
        let got = body(
            &ChatRequest::default(),
            json!({"temperature": 0.2, "stream": false, "model": "other", "tools": [], "reasoning": {"effort": "high"}}),
        );
        assert_eq!(got["temperature"], json!(0.2));
        assert_eq!(got["reasoning"], json!({"effort": "high"}));
        assert_eq!(got["stream"], json!(true));
        assert_eq!(got["model"], json!("m"));
        assert!(got.get("tools").is_none());
    }

    #[test]
    fn assistant_reasoning_goes_out_as_the_policy_says_and_nothing_else_changes() {
        let messages = vec![
            json!({"role": "user", "content": "hi", "reasoning_content": "not an assistant's"}),
            json!({"role": "assistant", "content": "a", "reasoning_content": "r", "reasoning": "r",
                   "reasoning_details": [{"type": "reasoning.text", "text": "r"}]}),
        ];
        let request = ChatRequest {
            messages: messages.clone(),
            ..ChatRequest::default()
        };
        let sent = |send: Option<SendReasoning>| {
            let config = config(Map::new(), Provider::Generic, send);
            let bytes = encode_body("m", &request, &config).expect("encodes");
            let body: Value = serde_json::from_slice(&bytes).expect("JSON");
            body["messages"].clone()
        };
        let never = sent(None);
        assert_eq!(never[0], messages[0], "only assistant messages change");
        assert_eq!(never[1], json!({"role": "assistant", "content": "a"}));
        let always = sent(Some(SendReasoning::Always));
        assert_eq!(
            always[1],
            json!({"role": "assistant", "content": "a", "reasoning_content": "r"})
        );
    }
}
