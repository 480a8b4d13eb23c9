//! The messages of JSON-RPC 2.0 as oml reads them: request ids, requests, notifications,
//! responses and unusable lines, and [`classify`], which turns one line into one [`Message`].
//!
//! Pure: no I/O and no connection state. It does not know where lines come from ([`super::frame`])
//! or what is done with a message ([`super::connection`]).

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use super::error::{INTERNAL_ERROR, RpcError};
use super::limits::MALFORMED_EXCERPT_BYTES;

/// A request id: a JSON number or a string, echoed exactly as received. Null ids are not
/// accepted on requests.
///
/// An integer within `i64`/`u64` is a [`RequestId::Number`]. Any other number (2^64+1, `1.5`,
/// `1e3`), which serde_json would read as an `f64` and write back changed
/// (`1.8446744073709552e+19`, `1000.0`), is a [`RequestId::Exact`]: the text the peer sent.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(untagged)]
pub enum RequestId {
    Number(serde_json::Number),
    Exact(ExactNumber),
    String(String),
}

/// A JSON number kept as the text it was sent as, written back verbatim.
#[derive(Clone, Debug)]
pub struct ExactNumber(Box<RawValue>);

impl ExactNumber {
    /// The number's text, as the peer wrote it.
    pub fn as_str(&self) -> &str {
        self.0.get()
    }
}

impl PartialEq for ExactNumber {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for ExactNumber {}

impl std::hash::Hash for ExactNumber {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl Serialize for ExactNumber {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl From<u64> for RequestId {
    fn from(n: u64) -> Self {
        Self::Number(n.into())
    }
}

impl From<&str> for RequestId {
    fn from(s: &str) -> Self {
        Self::String(s.to_owned())
    }
}

impl From<String> for RequestId {
    fn from(s: String) -> Self {
        Self::String(s)
    }
}

/// Shown as on the wire: `7` or `"abc"`.
impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Number(n) => write!(f, "{n}"),
            Self::Exact(n) => f.write_str(n.as_str()),
            Self::String(s) => write!(f, "{}", Value::from(s.as_str())),
        }
    }
}

/// A call that expects an answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub id: RequestId,
    pub method: String,
    /// `None` when the message had no `params` member.
    pub params: Option<Value>,
}

/// A call that expects no answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Notification {
    pub method: String,
    /// `None` when the message had no `params` member.
    pub params: Option<Value>,
}

/// An answer to a request.
#[derive(Clone, Debug, PartialEq)]
pub struct Response {
    /// `None` for an error answer with a null (or missing) id: the peer could not read one of
    /// our messages well enough to tell which.
    pub id: Option<RequestId>,
    pub outcome: Result<Value, RpcError>,
}

/// Why a line is not a usable JSON-RPC message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MalformedKind {
    /// The line is not JSON.
    ParseError,
    /// The line is not UTF-8.
    InvalidUtf8,
    /// The line is longer than the reader's cap; `len` is its whole length in bytes.
    TooLong { len: usize },
    /// Valid JSON that is not a JSON-RPC 2.0 request, notification or response: a scalar, an
    /// array (batches are not supported), an object without `"jsonrpc": "2.0"` such as a log
    /// record, or one of the wrong shape.
    InvalidRequest,
}

/// A line that could not be used. On the client side every one of these is agent noise.
#[derive(Clone, Debug, PartialEq)]
pub struct Malformed {
    pub kind: MalformedKind,
    /// The id, when the line is an invalid request whose id could still be read (a number or a
    /// string); it is what the error answer must carry.
    pub id: Option<RequestId>,
    /// What is wrong, in words (also sent as the error's `data`).
    pub detail: String,
    /// The head of the line, at most [`MALFORMED_EXCERPT_BYTES`], decoded lossily.
    pub excerpt: String,
}

impl Malformed {
    /// The error an agent answers this line with: `-32700` for lines that are not JSON (not
    /// UTF-8, too long, or unparseable) and `-32600` for JSON that is not a valid request; the
    /// detail goes in `data`. Its id is [`Malformed::id`], null when there is none.
    pub fn error(&self) -> RpcError {
        let error = match self.kind {
            MalformedKind::ParseError
            | MalformedKind::InvalidUtf8
            | MalformedKind::TooLong { .. } => RpcError::parse_error(),
            MalformedKind::InvalidRequest => RpcError::invalid_request(),
        };
        error.with_data(self.detail.clone())
    }
}

/// One line, classified.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    Request(Request),
    Notification(Notification),
    Response(Response),
    Malformed(Malformed),
}

/// What the reader hands to the owner of a [`Connection`](super::Connection). Responses never
/// appear here: the reader routes them to the pending request itself.
#[derive(Clone, Debug, PartialEq)]
pub enum Incoming {
    Request(Request),
    Notification(Notification),
    /// A line that could not be used. `consecutive` counts the bad lines in a row, this one
    /// included; any good message resets it. The policy (answer, skip, give up) is the owner's.
    Malformed {
        malformed: Malformed,
        consecutive: u32,
    },
}

/// Classifies one complete line (without its line ending). Never fails: anything unusable is a
/// [`Message::Malformed`]. Strict about `"jsonrpc": "2.0"`, so a JSON log record that happens to
/// carry an `id` is never taken for a response.
pub fn classify(line: &[u8]) -> Message {
    let text = match std::str::from_utf8(line) {
        Ok(text) => text,
        Err(e) => {
            return malformed(
                MalformedKind::InvalidUtf8,
                None,
                format!("line is not valid UTF-8: {e}"),
                line,
            );
        }
    };
    match serde_json::from_str::<Value>(text) {
        Ok(value) => classify_value(value, line).with_exact_id(text),
        Err(e) => malformed(
            MalformedKind::ParseError,
            None,
            format!("line is not JSON: {e}"),
            line,
        ),
    }
}

fn classify_value(value: Value, line: &[u8]) -> Message {
    let mut object = match value {
        Value::Object(object) => object,
        Value::Array(_) => {
            let detail = "expected a JSON-RPC object, got an array (batches are not supported)";
            return invalid(None, detail, line);
        }
        other => {
            let detail = format!("expected a JSON-RPC object, got {}", json_kind(&other));
            return invalid(None, detail, line);
        }
    };
    let id_value = object.remove("id");
    let id = id_value.as_ref().and_then(request_id);
    match object.get("jsonrpc") {
        Some(Value::String(version)) if version == "2.0" => {}
        Some(other) => {
            let detail = format!("\"jsonrpc\" must be \"2.0\", got {other}");
            return invalid(id, detail, line);
        }
        None => return invalid(id, "not JSON-RPC: no \"jsonrpc\": \"2.0\"", line),
    }
    if let Some(method) = object.remove("method") {
        let Value::String(method) = method else {
            return invalid(id, "\"method\" must be a string", line);
        };
        let params = object.remove("params");
        return match (id_value, id) {
            (None, _) => Message::Notification(Notification { method, params }),
            (Some(_), Some(id)) => Message::Request(Request { id, method, params }),
            (Some(other), None) => {
                let detail = format!("a request id must be a number or a string, got {other}");
                invalid(None, detail, line)
            }
        };
    }
    match (object.remove("result"), object.remove("error")) {
        (Some(_), Some(_)) => invalid(id, "a response has both \"result\" and \"error\"", line),
        (None, None) => {
            let detail =
                "neither a request (no \"method\") nor a response (no \"result\" or \"error\")";
            invalid(id, detail, line)
        }
        (Some(result), None) => match id {
            Some(id) => Message::Response(Response {
                id: Some(id),
                outcome: Ok(result),
            }),
            None => invalid(None, "a result needs a number or string id", line),
        },
        (None, Some(error)) => match (id_value, id) {
            (_, Some(id)) => Message::Response(Response {
                id: Some(id),
                outcome: Err(rpc_error(error)),
            }),
            (None | Some(Value::Null), None) => Message::Response(Response {
                id: None,
                outcome: Err(rpc_error(error)),
            }),
            (Some(other), None) => {
                let detail =
                    format!("a response id must be a number, a string or null, got {other}");
                invalid(None, detail, line)
            }
        },
    }
}

impl Message {
    /// This message with a numeric id that did not survive parsing as a `Value` (it became an
    /// `f64`) replaced by the text of the id in `line`. Parses the line a second time, only
    /// for such ids.
    fn with_exact_id(mut self, line: &str) -> Message {
        let id = match &mut self {
            Message::Request(r) => Some(&mut r.id),
            Message::Response(r) => r.id.as_mut(),
            Message::Malformed(m) => m.id.as_mut(),
            Message::Notification(_) => None,
        };
        if let Some(id) = id
            && matches!(id, RequestId::Number(n) if n.is_f64())
            && let Ok(IdText { id: Some(raw) }) = serde_json::from_str::<IdText>(line)
        {
            *id = RequestId::Exact(ExactNumber(raw.to_owned()));
        }
        self
    }
}

/// The `id` member of a message, as its text.
#[derive(Deserialize)]
struct IdText<'a> {
    #[serde(borrow)]
    id: Option<&'a RawValue>,
}

fn request_id(value: &Value) -> Option<RequestId> {
    match value {
        Value::Number(n) => Some(RequestId::Number(n.clone())),
        Value::String(s) => Some(RequestId::String(s.clone())),
        _ => None,
    }
}

/// Reads an error object leniently: a peer's answer must fail its request even when the error is
/// oddly shaped, rather than leave the request waiting.
fn rpc_error(value: Value) -> RpcError {
    match value {
        Value::Object(mut object) => {
            let code = object
                .get("code")
                .and_then(Value::as_i64)
                .and_then(|c| i32::try_from(c).ok())
                .unwrap_or(INTERNAL_ERROR);
            let message = match object.remove("message") {
                Some(Value::String(message)) => message,
                Some(other) => other.to_string(),
                None => String::new(),
            };
            RpcError {
                code,
                message,
                data: object.remove("data"),
            }
        }
        Value::String(message) => RpcError::new(INTERNAL_ERROR, message),
        other => RpcError::new(INTERNAL_ERROR, other.to_string()),
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn invalid(id: Option<RequestId>, detail: impl Into<String>, line: &[u8]) -> Message {
    malformed(MalformedKind::InvalidRequest, id, detail.into(), line)
}

pub(super) fn malformed(
    kind: MalformedKind,
    id: Option<RequestId>,
    detail: String,
    line: &[u8],
) -> Message {
    Message::Malformed(Malformed {
        kind,
        id,
        detail,
        excerpt: excerpt(line),
    })
}

/// The head of `bytes`, at most [`MALFORMED_EXCERPT_BYTES`], without a character cut in half.
fn excerpt(bytes: &[u8]) -> String {
    let head = &bytes[..bytes.len().min(MALFORMED_EXCERPT_BYTES)];
    match std::str::from_utf8(head) {
        Ok(text) => text.to_owned(),
        // Only the last character is incomplete (cut by the limit): drop it.
        Err(e) if e.error_len().is_none() => {
            String::from_utf8_lossy(&head[..e.valid_up_to()]).into_owned()
        }
        Err(_) => String::from_utf8_lossy(head).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::PARSE_ERROR;
    use serde_json::json;

    fn check(line: &str, expected: Message) {
        assert_eq!(classify(line.as_bytes()), expected, "line: {line}");
    }

    fn invalid_with(id: Option<RequestId>, detail: &str, line: &str) -> Message {
        Message::Malformed(Malformed {
            kind: MalformedKind::InvalidRequest,
            id,
            detail: detail.to_owned(),
            excerpt: line.to_owned(),
        })
    }

    #[test]
    fn well_formed_messages_are_classified_by_shape() {
        let cases = [
            (
                r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"a":1}}"#,
                Message::Request(Request {
                    id: RequestId::from(0),
                    method: "initialize".into(),
                    params: Some(json!({"a": 1})),
                }),
            ),
            (
                r#"{"jsonrpc":"2.0","id":"x-1","method":"m"}"#,
                Message::Request(Request {
                    id: RequestId::from("x-1"),
                    method: "m".into(),
                    params: None,
                }),
            ),
            (
                r#"{"jsonrpc":"2.0","method":"session/update","params":[]}"#,
                Message::Notification(Notification {
                    method: "session/update".into(),
                    params: Some(json!([])),
                }),
            ),
            (
                r#"{"jsonrpc":"2.0","id":3,"result":null}"#,
                Message::Response(Response {
                    id: Some(RequestId::from(3)),
                    outcome: Ok(Value::Null),
                }),
            ),
            (
                r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"nope","data":[1]}}"#,
                Message::Response(Response {
                    id: Some(RequestId::from(3)),
                    outcome: Err(RpcError::new(-32601, "nope").with_data(json!([1]))),
                }),
            ),
            (
                r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#,
                Message::Response(Response {
                    id: None,
                    outcome: Err(RpcError::parse_error()),
                }),
            ),
            (
                r#"{"jsonrpc":"2.0","id":4,"error":"boom"}"#,
                Message::Response(Response {
                    id: Some(RequestId::from(4)),
                    outcome: Err(RpcError::new(INTERNAL_ERROR, "boom")),
                }),
            ),
        ];
        for (line, expected) in cases {
            check(line, expected);
        }
    }

    #[test]
    fn json_that_is_not_json_rpc_is_an_invalid_request_keeping_a_readable_id() {
        let cases: [(&str, Option<RequestId>, &str); 9] = [
            ("42", None, "expected a JSON-RPC object, got a number"),
            (
                "[1,2]",
                None,
                "expected a JSON-RPC object, got an array (batches are not supported)",
            ),
            (
                r#"{"level":"info","id":1,"msg":"started"}"#,
                Some(RequestId::from(1)),
                "not JSON-RPC: no \"jsonrpc\": \"2.0\"",
            ),
            (
                r#"{"jsonrpc":"1.0","id":"a","method":"m"}"#,
                Some(RequestId::from("a")),
                "\"jsonrpc\" must be \"2.0\", got \"1.0\"",
            ),
            (
                r#"{"jsonrpc":"2.0","id":5,"method":7}"#,
                Some(RequestId::from(5)),
                "\"method\" must be a string",
            ),
            (
                r#"{"jsonrpc":"2.0","id":null,"method":"m"}"#,
                None,
                "a request id must be a number or a string, got null",
            ),
            (
                r#"{"jsonrpc":"2.0","id":6}"#,
                Some(RequestId::from(6)),
                "neither a request (no \"method\") nor a response (no \"result\" or \"error\")",
            ),
            (
                r#"{"jsonrpc":"2.0","id":7,"result":1,"error":{}}"#,
                Some(RequestId::from(7)),
                "a response has both \"result\" and \"error\"",
            ),
            (
                r#"{"jsonrpc":"2.0","result":1}"#,
                None,
                "a result needs a number or string id",
            ),
        ];
        for (line, id, detail) in cases {
            check(line, invalid_with(id, detail, line));
        }
    }

    #[test]
    fn lines_that_are_not_json_are_parse_errors() {
        let Message::Malformed(m) = classify(b"Starting server on port 3000...") else {
            panic!("expected a malformed line");
        };
        assert_eq!(m.kind, MalformedKind::ParseError);
        assert!(m.detail.starts_with("line is not JSON: "), "{}", m.detail);
        assert_eq!(m.excerpt, "Starting server on port 3000...");
        assert_eq!(m.error().code, PARSE_ERROR);

        let Message::Malformed(m) = classify(b"{\"a\":\"\xff\"}") else {
            panic!("expected a malformed line");
        };
        assert_eq!(m.kind, MalformedKind::InvalidUtf8);
        assert_eq!(m.excerpt, "{\"a\":\"\u{fffd}\"}");
        assert_eq!(m.error().code, PARSE_ERROR);
    }

    #[test]
    fn numeric_ids_keep_their_exact_json_form() {
        let exact = [
            "18446744073709551617",
            "-18446744073709551617",
            "1e3",
            "1.50",
            "123456789012345678901234567890",
        ];
        for id in ["0", "7", "18446744073709551615", "-3", "1.5"]
            .into_iter()
            .chain(exact)
        {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"m"}}"#);
            let Message::Request(request) = classify(line.as_bytes()) else {
                panic!("expected a request: {line}");
            };
            assert_eq!(request.id.to_string(), id);
            assert_eq!(serde_json::to_string(&request.id).ok().as_deref(), Some(id));
        }
    }

    #[test]
    fn excerpts_keep_the_head_and_never_split_a_character() {
        let long = "é".repeat(MALFORMED_EXCERPT_BYTES);
        let cut = excerpt(long.as_bytes());
        assert_eq!(cut, "é".repeat(MALFORMED_EXCERPT_BYTES / 2));
        let odd = format!("a{long}");
        assert_eq!(excerpt(odd.as_bytes()).len(), MALFORMED_EXCERPT_BYTES - 1);
        assert_eq!(excerpt(b"short"), "short");
    }
}
