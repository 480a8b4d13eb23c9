//! The domain proxy's HTTP face: each connection from inside the namespace is served as
//! HTTP/1.1; `CONNECT host:port` opens a tunnel, an absolute `http://` request is forwarded,
//! anything else is refused. Every host is judged by [`Domains::verdict`] before it is looked
//! up, and every address it resolves to by [`Domains::reaches_inward`]; a
//! refusal is a 403 whose body names the host and the setting, and a line in [`Refusals`].
//!
//! It never connects anywhere but the host of a request that passed, never to a Unix socket,
//! and never terminates TLS. It knows HTTP and the verdicts, not namespaces.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

use super::Refusals;
use crate::sandbox::domains::{Domains, Verdict, this_machine};

/// The most connections from commands served at once; a connection beyond is closed at once.
const MAX_CONNECTIONS: usize = 256;

/// How long a connection may take to send its request's head.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long reaching an allowed host may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long to wait before accepting again when accepting failed (no descriptors left).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// The request headers that concern the hop to the proxy, not the host: not forwarded.
const HOP_HEADERS: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
];

type Body = BoxBody<Bytes, hyper::Error>;

/// The most characters of a host a refusal shows.
const SHOWN_HOST_CHARS: usize = 80;

/// What the proxy knows while it serves.
struct Ctx {
    domains: Arc<Domains>,
    refusals: Arc<Refusals>,
    /// Room for connections and tunnels together ([`MAX_CONNECTIONS`]): a tunnel takes its
    /// own place when hyper hands it over, as the connection's is given back.
    room: Arc<Semaphore>,
}

/// Serve `listener` (inside the namespace) until the process ends.
pub(super) async fn run(
    listener: std::net::TcpListener,
    domains: Arc<Domains>,
    refusals: Arc<Refusals>,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    let room = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let ctx = Arc::new(Ctx {
        domains,
        refusals,
        room: room.clone(),
    });
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let Ok(permit) = room.clone().try_acquire_owned() else {
            continue;
        };
        let ctx = ctx.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let service = hyper::service::service_fn(move |req| handle(ctx.clone(), req));
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades()
                .await;
        });
    }
}

/// Where a request asks to go.
struct Target {
    host: String,
    port: u16,
}

/// Why a request was not carried.
enum Refused {
    /// Not a request a proxy carries (400).
    Malformed(&'static str),
    /// The host's verdict, or where it resolved to (403): the line for the tool result.
    Host(String),
    /// The host could not be reached (502).
    Unreachable(String),
    /// No room for another tunnel (503).
    Busy,
}

async fn handle(ctx: Arc<Ctx>, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let carried = match target(&req) {
        Ok(target) => match reach(&ctx.domains, &target).await {
            Ok(upstream) if req.method() == Method::CONNECT => tunnel(&ctx, req, upstream),
            Ok(upstream) => forward(req, upstream, &target).await,
            Err(refused) => Err(refused),
        },
        Err(refused) => Err(refused),
    };
    Ok(carried.unwrap_or_else(|refused| answer(&ctx, refused)))
}

/// The host and port of an absolute `http://` request or a `CONNECT`.
fn target(req: &Request<Incoming>) -> Result<Target, Refused> {
    let uri = req.uri();
    let host = uri.host().filter(|h| !h.is_empty());
    let host = host.ok_or(Refused::Malformed(
        "no host: send CONNECT or an absolute http:// URL",
    ))?;
    let port = if req.method() == Method::CONNECT {
        uri.port_u16()
            .ok_or(Refused::Malformed("CONNECT needs host:port"))?
    } else {
        match uri.scheme_str() {
            Some("http") => uri.port_u16().unwrap_or(80),
            _ => return Err(Refused::Malformed("only http:// is forwarded; use CONNECT")),
        }
    };
    Ok(Target {
        host: host.to_owned(),
        port,
    })
}

/// The host judged, looked up, its addresses judged, and a connection opened to the first one
/// that answers.
async fn reach(domains: &Domains, target: &Target) -> Result<TcpStream, Refused> {
    let shown = format!("{}:{}", shown_host(&target.host), target.port);
    match domains.verdict(&target.host) {
        Verdict::Allowed => {}
        Verdict::NotAHost => {
            return Err(Refused::Host(format!(
                "{shown} — not a host name or an address as written"
            )));
        }
        Verdict::Denied => {
            let from = &domains.denied_from;
            return Err(Refused::Host(format!("{shown} — in {from}")));
        }
        Verdict::NotAllowed => {
            let from = &domains.allowed_from;
            return Err(Refused::Host(format!("{shown} — not in {from}")));
        }
    }
    let inward_ok = domains.reaches_inward(&target.host);
    let bare = target.host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> = match bare.parse::<std::net::IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, target.port)],
        Err(_) => tokio::net::lookup_host((bare, target.port))
            .await
            .map_err(|e| Refused::Unreachable(format!("{shown}: {e}")))?
            .collect(),
    };
    if let Some(addr) = addrs.iter().find(|a| domains.denies(&a.ip())) {
        let (ip, from) = (addr.ip(), &domains.denied_from);
        return Err(Refused::Host(format!(
            "{shown} — resolves to {ip}, in {from}"
        )));
    }
    let (inward, outward): (Vec<_>, Vec<_>) = addrs
        .into_iter()
        .partition(|a| this_machine(&a.ip()) && !inward_ok);
    if outward.is_empty()
        && let Some(addr) = inward.first()
    {
        let ip = addr.ip();
        return Err(Refused::Host(format!(
            "{shown} — resolves to {ip} (this machine or its link), reached only as an address or localhost listed exactly in {}",
            domains.allowed_from
        )));
    }
    let mut last = format!("{shown}: no address");
    for addr in outward {
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => return Ok(stream),
            Ok(Err(e)) => last = format!("{shown}: {e}"),
            Err(_) => last = format!("{shown}: no answer within {CONNECT_TIMEOUT:?}"),
        }
    }
    Err(Refused::Unreachable(last))
}

/// Answer 200 and join the command's connection, once hyper hands it over, to `upstream`; the
/// tunnel holds a place of [`MAX_CONNECTIONS`] while it lasts (503 when there is none).
fn tunnel(
    ctx: &Ctx,
    req: Request<Incoming>,
    mut upstream: TcpStream,
) -> Result<Response<Body>, Refused> {
    let Ok(place) = ctx.room.clone().try_acquire_owned() else {
        return Err(Refused::Busy);
    };
    tokio::spawn(async move {
        let _place = place;
        if let Ok(upgraded) = hyper::upgrade::on(req).await {
            let mut upgraded = TokioIo::new(upgraded);
            let _ = tokio::io::copy_bidirectional(&mut upgraded, &mut upstream).await;
        }
    });
    Ok(Response::new(empty()))
}

/// `host` as a refusal shows it: at most [`SHOWN_HOST_CHARS`] characters.
fn shown_host(host: &str) -> String {
    match host.char_indices().nth(SHOWN_HOST_CHARS) {
        Some((cut, _)) => format!("{}…", &host[..cut]),
        None => host.to_owned(),
    }
}

/// Send `req` to `upstream` in origin form, with the hop's own headers left out, and hand back
/// the answer as it streams.
async fn forward(
    mut req: Request<Incoming>,
    upstream: TcpStream,
    target: &Target,
) -> Result<Response<Body>, Refused> {
    let unreachable = |e: hyper::Error| Refused::Unreachable(format!("{}: {e}", target.host));
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(upstream))
        .await
        .map_err(unreachable)?;
    tokio::spawn(conn);
    let origin = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .parse()
        .map_err(|_| Refused::Malformed("a path that cannot be forwarded"))?;
    *req.uri_mut() = origin;
    let headers = req.headers_mut();
    for name in HOP_HEADERS {
        headers.remove(name);
    }
    let host = match target.port {
        80 => target.host.clone(),
        port => format!("{}:{port}", target.host),
    };
    if let Ok(value) = host.parse() {
        headers.insert(hyper::header::HOST, value);
    }
    let response = sender.send_request(req).await.map_err(unreachable)?;
    Ok(response.map(BodyExt::boxed))
}

/// The answer to a request that was not carried; a refused host is also kept for the tool
/// result.
fn answer(ctx: &Ctx, refused: Refused) -> Response<Body> {
    let (status, body) = match refused {
        Refused::Malformed(why) => (StatusCode::BAD_REQUEST, format!("oml sandbox proxy: {why}")),
        Refused::Host(line) => {
            ctx.refusals
                .push(format!("[sandbox: refused connection to {line}]"));
            (
                StatusCode::FORBIDDEN,
                format!("oml sandbox: refused connection to {line}"),
            )
        }
        Refused::Busy => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("oml sandbox proxy: {MAX_CONNECTIONS} connections already"),
        ),
        Refused::Unreachable(why) => (
            StatusCode::BAD_GATEWAY,
            format!("oml sandbox proxy: cannot reach {why}"),
        ),
    };
    let mut response = Response::new(full(format!("{body}\n")));
    *response.status_mut() = status;
    response
}

fn full(text: String) -> Body {
    Full::new(Bytes::from(text))
        .map_err(|never| match never {})
        .boxed()
}

fn empty() -> Body {
    full(String::new())
}
