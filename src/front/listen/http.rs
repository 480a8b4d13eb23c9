//! Streamable HTTP on `/acp`: POST carries one JSON-RPC message from the client (`initialize`
//! opens a connection and is answered in the response body, with its `Acp-Connection-Id`;
//! everything else is accepted with 202 and answered on an SSE stream), GET opens the
//! connection's stream or, with `Acp-Session-Id`, a session's, DELETE ends the connection.
//!
//! It knows the headers and status codes of the draft RFD as the official TypeScript SDK's
//! client speaks them; the connection's process and routing are `gateway`'s.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue};
use hyper::{Request, Response, StatusCode, body::Incoming};
use serde_json::json;

use super::gateway::{CloseOnDrop, Gateway, Probe, Route, Routing};
use super::{Body, INITIALIZE_TIMEOUT, MAX_BODY_BYTES, ORPHAN_GRACE, State, full, status};

/// The connection header.
pub const CONNECTION_ID: &str = "acp-connection-id";
/// The session header.
pub const SESSION_ID: &str = "acp-session-id";

fn header<'r>(req: &'r Request<Incoming>, name: &str) -> Option<&'r str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

/// A JSON-RPC error as the whole response, with an HTTP status.
fn rpc_error(code: StatusCode, rpc: i32, message: &str) -> Response<Body> {
    let body = json!({"jsonrpc": "2.0", "id": null, "error": {"code": rpc, "message": message}});
    let mut r = Response::new(full(Bytes::from(body.to_string())));
    *r.status_mut() = code;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// POST: one message from the client.
pub(super) async fn post(state: Arc<State>, req: Request<Incoming>) -> Response<Body> {
    let json = header(&req, CONTENT_TYPE.as_str()).is_some_and(|t| t.contains("application/json"));
    if !json {
        return status(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Content-Type must be application/json",
        );
    }
    let connection = header(&req, CONNECTION_ID).map(str::to_owned);
    let session = header(&req, SESSION_ID).map(str::to_owned);
    let body = match Limited::new(req.into_body(), MAX_BODY_BYTES)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(_) => return status(StatusCode::PAYLOAD_TOO_LARGE, "the message is too large"),
    };
    let body = match one_line(body) {
        Ok(b) => b,
        Err(BadBody::Batch) => {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                -32600,
                "ACP does not use JSON-RPC batches",
            );
        }
        Err(BadBody::NotJson) => return rpc_error(StatusCode::BAD_REQUEST, -32700, "Parse error"),
    };
    let Some(probe) = Probe::read(&body) else {
        return rpc_error(StatusCode::BAD_REQUEST, -32600, "not one JSON-RPC message");
    };
    let Some(connection) = connection else {
        return initialize(&state, &body, &probe).await;
    };
    let Some(gateway) = state.connection(&connection) else {
        return status(StatusCode::NOT_FOUND, "no such connection");
    };
    if gateway.ended() {
        state.remove(&connection).await;
        return status(StatusCode::GONE, "the connection's agent has ended");
    }
    let route = match session.as_deref().or(probe.session()) {
        Some(s) => Route::Session(s.to_owned()),
        None => Route::Connection,
    };
    gateway.post(body.clone(), &probe, route);
    status(StatusCode::ACCEPTED, "")
}

/// Why a POST body is not one message.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum BadBody {
    Batch,
    NotJson,
}

/// The body as one line: JSON with no raw line break inside (a pretty-printed message is
/// re-encoded).
pub(super) fn one_line(body: Bytes) -> Result<Bytes, BadBody> {
    let trimmed = body.trim_ascii();
    if trimmed.starts_with(b"[") {
        return Err(BadBody::Batch);
    }
    if memchr::memchr(b'\n', trimmed).is_none() {
        return Ok(Bytes::copy_from_slice(trimmed));
    }
    match serde_json::from_slice::<serde_json::Value>(trimmed) {
        Ok(v) => Ok(Bytes::from(v.to_string())),
        Err(_) => Err(BadBody::NotJson),
    }
}

/// A POST with no connection: it must be `initialize`, which starts the connection's process
/// and is answered here, with the new connection's id.
async fn initialize(state: &Arc<State>, body: &Bytes, probe: &Probe<'_>) -> Response<Body> {
    let (Some(id), Some("initialize")) = (probe.id, probe.method.as_deref()) else {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            -32600,
            "the first message of a connection is initialize (or give Acp-Connection-Id)",
        );
    };
    let Ok(connection) = State::new_id() else {
        return status(StatusCode::INTERNAL_SERVER_ERROR, "no randomness for an id");
    };
    let gateway = match Gateway::start(&state.agent, Routing::BySession) {
        Ok(g) => g,
        Err(e) => {
            tracing::warn!("cannot start the agent for a connection: {e}");
            return status(StatusCode::INTERNAL_SERVER_ERROR, "cannot start the agent");
        }
    };
    let closer = CloseOnDrop::new(&gateway);
    let answered = tokio::time::timeout(
        INITIALIZE_TIMEOUT,
        gateway.initialize(body.clone(), id.get()),
    );
    let answer = match answered.await {
        Ok(Some(answer)) => answer,
        Ok(None) => return status(StatusCode::BAD_GATEWAY, "the agent ended before answering"),
        Err(_) => {
            return status(
                StatusCode::GATEWAY_TIMEOUT,
                "the agent did not answer in time",
            );
        }
    };
    state.add(connection.clone(), Arc::clone(&gateway));
    closer.disarm();
    watch_orphan(state, &connection, &gateway);
    let mut r = Response::new(full(answer));
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Ok(v) = HeaderValue::from_str(&connection) {
        r.headers_mut().insert(CONNECTION_ID, v);
    }
    r
}

/// End a connection whose client never opens its connection stream, or let it go and never
/// comes back, within [`ORPHAN_GRACE`].
fn watch_orphan(state: &Arc<State>, connection: &str, gateway: &Arc<Gateway>) {
    let (state, connection, gateway) = (
        Arc::clone(state),
        connection.to_owned(),
        Arc::clone(gateway),
    );
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(ORPHAN_GRACE).await;
            if state.connection(&connection).is_none() {
                break;
            }
            if gateway.ended() {
                state.remove(&connection).await;
                break;
            }
            if !gateway.connection_read() {
                tracing::info!("connection {connection}: its client went away");
                state.remove(&connection).await;
                break;
            }
        }
    });
}

/// GET: the connection's SSE stream, or a session's.
pub(super) fn get(state: &Arc<State>, req: &Request<Incoming>) -> Response<Body> {
    let Some(connection) = header(req, CONNECTION_ID) else {
        return status(StatusCode::BAD_REQUEST, "Acp-Connection-Id is required");
    };
    let Some(gateway) = state.connection(connection) else {
        return status(StatusCode::NOT_FOUND, "no such connection");
    };
    let route = header(req, SESSION_ID).map_or(Route::Connection, |s| Route::Session(s.to_owned()));
    let lines = gateway.open(route);
    let body = super::sse::Events::new(lines, Arc::clone(&gateway.unread));
    let mut r = Response::new(BodyExt::boxed(body));
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

/// DELETE: end the connection.
pub(super) async fn delete(state: &Arc<State>, req: &Request<Incoming>) -> Response<Body> {
    let Some(connection) = header(req, CONNECTION_ID) else {
        return status(StatusCode::BAD_REQUEST, "Acp-Connection-Id is required");
    };
    if state.connection(connection).is_none() {
        return status(StatusCode::NOT_FOUND, "no such connection");
    }
    state.remove(connection).await;
    status(StatusCode::ACCEPTED, "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_becomes_one_line() {
        let one = |s: &str| one_line(Bytes::from(s.to_owned()));
        assert_eq!(
            one("{\"a\": 1}\n").unwrap(),
            Bytes::from_static(b"{\"a\": 1}")
        );
        assert_eq!(
            one("{\n  \"a\": 1\n}").unwrap(),
            Bytes::from_static(b"{\"a\":1}")
        );
        assert_eq!(one(" [{}]"), Err(BadBody::Batch));
        assert_eq!(one("{\n nope"), Err(BadBody::NotJson));
    }
}
