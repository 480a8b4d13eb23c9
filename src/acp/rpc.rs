//! ACP's JSON-RPC messages as a program that passes them on as they came reads and writes them
//! (`oml proxy`): what it reads of one (its method and id), the messages it writes itself
//! (requests, notifications, answers, errors), and the proxy chains' envelope
//! (`proxy/successor`), which carries a message to or from the successor.
//!
//! It knows the envelope, not the transport (`jsonrpc` is the transport) or the methods.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// JSON-RPC's `-32603 Internal error`.
pub const INTERNAL_ERROR: i64 = -32603;

/// The proxy-chains RFD's envelope of what goes to and comes from the successor.
pub const SUCCESSOR: &str = "proxy/successor";

const VERSION: &str = "2.0";

/// What is read of a message: its method and id, each as sent (an id of null is one).
#[derive(Debug, Default, Deserialize)]
pub struct Head {
    #[serde(default, deserialize_with = "given")]
    pub method: Option<Value>,
    #[serde(default, deserialize_with = "given")]
    pub id: Option<Value>,
}

/// `Some` whenever the member is there, null included.
fn given<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

impl Head {
    /// The head of `msg`; a message that is not an object has neither.
    pub fn of(msg: &Value) -> Head {
        #[derive(Deserialize)]
        struct Members {
            #[serde(default, deserialize_with = "given")]
            method: Option<Value>,
            #[serde(default, deserialize_with = "given")]
            id: Option<Value>,
        }
        // Only the two members are read: the params (which can hold a whole file) are not
        // copied.
        match Members::deserialize(msg) {
            Ok(m) => Head {
                method: m.method,
                id: m.id,
            },
            Err(_) => Head::default(),
        }
    }

    /// The method, when it is a string.
    pub fn method(&self) -> Option<&str> {
        self.method.as_ref().and_then(Value::as_str)
    }

    /// A request: it has a method and an id.
    pub fn is_request(&self) -> bool {
        self.method.is_some() && self.id.is_some()
    }

    /// An answer: it has no method.
    pub fn is_answer(&self) -> bool {
        self.method.is_none()
    }
}

/// A message written whole.
#[derive(Serialize)]
struct Message<'a> {
    jsonrpc: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    method: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a Value>,
}

impl Message<'_> {
    fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

fn empty<'a>() -> Message<'a> {
    Message {
        jsonrpc: VERSION,
        id: None,
        method: None,
        params: None,
        result: None,
        error: None,
    }
}

/// The result of an answer with nothing to say: `{}`.
pub fn empty_result() -> Value {
    Value::Object(serde_json::Map::new())
}

/// The request `method` with `params` and `id`.
pub fn request(id: &Value, method: &str, params: &Value) -> Value {
    let method = Value::String(method.to_owned());
    Message {
        id: Some(id),
        method: Some(&method),
        params: Some(params),
        ..empty()
    }
    .to_value()
}

/// The notification `method` with `params`.
pub fn notification(method: &str, params: &Value) -> Value {
    let method = Value::String(method.to_owned());
    Message {
        method: Some(&method),
        params: Some(params),
        ..empty()
    }
    .to_value()
}

/// The answer to the request `id`: `result`.
pub fn answer(id: &Value, result: &Value) -> Value {
    Message {
        id: Some(id),
        result: Some(result),
        ..empty()
    }
    .to_value()
}

/// The error object `{code, message}`.
pub fn error_object(code: i64, message: &str) -> Value {
    #[derive(Serialize)]
    struct Error<'a> {
        code: i64,
        message: &'a str,
    }
    serde_json::to_value(Error { code, message }).unwrap_or(Value::Null)
}

/// The error answer to the request `id`: `-32603` with `message`.
pub fn internal_error(id: &Value, message: &str) -> Value {
    let error = error_object(INTERNAL_ERROR, message);
    Message {
        id: Some(id),
        error: Some(&error),
        ..empty()
    }
    .to_value()
}

/// What an answer says: its result (null when it has none), or its error object.
pub fn outcome(answer: Value) -> Result<Value, Value> {
    #[derive(Deserialize)]
    struct Answer {
        #[serde(default)]
        result: Value,
        #[serde(default, deserialize_with = "given")]
        error: Option<Value>,
    }
    match serde_json::from_value::<Answer>(answer) {
        Ok(Answer {
            error: Some(error), ..
        }) => Err(error),
        Ok(Answer { result, .. }) => Ok(result),
        Err(_) => Ok(Value::Null),
    }
}

/// An error object's message, when it has one.
pub fn error_message(error: &Value) -> Option<&str> {
    #[derive(Deserialize)]
    struct Error<'a> {
        message: &'a str,
    }
    Error::deserialize(error).ok().map(|e| e.message)
}

/// A message's method and params, as the envelope holds them.
#[derive(Deserialize)]
struct Inner {
    #[serde(default)]
    method: Value,
    #[serde(default)]
    params: Value,
}

/// `msg` (a request or notification) in its `proxy/successor` envelope; `None` for an answer,
/// which goes as it is.
pub fn wrap(msg: &Value) -> Option<Value> {
    let head = Head::of(msg);
    let method = head.method.as_ref()?;
    #[derive(Serialize)]
    struct Wrapped<'a> {
        method: &'a Value,
        params: Option<&'a Value>,
    }
    let params = match msg {
        Value::Object(m) => m.get("params"),
        _ => None,
    };
    let inner = serde_json::to_value(Wrapped { method, params }).ok()?;
    let successor = Value::String(SUCCESSOR.to_owned());
    Some(
        Message {
            method: Some(&successor),
            params: Some(&inner),
            id: None,
            ..empty()
        }
        .to_value(),
    )
    .map(|mut envelope| {
        if let (Some(id), Value::Object(e)) = (head.id, &mut envelope) {
            e.insert("id".into(), id);
        }
        envelope
    })
}

/// The message a `proxy/successor` envelope holds, with the envelope's id.
pub fn unwrap(envelope: Value) -> Value {
    #[derive(Deserialize)]
    struct Envelope {
        #[serde(default)]
        params: Option<Inner>,
        #[serde(default, deserialize_with = "given")]
        id: Option<Value>,
    }
    let (inner, id) = match serde_json::from_value::<Envelope>(envelope) {
        Ok(e) => (e.params, e.id),
        Err(_) => (None, None),
    };
    let (method, params) = inner.map_or((Value::Null, Value::Null), |i| (i.method, i.params));
    let mut out = Message {
        method: Some(&method),
        params: Some(&params),
        ..empty()
    }
    .to_value();
    if let (Some(id), Value::Object(o)) = (id, &mut out) {
        o.insert("id".into(), id);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_are_read_and_written_as_the_envelope_says() {
        let request = json!({"jsonrpc": "2.0", "id": null, "method": "m", "params": [1]});
        let head = Head::of(&request);
        assert!(head.is_request());
        assert_eq!(head.method(), Some("m"));
        let envelope = wrap(&request).expect("a request is wrapped");
        assert_eq!(
            envelope,
            json!({"jsonrpc": "2.0", "method": "proxy/successor",
                   "params": {"method": "m", "params": [1]}, "id": null})
        );
        assert_eq!(unwrap(envelope), request);
        assert!(wrap(&json!({"jsonrpc": "2.0", "id": 1, "result": {}})).is_none());
        assert_eq!(
            internal_error(&json!(3), "no"),
            json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32603, "message": "no"}})
        );
        assert_eq!(outcome(json!({"id": 1, "result": 5})), Ok(json!(5)));
        let failed = outcome(json!({"id": 1, "error": {"code": 1, "message": "m"}}));
        assert_eq!(failed.as_ref().err().and_then(error_message), Some("m"));
    }
}
