//! oml's one ACP auth method, the terminal kind (`type: "terminal"`, as the ACP agent registry
//! requires of the agents it lists), offered to a client that says it can run one: the editor
//! runs oml with `setup` in a terminal (`oml acp setup` when it appends the arguments to its
//! command, as the protocol says; `oml setup` when it replaces them, as the registry's notes
//! say), where oml's first-run set-up chooses a provider and a model and writes the user init
//! file, then starts `oml acp` again. `authenticate` with that method answers success once a model is configured,
//! and the auth-required error (`-32000`) while none is.
//!
//! oml has no account and keeps no credentials of its own: "authenticated" means only that
//! `llm.model` is set. It knows the method's shape and the check; not the set-up dialog
//! (`crate::cli::setup`) nor the transport.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::jsonrpc::RpcError;
use crate::lisp::Lisp;

/// The id of oml's terminal auth method.
pub const SETUP_METHOD_ID: &str = "oml-setup";

/// The arguments the editor runs oml with in a terminal for it (they replace `acp`).
pub const SETUP_ARGS: &[&str] = &["setup"];

/// The setting that says a model is configured.
const MODEL_SETTING: &str = "llm.model";

/// ACP's `AuthMethodTerminal`: the client runs the agent's own command with `args` and `env` in
/// a terminal, then reconnects.
#[derive(Debug, Serialize)]
struct TerminalAuthMethod {
    id: &'static str,
    name: &'static str,
    description: &'static str,
    #[serde(rename = "type")]
    kind: &'static str,
    args: &'static [&'static str],
    env: serde_json::Map<String, Value>,
}

/// Whether the client can run terminal auth: `clientCapabilities.auth.terminal`, or the marker
/// the ACP registry's validator and Zed send, `clientCapabilities._meta["terminal-auth"]`. The
/// protocol lets an agent offer the terminal kind only to such a client.
pub fn terminal_auth_offered(client_capabilities: &Value) -> bool {
    let on = |pointer: &str| client_capabilities.pointer(pointer) == Some(&Value::Bool(true));
    on("/auth/terminal") || on("/_meta/terminal-auth")
}

/// `authMethods` of oml's `initialize` answer: the terminal method for a client that can run it
/// (see [`terminal_auth_offered`]), else none.
pub fn auth_methods(client_capabilities: &Value) -> Value {
    if !terminal_auth_offered(client_capabilities) {
        return Value::Array(Vec::new());
    }
    let setup = TerminalAuthMethod {
        id: SETUP_METHOD_ID,
        name: "Set up a model",
        description: "Run oml's first-run set-up in a terminal: choose a provider and a model \
                      and write them to the init file.",
        kind: "terminal",
        args: SETUP_ARGS,
        env: serde_json::Map::new(),
    };
    serde_json::to_value([setup]).unwrap_or_else(|_| Value::Array(Vec::new()))
}

/// `authenticate`'s params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AuthenticateParams {
    method_id: String,
}

/// Why `authenticate` did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("bad params: {0}")]
    Params(#[from] serde_json::Error),
    #[error("unknown auth method {0:?}; oml offers only {SETUP_METHOD_ID:?}")]
    UnknownMethod(String),
    /// No model is configured: the user has not run the set-up yet.
    #[error("no model is configured: run `oml setup` in a terminal (the {SETUP_METHOD_ID} method)")]
    NoModel,
}

impl From<AuthError> for RpcError {
    fn from(e: AuthError) -> RpcError {
        match e {
            AuthError::NoModel => RpcError::auth_required().with_data(e.to_string()),
            AuthError::Params(_) | AuthError::UnknownMethod(_) => RpcError::invalid_params(e),
        }
    }
}

/// `authenticate {methodId}`: `{}` when the method is oml's and a model is configured.
pub fn authenticate(lisp: &Lisp, params: Value) -> Result<Value, AuthError> {
    let params: AuthenticateParams = serde_json::from_value(params)?;
    if params.method_id != SETUP_METHOD_ID {
        return Err(AuthError::UnknownMethod(params.method_id));
    }
    let model: Option<String> = lisp.setting(MODEL_SETTING).unwrap_or(None);
    match model {
        Some(m) if !m.is_empty() => Ok(Value::Object(serde_json::Map::new())),
        _ => Err(AuthError::NoModel),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_method_is_the_terminal_kind_with_the_setup_args() {
        assert_eq!(auth_methods(&serde_json::json!({})), serde_json::json!([]));
        assert_eq!(
            auth_methods(&serde_json::json!({"terminal": true, "auth": {"terminal": false}})),
            serde_json::json!([])
        );
        let legacy = auth_methods(&serde_json::json!({"_meta": {"terminal-auth": true}}));
        assert_eq!(legacy[0]["id"], SETUP_METHOD_ID);
        let v = auth_methods(&serde_json::json!({"auth": {"terminal": true}}));
        assert_eq!(v[0]["type"], "terminal");
        assert_eq!(v[0]["id"], SETUP_METHOD_ID);
        assert_eq!(v[0]["args"], serde_json::json!(["setup"]));
        assert_eq!(v[0]["env"], serde_json::json!({}));
    }

    #[test]
    fn errors_map_to_auth_required_or_invalid_params() {
        assert_eq!(
            RpcError::from(AuthError::NoModel).code,
            crate::jsonrpc::AUTH_REQUIRED
        );
        assert_eq!(
            RpcError::from(AuthError::UnknownMethod("x".into())).code,
            crate::jsonrpc::INVALID_PARAMS
        );
    }
}
