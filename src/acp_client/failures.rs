//! How what ends a request to an external agent becomes a `ClientError` with a category: the
//! agent's error answer (an "authentication required" one naming the methods it offers), a
//! timeout or a cancel, or the connection gone (with the agent's exit status and the tail of its
//! stderr). It knows the `Client`'s connection and process, not the sessions.

use super::client::{Client, data};
use super::process;
use super::{Category, ClientError};
use crate::jsonrpc::{self, RequestError};
use serde_json::Value;

impl Client {
    pub(super) async fn map_error(&self, error: RequestError) -> ClientError {
        // The reader stopped at the line that made the connection unusable: whatever ended the
        // request after that (the stop, the cancel, the close) is that protocol error.
        if !matches!(error, RequestError::Rpc { .. })
            && let Some(e) = self.inner.router.fatal_error()
        {
            self.close().await;
            return e;
        }
        match error {
            RequestError::Rpc { method, error } => self.agent_error(&method, error),
            RequestError::Cancelled { method, .. } => match self.inner.router.fatal_error() {
                Some(e) => {
                    self.close().await;
                    e
                }
                None => ClientError::new(Category::Connection, format!("{method} was cancelled")),
            },
            RequestError::Timeout { method, after, .. } => ClientError::new(
                Category::Connection,
                format!("{method}: the agent gave no answer within {after:?}"),
            ),
            other @ (RequestError::Closed { .. }
            | RequestError::Io { .. }
            | RequestError::Send { .. }) => self.connection_error(other.to_string()).await,
        }
    }

    /// An error answer of the agent; "authentication required" names the methods it offers.
    fn agent_error(&self, method: &str, error: jsonrpc::RpcError) -> ClientError {
        let mut e = ClientError::new(
            Category::Agent,
            format!("{method} failed: {} ({})", error.message, error.code),
        );
        e.code = Some(error.code.into());
        if error.code != jsonrpc::AUTH_REQUIRED || method == "authenticate" {
            e.data = error.data;
            return e;
        }
        let names: Vec<String> = (self.inner.initialized.methods.iter())
            .map(|m| match &m.name {
                Some(name) => format!("{} ({name})", m.id),
                None => m.id.clone(),
            })
            .collect();
        e.message = format!(
            "{method} failed: authentication required; the agent offers: {}",
            if names.is_empty() {
                "no methods".to_owned()
            } else {
                names.join(", ")
            }
        );
        let data = AuthData {
            auth_methods: &self.inner.initialized.auth_methods,
            error: error.data.as_ref(),
        };
        e.data = Some(self::data(&data));
        e
    }

    /// The connection is gone: say so with the agent's exit status and the tail of its stderr.
    async fn connection_error(&self, mut message: String) -> ClientError {
        let Some(process) = &self.inner.process else {
            message.push_str(&format!("; the connection to {} ended", self.inner.name));
            return ClientError::new(Category::Connection, message);
        };
        let status = process.wait_exit(process::EXIT_REPORT_WAIT).await;
        if let Some(status) = status {
            message.push_str(&format!(
                "; the agent exited with {}",
                process::describe_status(&status)
            ));
        }
        if status.is_some() {
            process.wait_stderr(process::STDERR_DRAIN_WAIT).await;
        }
        let tail = process.stderr_tail();
        let tail = tail.trim_end();
        if !tail.is_empty() {
            message.push_str(&format!("; its stderr ends with:\n{tail}"));
        }
        let mut e = ClientError::new(Category::Connection, message);
        e.data = Some(data(&ExitData {
            exit_status: status.and_then(|s| s.code()),
            stderr: tail,
        }));
        e
    }
}

/// Authentication required: the error's data, with the agent's own.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct AuthData<'a, M: serde::Serialize> {
    auth_methods: &'a M,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a Value>,
}

/// The connection is gone: the error's data.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ExitData<'a> {
    exit_status: Option<i32>,
    stderr: &'a str,
}
