//! `llm.protocol`: the wire protocol a model call would speak, as `llm.chat` decides it (the
//! request's `:api`, else `llm.api`, `:auto` resolved by the base URL's host and the model), for
//! Lisp that must know it before the call (the agent's notice when a session changes protocol).
//!
//! It decides nothing itself: the decision is `LlmConfig::pinned`'s.

use mlua::Lua;

use crate::lisp::{HostFn, Lisp};
use crate::llm::Api;

pub(super) const PROTOCOL_FNS: &[HostFn] = &[HostFn {
    name: "protocol",
    args: "?model ?api",
    doc: "The wire protocol a model call with ?MODEL (else llm.model) and ?API (else llm.api; \
          \"auto\" picks by host and model) would speak: \"chat\", \"anthropic\", \"responses\" \
          or \"gemini\".",
    make: |lua| lua.create_function(protocol),
}];

/// `llm.protocol`.
fn protocol(lua: &Lua, (model, api): (Option<String>, Option<String>)) -> mlua::Result<String> {
    let lisp = Lisp::from_lua(lua).ok_or_else(|| mlua::Error::RuntimeError("no Lisp".into()))?;
    let mut config =
        super::settings_config(&lisp).map_err(|e| mlua::Error::RuntimeError(e.to_string()))?;
    match api.as_deref() {
        None => {}
        Some("auto") => config.api = None,
        Some(name) => {
            config.api = Some(Api::from_name(name).ok_or_else(|| {
                mlua::Error::RuntimeError(format!("llm.protocol: unknown protocol {name:?}"))
            })?);
        }
    }
    let config = super::settle(config).pinned(model.as_deref());
    Ok(config.api().name().to_owned())
}
