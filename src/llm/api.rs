//! Which wire protocol a model call speaks: OpenAI-compatible chat completions, or Anthropic's
//! Messages API. The setting `llm.api` names one, or `:auto`, which picks by the base URL's
//! host.
//!
//! The transcript, the loop's events and the request that advice on `agent.build-request` sees
//! are the chat shape for every protocol; a protocol other than [`Api::Chat`] translates the
//! chat-shaped body on the way out and its stream on the way in (`super::anthropic`).
//!
//! It knows the protocols' names, hosts and paths; nothing of their bodies or of the network.

/// A model wire protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    /// `POST <base>/chat/completions`, OpenAI's shape, spoken by most servers.
    Chat,
    /// `POST <base>/v1/messages`, Anthropic's Messages API: thinking with signatures, prompt
    /// caching.
    Anthropic,
    /// `POST <base>/responses`, OpenAI's Responses API: reasoning kept across tool calls.
    Responses,
}

/// Models asked for in one Anthropic model list (the API's largest page; it lists fewer).
const ANTHROPIC_MODELS_LIMIT: u32 = 1000;

/// The hosts whose base URL makes `:auto` pick a protocol other than chat (OpenAI's only for
/// its reasoning models, see [`Api::auto`]).
const HOSTS: &[(&str, Api)] = &[
    ("api.anthropic.com", Api::Anthropic),
    ("api.openai.com", Api::Responses),
];

impl Api {
    /// Every protocol.
    pub const ALL: [Api; 3] = [Api::Chat, Api::Anthropic, Api::Responses];

    /// The name the `llm.api` setting uses.
    pub fn name(self) -> &'static str {
        match self {
            Api::Chat => "chat",
            Api::Anthropic => "anthropic",
            Api::Responses => "responses",
        }
    }

    /// The protocol called `name`.
    pub fn from_name(name: &str) -> Option<Api> {
        Self::ALL.into_iter().find(|api| api.name() == name)
    }

    /// What `:auto` picks for `base_url` and `model`: the protocol the host speaks natively
    /// (the Responses API on api.openai.com only for a reasoning model), else [`Api::Chat`].
    pub fn auto(base_url: &str, model: Option<&str>) -> Api {
        let Some(host) = super::provider::host_of(base_url) else {
            return Api::Chat;
        };
        let native = HOSTS
            .iter()
            .find(|(known, _)| super::provider::host_matches(&host, known))
            .map_or(Api::Chat, |(_, api)| *api);
        match native {
            Api::Responses if !model.is_some_and(super::responses::reasoning_model) => Api::Chat,
            api => api,
        }
    }

    /// Where a call of this protocol is posted, for `base_url` (trailing slashes removed). An
    /// Anthropic base URL is the host's root (`ANTHROPIC_BASE_URL`'s convention); one that
    /// already ends in `/v1` gets `/messages` only.
    pub fn call_url(self, base_url: &str) -> String {
        let base = base_url.trim_end_matches('/');
        match self {
            Api::Chat => format!("{base}/chat/completions"),
            Api::Anthropic => format!("{}/messages", versioned(base)),
            Api::Responses => format!("{base}/responses"),
        }
    }

    /// Where this protocol lists its models, for `base_url`.
    pub fn models_url(self, base_url: &str) -> String {
        let base = base_url.trim_end_matches('/');
        match self {
            Api::Chat | Api::Responses => format!("{base}/models"),
            Api::Anthropic => format!("{}/models?limit={ANTHROPIC_MODELS_LIMIT}", versioned(base)),
        }
    }
}

/// `base` with `/v1` appended unless it ends with it.
fn versioned(base: &str) -> String {
    if base.ends_with("/v1") {
        base.to_owned()
    } else {
        format!("{base}/v1")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for api in Api::ALL {
            assert_eq!(Api::from_name(api.name()), Some(api));
        }
        assert_eq!(Api::from_name("gemini"), None);
    }

    #[test]
    fn auto_picks_by_host_and_model() {
        let cases = [
            ("https://api.anthropic.com", None, Api::Anthropic),
            (
                "https://api.anthropic.com/v1/",
                Some("claude-x"),
                Api::Anthropic,
            ),
            ("https://api.openai.com/v1", Some("gpt-4o"), Api::Chat),
            ("https://api.openai.com/v1", None, Api::Chat),
            ("https://api.openai.com/v1", Some("o4-mini"), Api::Responses),
            ("https://openrouter.ai/api/v1", Some("o4-mini"), Api::Chat),
            ("https://notapi.anthropic.com.evil.test", None, Api::Chat),
            ("http://127.0.0.1:8080/v1", None, Api::Chat),
        ];
        for (base, model, api) in cases {
            assert_eq!(Api::auto(base, model), api, "{base} {model:?}");
        }
    }

    #[test]
    fn urls_follow_each_convention() {
        let cases = [
            (Api::Chat, "https://h/v1/", "https://h/v1/chat/completions"),
            (Api::Anthropic, "https://h", "https://h/v1/messages"),
            (Api::Anthropic, "https://h/", "https://h/v1/messages"),
            (Api::Anthropic, "https://h/v1", "https://h/v1/messages"),
            (
                Api::Anthropic,
                "http://p:1/proxy",
                "http://p:1/proxy/v1/messages",
            ),
        ];
        for (api, base, url) in cases {
            assert_eq!(api.call_url(base), url, "{api:?} {base}");
        }
        assert_eq!(
            Api::Anthropic.models_url("https://h"),
            "https://h/v1/models?limit=1000"
        );
        assert_eq!(Api::Chat.models_url("https://h/v1"), "https://h/v1/models");
    }
}
