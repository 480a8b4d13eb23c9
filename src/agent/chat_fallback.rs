//! A stand-in `llm.chat`, installed only when no model-client binding defined one.
//!
//! The real binding (`src/lisp/bind/llm.rs`, settings `llm.*`) is being written on its own
//! branch; until it is merged this keeps `agent.call-model` working against any
//! OpenAI-compatible endpoint configured through `OPENAI_BASE_URL`, `OPENAI_MODEL` and
//! `OPENAI_API_KEY`. It takes the same arguments and returns the same shape:
//! `(llm.chat {:messages :tools :model} {:on-event f})` →
//! `{:message :text :reasoning :finish-reason :usage :cancelled :tool-calls}`. It uses the cancel
//! token of the calling coroutine's session. Delete it once the binding is on main.

use std::sync::Arc;

use mlua::{Function, Lua, Table, Value};
use serde_json::json;
use tokio::sync::mpsc;

use super::Sessions;
use crate::cancel::CancelToken;
use crate::lisp::{Lisp, LispError, from_lua, to_lua};
use crate::llm::{ChatRequest, LlmClient, LlmConfig, StreamEvent, ToolSpec};

pub(super) fn install_if_missing(lisp: &Lisp) -> Result<(), LispError> {
    let lua = lisp.lua();
    let llm: Table = lua.globals().get("llm")?;
    if llm.contains_key("chat")? {
        return Ok(());
    }
    let client = Arc::new(LlmClient::new());
    llm.set(
        "chat",
        lua.create_async_function(move |lua, (request, opts): (Value, Option<Table>)| {
            let client = client.clone();
            let cancel = lua
                .app_data_ref::<Arc<Sessions>>()
                .and_then(|s| {
                    let key = lua.current_thread().to_pointer() as usize;
                    s.of_thread(key)
                        .and_then(|id| s.with(&id, |s| s.cancel.clone()))
                })
                .unwrap_or_else(CancelToken::new);
            let on_event: Option<Function> = opts.and_then(|o| o.get("on-event").ok());
            let request = from_lua(&lua, request);
            async move {
                let request = request?;
                let chat = ChatRequest {
                    messages: request["messages"].as_array().cloned().unwrap_or_default(),
                    tools: request["tools"]
                        .as_array()
                        .map(|tools| {
                            tools
                                .iter()
                                .map(|t| ToolSpec {
                                    name: t["name"].as_str().unwrap_or_default().to_owned(),
                                    description: t["description"]
                                        .as_str()
                                        .unwrap_or_default()
                                        .to_owned(),
                                    parameters: t["parameters"].clone(),
                                })
                                .collect()
                        })
                        .unwrap_or_default(),
                    model: request["model"].as_str().map(str::to_owned),
                };
                let config = LlmConfig::from_env();
                let (tx, mut rx) = mpsc::unbounded_channel();
                let call = client.stream_chat(&config, &chat, &tx, &cancel);
                tokio::pin!(call);
                let deliver = |lua: &Lua, event: StreamEvent| -> mlua::Result<()> {
                    let Some(f) = &on_event else { return Ok(()) };
                    let e = match event {
                        StreamEvent::TextDelta(text) => json!({"type": "text-delta", "text": text}),
                        StreamEvent::ThoughtDelta(text) => {
                            json!({"type": "thought-delta", "text": text})
                        }
                        _ => return Ok(()),
                    };
                    f.call::<()>(to_lua(lua, &e)?)
                };
                let outcome = loop {
                    tokio::select! {
                        Some(event) = rx.recv() => deliver(&lua, event)?,
                        outcome = &mut call => break outcome,
                    }
                };
                while let Ok(event) = rx.try_recv() {
                    deliver(&lua, event)?;
                }
                let outcome = outcome.map_err(|e| mlua::Error::RuntimeError(e.to_string()))?;
                let calls: Vec<serde_json::Value> = outcome
                    .tool_calls
                    .iter()
                    .map(|c| json!({"id": c.id, "name": c.name, "arguments": c.arguments}))
                    .collect();
                to_lua(
                    &lua,
                    &json!({
                        "message": outcome.message,
                        "text": outcome.text,
                        "reasoning": outcome.reasoning,
                        "finish-reason": outcome.finish_reason,
                        "usage": outcome.usage,
                        "cancelled": outcome.cancelled,
                        "tool-calls": calls,
                    }),
                )
            }
        })?,
    )?;
    Ok(())
}
