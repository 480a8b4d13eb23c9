//! The router's answers to the agent's requests, each in a task of its own:
//! `session/request_permission` through the permission handler, `elicitation/create` through
//! the elicitation handler, `fs/*` and `terminal/*` through the program's handlers with the
//! session's folders; anything else `-32601`. A request the agent gives up (`$/cancel_request`)
//! is answered `-32800` at once. It knows the handlers' contracts, not the turns.

use std::sync::Arc;

use serde_json::Value;

use super::{Router, choose};
use crate::acp::served::{ElicitationAnswer, SessionHead};
use crate::acp::{PermissionOutcome, PermissionParams};
use crate::acp_client::{PermissionDecision, PermissionRequest};
use crate::cancel::CancelToken;
use crate::jsonrpc::{Request, RpcError};

impl Router {
    /// Tell the terminal handler the connection is closing: it kills what still runs.
    pub(in crate::acp_client) async fn release_terminals(&self) {
        if let Some(handler) = &self.terminal {
            let call = crate::acp_client::FsCall {
                method: crate::acp_client::RELEASE_TERMINALS.to_owned(),
                params: Value::Null,
                roots: Vec::new(),
                cancel: CancelToken::new(),
            };
            let _ = handler(call).await;
        }
    }

    pub(super) async fn answer(self: Arc<Self>, request: Request, abandoned: CancelToken) {
        let key = request.id.to_string();
        let Some(rpc) = self.rpc.get() else {
            self.asked.lock().remove(&key);
            return;
        };
        let outcome = match request.method.as_str() {
            "session/request_permission" => match PermissionParams::parse(request.params) {
                Ok(params) => tokio::select! {
                    outcome = self.permission(params) => Ok(outcome.to_value()),
                    () = abandoned.cancelled() => Err(RpcError::request_cancelled()),
                },
                Err(error) => Err(RpcError::invalid_params(error)),
            },
            m @ ("fs/read_text_file"
            | "fs/write_text_file"
            | "terminal/create"
            | "terminal/output"
            | "terminal/wait_for_exit"
            | "terminal/kill"
            | "terminal/release") => {
                let served = if m.starts_with("fs/") {
                    &self.fs
                } else {
                    &self.terminal
                };
                let params = request.params.clone().unwrap_or(Value::Null);
                tokio::select! {
                    served = self.serve(served, m, params, abandoned.clone()) => served,
                    () = abandoned.cancelled() => Err(RpcError::request_cancelled()),
                }
            }
            "elicitation/create" if self.elicitation.is_some() => {
                let params = request.params.clone().unwrap_or(Value::Null);
                tokio::select! {
                    answer = self.elicit(params, abandoned.clone()) => Ok(answer),
                    () = abandoned.cancelled() => Err(RpcError::request_cancelled()),
                }
            }
            other => {
                tracing::debug!(method = %other, "the agent asked for a method we do not offer");
                Err(RpcError::method_not_found(other))
            }
        };
        self.asked.lock().remove(&key);
        let sent = match outcome {
            Ok(result) => rpc.respond(&request.id, result).await,
            Err(error) => rpc.respond_error(&request.id, error).await,
        };
        if let Err(e) = sent {
            tracing::debug!("could not answer the agent's {}: {e}", request.method);
        }
    }

    /// Hands an `fs/*` or `terminal/*` request to the program's handler, with the session's folders.
    async fn serve(
        &self,
        handler: &Option<crate::acp_client::FsHandler>,
        method: &str,
        params: Value,
        cancel: CancelToken,
    ) -> Result<Value, RpcError> {
        let Some(handler) = handler else {
            return Err(RpcError::method_not_found(method));
        };
        let session = SessionHead::session_id(&params).unwrap_or_default();
        let roots = self.roots(&session);
        let call = crate::acp_client::FsCall {
            method: method.to_owned(),
            params,
            roots,
            cancel,
        };
        handler(call)
            .await
            .map_err(|why| RpcError::new(crate::jsonrpc::INTERNAL_ERROR, why))
    }

    /// Asks the elicitation handler; a failing one answers `cancel`.
    async fn elicit(&self, params: Value, abandoned: CancelToken) -> Value {
        let Some(handler) = &self.elicitation else {
            return ElicitationAnswer::cancel();
        };
        handler(params, abandoned).await.unwrap_or_else(|reason| {
            tracing::info!("the elicitation handler failed, answering cancel: {reason}");
            ElicitationAnswer::cancel()
        })
    }

    /// Asks the handler and turns its decision into an outcome. Cancelling the turn answers
    /// `cancelled` at once, whatever the handler is doing.
    async fn permission(&self, params: PermissionParams) -> PermissionOutcome {
        let PermissionParams {
            session_id,
            tool_call,
            options,
        } = params;
        let cancel = self
            .running_turn(&session_id)
            .map(|t| t.cancel.clone())
            .unwrap_or_default();
        if cancel.is_cancelled() {
            return PermissionOutcome::Cancelled;
        }
        let decision = match &self.permission {
            None => Err("no permission handler".to_owned()),
            Some(handler) => {
                let request = PermissionRequest {
                    session_id,
                    tool_call,
                    options: options.clone(),
                    cancel: cancel.clone(),
                };
                tokio::select! {
                    d = handler(request) => d,
                    () = cancel.cancelled() => return PermissionOutcome::Cancelled,
                }
            }
        };
        let decision = decision.unwrap_or_else(|reason| {
            tracing::info!("permission request rejected safely: {reason}");
            PermissionDecision::Reject
        });
        if cancel.is_cancelled() {
            return PermissionOutcome::Cancelled;
        }
        choose(&options, &decision)
    }
}
