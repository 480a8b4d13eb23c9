//! JSON-RPC error codes (the standard ones and ACP's) and the error object, [`RpcError`], as sent
//! and as received.
//!
//! It knows nothing of the wire or of which method failed; callers pick the code.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// JSON-RPC: the line is not JSON (also used here for invalid UTF-8 and oversize lines).
pub const PARSE_ERROR: i32 = -32700;
/// JSON-RPC: the JSON is not a valid request object.
pub const INVALID_REQUEST: i32 = -32600;
/// JSON-RPC: the method does not exist or is not available.
pub const METHOD_NOT_FOUND: i32 = -32601;
/// JSON-RPC: the params are wrong for the method.
pub const INVALID_PARAMS: i32 = -32602;
/// JSON-RPC: something failed inside the receiver.
pub const INTERNAL_ERROR: i32 = -32603;
/// ACP: authentication is required before this operation.
pub const AUTH_REQUIRED: i32 = -32000;
/// ACP: a resource (session, file) was not found.
pub const RESOURCE_NOT_FOUND: i32 = -32002;
/// ACP (from LSP): the request was cancelled.
pub const REQUEST_CANCELLED: i32 = -32800;

/// A JSON-RPC error object, as sent and as received. Unknown codes are kept as they are.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{message} ({code})")]
pub struct RpcError {
    pub code: i32,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    /// An error with any code and message and no data.
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// The same error carrying `data` (a detail string or any JSON value).
    pub fn with_data(mut self, data: impl Into<Value>) -> Self {
        self.data = Some(data.into());
        self
    }

    /// `-32700 Parse error`.
    pub fn parse_error() -> Self {
        Self::new(PARSE_ERROR, "Parse error")
    }

    /// `-32600 Invalid Request`.
    pub fn invalid_request() -> Self {
        Self::new(INVALID_REQUEST, "Invalid Request")
    }

    /// `-32601 Method not found: <method>`.
    pub fn method_not_found(method: &str) -> Self {
        Self::new(METHOD_NOT_FOUND, format!("Method not found: {method}"))
    }

    /// `-32602 Invalid params: <detail>`.
    pub fn invalid_params(detail: impl fmt::Display) -> Self {
        Self::new(INVALID_PARAMS, format!("Invalid params: {detail}"))
    }

    /// `-32603 Internal error: <detail>`.
    pub fn internal_error(detail: impl fmt::Display) -> Self {
        Self::new(INTERNAL_ERROR, format!("Internal error: {detail}"))
    }

    /// `-32000 Authentication required`.
    pub fn auth_required() -> Self {
        Self::new(AUTH_REQUIRED, "Authentication required")
    }

    /// `-32002 Resource not found: <what>`.
    pub fn resource_not_found(what: impl fmt::Display) -> Self {
        Self::new(RESOURCE_NOT_FOUND, format!("Resource not found: {what}"))
    }

    /// `-32800 Request cancelled`.
    pub fn request_cancelled() -> Self {
        Self::new(REQUEST_CANCELLED, "Request cancelled")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_constructors_give_the_standard_codes_and_messages() {
        let cases = [
            (RpcError::parse_error(), -32700, "Parse error"),
            (RpcError::invalid_request(), -32600, "Invalid Request"),
            (
                RpcError::method_not_found("x/y"),
                -32601,
                "Method not found: x/y",
            ),
            (
                RpcError::invalid_params("missing sessionId"),
                -32602,
                "Invalid params: missing sessionId",
            ),
            (
                RpcError::internal_error("boom"),
                -32603,
                "Internal error: boom",
            ),
            (RpcError::auth_required(), -32000, "Authentication required"),
            (
                RpcError::resource_not_found("session s1"),
                -32002,
                "Resource not found: session s1",
            ),
            (RpcError::request_cancelled(), -32800, "Request cancelled"),
        ];
        for (error, code, message) in cases {
            assert_eq!((error.code, error.message.as_str()), (code, message));
            assert_eq!(error.to_string(), format!("{message} ({code})"));
        }
    }
}
