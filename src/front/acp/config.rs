//! Modes and config options: `session/set_mode`, `session/set_config_option`, and the updates
//! that tell the client about them and about the slash commands.
//!
//! The options themselves live in Lisp (`acp.config-options`, `acp.set-config-option!`,
//! `acp.available-commands`); this module only calls them and sends what they answer.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::calls::lisp_json;
use super::ctx::Ctx;
use super::ctx::known_session;
use super::ctx::update;
use crate::acp::params::{SetConfigOptionParams, SetModeParams};
use crate::acp::updates::{self, SessionUpdate};
use crate::jsonrpc::RpcError;

pub(super) async fn set_mode(ctx: &Arc<Ctx>, params: &SetModeParams) -> Result<Value, RpcError> {
    let sid = known_session(ctx, &params.session_id.0)?;
    let mode = params.mode_id.0.as_str();
    let mode = Value::String(mode.to_owned());
    set_option(ctx, &sid, "mode", mode.clone()).await?;
    let changed = SessionUpdate::CurrentModeUpdate {
        current_mode_id: &mode,
    };
    update(ctx, &sid, changed.to_value()).await;
    config_update(ctx, &sid).await;
    Ok(Value::Object(Map::new()))
}

pub(super) async fn set_config_option(
    ctx: &Arc<Ctx>,
    params: SetConfigOptionParams,
) -> Result<Value, RpcError> {
    let sid = known_session(ctx, &params.session_id.0)?;
    let config_id = params.config_id.0.as_str();
    let value = params
        .value
        .ok_or_else(|| RpcError::invalid_params("value is required"))?
        .0;
    set_option(ctx, &sid, config_id, value.clone()).await?;
    if config_id == "mode" {
        let mode = SessionUpdate::CurrentModeUpdate {
            current_mode_id: &value,
        };
        update(ctx, &sid, mode.to_value()).await;
    }
    let options = lisp_json(ctx, "acp.config-options", &[Value::String(sid)])
        .await
        .map_err(RpcError::internal_error)?;
    Ok(updates::config_options_answer(&options))
}

pub(super) async fn set_option(
    ctx: &Ctx,
    sid: &str,
    id: &str,
    value: Value,
) -> Result<(), RpcError> {
    lisp_json(
        ctx,
        "acp.set-config-option!",
        &[
            Value::String(id.to_owned()),
            value,
            Value::String(sid.to_owned()),
        ],
    )
    .await
    .map(|_| ())
    .map_err(RpcError::invalid_params)
}

pub(super) async fn advertise_commands(ctx: &Ctx, sid: &str) {
    match lisp_json(ctx, "acp.available-commands", &[]).await {
        Ok(commands) => {
            let commands = if commands.is_array() {
                commands
            } else {
                Value::Array(Vec::new())
            };
            let commands = SessionUpdate::AvailableCommandsUpdate {
                available_commands: &commands,
            };
            update(ctx, sid, commands.to_value()).await;
        }
        Err(e) => tracing::warn!("acp.available-commands failed: {e}"),
    }
}

/// A `config_option_update` with the session's options, to every client, whatever it offered
/// in `initialize`: it is a stable v1 notification, and agent-shell, which offers no
/// `session.configOptions`, keeps its header's model and mode from it.
pub(super) async fn config_update(ctx: &Ctx, sid: &str) {
    let sid_value = Value::String(sid.to_owned());
    if let Ok(options) = lisp_json(ctx, "acp.config-options", &[sid_value]).await {
        let options = SessionUpdate::ConfigOptionUpdate {
            config_options: &options,
        };
        update(ctx, sid, options.to_value()).await;
    }
}
