//! The model client's settings as plain data, their defaults, and their environment variables.
//!
//! The Lisp layer owns the live settings (`llm.base-url`, `llm.model`, ...) and builds an
//! [`LlmConfig`] from them at every call, so a `setq` takes effect on the next call. This module
//! does not know about Lisp; it only knows the defaults and the three `OPENAI_*` variables that
//! give the defaults of the base URL, key and model.
//!
//! Compare with pi: `models.json` entries (`baseUrl`, API key, model id) plus the retry settings.
//! Compare with oml.clj: the `oml.llm/base-url`, `api-key`, `model` and `send-reasoning?` defs;
//! the provider, the reasoning policy, the timeouts, retries, extra body and on-chunk observer
//! are new.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use super::api::Api;
use super::provider::{Provider, ReasoningPolicy, SendReasoning};

/// Where requests go when neither the setting nor `OPENAI_BASE_URL` says otherwise.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// How long establishing a connection (TCP and TLS) may take before the attempt fails and is
/// retried.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest silence allowed once the request is sent: waiting for the response headers, and
/// between two reads of the stream. Generous because a local server may process a long prompt
/// before its first byte, and some reasoning models think silently.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// Retries after the first attempt (so at most 5 requests) for failures before the first delta.
pub const DEFAULT_MAX_RETRIES: u32 = 4;

/// How long a stream may go on without any content (text, reasoning, a tool call's pieces)
/// before the call fails: keep-alive comments and empty deltas reset the idle timeout but not
/// this one.
pub const DEFAULT_CONTENT_TIMEOUT: Duration = Duration::from_secs(600);
/// The first retry waits this long; each further retry doubles it.
pub const DEFAULT_RETRY_BASE_DELAY: Duration = Duration::from_millis(500);
/// No retry waits longer than this, whatever the backoff or the server's `Retry-After` says.
pub const DEFAULT_RETRY_MAX_DELAY: Duration = Duration::from_secs(30);

/// Gives the default base URL when set and non-empty.
pub const ENV_BASE_URL: &str = "OPENAI_BASE_URL";
/// Gives the default API key when set and non-empty.
pub const ENV_API_KEY: &str = "OPENAI_API_KEY";
/// Gives the default model when set and non-empty.
pub const ENV_MODEL: &str = "OPENAI_MODEL";

/// Sees every parsed chunk, raw, before it is folded (the `llm.on-chunk` hook). An `Err` is
/// logged as a warning and the stream goes on.
pub type ChunkObserver = Arc<dyn Fn(&Value) -> Result<(), String> + Send + Sync>;

/// Everything a call needs to know besides the request itself.
///
/// `Debug` never prints the API key (it shows `<hidden>`), so the config can be logged.
#[derive(Clone)]
pub struct LlmConfig {
    /// The OpenAI-compatible base URL; trailing slashes are removed and `/chat/completions`
    /// appended.
    pub base_url: String,
    /// Sent as `Authorization: Bearer <key>`; `None` (or empty) sends no `Authorization` header.
    pub api_key: Option<String>,
    /// The model id. Its absence fails the call, not the construction of the config.
    pub model: Option<String>,
    /// Whose rules the reasoning of earlier assistant messages follows on the way back; `None`
    /// (`llm.provider` `:auto`) means the one [`Provider::from_base_url`] finds.
    pub provider: Option<Provider>,
    /// The wire protocol (`llm.api`); `None` picks by the base URL's host and the model
    /// ([`Api::auto`]).
    pub api: Option<Api>,
    /// Anthropic cache breakpoints on the system prompt, the tools and the last turn
    /// (`llm.prompt-caching`).
    pub prompt_caching: bool,
    /// Which earlier assistant messages send their reasoning back; `None`
    /// (`llm.send-reasoning` `:auto`) means the provider's default (see
    /// [`PROVIDERS`](super::PROVIDERS)).
    pub send_reasoning: Option<SendReasoning>,
    /// Extra top-level request fields (`temperature`, `max_tokens`, `reasoning`, provider
    /// routing, ...). They cannot replace the fields the client owns, see
    /// [`RESERVED_BODY_KEYS`](super::RESERVED_BODY_KEYS).
    pub extra_body: Map<String, Value>,
    /// Extra HTTP headers of every request, in order (OpenRouter's `HTTP-Referer` and `X-Title`,
    /// Azure's `api-key`). They may hold secrets: `Debug` shows their names only.
    pub headers: Vec<(String, String)>,
    /// See [`DEFAULT_CONNECT_TIMEOUT`].
    pub connect_timeout: Duration,
    /// See [`DEFAULT_IDLE_TIMEOUT`].
    pub idle_timeout: Duration,
    /// See [`DEFAULT_CONTENT_TIMEOUT`].
    pub content_timeout: Duration,
    /// See [`DEFAULT_MAX_RETRIES`].
    pub max_retries: u32,
    /// See [`DEFAULT_RETRY_BASE_DELAY`].
    pub retry_base_delay: Duration,
    /// See [`DEFAULT_RETRY_MAX_DELAY`].
    pub retry_max_delay: Duration,
    /// See [`ChunkObserver`]. `None` costs nothing per chunk.
    pub on_chunk: Option<ChunkObserver>,
}

impl Default for LlmConfig {
    /// The built-in defaults, ignoring the environment.
    fn default() -> Self {
        Self {
            base_url: DEFAULT_BASE_URL.to_owned(),
            api_key: None,
            model: None,
            provider: None,
            api: None,
            prompt_caching: true,
            send_reasoning: None,
            extra_body: Map::new(),
            headers: Vec::new(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            content_timeout: DEFAULT_CONTENT_TIMEOUT,
            max_retries: DEFAULT_MAX_RETRIES,
            retry_base_delay: DEFAULT_RETRY_BASE_DELAY,
            retry_max_delay: DEFAULT_RETRY_MAX_DELAY,
            on_chunk: None,
        }
    }
}

impl LlmConfig {
    /// The defaults, with base URL, key and model taken from `OPENAI_BASE_URL`,
    /// `OPENAI_API_KEY` and `OPENAI_MODEL` when they are set and non-empty.
    pub fn from_env() -> Self {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Like [`from_env`](Self::from_env) with the variables looked up by `lookup`, so tests and
    /// callers with their own environment map need not touch the process environment.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let env = EnvDefaults::from_lookup(lookup);
        Self {
            base_url: env.base_url,
            api_key: env.api_key,
            model: env.model,
            api: env.api,
            ..Self::default()
        }
    }

    pub fn provider(&self) -> Provider {
        self.provider
            .unwrap_or_else(|| Provider::from_base_url(&self.base_url))
    }

    /// What this call does with reasoning: the provider's field, and the `send_reasoning` field
    /// when set, else the provider's default policy.
    pub fn reasoning_policy(&self) -> ReasoningPolicy {
        let mut policy = ReasoningPolicy::of(self.provider(), self.send_reasoning);
        policy.native = self.api() != Api::Chat;
        policy
    }

    /// The wire protocol: `llm.api`, else what `:auto` picks for the base URL and `llm.model`
    /// ([`Api::auto`]).
    pub fn api(&self) -> Api {
        self.api
            .unwrap_or_else(|| Api::auto(&self.base_url, self.model.as_deref()))
    }

    /// This config with its protocol fixed for a call of `model` (a request's own model, which
    /// `:auto` looks at in place of `llm.model`).
    pub fn pinned(mut self, model: Option<&str>) -> Self {
        let model = model.or(self.model.as_deref());
        self.api = Some(self.api.unwrap_or_else(|| Api::auto(&self.base_url, model)));
        self
    }
}

/// The endpoint the environment names: the `OPENAI_*` block when `OPENAI_API_KEY` or
/// `OPENAI_BASE_URL` is set; else the `ANTHROPIC_*` block (base URL, key, model, and the
/// Anthropic protocol) when `ANTHROPIC_API_KEY` is set; else the Gemini block
/// (`GEMINI_API_KEY`, `GOOGLE_GEMINI_BASE_URL`, `GEMINI_MODEL`); else the `OPENAI_*` defaults.
/// One block is read whole, never a mix: a key is only ever sent to the endpoint it came with.
#[derive(Clone, Debug, PartialEq)]
pub struct EnvDefaults {
    pub base_url: String,
    pub api_key: Option<String>,
    pub model: Option<String>,
    /// `Some` when the block fixes the protocol (the Anthropic one does: a proxy named by
    /// `ANTHROPIC_BASE_URL` speaks it whatever its host).
    pub api: Option<Api>,
    /// Whether the base URL came from the block's variable (a gateway or proxy the user named)
    /// rather than being the provider's own default endpoint.
    pub url_from_env: bool,
}

/// Whose block of environment variables a protocol takes its key, URL and model from: chat
/// completions and the Responses API are OpenAI's (and every compatible server's), the other
/// two have their own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyFamily {
    /// `OPENAI_API_KEY`, `OPENAI_BASE_URL`, `OPENAI_MODEL`.
    OpenAi,
    /// `ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL`, `ANTHROPIC_MODEL`.
    Anthropic,
    /// `GEMINI_API_KEY`, `GOOGLE_GEMINI_BASE_URL`, `GEMINI_MODEL`.
    Gemini,
}

impl KeyFamily {
    /// The family whose variables `api` reads.
    pub fn of(api: Api) -> Self {
        match api {
            Api::Chat | Api::Responses => KeyFamily::OpenAi,
            Api::Anthropic => KeyFamily::Anthropic,
            Api::Gemini => KeyFamily::Gemini,
        }
    }
}

impl EnvDefaults {
    /// Read through `lookup`; an empty variable counts as unset.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let non_empty = |name: &str| lookup(name).filter(|value| !value.is_empty());
        let openai = non_empty(ENV_API_KEY).is_some() || non_empty(ENV_BASE_URL).is_some();
        if !openai {
            for family in [KeyFamily::Anthropic, KeyFamily::Gemini] {
                let block = Self::block(family, &lookup);
                if block.api_key.is_some() {
                    return block;
                }
            }
        }
        Self::block(KeyFamily::OpenAi, &lookup)
    }

    /// The block of `family` alone, whether or not its key is set: its base URL (the
    /// variable's, else the family's default), key and model (a native family's model variable,
    /// else `OPENAI_MODEL`), and the protocol a native family fixes.
    pub fn block(family: KeyFamily, lookup: &impl Fn(&str) -> Option<String>) -> Self {
        use super::{anthropic, gemini};
        let non_empty = |name: &str| lookup(name).filter(|value| !value.is_empty());
        let (key, base, default_base, model, api) = match family {
            KeyFamily::OpenAi => {
                let named = non_empty(ENV_BASE_URL);
                return Self {
                    url_from_env: named.is_some(),
                    base_url: named.unwrap_or_else(|| DEFAULT_BASE_URL.to_owned()),
                    api_key: non_empty(ENV_API_KEY),
                    model: non_empty(ENV_MODEL),
                    api: None,
                };
            }
            KeyFamily::Anthropic => (
                anthropic::ENV_API_KEY,
                anthropic::ENV_BASE_URL,
                anthropic::DEFAULT_BASE_URL,
                anthropic::ENV_MODEL,
                Api::Anthropic,
            ),
            KeyFamily::Gemini => (
                gemini::ENV_API_KEY,
                gemini::ENV_BASE_URL,
                gemini::DEFAULT_BASE_URL,
                gemini::ENV_MODEL,
                Api::Gemini,
            ),
        };
        let named = non_empty(base);
        Self {
            url_from_env: named.is_some(),
            base_url: named.unwrap_or_else(|| default_base.to_owned()),
            api_key: non_empty(key),
            model: non_empty(model).or_else(|| non_empty(ENV_MODEL)),
            api: Some(api),
        }
    }

    /// The family this block's variables belong to.
    pub fn family(&self) -> KeyFamily {
        self.api.map_or(KeyFamily::OpenAi, KeyFamily::of)
    }

    /// Give `config` the endpoint of the protocol it speaks: when that protocol (`llm.api`,
    /// or what `:auto` picks) reads another family's variables than this block, and the
    /// block's URL is its provider's own endpoint (no `*_BASE_URL` named a gateway), the base
    /// URL, key and model that are still this block's defaults are replaced by that family's
    /// own (`ANTHROPIC_*` for `:anthropic`, `GEMINI_*` for `:gemini`, `OPENAI_*` for `:chat`
    /// and `:responses`). So `(setq llm.api :anthropic)` with both `OPENAI_API_KEY` and
    /// `ANTHROPIC_API_KEY` set sends the Anthropic key to Anthropic's endpoint, and no key at
    /// all where that family has none. A value set in Lisp (one that differs from this
    /// block's) is kept, and a URL set in Lisp gets no key from the environment (only
    /// `llm.api-key` sends one there); and a gateway
    /// named by the block's variable keeps its key, as it always did. Then
    /// [`confine`](Self::confine).
    pub fn settle(&self, config: &mut LlmConfig, lookup: &impl Fn(&str) -> Option<String>) {
        let family = KeyFamily::of(config.api());
        if family != self.family() && !self.url_from_env {
            let own = Self::block(family, lookup);
            let same_url = |a: &str, b: &str| a.trim_end_matches('/') == b.trim_end_matches('/');
            let own_endpoint = same_url(&config.base_url, &self.base_url);
            if own_endpoint {
                config.base_url = own.base_url;
            }
            // The family's key goes to the family's endpoint only: to a URL set in Lisp, only
            // a key set in Lisp goes.
            if config.api_key == self.api_key {
                config.api_key = own.api_key.filter(|_| own_endpoint);
            }
            if config.model == self.model && own.model.is_some() {
                config.model = own.model;
            }
            // The protocol is the one the user chose; pin it, so the new base URL's host does
            // not make `:auto` pick another.
            config.api = Some(config.api());
            return;
        }
        self.confine(config);
    }

    /// Keep a native block's key and protocol at the endpoint they came with: when `config`
    /// points at another base URL (an init file's local server, say) while its key and protocol
    /// are still this block's defaults, the key is not sent there and the protocol goes back to
    /// `:auto`. The `OPENAI_*` block is left as it always was: its key goes wherever
    /// `llm.base-url` points, which gateways configured by `OPENAI_API_KEY` rely on.
    pub fn confine(&self, config: &mut LlmConfig) {
        if self.api.is_none()
            || config.base_url.trim_end_matches('/') == self.base_url.trim_end_matches('/')
        {
            return;
        }
        if config.api_key.is_some() && config.api_key == self.api_key {
            config.api_key = None;
        }
        if config.api.is_some() && config.api == self.api {
            config.api = None;
        }
    }
}

impl fmt::Debug for LlmConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlmConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<hidden>"))
            .field("model", &self.model)
            .field("provider", &self.provider)
            .field("api", &self.api)
            .field("prompt_caching", &self.prompt_caching)
            .field("send_reasoning", &self.send_reasoning)
            .field("extra_body", &self.extra_body)
            .field(
                "headers",
                &self.headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .field("connect_timeout", &self.connect_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("content_timeout", &self.content_timeout)
            .field("max_retries", &self.max_retries)
            .field("retry_base_delay", &self.retry_base_delay)
            .field("retry_max_delay", &self.retry_max_delay)
            .field("on_chunk", &self.on_chunk.as_ref().map(|_| "<fn>"))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_names_one_endpoint_whole() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            EnvDefaults::from_lookup(move |name| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_owned())
            })
        };
        let anthropic = env(&[("ANTHROPIC_API_KEY", "ak"), ("ANTHROPIC_MODEL", "claude-x")]);
        assert_eq!(anthropic.base_url, "https://api.anthropic.com");
        assert_eq!(anthropic.api_key.as_deref(), Some("ak"));
        assert_eq!(anthropic.model.as_deref(), Some("claude-x"));
        assert_eq!(anthropic.api, Some(Api::Anthropic));
        let both = env(&[("ANTHROPIC_API_KEY", "ak"), ("OPENAI_API_KEY", "ok")]);
        assert_eq!(both.api_key.as_deref(), Some("ok"));
        assert_eq!(both.base_url, DEFAULT_BASE_URL);
        assert_eq!(both.api, None);
        let proxy = env(&[
            ("ANTHROPIC_API_KEY", "ak"),
            ("ANTHROPIC_BASE_URL", "http://p:1"),
        ]);
        assert_eq!(proxy.base_url, "http://p:1");
        assert_eq!(env(&[("ANTHROPIC_API_KEY", "")]).api_key, None);
        let gemini = env(&[("GEMINI_API_KEY", "gk"), ("GEMINI_MODEL", "gemini-x")]);
        assert_eq!(gemini.base_url, "https://generativelanguage.googleapis.com");
        assert_eq!(gemini.api, Some(Api::Gemini));
        assert_eq!(gemini.model.as_deref(), Some("gemini-x"));
        let first = env(&[("GEMINI_API_KEY", "gk"), ("ANTHROPIC_API_KEY", "ak")]);
        assert_eq!(first.api_key.as_deref(), Some("ak"));
    }

    #[test]
    fn a_native_blocks_key_stays_at_its_endpoint() {
        let env = EnvDefaults::from_lookup(|name| {
            (name == "ANTHROPIC_API_KEY").then(|| "sk-ant".to_owned())
        });
        let at = |base_url: &str| {
            let mut config = LlmConfig {
                base_url: base_url.into(),
                api_key: env.api_key.clone(),
                api: env.api,
                ..LlmConfig::default()
            };
            env.confine(&mut config);
            config
        };
        let home = at("https://api.anthropic.com/");
        assert_eq!(home.api_key.as_deref(), Some("sk-ant"));
        assert_eq!(home.api, Some(Api::Anthropic));
        let local = at("http://localhost:8080/v1");
        assert_eq!(
            local.api_key, None,
            "the Anthropic key is not sent to a local server"
        );
        assert_eq!(local.api, None);
        let openai =
            EnvDefaults::from_lookup(|name| (name == "OPENAI_API_KEY").then(|| "sk".to_owned()));
        let mut gateway = LlmConfig {
            base_url: "https://openrouter.ai/api/v1".into(),
            api_key: Some("sk".into()),
            ..LlmConfig::default()
        };
        openai.confine(&mut gateway);
        assert_eq!(gateway.api_key.as_deref(), Some("sk"));
    }

    #[test]
    fn a_chosen_protocol_takes_its_own_providers_key_and_url() {
        let vars: &[(&str, &str)] = &[
            ("OPENAI_API_KEY", "sk-openai"),
            ("ANTHROPIC_API_KEY", "sk-ant"),
            ("GEMINI_API_KEY", "gk"),
            ("ANTHROPIC_MODEL", "claude-x"),
        ];
        let lookup = |name: &str| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        };
        let env = EnvDefaults::from_lookup(lookup);
        assert_eq!(env.family(), KeyFamily::OpenAi);
        let settled = |api: Option<Api>, base_url: Option<&str>, key: Option<&str>| {
            let mut config = LlmConfig {
                base_url: base_url.map_or(env.base_url.clone(), str::to_owned),
                api_key: key.map_or(env.api_key.clone(), |key| Some(key.to_owned())),
                model: env.model.clone(),
                api,
                ..LlmConfig::default()
            };
            env.settle(&mut config, &lookup);
            config
        };
        let anthropic = settled(Some(Api::Anthropic), None, None);
        assert_eq!(anthropic.base_url, "https://api.anthropic.com");
        assert_eq!(anthropic.api_key.as_deref(), Some("sk-ant"));
        assert_eq!(anthropic.model.as_deref(), Some("claude-x"));
        assert_eq!(anthropic.api, Some(Api::Anthropic));
        let gemini = settled(Some(Api::Gemini), None, None);
        assert_eq!(gemini.api_key.as_deref(), Some("gk"));
        assert_eq!(gemini.base_url, "https://generativelanguage.googleapis.com");
        // What the user set is kept: their key goes where they said.
        let own_key = settled(Some(Api::Anthropic), None, Some("mine"));
        assert_eq!(own_key.api_key.as_deref(), Some("mine"));
        // A URL set in Lisp gets no key from the environment: only one set in Lisp.
        let proxy = settled(Some(Api::Anthropic), Some("http://proxy:1"), None);
        assert_eq!(proxy.base_url, "http://proxy:1");
        assert_eq!(proxy.api_key, None);
        // The OpenAI family keeps its block, gateways included.
        let chat = settled(Some(Api::Chat), None, None);
        assert_eq!(chat.api_key.as_deref(), Some("sk-openai"));
        // No key of the chosen family: none is sent, rather than another provider's.
        let only_openai = |name: &str| (name == "OPENAI_API_KEY").then(|| "sk-openai".to_owned());
        let env = EnvDefaults::from_lookup(only_openai);
        let mut config = LlmConfig {
            api_key: env.api_key.clone(),
            api: Some(Api::Anthropic),
            ..LlmConfig::default()
        };
        env.settle(&mut config, &only_openai);
        assert_eq!(config.api_key, None);
        assert_eq!(config.base_url, "https://api.anthropic.com");
    }

    #[test]
    fn debug_never_shows_the_api_key() {
        let config = LlmConfig {
            api_key: Some("sk-very-secret".into()),
            ..LlmConfig::default()
        };
        let shown = format!("{config:?}");
        assert!(!shown.contains("sk-very-secret"), "{shown}");
        assert!(shown.contains("<hidden>"), "{shown}");
    }

    #[test]
    fn the_policy_follows_the_base_url_unless_overridden() {
        let at = |base_url: &str| LlmConfig {
            base_url: base_url.into(),
            ..LlmConfig::default()
        };
        assert_eq!(LlmConfig::default().provider(), Provider::Generic);
        let deepseek = at("https://api.deepseek.com/v1");
        assert_eq!(deepseek.provider(), Provider::DeepSeek);
        assert_eq!(deepseek.reasoning_policy().send, SendReasoning::Always);
        let forced = LlmConfig {
            provider: Some(Provider::OpenRouter),
            send_reasoning: Some(SendReasoning::Never),
            ..deepseek
        };
        assert_eq!(
            forced.reasoning_policy(),
            ReasoningPolicy::of(Provider::OpenRouter, Some(SendReasoning::Never))
        );
    }

    #[test]
    fn the_environment_gives_defaults_and_empty_means_unset() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(key, _)| *key == name)
                    .map(|(_, value)| value.to_string())
            }
        };
        let set = LlmConfig::from_lookup(env(&[
            ("OPENAI_BASE_URL", "http://localhost:8080/v1"),
            ("OPENAI_API_KEY", "k"),
            ("OPENAI_MODEL", "m"),
        ]));
        assert_eq!(set.base_url, "http://localhost:8080/v1");
        assert_eq!(set.api_key.as_deref(), Some("k"));
        assert_eq!(set.model.as_deref(), Some("m"));

        let empty = LlmConfig::from_lookup(env(&[
            ("OPENAI_BASE_URL", ""),
            ("OPENAI_API_KEY", ""),
            ("OPENAI_MODEL", ""),
        ]));
        assert_eq!(empty.base_url, DEFAULT_BASE_URL);
        assert_eq!(empty.api_key, None);
        assert_eq!(empty.model, None);
    }
}
