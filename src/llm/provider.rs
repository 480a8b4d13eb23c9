//! Which provider a base URL points at, and how that provider wants the reasoning of earlier
//! assistant messages sent back. Pure data and pure functions.
//!
//! Providers disagree about reasoning on the way back. DeepSeek's thinking mode answers 400 when
//! a request with `tools` lacks the `reasoning_content` of earlier assistant messages; Kimi
//! (Moonshot) answers 400 when a tool-call message lacks it; Qwen (DashScope) accepts it and
//! drops it; OpenRouter wants its `reasoning_details` back, unmodified, on tool-call turns
//! (Gemini fails without them); and Mistral or Cerebras reject the unknown field outright. So
//! the decision is one table, [`PROVIDERS`]: one [`ProviderRow`] per provider, with the hosts
//! that identify it, the default [`SendReasoning`] policy, the wire [`ReasoningField`], what to
//! send for a message that has no reasoning ([`WhenMissing`]), and the documentation the row was
//! checked against. docs/src/models.md shows the same table ("Reasoning, per provider"); a unit
//! test checks that it cites every row's source.
//!
//! [`Provider::from_base_url`] picks the row by the base URL's host, exact or a subdomain;
//! anything else is [`Provider::Generic`], which sends nothing back. The settings
//! `llm.provider` and `llm.send-reasoning` override the guess and the policy; this module knows
//! nothing of them, only of [`ReasoningPolicy`], what a call resolves them to.
//!
//! It does no I/O and never sees a request: `request` applies [`ReasoningPolicy::outgoing`] to
//! each assistant message, and `fold` asks [`SendReasoning::sends`] whether a new message keeps
//! its reasoning.

use serde::Serialize;
use serde_json::{Map, Value};

/// A provider whose handling of reasoning oml knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Provider {
    /// api.deepseek.com.
    DeepSeek,
    /// Kimi: api.moonshot.ai, api.moonshot.cn, api.kimi.com.
    Moonshot,
    /// Qwen on Alibaba Cloud Model Studio (DashScope's OpenAI-compatible mode).
    DashScope,
    /// openrouter.ai.
    OpenRouter,
    /// Anything else: OpenAI, local servers (vLLM, llama.cpp, Ollama), Mistral, Cerebras, ...
    Generic,
}

/// Which earlier assistant messages carry their reasoning in the next request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SendReasoning {
    /// None.
    Never,
    /// Those with tool calls, for the whole conversation.
    ToolTurns,
    /// All of them.
    Always,
}

/// The field an outgoing assistant message carries its reasoning in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReasoningField {
    /// `reasoning_content`: the text.
    ReasoningContent,
    /// OpenRouter's: `reasoning_details`, the raw items as they streamed, when the message kept
    /// them; else the text as `reasoning`.
    Details,
}

/// What a message without reasoning sends, when the policy says it sends its reasoning.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WhenMissing {
    /// No field.
    Omit,
    /// The field with `""`: for providers that refuse a message without it.
    Empty,
}

/// One provider's row of [`PROVIDERS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProviderRow {
    pub provider: Provider,
    /// Hosts that identify the provider: the base URL's host is one of them or a subdomain.
    pub hosts: &'static [&'static str],
    /// The policy `llm.send-reasoning` `:auto` means for this provider.
    pub send: SendReasoning,
    pub field: ReasoningField,
    pub when_missing: WhenMissing,
    /// The documentation the row was checked against.
    pub source: &'static str,
}

/// Every provider oml knows, [`Provider::Generic`] last (it has no hosts).
pub const PROVIDERS: &[ProviderRow] = &[
    ProviderRow {
        provider: Provider::DeepSeek,
        hosts: &["api.deepseek.com"],
        send: SendReasoning::Always,
        field: ReasoningField::ReasoningContent,
        when_missing: WhenMissing::Empty,
        source: "https://api-docs.deepseek.com/guides/thinking_mode",
    },
    ProviderRow {
        provider: Provider::Moonshot,
        hosts: &["api.moonshot.ai", "api.moonshot.cn", "api.kimi.com"],
        send: SendReasoning::Always,
        field: ReasoningField::ReasoningContent,
        when_missing: WhenMissing::Empty,
        source: "https://platform.moonshot.ai/docs/guide/use-kimi-k2-thinking-model",
    },
    ProviderRow {
        provider: Provider::DashScope,
        hosts: &[
            "dashscope.aliyuncs.com",
            "dashscope-intl.aliyuncs.com",
            "dashscope-us.aliyuncs.com",
        ],
        send: SendReasoning::ToolTurns,
        field: ReasoningField::ReasoningContent,
        when_missing: WhenMissing::Omit,
        source: "https://www.alibabacloud.com/help/en/model-studio/deep-thinking",
    },
    ProviderRow {
        provider: Provider::OpenRouter,
        hosts: &["openrouter.ai"],
        send: SendReasoning::ToolTurns,
        field: ReasoningField::Details,
        when_missing: WhenMissing::Omit,
        source: "https://openrouter.ai/docs/use-cases/reasoning-tokens",
    },
    ProviderRow {
        provider: Provider::Generic,
        hosts: &[],
        send: SendReasoning::Never,
        field: ReasoningField::ReasoningContent,
        when_missing: WhenMissing::Omit,
        source: "https://platform.openai.com/docs/api-reference/chat/create",
    },
];

/// The reasoning fields of a stored assistant message, all removed from outgoing messages before
/// the provider's own field is added: `reasoning_content` (the text as oml stores it),
/// `reasoning` (the text as some gateways stream it) and `reasoning_details` (OpenRouter's raw
/// items).
pub const REASONING_KEYS: [&str; 3] = ["reasoning_content", "reasoning", "reasoning_details"];

impl Provider {
    /// Every provider, in [`PROVIDERS`] order.
    pub const ALL: [Provider; 5] = [
        Provider::DeepSeek,
        Provider::Moonshot,
        Provider::DashScope,
        Provider::OpenRouter,
        Provider::Generic,
    ];

    /// The name the `llm.provider` setting uses.
    pub fn name(self) -> &'static str {
        match self {
            Provider::DeepSeek => "deepseek",
            Provider::Moonshot => "moonshot",
            Provider::DashScope => "dashscope",
            Provider::OpenRouter => "openrouter",
            Provider::Generic => "generic",
        }
    }

    /// The provider called `name` (see [`name`](Self::name)).
    pub fn from_name(name: &str) -> Option<Provider> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    /// This provider's row.
    pub fn row(self) -> &'static ProviderRow {
        PROVIDERS
            .iter()
            .find(|row| row.provider == self)
            .unwrap_or(&PROVIDERS[PROVIDERS.len() - 1])
    }

    /// The provider whose hosts hold the host of `base_url` (exactly, or as a subdomain), else
    /// [`Provider::Generic`].
    pub fn from_base_url(base_url: &str) -> Provider {
        let Some(host) = host_of(base_url) else {
            return Provider::Generic;
        };
        PROVIDERS
            .iter()
            .find(|row| row.hosts.iter().any(|known| host_matches(&host, known)))
            .map_or(Provider::Generic, |row| row.provider)
    }
}

impl SendReasoning {
    /// Every policy.
    pub const ALL: [SendReasoning; 3] = [
        SendReasoning::Never,
        SendReasoning::ToolTurns,
        SendReasoning::Always,
    ];

    /// The name the `llm.send-reasoning` setting uses.
    pub fn name(self) -> &'static str {
        match self {
            SendReasoning::Never => "never",
            SendReasoning::ToolTurns => "tool-turns",
            SendReasoning::Always => "always",
        }
    }

    /// The policy called `name` (see [`name`](Self::name)).
    pub fn from_name(name: &str) -> Option<SendReasoning> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Whether an assistant message with (or without) tool calls carries its reasoning.
    pub fn sends(self, has_tool_calls: bool) -> bool {
        match self {
            SendReasoning::Never => false,
            SendReasoning::ToolTurns => has_tool_calls,
            SendReasoning::Always => true,
        }
    }
}

/// What one call does with reasoning: which messages send it ([`SendReasoning`]), and how
/// (the provider's field and what a message without reasoning sends).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReasoningPolicy {
    pub send: SendReasoning,
    pub field: ReasoningField,
    pub when_missing: WhenMissing,
    /// The call speaks a native protocol (`llm.api` not `:chat`), which reads the fields of
    /// [`NATIVE_KEYS`]; the chat protocol leaves them out.
    pub native: bool,
}

/// Fields of a stored assistant message that only a native protocol sends back (Anthropic's
/// thinking blocks, the Responses API's reasoning items, Gemini's thought signatures); each
/// protocol reads its own.
pub const NATIVE_KEYS: [&str; 3] = [
    super::anthropic::THINKING_KEY,
    super::responses::ITEMS_KEY,
    super::gemini::SIGNATURES_KEY,
];

impl ReasoningPolicy {
    /// Whether an outgoing assistant message leaves out its field `key`.
    pub fn drops(&self, key: &str) -> bool {
        REASONING_KEYS.contains(&key) || (!self.native && NATIVE_KEYS.contains(&key))
    }

    /// `provider`'s policy, with `send` in place of its default when given.
    pub fn of(provider: Provider, send: Option<SendReasoning>) -> Self {
        let row = provider.row();
        Self {
            send: send.unwrap_or(row.send),
            field: row.field,
            when_missing: row.when_missing,
            native: false,
        }
    }

    /// The reasoning field an outgoing assistant message carries, from what `message` holds:
    /// nothing when the policy does not send this message's reasoning, or when it has none and
    /// the provider does not want `""`.
    pub fn outgoing<'a>(
        &self,
        message: &'a Map<String, Value>,
    ) -> Option<(&'static str, Outgoing<'a>)> {
        let has_calls = message
            .get("tool_calls")
            .and_then(Value::as_array)
            .is_some_and(|calls| !calls.is_empty());
        self.outgoing_for(has_calls, message)
    }

    /// [`ReasoningPolicy::outgoing`] for a message held elsewhere: `has_calls` says whether it
    /// has tool calls, and `message` holds (at least) its [`REASONING_KEYS`] fields.
    pub fn outgoing_for<'a>(
        &self,
        has_calls: bool,
        message: &'a Map<String, Value>,
    ) -> Option<(&'static str, Outgoing<'a>)> {
        if !self.send.sends(has_calls) {
            return None;
        }
        let text = ["reasoning_content", "reasoning"]
            .into_iter()
            .filter_map(|key| message.get(key).and_then(Value::as_str))
            .find(|text| !text.is_empty());
        let details = message
            .get("reasoning_details")
            .filter(|details| details.as_array().is_some_and(|items| !items.is_empty()));
        match (self.field, details, text) {
            (ReasoningField::Details, Some(details), _) => {
                Some(("reasoning_details", Outgoing::Raw(details)))
            }
            (ReasoningField::Details, None, Some(text)) => {
                Some(("reasoning", Outgoing::Text(text)))
            }
            (ReasoningField::ReasoningContent, _, Some(text)) => {
                Some(("reasoning_content", Outgoing::Text(text)))
            }
            (field, _, None) => match self.when_missing {
                WhenMissing::Omit => None,
                WhenMissing::Empty => Some((field.text_key(), Outgoing::Text(""))),
            },
        }
    }
}

impl ReasoningField {
    /// The field that carries the text.
    fn text_key(self) -> &'static str {
        match self {
            ReasoningField::ReasoningContent => "reasoning_content",
            ReasoningField::Details => "reasoning",
        }
    }
}

/// The value of an outgoing reasoning field, borrowed from the stored message.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Outgoing<'a> {
    Text(&'a str),
    Raw(&'a Value),
}

// --- private: hosts

/// The lowercase host of a URL such as `https://user@API.DeepSeek.com:443/v1`, without a
/// trailing dot; `None` when there is none.
pub(super) fn host_of(url: &str) -> Option<String> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next()?;
    let host_port = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let host = if host_port.starts_with('[') {
        host_port.split_inclusive(']').next()?
    } else {
        host_port.split(':').next()?
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    (!host.is_empty()).then_some(host)
}

/// `host` is `known` or a subdomain of it.
pub(super) fn host_matches(host: &str, known: &str) -> bool {
    host.strip_suffix(known)
        .is_some_and(|prefix| prefix.is_empty() || prefix.ends_with('.'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hosts_pick_the_provider() {
        let cases = [
            ("https://api.deepseek.com", Provider::DeepSeek),
            ("https://api.deepseek.com/v1", Provider::DeepSeek),
            ("https://API.DeepSeek.com./v1/", Provider::DeepSeek),
            ("https://eu.api.deepseek.com/v1", Provider::DeepSeek),
            ("https://api.moonshot.ai/v1", Provider::Moonshot),
            ("https://api.moonshot.cn/v1", Provider::Moonshot),
            ("https://api.kimi.com/coding/v1", Provider::Moonshot),
            (
                "https://dashscope.aliyuncs.com/compatible-mode/v1",
                Provider::DashScope,
            ),
            (
                "https://dashscope-intl.aliyuncs.com/compatible-mode/v1",
                Provider::DashScope,
            ),
            (
                "https://dashscope-us.aliyuncs.com/compatible-mode/v1",
                Provider::DashScope,
            ),
            ("https://openrouter.ai/api/v1", Provider::OpenRouter),
            (
                "https://user:pw@openrouter.ai:443/api/v1",
                Provider::OpenRouter,
            ),
            ("openrouter.ai/api/v1", Provider::OpenRouter),
            ("https://api.openai.com/v1", Provider::Generic),
            ("http://localhost:8000/v1", Provider::Generic),
            ("http://127.0.0.1:11434/v1", Provider::Generic),
            ("http://[::1]:8080/v1", Provider::Generic),
            ("https://api.mistral.ai/v1", Provider::Generic),
            ("https://notopenrouter.ai/v1", Provider::Generic),
            ("https://openrouter.ai.example.com/v1", Provider::Generic),
            (
                "https://proxy.example.com/openrouter.ai/v1",
                Provider::Generic,
            ),
            ("https://deepseek.com/v1", Provider::Generic),
            ("", Provider::Generic),
        ];
        for (url, expected) in cases {
            assert_eq!(Provider::from_base_url(url), expected, "{url}");
        }
    }

    #[test]
    fn the_table_has_one_row_per_provider_with_generic_last_and_hostless() {
        let listed: Vec<Provider> = PROVIDERS.iter().map(|row| row.provider).collect();
        assert_eq!(listed, Provider::ALL);
        for provider in Provider::ALL {
            assert_eq!(provider.row().provider, provider);
            assert_eq!(Provider::from_name(provider.name()), Some(provider));
            let hostless = provider.row().hosts.is_empty();
            assert_eq!(hostless, provider == Provider::Generic, "{provider:?}");
        }
        for policy in SendReasoning::ALL {
            assert_eq!(SendReasoning::from_name(policy.name()), Some(policy));
        }
        assert_eq!(Provider::from_name("auto"), None);
        assert_eq!(SendReasoning::from_name("auto"), None);
    }

    #[test]
    fn models_md_cites_every_rows_source() {
        let page = include_str!("../../docs/src/models.md");
        for row in PROVIDERS {
            assert!(page.contains(row.source), "models.md lacks {}", row.source);
        }
    }

    /// The reasoning field each provider's default policy gives four messages: with reasoning
    /// (text and OpenRouter's items) and without, each without tool calls and with.
    #[test]
    fn each_providers_default_policy_per_message() {
        let details = json!([{"type": "reasoning.encrypted", "data": "x"}]);
        let message = |reasoning: bool, calls: bool| {
            let mut m = json!({"role": "assistant", "content": "a"});
            if reasoning {
                m["reasoning_content"] = json!("r");
                m["reasoning_details"] = details.clone();
            }
            if calls {
                m["tool_calls"] = json!([{"id": "c"}]);
            }
            m
        };
        let messages = [
            message(true, false),
            message(true, true),
            message(false, false),
            message(false, true),
        ];
        let content = |text: &str| Some(("reasoning_content", json!(text)));
        let cases = [
            (
                Provider::DeepSeek,
                [content("r"), content("r"), content(""), content("")],
            ),
            (
                Provider::Moonshot,
                [content("r"), content("r"), content(""), content("")],
            ),
            (Provider::DashScope, [None, content("r"), None, None]),
            (
                Provider::OpenRouter,
                [
                    None,
                    Some(("reasoning_details", details.clone())),
                    None,
                    None,
                ],
            ),
            (Provider::Generic, [None, None, None, None]),
        ];
        for (provider, expected) in cases {
            let policy = ReasoningPolicy::of(provider, None);
            for (i, message) in messages.iter().enumerate() {
                let got = policy
                    .outgoing(message.as_object().expect("an object"))
                    .map(|(key, value)| (key, serde_json::to_value(value).expect("JSON")));
                assert_eq!(got, expected[i], "{provider:?}, message {i}");
            }
        }
    }

    #[test]
    fn openrouter_falls_back_to_the_text_and_overrides_win() {
        let with_text = json!({"role": "assistant", "reasoning": "r", "tool_calls": [{}]});
        let message = with_text.as_object().expect("object");
        let openrouter = ReasoningPolicy::of(Provider::OpenRouter, None);
        assert_eq!(
            openrouter.outgoing(message),
            Some(("reasoning", Outgoing::Text("r")))
        );
        let never = ReasoningPolicy::of(Provider::DeepSeek, Some(SendReasoning::Never));
        assert_eq!(never.outgoing(message), None);
        let always = ReasoningPolicy::of(Provider::Generic, Some(SendReasoning::Always));
        assert_eq!(
            always.outgoing(message),
            Some(("reasoning_content", Outgoing::Text("r")))
        );
        let plain = json!({"role": "assistant", "content": "a"});
        assert_eq!(always.outgoing(plain.as_object().expect("object")), None);
    }
}
