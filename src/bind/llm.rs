//! The `llm` namespace: the model client's settings, `llm.chat` and `llm.models` (the
//! endpoint's model list, `models`), the Lisp face of [`crate::llm`] (see docs/src/models.md).
//!
//! [`install`] declares the `llm.*` settings, with their defaults taken from `crate::llm`'s
//! constants and the `OPENAI_*` environment variables, and defines `llm.chat`. [`config`] reads
//! every setting when it is called and builds an [`LlmConfig`], so a `setq` applies to the next
//! model call; `llm.chat` calls it at the start of every call.
//!
//! `llm.chat` runs one streaming call through one [`LlmClient`] shared by the host. The call is
//! driven from Lisp: a small Fennel wrapper (`llm.fnl`) asks the Rust side for the next event (an async host
//! function, so only the calling coroutine waits) and calls `:on-event` itself. The callback
//! therefore runs in the caller's coroutine: it may wait on async functions, sees the caller's
//! session, is interrupted with it, and an error in it stops the call (the connection is closed
//! at once) and propagates unchanged. A failed call raises an error table
//! `{:kind :message :status :body :partial}` whose `tostring` is the [`LlmError`] message.
//!
//! The `llm.on-chunk` hook is different: the client calls it synchronously for every raw chunk,
//! from inside the stream ([`ChunkObserver`]). The observer looks `llm.on-chunk` up by name on
//! every chunk, so a redefinition applies mid-stream; when the setting is nil at the start of a
//! call there is no observer at all and the client does not even parse chunks for it. An error
//! in the hook is returned to the client, which logs it and goes on.
//!
//! Cancellation: dropping the Lisp evaluation (an interrupt) drops the call and closes the
//! connection. A softer cancel, which makes the call return `{:cancelled true}` with the text so
//! far, needs a token: whoever maps coroutines to prompts (the agent, with its sessions) registers
//! a [`CancelLookup`] with [`set_cancel_lookup`], and `llm.chat` asks it for the calling
//! coroutine's token.
//!
//! Deltas without Lisp: a streamed reply is mostly one-token text deltas, and handing each to
//! `:on-event` costs a trip into Lua. Whoever owns a callback that only forwards deltas to a
//! place Rust can reach (the agent's `session.delta-forwarder`) registers a [`DeltaShortcut`]
//! with [`set_delta_shortcut`]; when it recognises a call's `:on-event`, the call hands text and
//! thought deltas to the [`DeltaSink`] it returns instead, from a task that streams the reply,
//! as long as the sink says it is open (asked at each delta). Every other event, and every delta
//! once the sink has closed, still goes to `:on-event`, in order. With an `llm.on-chunk` hook,
//! which must run in the caller's coroutine, there is no shortcut.
//!
//! Compare with oml.clj: `oml.llm/stream-chat` called from `oml.agent/call-model`, settings as
//! plain defs, `on-chunk` as a var; the timeouts, retries, extra body and error data are new.

mod body;
mod call;
mod models;
mod protocol;

pub use models::{MODELS_CACHE_TTL, MODELS_FAILED_TTL, MODELS_WAIT};

use std::sync::Arc;
use std::time::Duration;

use mlua::{Lua, Value};
use serde_json::{Map, Value as Json, json};

use crate::cancel::CancelToken;
use crate::lisp::{Lisp, LispError, SettingDecl, to_lua};
use crate::llm::{
    Api, ChunkObserver, DEFAULT_CONNECT_TIMEOUT, DEFAULT_CONTENT_TIMEOUT, DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_RETRIES, DEFAULT_RETRY_BASE_DELAY, DEFAULT_RETRY_MAX_DELAY, EnvDefaults, LlmConfig,
    Provider, SendReasoning, StreamEvent,
};

/// `llm.fnl`, run with the `llm` table and the three host functions of [`call`]: defines
/// `llm.chat`.
static CHAT_BYTECODE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/prelude_llm.luac"));
const CHAT_FILE: &str = "src/bind/llm.fnl";

/// The setting that holds the raw-chunk hook.
pub const ON_CHUNK: &str = "llm.on-chunk";

/// The setting that names the provider whose reasoning rules apply (or `:auto`).
pub const PROVIDER: &str = "llm.provider";

/// The setting that names the wire protocol (or `:auto`).
pub const API: &str = "llm.api";

/// The setting that turns Anthropic's cache breakpoints on or off.
pub const PROMPT_CACHING: &str = "llm.prompt-caching";

/// The setting that says which earlier assistant messages send their reasoning back (or `:auto`).
pub const SEND_REASONING: &str = "llm.send-reasoning";

/// The value of [`PROVIDER`] and [`SEND_REASONING`] that leaves the choice to oml: the provider
/// by the base URL's host, the policy by the provider.
pub const AUTO: &str = "auto";

/// The longest duration a timeout or delay setting accepts, in seconds (about 31 years): large
/// enough to mean "never", small enough that adding it to the clock cannot overflow.
pub const MAX_SECONDS: f64 = 1e9;

/// Finds the cancel token of the work the calling coroutine does, if any (called with the state,
/// inside `llm.chat`, so `lua.current_thread()` is the caller).
pub type CancelLookup = Arc<dyn Fn(&Lua) -> Option<CancelToken> + Send + Sync>;

/// Recognises an `:on-event` callback whose deltas can be delivered without calling it (see
/// the module doc), and returns where they go.
pub type DeltaShortcut = Arc<dyn Fn(&Lua, &Value) -> Option<DeltaSink> + Send + Sync>;

/// Where a call delivers its text and thought deltas in place of `:on-event`.
pub struct DeltaSink {
    /// Whether deltas may still bypass `:on-event`; asked at each delta, so a change in Lisp
    /// (advice, a redefinition) applies from the next delta on.
    pub open: Box<dyn Fn(&Lua) -> bool + Send>,
    /// Takes one [`StreamEvent::TextDelta`] or [`StreamEvent::ThoughtDelta`].
    pub deliver: Box<dyn Fn(StreamEvent) + Send>,
}

/// Declare the `llm.*` settings and define `llm.chat`. Call it before the init files load, so
/// that they can `setq` the settings. Calling it again keeps the settings' values.
pub fn install(lisp: &Lisp) -> Result<(), LispError> {
    for decl in settings(|name| std::env::var(name).ok()) {
        lisp.declare_setting(&decl)?;
    }
    let lua = lisp.lua();
    let llm = crate::lisp::surface::namespace(lua, "llm")?;
    let (start, next, close) = call::host_functions(lua)?;
    lua.load(CHAT_BYTECODE)
        .set_name(format!("@{CHAT_FILE}"))
        .set_mode(mlua::chunk::ChunkMode::Binary)
        .call::<()>((llm, start, next, close))?;
    lisp.register_source(CHAT_FILE, include_str!("llm.fnl"));
    crate::lisp::define(lua, "llm", models::MODELS_FNS)?;
    crate::lisp::define(lua, "llm", protocol::PROTOCOL_FNS)?;
    Ok(())
}

/// Make `llm.chat` take its cancel token from `lookup` (replacing any earlier lookup). Without
/// one, or when it returns `None`, a call is only stopped by interrupting the Lisp evaluation.
pub fn set_cancel_lookup(lisp: &Lisp, lookup: CancelLookup) {
    lisp.lua().set_app_data(CancelSource(lookup));
}

/// Let `llm.chat` deliver deltas through `shortcut` (replacing any earlier one).
pub fn set_delta_shortcut(lisp: &Lisp, shortcut: DeltaShortcut) {
    lisp.lua().set_app_data(DeltaShortcutSource(shortcut));
}

/// The model client's settings as they are now, with the endpoint, key and model that are still
/// the environment's defaults taken from the variables of the protocol the call speaks, and a
/// native block's key kept at its own endpoint ([`EnvDefaults::settle`]).
///
/// Empty strings in `llm.api-key` and `llm.model` count as unset. When `llm.on-chunk` holds a
/// function, the config's observer calls whatever `llm.on-chunk` holds when each chunk arrives;
/// when it is nil, there is no observer. A setting that holds a value of the wrong type (a
/// `set` bypasses `setq`'s check) or an unusable duration is an error naming the setting.
pub fn config(lisp: &Lisp) -> Result<LlmConfig, LispError> {
    Ok(settle(settings_config(lisp)?))
}

/// `config` with its endpoint, key and model settled for the protocol it now speaks
/// ([`EnvDefaults::settle`]): call it after anything that changes the protocol (a request's own
/// `:api`).
pub(crate) fn settle(mut config: LlmConfig) -> LlmConfig {
    let env = |name: &str| std::env::var(name).ok();
    EnvDefaults::from_lookup(env).settle(&mut config, &env);
    config
}

/// The settings as they are, before [`settle`].
fn settings_config(lisp: &Lisp) -> Result<LlmConfig, LispError> {
    let non_empty = |value: Option<String>| value.filter(|value| !value.is_empty());
    let config = LlmConfig {
        base_url: lisp.setting("llm.base-url")?,
        api_key: non_empty(lisp.setting("llm.api-key")?),
        model: non_empty(lisp.setting("llm.model")?),
        provider: choice(lisp, PROVIDER, Provider::from_name)?,
        api: choice(lisp, API, Api::from_name)?,
        prompt_caching: lisp.setting(PROMPT_CACHING)?,
        send_reasoning: choice(lisp, SEND_REASONING, SendReasoning::from_name)?,
        extra_body: extra_body(lisp)?,
        headers: headers(lisp)?,
        connect_timeout: seconds(lisp, "llm.connect-timeout", false)?,
        idle_timeout: seconds(lisp, "llm.idle-timeout", false)?,
        content_timeout: seconds(lisp, "llm.content-timeout", false)?,
        max_retries: max_retries(lisp)?,
        retry_base_delay: seconds(lisp, "llm.retry-base-delay", true)?,
        retry_max_delay: seconds(lisp, "llm.retry-max-delay", true)?,
        on_chunk: on_chunk(lisp)?,
    };
    Ok(config)
}

/// The declarations [`install`] makes, with the environment read through `env` (an empty
/// variable counts as unset).
pub fn settings(env: impl Fn(&str) -> Option<String>) -> Vec<SettingDecl> {
    let defaults = EnvDefaults::from_lookup(env);
    let or_nil = |value: Option<String>| value.map_or(Json::Null, Json::String);
    // The values of a one-of setting that is `:auto` by default: `:auto` and `names`.
    let auto_or =
        |names: &[&str]| -> Json { std::iter::once(AUTO).chain(names.iter().copied()).collect() };
    vec![
        SettingDecl::new(
            "llm.base-url",
            "string",
            Json::String(defaults.base_url),
            "The model server's base URL: chat requests go to <base-url>/chat/completions, Responses ones to <base-url>/responses, Anthropic ones to <base-url>/v1/messages, Gemini ones to <base-url>/v1beta/models/<model>:streamGenerateContent (trailing slashes removed). Default: $OPENAI_BASE_URL; else with $ANTHROPIC_API_KEY (and no OPENAI_* variable) $ANTHROPIC_BASE_URL or https://api.anthropic.com; else with $GEMINI_API_KEY $GOOGLE_GEMINI_BASE_URL or https://generativelanguage.googleapis.com; else https://api.openai.com/v1. While it holds that default, a protocol chosen in llm.api that belongs to another provider takes that provider's own URL ($ANTHROPIC_BASE_URL or https://api.anthropic.com for :anthropic, $GOOGLE_GEMINI_BASE_URL or Google's for :gemini, $OPENAI_BASE_URL or OpenAI's for :chat and :responses).",
        ),
        SettingDecl::new(
            "llm.api-key",
            "string?",
            or_nil(defaults.api_key),
            "Sent as `Authorization: Bearer <key>` (chat, Responses), `x-api-key` (Anthropic) or `x-goog-api-key` (Gemini); nil sends none. Secret: never shown. Default: the key of the provider whose protocol the call speaks: $OPENAI_API_KEY for :chat and :responses, $ANTHROPIC_API_KEY for :anthropic, $GEMINI_API_KEY for :gemini (with llm.api :auto, the first that is set, in that order). A key from the environment is never sent to another provider's endpoint; a key set here goes wherever llm.base-url points.",
        )
        .secret(),
        SettingDecl::new(
            "llm.model",
            "string?",
            or_nil(defaults.model),
            "The model id, e.g. \"gpt-4o-mini\". Needed by the first model call, not at start-up. Default: $OPENAI_MODEL, else with the Anthropic or Gemini variables $ANTHROPIC_MODEL or $GEMINI_MODEL.",
        ),
        SettingDecl::new(
            API,
            auto_or(&Api::ALL.map(Api::name)),
            defaults.api.map_or(AUTO, Api::name),
            "The wire protocol: :chat (OpenAI-compatible chat completions), :anthropic (the Messages API: thinking sent back with its signatures, prompt caching), :responses (OpenAI's Responses API: encrypted reasoning kept across tool calls), :gemini (Google's API: thought signatures returned) or :auto, which picks :anthropic for api.anthropic.com, :responses for a reasoning model (o1, o3, o4, gpt-5, codex) on api.openai.com, :gemini for generativelanguage.googleapis.com (not its /openai endpoint), and :chat elsewhere. Default: the protocol of the ANTHROPIC_* or GEMINI_* variables when they name the endpoint, else :auto.",
        ),
        SettingDecl::new(
            PROMPT_CACHING,
            "boolean",
            true,
            "On the Anthropic protocol, put cache breakpoints on the tools, the system prompt and the last turn of every request, so that each request reads the one before it from the cache. false sends none.",
        ),
        SettingDecl::new(
            PROVIDER,
            auto_or(&Provider::ALL.map(Provider::name)),
            AUTO,
            "Whose rules the reasoning of earlier assistant messages follows on the way back: :auto (the default) picks by the host of llm.base-url (api.deepseek.com, api.moonshot.ai/.cn and api.kimi.com, dashscope*.aliyuncs.com, openrouter.ai, else :generic).",
        ),
        SettingDecl::new(
            SEND_REASONING,
            auto_or(&SendReasoning::ALL.map(SendReasoning::name)),
            AUTO,
            "Which earlier assistant messages send their reasoning back to the model: :never, :tool-turns (those with tool calls), :always, or :auto (the default: the provider's own rule, see llm.provider; nothing for :generic).",
        ),
        SettingDecl::new(
            "llm.extra-body",
            "table",
            json!({}),
            "Extra top-level fields for every request body, e.g. {:temperature 0.2 :max_tokens 4096}. They cannot replace model, messages, stream, stream_options or tools.",
        ),
        SettingDecl::new(
            "llm.headers",
            "table",
            json!({}),
            "Extra HTTP headers for every request, e.g. {:HTTP-Referer \"https://example.com\" :X-Title \"oml\"} for OpenRouter or {:api-key \"...\"} for Azure. Secret: /settings hides it.",
        )
        .secret(),
        SettingDecl::new(
            "llm.connect-timeout",
            "number",
            secs_json(DEFAULT_CONNECT_TIMEOUT),
            "Seconds connecting to the model server (TCP and TLS) may take; a timeout is retried like any connect failure.",
        ),
        SettingDecl::new(
            "llm.idle-timeout",
            "number",
            secs_json(DEFAULT_IDLE_TIMEOUT),
            "The longest silence, in seconds, once a request is sent: before the reply starts and between two pieces of it. Exceeding it fails the call without a retry.",
        ),
        SettingDecl::new(
            "llm.content-timeout",
            "number",
            secs_json(DEFAULT_CONTENT_TIMEOUT),
            "The longest time, in seconds, a reply may stream without content (text, reasoning or a tool call): keep-alive comments and empty deltas do not count. Exceeding it fails the call, keeping what arrived.",
        ),
        SettingDecl::new(
            "llm.max-retries",
            "integer",
            DEFAULT_MAX_RETRIES,
            "How many times a request that failed before any reply arrived (429, 5xx, connect errors) is sent again; 0 turns retries off.",
        ),
        SettingDecl::new(
            "llm.retry-base-delay",
            "number",
            secs_json(DEFAULT_RETRY_BASE_DELAY),
            "Seconds to wait before the first retry; each further retry waits twice as long.",
        ),
        SettingDecl::new(
            "llm.retry-max-delay",
            "number",
            secs_json(DEFAULT_RETRY_MAX_DELAY),
            "The longest wait before a retry, in seconds, whatever the backoff or the server's Retry-After says.",
        ),
        SettingDecl::new(
            ON_CHUNK,
            "function?",
            Json::Null,
            "A function called with every raw chunk of a model reply (the parsed JSON object), before oml folds it; nil (the default) costs nothing. It must not wait. An error in it is logged and the stream goes on.",
        ),
    ]
}

// --- private: settings

struct CancelSource(CancelLookup);

struct DeltaShortcutSource(DeltaShortcut);

/// A duration as JSON seconds: an integer when it is whole, so it reads `30`, not `30.0`.
fn secs_json(duration: Duration) -> Json {
    if duration.subsec_nanos() == 0 {
        duration.as_secs().into()
    } else {
        duration.as_secs_f64().into()
    }
}

/// A number setting as it is in Lisp (read directly: JSON cannot hold an infinity or a NaN).
fn number(lisp: &Lisp, name: &str) -> Result<f64, LispError> {
    // Checks the type, with the registry's message when it is wrong.
    lisp.setting::<Json>(name)?;
    match lisp.lookup(name)? {
        Value::Integer(value) => Ok(value as f64),
        Value::Number(value) => Ok(value),
        other => Err(LispError::Setting(format!(
            "{name} must be a number, got {}",
            other.type_name()
        ))),
    }
}

fn seconds(lisp: &Lisp, name: &str, zero_ok: bool) -> Result<Duration, LispError> {
    let value = number(lisp, name)?;
    let in_range =
        value.is_finite() && value <= MAX_SECONDS && (value > 0.0 || zero_ok && value == 0.0);
    if !in_range {
        let what = if zero_ok {
            "zero or more"
        } else {
            "more than zero"
        };
        return Err(LispError::Setting(format!(
            "{name} must be a number of seconds, {what} (at most {MAX_SECONDS}), got {value}"
        )));
    }
    Ok(Duration::from_secs_f64(value))
}

fn max_retries(lisp: &Lisp) -> Result<u32, LispError> {
    let value = number(lisp, "llm.max-retries")?;
    if !(0.0..=f64::from(u32::MAX)).contains(&value) {
        return Err(LispError::Setting(format!(
            "llm.max-retries must be zero or more, got {value}"
        )));
    }
    Ok(value as u32)
}

fn extra_body(lisp: &Lisp) -> Result<Map<String, Json>, LispError> {
    match lisp.setting::<Json>("llm.extra-body")? {
        Json::Object(fields) => Ok(fields),
        // An empty Lisp table may come back as an empty array.
        Json::Array(items) if items.is_empty() => Ok(Map::new()),
        other => Err(LispError::Setting(format!(
            "llm.extra-body must be a table of request fields such as {{:temperature 0.2}}, got {other}"
        ))),
    }
}

fn headers(lisp: &Lisp) -> Result<Vec<(String, String)>, LispError> {
    let fields = match lisp.setting::<Json>("llm.headers")? {
        Json::Object(fields) => fields,
        Json::Array(items) if items.is_empty() => Map::new(),
        other => {
            return Err(LispError::Setting(format!(
                "llm.headers must be a table of header names to strings, such as {{:X-Title \"oml\"}}, got {other}"
            )));
        }
    };
    fields
        .into_iter()
        .map(|(name, value)| match value {
            Json::String(value) => Ok((name, value)),
            other => Err(LispError::Setting(format!(
                "llm.headers: the value of {name} must be a string, got {other}"
            ))),
        })
        .collect()
}

/// A one-of setting as `None` for `:auto`, else what `parse` makes of it (the registry has
/// checked the value; a `set` that bypassed it is an error naming the setting).
fn choice<T>(
    lisp: &Lisp,
    name: &str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Option<T>, LispError> {
    let value: String = lisp.setting(name)?;
    if value == AUTO {
        return Ok(None);
    }
    parse(&value)
        .map(Some)
        .ok_or_else(|| LispError::Setting(format!("{name}: unknown value {value:?}")))
}

fn on_chunk(lisp: &Lisp) -> Result<Option<ChunkObserver>, LispError> {
    if lisp.function(ON_CHUNK)?.is_some() {
        return Ok(Some(chunk_observer(lisp.lua())));
    }
    match lisp.lookup(ON_CHUNK)? {
        Value::Nil => Ok(None),
        other => Err(LispError::Setting(format!(
            "{ON_CHUNK} must be a function or nil, got {}",
            other.type_name()
        ))),
    }
}

/// Calls whatever `llm.on-chunk` holds when a chunk arrives (nothing, if it became nil).
fn chunk_observer(lua: &Lua) -> ChunkObserver {
    // Weak: the observer lives in a call that Lua itself holds; it must not keep the state alive.
    let weak = lua.weak();
    Arc::new(move |chunk: &Json| {
        let Some(lua) = weak.try_upgrade() else {
            return Ok(());
        };
        let Some(lisp) = Lisp::from_lua(&lua) else {
            return Ok(());
        };
        let hook = match lisp.function(ON_CHUNK) {
            Ok(Some(hook)) => hook,
            Ok(None) => return Ok(()),
            Err(error) => return Err(error.to_string()),
        };
        let chunk = to_lua(&lua, chunk).map_err(|error| error_text(&error))?;
        hook.call::<()>(chunk).map_err(|error| error_text(&error))
    })
}

/// An error's message, without Lua's stack traceback.
fn error_text(error: &mlua::Error) -> String {
    LispError::from(error.clone()).to_string()
}
