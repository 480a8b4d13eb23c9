//! `client.connect` to an agent at a URL rather than a command: `http(s)://…/acp` (Streamable
//! HTTP) or `ws://…` (WebSocket), with the bearer token from `:token`, `:token-file` or
//! `$OML_ACP_TOKEN` (this one only to a loopback address or over TLS, so that a URL a program
//! was handed does not receive the user's token). It reads the options; the transport is
//! `acp_client::remote`'s.

use mlua::Table;

use crate::acp_client::{Category, ClientError, Remote, remote};

/// The environment variable a token is read from when the options give none.
pub const TOKEN_ENV: &str = "OML_ACP_TOKEN";

/// The remote agent `target` names, with its token; `None` when `target` is a command.
pub(super) fn remote_of(target: &str, opts: Option<&Table>) -> Result<Option<Remote>, ClientError> {
    if !remote::is_url(target) {
        return Ok(None);
    }
    let option = |key: &str| -> Result<Option<String>, ClientError> {
        match opts {
            Some(t) => t
                .get::<Option<String>>(key)
                .map_err(|e| ClientError::new(Category::Protocol, e.to_string())),
            None => Ok(None),
        }
    };
    let token = match (option("token")?, option("token-file")?) {
        (Some(t), _) => Some(t),
        (None, Some(file)) => Some(
            std::fs::read_to_string(&file)
                .map_err(|e| {
                    ClientError::new(Category::Connection, format!("cannot read {file}: {e}"))
                })?
                .trim()
                .to_owned(),
        ),
        // The environment's token goes only where it cannot be read on the way or by a stranger:
        // a loopback address, or TLS.
        (None, None) if private_or_tls(target) => {
            std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty())
        }
        (None, None) => None,
    };
    Ok(Some(Remote {
        url: target.to_owned(),
        token,
    }))
}

/// Whether `url` is `https://`, or `http://` or `ws://` to a loopback host.
fn private_or_tls(url: &str) -> bool {
    if url.starts_with("https://") || url.starts_with("wss://") {
        return true;
    }
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let host = rest.split(['/', '?']).next().unwrap_or_default();
    let host = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_token_goes_to_loopback_or_over_tls_only() {
        assert!(private_or_tls("http://127.0.0.1:8765/acp"));
        assert!(private_or_tls("ws://localhost:1/acp"));
        assert!(private_or_tls("http://[::1]:9/acp"));
        assert!(private_or_tls("https://agents.example.com/acp"));
        assert!(!private_or_tls("http://agents.example.com/acp"));
        assert!(!private_or_tls("http://127.0.0.1.example.com/acp"));
        assert!(!private_or_tls("ws://10.0.0.2:8765/acp"));
    }
}
