//! One `llm.chat` call: the host functions the Fennel wrapper (`llm.fnl`) drives, the call's
//! state and event pump, and the results as Lisp data (`body` checks and encodes the request).
//!
//! This module does not read settings (`super::settings_config` does) and knows nothing of sessions.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use mlua::{Function, Lua, MultiValue, Table, UserData, UserDataRef, Value};
use parking_lot::Mutex;
use serde_json::{Map, Value as Json, json};
use tokio::sync::mpsc;

use super::body::LispRequest;
use super::{CancelSource, DeltaShortcutSource, DeltaSink, error_text};
use crate::lisp::{Lisp, to_lua};
use crate::llm::{ChatOutcome, LlmClient, LlmError, StreamEvent};

/// The host functions `llm.fnl` stands on: start a call (returns the call, or nil and the
/// problem), wait for its next events, close it. They share one [`LlmClient`].
pub(super) fn host_functions(lua: &Lua) -> mlua::Result<(Function, Function, Function)> {
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
    Ok((start, next, close))
}

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
    /// The id and arguments of each tool call, in order, the arguments as the Lua string its
    /// `tool-call` event carried, which the outcome's message reuses: a large `write`'s
    /// arguments are made in Lua once.
    arguments: Vec<(String, mlua::LuaString)>,
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
        self.0.lock().take();
    }

    /// The next events, or the result once every event has been delivered: `("events", [table
    /// ...])` with every event already queued (at least one, at most [`EVENTS_PER_STEP`]),
    /// `("ok", outcome)` or `("error", error)`. Taking what is queued in one step spares a
    /// streaming reply one trip through the async call machinery per token.
    async fn next(&self, lua: &Lua) -> mlua::Result<MultiValue> {
        let taken = self.0.lock().take();
        let Some(mut state) = taken else {
            return Err(mlua::Error::RuntimeError(
                "llm.chat: this call has ended (or is read by another coroutine)".to_owned(),
            ));
        };
        let (kind, value) = match state.step().await {
            Step::Event(event) => {
                let batch = state.take_events(lua, event)?;
                *self.0.lock() = Some(state);
                ("events", Value::Table(batch))
            }
            Step::Done(Ok(outcome)) => ("ok", outcome_table(lua, &outcome, &state.arguments)?),
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
        batch.raw_push(event_table(lua, first, &mut self.arguments)?)?;
        while batch.raw_len() < EVENTS_PER_STEP {
            match self.events.try_recv() {
                Ok(event) => batch.raw_push(event_table(lua, event, &mut self.arguments)?)?,
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
            ..
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
    let on_event = on_event(&opts)?;
    let request = LispRequest::parse(lua, request).map_err(|error| error.to_string())?;
    let lisp = Lisp::from_lua(lua).ok_or("the Lisp host is gone")?;
    let settings = super::settings_config(&lisp).map_err(|error| error.to_string())?;
    let config = request.configure(settings);
    let body = request.encode(lua, &config)?;
    drop(request);
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
    let future: CallFuture = match (body, sink) {
        (Err(error), _) => Box::pin(async move { Err(error) }),
        (Ok(body), Some(sink)) => streamed_apart(lua, client, config, body, cancel, sink, sender),
        (Ok(body), None) => {
            Box::pin(async move { client.stream_body(&config, body, &sender, &cancel).await })
        }
    };
    Ok(ChatCall(Arc::new(Mutex::new(Some(CallState {
        future: Some(future),
        events,
        result: None,
        arguments: Vec::new(),
    })))))
}

/// The `:on-event` of the options: nil, a function, or a callable table or userdata.
fn on_event(opts: &Value) -> Result<Value, String> {
    match opts {
        Value::Nil => Ok(Value::Nil),
        Value::Table(opts) => match opts.raw_get::<Value>("on-event") {
            Ok(f @ (Value::Nil | Value::Function(_))) => Ok(f),
            Ok(Value::Table(t))
                if t.metatable()
                    .is_some_and(|m| m.contains_key("__call").unwrap_or(false)) =>
            {
                Ok(Value::Table(t))
            }
            Ok(Value::UserData(u))
                if u.metatable()
                    .is_ok_and(|m| m.contains(mlua::MetaMethod::Call).unwrap_or(false)) =>
            {
                Ok(Value::UserData(u))
            }
            Ok(other) => Err(format!(
                ":on-event must be a function, got {}",
                other.type_name()
            )),
            Err(error) => Err(error_text(&error)),
        },
        other => Err(format!(
            "the options must be a table, got {}",
            other.type_name()
        )),
    }
}

/// The call streamed in a task of its own, which hands the deltas to `sink` from there: the
/// calling coroutine wakes only for the other events and the end.
fn streamed_apart(
    lua: &Lua,
    client: Arc<LlmClient>,
    config: crate::llm::LlmConfig,
    body: Vec<u8>,
    cancel: crate::cancel::CancelToken,
    sink: DeltaSink,
    sender: mpsc::UnboundedSender<StreamEvent>,
) -> CallFuture {
    let lua = lua.weak();
    let task = tokio::spawn(async move {
        let (inner, mut incoming) = mpsc::unbounded_channel();
        let mut pump = Pump {
            sink: Some(sink),
            lua,
            out: sender,
        };
        let stream = client.stream_body(&config, body, &inner, &cancel);
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

// --- private: results as Lisp data

/// `event` as Lua data. A tool call's arguments, as the Lua string the event carries, are also
/// pushed onto `made`, for the outcome's message to reuse.
fn event_table(
    lua: &Lua,
    event: StreamEvent,
    made: &mut Vec<(String, mlua::LuaString)>,
) -> mlua::Result<Value> {
    let event = match event {
        // The deltas, nearly every event of a reply, are built directly.
        StreamEvent::TextDelta(text) => return delta_table(lua, "text-delta", &text),
        StreamEvent::ThoughtDelta(text) => return delta_table(lua, "thought-delta", &text),
        // Built directly: the arguments can be as large as a file.
        StreamEvent::ToolCall(call) => {
            let arguments = lua.create_string(call.arguments.as_bytes())?;
            made.push((call.id.clone(), arguments.clone()));
            let t = lua.create_table_with_capacity(0, 4)?;
            t.raw_set("type", "tool-call")?;
            t.raw_set("id", call.id)?;
            t.raw_set("name", call.name)?;
            t.raw_set("arguments", arguments)?;
            return Ok(Value::Table(t));
        }
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
        .map(|call| json!({"id": call.id, "name": call.name, "arguments": call.arguments.as_str()}))
        .collect();
    let mut table = outcome_fields(outcome);
    table.insert("message".into(), outcome.transcript_message());
    table.insert("tool-calls".into(), Json::Array(calls));
    Json::Object(table)
}

/// The outcome's fields but `message` and `tool-calls`: `{:text :reasoning :cancelled
/// :finish-reason :usage}`, the last two only when the provider sent them.
fn outcome_fields(outcome: &ChatOutcome) -> Map<String, Json> {
    let mut fields = Map::new();
    fields.insert("text".into(), outcome.text.clone().into());
    fields.insert("reasoning".into(), outcome.reasoning.clone().into());
    fields.insert("cancelled".into(), outcome.cancelled.into());
    insert_some(
        &mut fields,
        "finish-reason",
        outcome.finish_reason.clone().map(Json::String),
    );
    insert_some(&mut fields, "usage", outcome.usage.clone());
    fields
}

/// [`outcome_json`] as a Lua table, each tool call's arguments one Lua string shared by
/// `message.tool_calls` and `tool-calls`: the one its `tool-call` event carried (`made`, in the
/// calls' order, with their ids), else made here. The arguments of a large `write` are as large as the file.
fn outcome_table(
    lua: &Lua,
    outcome: &ChatOutcome,
    made: &[(String, mlua::LuaString)],
) -> mlua::Result<Value> {
    let Value::Table(table) = to_lua(lua, &Json::Object(outcome_fields(outcome)))? else {
        return Err(mlua::Error::runtime("an outcome is a table"));
    };
    let message = to_lua(lua, &outcome.message)?;
    let (wire, calls) = (lua.create_table()?, lua.create_table()?);
    for list in [&wire, &calls] {
        list.set_metatable(Some(mlua::LuaSerdeExt::array_metatable(lua)))?;
    }
    for (i, call) in outcome.tool_calls.iter().enumerate() {
        // The events came in the calls' order; the id is checked too, so a provider that gives
        // two calls one id still gets each call's own arguments.
        let arguments = match made.get(i).filter(|(id, _)| *id == call.id) {
            Some((_, s)) => s.clone(),
            None => lua.create_string(call.arguments.as_bytes())?,
        };
        let function = lua.create_table()?;
        function.set("name", call.name.as_str())?;
        function.set("arguments", &arguments)?;
        let w = lua.create_table()?;
        w.set("id", call.id.as_str())?;
        w.set("type", "function")?;
        w.set("function", function)?;
        wire.raw_push(w)?;
        let t = lua.create_table()?;
        t.set("id", call.id.as_str())?;
        t.set("name", call.name.as_str())?;
        t.set("arguments", arguments)?;
        calls.raw_push(t)?;
    }
    if let (Value::Table(m), false) = (&message, outcome.tool_calls.is_empty()) {
        m.set("tool_calls", wire)?;
    }
    table.set("message", message)?;
    table.set("tool-calls", calls)?;
    Ok(Value::Table(table))
}

/// `{:kind :message :status :body :context-exceeded? :partial}`; the wrapper gives it a `__tostring` (the message)
/// and raises it.
fn error_table(lua: &Lua, error: &LlmError) -> mlua::Result<Value> {
    let kind = match error {
        LlmError::NoModel { .. } => "no-model",
        LlmError::Config(_) => "config",
        LlmError::Http { .. } => "http",
        LlmError::NotAStream { .. } => "not-a-stream",
        LlmError::Connect { .. } => "connect",
        LlmError::IdleTimeout { .. } => "idle-timeout",
        LlmError::NoContent { .. } => "no-content",
        LlmError::StreamBroken { .. } => "stream-broken",
        LlmError::MalformedChunk { .. } => "malformed-chunk",
        LlmError::Provider { .. } => "provider",
    };
    let mut table = Map::new();
    table.insert("kind".into(), kind.into());
    table.insert("message".into(), error.to_string().into());
    if error.exceeds_context() {
        table.insert("context-exceeded?".into(), true.into());
    }
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
