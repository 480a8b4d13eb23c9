//! The `llm` namespace: the model client's settings and `llm.chat`, the Lisp face of
//! [`crate::llm`] (see docs/src/models.md).
//!
//! [`install`] declares the `llm.*` settings, with their defaults taken from `crate::llm`'s
//! constants and the `OPENAI_*` environment variables, and defines `llm.chat`. [`config`] reads
//! every setting when it is called and builds an [`LlmConfig`], so a `setq` applies to the next
//! model call; `llm.chat` calls it at the start of every call.
//!
//! `llm.chat` runs one streaming call through one [`LlmClient`] shared by the host. The call is
//! driven from Lisp: a small Lua wrapper asks the Rust side for the next event (an async host
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

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use mlua::{Lua, MultiValue, Table, UserData, UserDataRef, Value};
use serde_json::{Map, Value as Json, json};
use tokio::sync::mpsc;

use crate::cancel::CancelToken;
use crate::lisp::{Lisp, LispError, SettingDecl, from_lua, to_lua};
use crate::llm::{
    ChatOutcome, ChatRequest, ChunkObserver, DEFAULT_BASE_URL, DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_RETRIES, DEFAULT_RETRY_BASE_DELAY, DEFAULT_RETRY_MAX_DELAY,
    ENV_API_KEY, ENV_BASE_URL, ENV_MODEL, LlmClient, LlmConfig, LlmError, StreamEvent, ToolSpec,
};

/// The setting that holds the raw-chunk hook.
pub const ON_CHUNK: &str = "llm.on-chunk";

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
    let llm: Table = lua.globals().get("llm")?;
    let client = Arc::new(LlmClient::new());
    let start =
        lua.create_function(move |lua, (request, opts): (Value, Value)| {
            match start_call(lua, &client, request, opts) {
                Ok(call) => Ok((Some(call), None)),
                Err(problem) => Ok((None, Some(problem))),
            }
        })?;
    let next = crate::lisp::create_async_function(lua, |lua, call: UserDataRef<ChatCall>| {
        let call = call.clone();
        async move { call.next(&lua).await }
    })?;
    let close = lua.create_function(|_, call: UserDataRef<ChatCall>| {
        call.close();
        Ok(())
    })?;
    lua.load(GLUE)
        .set_name("=[llm.chat]")
        .call::<()>((llm, start, next, close, CHAT_DOC))?;
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

/// The model client's settings as they are now.
///
/// Empty strings in `llm.api-key` and `llm.model` count as unset. When `llm.on-chunk` holds a
/// function, the config's observer calls whatever `llm.on-chunk` holds when each chunk arrives;
/// when it is nil, there is no observer. A setting that holds a value of the wrong type (a
/// `set` bypasses `setq`'s check) or an unusable duration is an error naming the setting.
pub fn config(lisp: &Lisp) -> Result<LlmConfig, LispError> {
    let non_empty = |value: Option<String>| value.filter(|value| !value.is_empty());
    Ok(LlmConfig {
        base_url: lisp.setting("llm.base-url")?,
        api_key: non_empty(lisp.setting("llm.api-key")?),
        model: non_empty(lisp.setting("llm.model")?),
        send_reasoning: lisp.setting("llm.send-reasoning?")?,
        extra_body: extra_body(lisp)?,
        connect_timeout: seconds(lisp, "llm.connect-timeout", false)?,
        idle_timeout: seconds(lisp, "llm.idle-timeout", false)?,
        max_retries: max_retries(lisp)?,
        retry_base_delay: seconds(lisp, "llm.retry-base-delay", true)?,
        retry_max_delay: seconds(lisp, "llm.retry-max-delay", true)?,
        on_chunk: on_chunk(lisp)?,
    })
}

/// The declarations [`install`] makes, with the environment read through `env` (an empty
/// variable counts as unset).
pub fn settings(env: impl Fn(&str) -> Option<String>) -> Vec<SettingDecl> {
    let env = |name: &str| env(name).filter(|value| !value.is_empty());
    let or_nil = |value: Option<String>| value.map_or(Json::Null, Json::String);
    let decl = |name, doc, ty: &str, default, secret, line| SettingDecl {
        name,
        doc,
        ty: ty.into(),
        default,
        secret,
        file: file!(),
        line,
    };
    vec![
        decl(
            "llm.base-url",
            "The OpenAI-compatible base URL; requests go to <base-url>/chat/completions (trailing slashes removed). Default: $OPENAI_BASE_URL, else https://api.openai.com/v1.",
            "string",
            Json::String(env(ENV_BASE_URL).unwrap_or_else(|| DEFAULT_BASE_URL.to_owned())),
            false,
            line!(),
        ),
        decl(
            "llm.api-key",
            "Sent as `Authorization: Bearer <key>`; nil sends no Authorization header. Secret: never shown. Default: $OPENAI_API_KEY.",
            "string?",
            or_nil(env(ENV_API_KEY)),
            true,
            line!(),
        ),
        decl(
            "llm.model",
            "The model id, e.g. \"gpt-4o-mini\". Needed by the first model call, not at start-up. Default: $OPENAI_MODEL.",
            "string?",
            or_nil(env(ENV_MODEL)),
            false,
            line!(),
        ),
        decl(
            "llm.send-reasoning?",
            "Keep the streamed reasoning in the assistant message (as reasoning_content), so the model sees it on the next turn. Some providers reject it.",
            "boolean",
            Json::Bool(false),
            false,
            line!(),
        ),
        decl(
            "llm.extra-body",
            "Extra top-level fields for every request body, e.g. {:temperature 0.2 :max_tokens 4096}. They cannot replace model, messages, stream, stream_options or tools.",
            "table",
            json!({}),
            false,
            line!(),
        ),
        decl(
            "llm.connect-timeout",
            "Seconds connecting to the model server (TCP and TLS) may take; a timeout is retried like any connect failure.",
            "number",
            secs_json(DEFAULT_CONNECT_TIMEOUT),
            false,
            line!(),
        ),
        decl(
            "llm.idle-timeout",
            "The longest silence, in seconds, once a request is sent: before the reply starts and between two pieces of it. Exceeding it fails the call without a retry.",
            "number",
            secs_json(DEFAULT_IDLE_TIMEOUT),
            false,
            line!(),
        ),
        decl(
            "llm.max-retries",
            "How many times a request that failed before any reply arrived (429, 5xx, connect errors) is sent again; 0 turns retries off.",
            "integer",
            DEFAULT_MAX_RETRIES.into(),
            false,
            line!(),
        ),
        decl(
            "llm.retry-base-delay",
            "Seconds to wait before the first retry; each further retry waits twice as long.",
            "number",
            secs_json(DEFAULT_RETRY_BASE_DELAY),
            false,
            line!(),
        ),
        decl(
            "llm.retry-max-delay",
            "The longest wait before a retry, in seconds, whatever the backoff or the server's Retry-After says.",
            "number",
            secs_json(DEFAULT_RETRY_MAX_DELAY),
            false,
            line!(),
        ),
        decl(
            ON_CHUNK,
            "A function called with every raw chunk of a model reply (the parsed JSON object), before oml folds it; nil (the default) costs nothing. It must not wait. An error in it is logged and the stream goes on.",
            "function?",
            Json::Null,
            false,
            line!(),
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

/// An error's message without Lua's stack traceback.
fn error_text(error: &mlua::Error) -> String {
    let text = LispError::from(error.clone()).to_string();
    match text.find("\nstack traceback:") {
        Some(end) => text[..end].to_owned(),
        None => text,
    }
}

// --- private: one call

type CallFuture = Pin<Box<dyn Future<Output = Result<ChatOutcome, LlmError>> + Send>>;

/// A running `llm.chat` call, as the Lua wrapper holds it. Dropping it (`close`, or the garbage
/// collector after an interrupt) drops the request, which closes the connection.
#[derive(Clone)]
struct ChatCall(Arc<Mutex<Option<CallState>>>);

impl UserData for ChatCall {}

struct CallState {
    /// `None` once the call has returned.
    future: Option<CallFuture>,
    events: mpsc::UnboundedReceiver<StreamEvent>,
    /// The call's result, kept until the events sent before it have been delivered.
    result: Option<Result<ChatOutcome, LlmError>>,
}

/// The most events one step of a call hands to Lua; the rest wait for the next step.
const EVENTS_PER_STEP: usize = 256;

/// What the Lua wrapper gets from one `next`.
enum Step {
    Event(StreamEvent),
    Done(Result<ChatOutcome, LlmError>),
}

impl ChatCall {
    fn close(&self) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
    }

    /// The next events, or the result once every event has been delivered: `("events", [table
    /// ...])` with every event already queued (at least one, at most [`EVENTS_PER_STEP`]),
    /// `("ok", outcome)` or `("error", error)`. Taking what is queued in one step spares a
    /// streaming reply one trip through the async call machinery per token.
    async fn next(&self, lua: &Lua) -> mlua::Result<MultiValue> {
        let taken = self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
        let Some(mut state) = taken else {
            return Err(mlua::Error::RuntimeError(
                "llm.chat: this call has ended (or is read by another coroutine)".to_owned(),
            ));
        };
        let (kind, value) = match state.step().await {
            Step::Event(event) => {
                let batch = state.take_events(lua, event)?;
                *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(state);
                ("events", Value::Table(batch))
            }
            Step::Done(Ok(outcome)) => ("ok", outcome_table(lua, &outcome)?),
            Step::Done(Err(error)) => ("error", error_table(lua, &error)?),
        };
        Ok(MultiValue::from_iter([
            Value::String(lua.create_string(kind)?),
            value,
        ]))
    }
}

impl CallState {
    /// `first` and the events already queued behind it (at most [`EVENTS_PER_STEP`] in all), as
    /// the Lua batch for `:on-event`.
    fn take_events(&mut self, lua: &Lua, first: StreamEvent) -> mlua::Result<Table> {
        let batch = lua.create_table()?;
        batch.raw_push(event_table(lua, first)?)?;
        while batch.raw_len() < EVENTS_PER_STEP {
            match self.events.try_recv() {
                Ok(event) => batch.raw_push(event_table(lua, event)?)?,
                Err(_) => break,
            }
        }
        Ok(batch)
    }

    async fn step(&mut self) -> Step {
        let CallState {
            future,
            events,
            result,
        } = self;
        loop {
            if let Ok(event) = events.try_recv() {
                return Step::Event(event);
            }
            if let Some(result) = result.take() {
                return Step::Done(result);
            }
            let Some(call) = future.as_mut() else {
                return Step::Done(Err(LlmError::Config("the call has ended".to_owned())));
            };
            tokio::select! {
                biased;
                Some(event) = events.recv() => return Step::Event(event),
                done = call => {
                    *result = Some(done);
                    *future = None;
                }
            }
        }
    }
}

fn start_call(
    lua: &Lua,
    client: &Arc<LlmClient>,
    request: Value,
    opts: Value,
) -> Result<ChatCall, String> {
    let on_event = match &opts {
        Value::Nil => Value::Nil,
        Value::Table(opts) => match opts.raw_get::<Value>("on-event") {
            Ok(f @ (Value::Nil | Value::Function(_))) => f,
            Ok(Value::Table(t))
                if t.metatable()
                    .is_some_and(|m| m.contains_key("__call").unwrap_or(false)) =>
            {
                Value::Table(t)
            }
            Ok(Value::UserData(u))
                if u.metatable()
                    .is_ok_and(|m| m.contains(mlua::MetaMethod::Call).unwrap_or(false)) =>
            {
                Value::UserData(u)
            }
            Ok(other) => {
                return Err(format!(
                    ":on-event must be a function, got {}",
                    other.type_name()
                ));
            }
            Err(error) => return Err(error_text(&error)),
        },
        other => {
            return Err(format!(
                "the options must be a table, got {}",
                other.type_name()
            ));
        }
    };
    let request = match request {
        Value::Table(_) => from_lua(lua, request).map_err(|error| error_text(&error))?,
        other => {
            return Err(format!(
                "the request must be a table {{:messages [...]}}, got {}",
                other.type_name()
            ));
        }
    };
    let request = chat_request(request)?;
    let lisp = Lisp::from_lua(lua).ok_or("the Lisp host is gone")?;
    let config = config(&lisp).map_err(|error| error.to_string())?;
    let cancel = lua
        .app_data_ref::<CancelSource>()
        .and_then(|source| (source.0)(lua))
        .unwrap_or_default();
    // No shortcut with an `llm.on-chunk` hook: it must run in the caller's coroutine.
    let sink = match on_event {
        Value::Nil => None,
        _ if config.on_chunk.is_some() => None,
        on_event => lua
            .app_data_ref::<DeltaShortcutSource>()
            .and_then(|source| (source.0)(lua, &on_event)),
    };
    let (sender, events) = mpsc::unbounded_channel();
    let client = Arc::clone(client);
    let future: CallFuture = match sink {
        // The stream runs in a task of its own and hands the deltas to the sink from there: the
        // calling coroutine wakes only for the other events and the end.
        Some(sink) => {
            let lua = lua.weak();
            let task = tokio::spawn(async move {
                let (inner, mut incoming) = mpsc::unbounded_channel();
                let mut pump = Pump {
                    sink: Some(sink),
                    lua,
                    out: sender,
                };
                let stream = client.stream_chat(&config, &request, &inner, &cancel);
                tokio::pin!(stream);
                let outcome = loop {
                    tokio::select! {
                        biased;
                        Some(event) = incoming.recv() => pump.send(event),
                        outcome = &mut stream => break outcome,
                    }
                };
                // The stream has ended: what it sent is all queued.
                while let Ok(event) = incoming.try_recv() {
                    pump.send(event);
                }
                outcome
            });
            Box::pin(async move {
                let mut task = AbortOnDrop(task);
                match (&mut task.0).await {
                    Ok(outcome) => outcome,
                    Err(error) => Err(LlmError::Config(format!("the model call failed: {error}"))),
                }
            })
        }
        None => Box::pin(async move {
            client
                .stream_chat(&config, &request, &sender, &cancel)
                .await
        }),
    };
    Ok(ChatCall(Arc::new(Mutex::new(Some(CallState {
        future: Some(future),
        events,
        result: None,
    })))))
}

/// Aborts the task when the call is dropped (closed, or interrupted with its coroutine), which
/// drops the request and closes the connection.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The events of a call that streams in its own task: deltas to the sink while it is open,
/// everything else (and every delta once it has closed) to the calling coroutine, in order.
/// A sink that closes stays closed for the rest of the call, so a delta never overtakes one
/// still queued for Lisp.
struct Pump {
    sink: Option<DeltaSink>,
    lua: mlua::WeakLua,
    out: mpsc::UnboundedSender<StreamEvent>,
}

impl Pump {
    fn send(&mut self, event: StreamEvent) {
        if let (StreamEvent::TextDelta(_) | StreamEvent::ThoughtDelta(_), Some(sink)) =
            (&event, &self.sink)
        {
            let open = self.lua.try_upgrade().is_some_and(|lua| (sink.open)(&lua));
            if open {
                (sink.deliver)(event);
                return;
            }
            self.sink = None;
        }
        let _ = self.out.send(event);
    }
}

/// `{:messages [...] :tools [...] :model "..."}` as a [`ChatRequest`]. Tools are
/// `{:name :description :parameters}`, or in the wire form `{:type "function" :function {...}}`.
fn chat_request(request: Json) -> Result<ChatRequest, String> {
    let Json::Object(mut request) = request else {
        return Err("the request must be a table {:messages [...]}".to_owned());
    };
    let messages = match request.remove("messages") {
        Some(Json::Array(messages)) => messages,
        Some(Json::Object(empty)) if empty.is_empty() => Vec::new(),
        None | Some(Json::Null) => {
            return Err("the request needs :messages, a list of messages".to_owned());
        }
        Some(other) => return Err(format!(":messages must be a list of messages, got {other}")),
    };
    let tools = match request.remove("tools") {
        None | Some(Json::Null) => Vec::new(),
        Some(Json::Object(empty)) if empty.is_empty() => Vec::new(),
        Some(Json::Array(tools)) => tools.into_iter().map(tool_spec).collect::<Result<_, _>>()?,
        Some(other) => return Err(format!(":tools must be a list of tools, got {other}")),
    };
    let model = match request.remove("model") {
        None | Some(Json::Null) => None,
        Some(Json::String(model)) => Some(model).filter(|model| !model.is_empty()),
        Some(other) => return Err(format!(":model must be a string, got {other}")),
    };
    Ok(ChatRequest {
        messages,
        tools,
        model,
    })
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

// --- private: results as Lisp data

fn event_table(lua: &Lua, event: StreamEvent) -> mlua::Result<Value> {
    let event = match event {
        // The deltas, nearly every event of a reply, are built directly.
        StreamEvent::TextDelta(text) => return delta_table(lua, "text-delta", &text),
        StreamEvent::ThoughtDelta(text) => return delta_table(lua, "thought-delta", &text),
        StreamEvent::ToolCall(call) => json!({
            "type": "tool-call", "id": call.id, "name": call.name, "arguments": call.arguments,
        }),
        StreamEvent::Done {
            finish_reason,
            usage,
        } => {
            let mut done = Map::new();
            done.insert("type".into(), "done".into());
            insert_some(&mut done, "finish-reason", finish_reason.map(Json::String));
            insert_some(&mut done, "usage", usage);
            Json::Object(done)
        }
        StreamEvent::Retry {
            attempt,
            delay,
            reason,
        } => json!({
            "type": "retry", "attempt": attempt, "delay": delay.as_secs_f64(), "reason": reason,
        }),
    };
    to_lua(lua, &event)
}

/// `{:type KIND :text TEXT}`.
fn delta_table(lua: &Lua, kind: &str, text: &str) -> mlua::Result<Value> {
    let t = lua.create_table_with_capacity(0, 2)?;
    t.raw_set("type", kind)?;
    t.raw_set("text", text)?;
    Ok(Value::Table(t))
}

/// `{:message :text :reasoning :tool-calls :cancelled :finish-reason :usage}`; the last two are
/// nil when the provider sent none.
fn outcome_json(outcome: &ChatOutcome) -> Json {
    let calls: Vec<Json> = outcome
        .tool_calls
        .iter()
        .map(|call| json!({"id": call.id, "name": call.name, "arguments": call.arguments}))
        .collect();
    let mut table = Map::new();
    table.insert("message".into(), outcome.message.clone());
    table.insert("text".into(), outcome.text.clone().into());
    table.insert("reasoning".into(), outcome.reasoning.clone().into());
    table.insert("tool-calls".into(), Json::Array(calls));
    table.insert("cancelled".into(), outcome.cancelled.into());
    insert_some(
        &mut table,
        "finish-reason",
        outcome.finish_reason.clone().map(Json::String),
    );
    insert_some(&mut table, "usage", outcome.usage.clone());
    Json::Object(table)
}

fn outcome_table(lua: &Lua, outcome: &ChatOutcome) -> mlua::Result<Value> {
    to_lua(lua, &outcome_json(outcome))
}

/// `{:kind :message :status :body :partial}`; the wrapper gives it a `__tostring` (the message)
/// and raises it.
fn error_table(lua: &Lua, error: &LlmError) -> mlua::Result<Value> {
    let kind = match error {
        LlmError::NoModel => "no-model",
        LlmError::Config(_) => "config",
        LlmError::Http { .. } => "http",
        LlmError::Connect { .. } => "connect",
        LlmError::IdleTimeout { .. } => "idle-timeout",
        LlmError::StreamBroken { .. } => "stream-broken",
        LlmError::MalformedChunk { .. } => "malformed-chunk",
        LlmError::Provider { .. } => "provider",
    };
    let mut table = Map::new();
    table.insert("kind".into(), kind.into());
    table.insert("message".into(), error.to_string().into());
    if let LlmError::Http { status, body } = error {
        table.insert("status".into(), (*status).into());
        table.insert("body".into(), body.clone().into());
    }
    insert_some(&mut table, "partial", error.partial().map(outcome_json));
    to_lua(lua, &Json::Object(table))
}

fn insert_some(table: &mut Map<String, Json>, key: &str, value: Option<Json>) {
    if let Some(value) = value.filter(|value| !value.is_null()) {
        table.insert(key.to_owned(), value);
    }
}

const CHAT_DOC: &str =
    "Run one streaming model call with the current llm.* settings and return its outcome.
REQUEST is {:messages [...] :tools [...] :model \"optional override\"}: OpenAI chat messages, and
tools as {:name :description :parameters}. ?OPTS is {:on-event (fn [event] ...)}, called in this
coroutine with {:type :text-delta :text}, {:type :thought-delta :text}, {:type :tool-call :id
:name :arguments}, {:type :done :finish-reason :usage} and {:type :retry :attempt :delay
:reason}. Returns {:message :text :reasoning :tool-calls :finish-reason :usage :cancelled}. A
failure raises an error table {:kind :message :status :body :partial}; tostring gives the
message.";

/// Defines `llm.chat` around the host functions: it starts the call, delivers the events to
/// `:on-event` in the caller's coroutine, closes the call if the callback fails, and raises
/// failures as error tables.
const GLUE: &str = r#"
local llm, start, next_events, close, doc = ...
local error_mt = {__name = "llm-error"}
error_mt.__tostring = function(e) return tostring(e.message) end
local function chat(request, opts)
  local call, problem = start(request, opts)
  if not call then error("llm.chat: " .. problem, 2) end
  local on_event = opts and opts["on-event"]
  while true do
    local kind, value = next_events(call)
    if kind == "events" then
      if on_event then
        for i = 1, #value do
          local ok, err = pcall(on_event, value[i])
          if not ok then
            close(call)
            error(err, 0)
          end
        end
      end
    elseif kind == "ok" then
      return value
    else
      error(setmetatable(value, error_mt), 0)
    end
  end
end
llm.chat = chat
local fennel = require("fennel")
fennel.metadata:setall(chat, "fnl/docstring", doc, "fnl/arglist", {"request", "?opts"})
"#;
