//! The listener's bearer token: read from `--token-file`, which must lie in a folder the sandbox
//! hides from confined commands (else a command the agent runs could read it and connect), or
//! made at start and told to the user on stdout only (a file would be readable by confined
//! commands wherever the sandbox cannot hide oml's runtime folder); and the check of each
//! request's `Authorization` header (or WebSocket subprotocol). It knows headers and files, not
//! connections.

use std::io::Read;

use hyper::HeaderMap;

use super::{ListenError, ListenOptions};

/// Random bytes in a made token (hex-encoded, so twice as many characters).
pub const TOKEN_BYTES: usize = 32;

/// The shortest token accepted from a file.
const MIN_TOKEN_CHARS: usize = 16;

/// The token, and whether it was made here (then the user is told it; a given one is not
/// printed).
pub(super) fn settle(options: &ListenOptions) -> Result<(String, bool), ListenError> {
    let Some(file) = &options.token_file else {
        let token = random_hex(TOKEN_BYTES)
            .map_err(|e| ListenError::Token(format!("cannot read /dev/urandom: {e}")))?;
        return Ok((token, true));
    };
    let text = std::fs::read_to_string(file)
        .map_err(|e| ListenError::Token(format!("cannot read {}: {e}", file.display())))?;
    // A command the agent runs (with the network on) that could read the token could open a
    // connection of its own, unconfined.
    crate::sandbox::hidden_from_commands(file).map_err(|why| ListenError::TokenFileReadable {
        file: file.clone(),
        why,
    })?;
    let token = text.trim().to_owned();
    if token.len() < MIN_TOKEN_CHARS || token.chars().any(char::is_whitespace) {
        return Err(ListenError::Token(format!(
            "{} must hold one word of at least {MIN_TOKEN_CHARS} characters",
            file.display()
        )));
    }
    Ok((token, false))
}

/// The WebSocket subprotocol prefix that carries the token, for clients that cannot set
/// headers on a WebSocket (browsers, Node's built-in WebSocket): `acp.bearer.<token>`.
pub const BEARER_PROTOCOL: &str = "acp.bearer.";

/// Whether `headers` carry the token: `Authorization: Bearer <token>`, or a
/// `Sec-WebSocket-Protocol` entry [`BEARER_PROTOCOL`]`<token>`. Compared in constant time.
pub(super) fn authorized(headers: &HeaderMap, token: &str) -> bool {
    let bearer = headers
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if bearer.is_some_and(|given| same(given.trim(), token)) {
        return true;
    }
    headers
        .get_all(hyper::header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|p| p.trim().strip_prefix(BEARER_PROTOCOL))
        .any(|given| same(given, token))
}

fn same(given: &str, token: &str) -> bool {
    let (a, b) = (given.as_bytes(), token.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `n` random bytes from the kernel, in hex. Without `/dev/urandom` there is no token or id:
/// one made from the clock and the pid would be guessable.
pub(super) fn random_hex(n: usize) -> std::io::Result<String> {
    let mut bytes = vec![0u8; n];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_bearer_token_passes() {
        let token = "0123456789abcdef0123";
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(hyper::header::AUTHORIZATION, v.parse().unwrap());
            authorized(&h, token)
        };
        assert!(with("Bearer 0123456789abcdef0123"));
        assert!(!with("Bearer 0123456789abcdef012"));
        assert!(!with("Bearer 0123456789abcdef01234"));
        assert!(!with("Basic 0123456789abcdef0123"));
        assert!(!with("0123456789abcdef0123"));
        assert!(!authorized(&HeaderMap::new(), token));
        let offered = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(hyper::header::SEC_WEBSOCKET_PROTOCOL, v.parse().unwrap());
            authorized(&h, token)
        };
        assert!(offered("acp, acp.bearer.0123456789abcdef0123"));
        assert!(!offered("acp, acp.bearer.0123456789abcdef012"));
        assert!(!offered("acp.bearer.0123456789abcdef0123x"));
        assert_eq!(random_hex(4).unwrap().len(), 8);
    }
}
