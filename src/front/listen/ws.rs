//! ACP over a WebSocket on `/acp` (the draft RFD's second transport): a GET with
//! `Upgrade: websocket` becomes a connection whose every JSON-RPC message is one text frame,
//! both ways, served by its own `oml acp` like an HTTP connection; it ends when the socket
//! closes. It knows the upgrade and the frames; the process is `gateway`'s.

use std::sync::Arc;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use hyper::header::{
    CONNECTION, HeaderValue, SEC_WEBSOCKET_ACCEPT, SEC_WEBSOCKET_KEY, SEC_WEBSOCKET_PROTOCOL,
    UPGRADE,
};
use hyper::{Request, Response, StatusCode, body::Incoming};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role;

use super::gateway::{Gateway, Probe, Route, Routing};
use super::http::CONNECTION_ID;
use super::{Body, State, status};

/// The largest WebSocket message taken, as the stdio transport's line cap.
pub const MAX_MESSAGE_BYTES: usize = crate::jsonrpc::DEFAULT_MAX_LINE_BYTES;

fn ws_config() -> tokio_tungstenite::tungstenite::protocol::WebSocketConfig {
    tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .max_message_size(Some(MAX_MESSAGE_BYTES))
        .max_frame_size(Some(MAX_MESSAGE_BYTES))
}

/// Whether `req` asks to become a WebSocket.
pub(super) fn is_upgrade(req: &Request<Incoming>) -> bool {
    req.headers()
        .get(UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// Answer the upgrade (101) and serve the socket once hyper hands it over.
pub(super) fn upgrade(state: Arc<State>, mut req: Request<Incoming>) -> Response<Body> {
    let Some(key) = req.headers().get(SEC_WEBSOCKET_KEY).cloned() else {
        return status(StatusCode::BAD_REQUEST, "Sec-WebSocket-Key is required");
    };
    let Ok(connection) = State::new_id() else {
        return status(StatusCode::INTERNAL_SERVER_ERROR, "no randomness for an id");
    };
    let gateway = match Gateway::start(&state.agent, Routing::Single) {
        Ok(g) => g,
        Err(e) => {
            tracing::warn!("cannot start the agent for a WebSocket: {e}");
            return status(StatusCode::INTERNAL_SERVER_ERROR, "cannot start the agent");
        }
    };
    let protocol = chosen_protocol(&req);
    let upgrading = hyper::upgrade::on(&mut req);
    state.add(connection.clone(), Arc::clone(&gateway));
    let id = connection.clone();
    tokio::spawn(async move {
        match upgrading.await {
            Ok(upgraded) => {
                let io = hyper_util::rt::TokioIo::new(upgraded);
                let socket =
                    WebSocketStream::from_raw_socket(io, Role::Server, Some(ws_config())).await;
                serve(socket, &gateway).await;
            }
            Err(e) => tracing::debug!("WebSocket upgrade failed: {e}"),
        }
        state.remove(&id).await;
    });
    let mut r = status(StatusCode::SWITCHING_PROTOCOLS, "");
    let h = r.headers_mut();
    h.insert(UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(CONNECTION, HeaderValue::from_static("Upgrade"));
    if let Ok(v) = HeaderValue::from_str(&derive_accept_key(key.as_bytes())) {
        h.insert(SEC_WEBSOCKET_ACCEPT, v);
    }
    if let Ok(v) = HeaderValue::from_str(&connection) {
        h.insert(CONNECTION_ID, v);
    }
    if let Some(p) = protocol {
        h.insert(SEC_WEBSOCKET_PROTOCOL, p);
    }
    r
}

/// The subprotocol to answer when the client offered some (a client that offers protocols
/// fails the handshake unless one is chosen): `acp` when offered, else the first.
fn chosen_protocol(req: &Request<Incoming>) -> Option<HeaderValue> {
    let offered: Vec<String> = req
        .headers()
        .get_all(SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|p| p.trim().to_owned())
        .filter(|p| !p.is_empty())
        .collect();
    let pick = offered.iter().find(|p| *p == "acp").or(offered.first())?;
    HeaderValue::from_str(pick).ok()
}

/// Frames to the process and the process's lines to frames, each way in a task of its own (a
/// client that is slow to read never holds up what it sends), until either side ends.
async fn serve<S>(socket: WebSocketStream<S>, gateway: &Arc<Gateway>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sink, mut frames) = socket.split();
    let mut lines = gateway.open(Route::Connection);
    let unread = Arc::clone(&gateway.unread);
    let mut writer = tokio::spawn(async move {
        while let Some(line) = lines.recv().await {
            unread.fetch_sub(line.len(), std::sync::atomic::Ordering::Relaxed);
            let text = String::from_utf8_lossy(line.trim_ascii_end()).into_owned();
            if sink.send(Message::text(text)).await.is_err() {
                break;
            }
        }
        let _ = sink.close().await;
    });
    loop {
        tokio::select! {
            frame = frames.next() => match frame {
                Some(Ok(Message::Text(text))) => {
                    let Ok(line) = super::http::one_line(Bytes::copy_from_slice(text.as_bytes()))
                    else {
                        tracing::debug!("a WebSocket frame that is not one JSON-RPC message");
                        continue;
                    };
                    match Probe::read(&line) {
                        Some(probe) => gateway.post(line.clone(), &probe, Route::Connection),
                        None => tracing::debug!("a WebSocket frame that is not a JSON object"),
                    }
                }
                Some(Ok(Message::Close(_)) | Err(_)) | None => break,
                Some(Ok(_)) => {}
            },
            _ = &mut writer => break,
        }
    }
    writer.abort();
}
