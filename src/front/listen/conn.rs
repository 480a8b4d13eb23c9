//! One TCP connection of `oml acp --listen`, from accept to its end: at most
//! [`MAX_TCP_CONNECTIONS`] at once, the TLS handshake and the first bytes within
//! [`HEADER_TIMEOUT`], then HTTP/2 when the client opened with its preface (or chose `h2` by
//! ALPN) and HTTP/1.1 otherwise, each request's headers within the same timeout. A client that
//! connects and sends nothing holds a slot for that long at most, and one that has not sent the
//! token is ended by the door (`door`: its own time limit, and a cap of its own). It knows
//! sockets and hyper's builders, not routes.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;

use super::door::{Door, Standing};
use super::{HEADER_TIMEOUT, MAX_TCP_CONNECTIONS, State, route, sse};

/// How long the accept loop waits after a failed accept (no descriptors left, say).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// How often the first bytes are looked at again while they are still arriving.
const PREFACE_POLL: Duration = Duration::from_millis(5);

/// HTTP/2's connection preface.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

pub(super) async fn accept_loop(
    listener: tokio::net::TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    state: Arc<State>,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_TCP_CONNECTIONS));
    let door = Door::default();
    loop {
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        let (socket, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::debug!("accept failed: {e}");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let (state, tls) = (Arc::clone(&state), tls.clone());
        let standing = door.admit();
        tokio::spawn(async move {
            let _slot = slot;
            tokio::select! {
                () = connection(socket, peer, tls, state, Arc::clone(&standing)) => {}
                () = standing.expired() => {
                    tracing::debug!("{peer} sent no request with the token in time");
                }
            }
            standing.close();
        });
    }
}

/// One accepted connection: the TLS handshake or the first bytes, then HTTP.
async fn connection(
    socket: TcpStream,
    peer: std::net::SocketAddr,
    tls: Option<tokio_rustls::TlsAcceptor>,
    state: Arc<State>,
    standing: Arc<Standing>,
) {
    let Some(tls) = tls else {
        match tokio::time::timeout(HEADER_TIMEOUT, opens_with_h2(&socket)).await {
            Ok(Some(h2)) => serve(socket, h2, state, standing).await,
            Ok(None) => {}
            Err(_) => tracing::debug!("{peer} sent nothing in time"),
        }
        return;
    };
    match tokio::time::timeout(HEADER_TIMEOUT, tls.accept(socket)).await {
        Ok(Ok(stream)) => {
            let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
            serve(stream, h2, state, standing).await;
        }
        Ok(Err(e)) => tracing::debug!("TLS handshake with {peer} failed: {e}"),
        Err(_) => tracing::debug!("TLS handshake with {peer} timed out"),
    }
}

/// Whether the client's first bytes are HTTP/2's preface; `None` when it closed first.
async fn opens_with_h2(socket: &TcpStream) -> Option<bool> {
    let mut buf = [0u8; H2_PREFACE.len()];
    loop {
        let n = socket.peek(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        if buf[..n] != H2_PREFACE[..n] {
            return Some(false);
        }
        if n == H2_PREFACE.len() {
            return Some(true);
        }
        tokio::time::sleep(PREFACE_POLL).await;
    }
}

/// Serve one connection with hyper, as HTTP/2 or HTTP/1.1 (with upgrades, for WebSockets).
async fn serve<S>(stream: S, h2: bool, state: Arc<State>, standing: Arc<Standing>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let io = hyper_util::rt::TokioIo::new(stream);
    let service = hyper::service::service_fn(move |req| {
        let state = Arc::clone(&state);
        let standing = Arc::clone(&standing);
        async move { Ok::<_, Infallible>(route(state, &standing, req).await) }
    });
    let ended = if h2 {
        hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .timer(hyper_util::rt::TokioTimer::new())
            .keep_alive_interval(Some(sse::KEEPALIVE))
            .serve_connection(io, service)
            .await
    } else {
        hyper::server::conn::http1::Builder::new()
            .timer(hyper_util::rt::TokioTimer::new())
            .header_read_timeout(HEADER_TIMEOUT)
            .serve_connection(io, service)
            .with_upgrades()
            .await
    };
    if let Err(e) = ended {
        tracing::debug!("HTTP connection ended: {e}");
    }
}
