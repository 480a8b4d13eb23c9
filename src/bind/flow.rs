//! The `flow` namespace: multi-step Fennel programs that resume where they failed (`flow.step`,
//! `flow.finish`, …), written in Lisp (`flow.fnl`) over the `json` namespace and Lua's files.
//! This file only loads that chunk; it knows nothing of agents (a step calls `client.ask` or
//! anything else).

use crate::lisp::Lisp;

static FLOW_BYTECODE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/prelude_flow.luac"));
const FLOW_FILE: &str = "src/bind/flow.fnl";

/// Installs `flow`. Called by [`super::install`].
pub fn install(lisp: &Lisp) -> mlua::Result<()> {
    let lua = lisp.lua();
    let flow = crate::lisp::surface::namespace(lua, "flow")?;
    lua.load(FLOW_BYTECODE)
        .set_name(format!("@{FLOW_FILE}"))
        .set_mode(mlua::chunk::ChunkMode::Binary)
        .call::<()>(flow)?;
    lisp.register_source(FLOW_FILE, include_str!("flow.fnl"));
    Ok(())
}
