//! Which wire protocol a model call speaks: OpenAI-compatible chat completions, Anthropic's
//! Messages API, OpenAI's Responses API or Google's Gemini API. The setting `llm.api` names one,
//! or `:auto`, which picks by the base URL's host (and, on OpenAI's, the model).
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
    /// `POST <base>/v1beta/models/<model>:streamGenerateContent`, Google's Gemini API: thought
    /// signatures returned.
    Gemini,
}

/// Models asked for in one Anthropic model list (the API's largest page; it lists fewer).
const ANTHROPIC_MODELS_LIMIT: u32 = 1000;

/// The hosts whose base URL makes `:auto` pick a protocol other than chat (OpenAI's only for
/// its reasoning models, see [`Api::auto`]).
const HOSTS: &[(&str, Api)] = &[
    ("api.anthropic.com", Api::Anthropic),
    ("api.openai.com", Api::Responses),
    ("generativelanguage.googleapis.com", Api::Gemini),
];

/// Models asked for in one Gemini model list.
const GEMINI_MODELS_PAGE: u32 = 1000;

impl Api {
    /// Every protocol.
    pub const ALL: [Api; 4] = [Api::Chat, Api::Anthropic, Api::Responses, Api::Gemini];

    /// The name the `llm.api` setting uses.
    pub fn name(self) -> &'static str {
        match self {
            Api::Chat => "chat",
            Api::Anthropic => "anthropic",
            Api::Responses => "responses",
            Api::Gemini => "gemini",
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
            // Gemini's OpenAI-compatible endpoint lives under .../openai on the same host.
            Api::Gemini if base_url.contains("/openai") => Api::Chat,
            api => api,
        }
    }

    /// Where a call of `model` in this protocol is posted, for `base_url` (trailing slashes
    /// removed). Anthropic's and Gemini's base URLs are the host's root (their variables'
    /// convention); one that already ends in the version gets the rest only. Only Gemini puts
    /// the model in the URL.
    pub fn call_url(self, base_url: &str, model: &str) -> String {
        let base = base_url.trim_end_matches('/');
        match self {
            Api::Chat => format!("{base}/chat/completions"),
            Api::Anthropic => format!("{}/messages", versioned(base, "/v1")),
            Api::Responses => format!("{base}/responses"),
            Api::Gemini => format!(
                "{}/models/{model}:streamGenerateContent?alt=sse",
                versioned(base, "/v1beta")
            ),
        }
    }

    /// Where this protocol lists its models, for `base_url`.
    pub fn models_url(self, base_url: &str) -> String {
        let base = base_url.trim_end_matches('/');
        match self {
            Api::Chat | Api::Responses => format!("{base}/models"),
            Api::Anthropic => format!(
                "{}/models?limit={ANTHROPIC_MODELS_LIMIT}",
                versioned(base, "/v1")
            ),
            Api::Gemini => format!(
                "{}/models?pageSize={GEMINI_MODELS_PAGE}",
                versioned(base, "/v1beta")
            ),
        }
    }
}

/// `base` with `version` (`/v1`, `/v1beta`) appended unless it ends with it.
fn versioned(base: &str, version: &str) -> String {
    if base.ends_with(version) {
        base.to_owned()
    } else {
        format!("{base}{version}")
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
        assert_eq!(Api::from_name("vertex"), None);
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
            (
                "https://generativelanguage.googleapis.com",
                Some("gemini-x"),
                Api::Gemini,
            ),
            (
                "https://generativelanguage.googleapis.com/v1beta/openai/",
                Some("gemini-x"),
                Api::Chat,
            ),
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
            assert_eq!(api.call_url(base, "m"), url, "{api:?} {base}");
        }
        assert_eq!(
            Api::Anthropic.models_url("https://h"),
            "https://h/v1/models?limit=1000"
        );
        assert_eq!(Api::Chat.models_url("https://h/v1"), "https://h/v1/models");
    }
}
