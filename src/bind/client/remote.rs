//! `client.connect` to an agent at a URL rather than a command: `http(s)://…/acp` (Streamable
//! HTTP) or `ws://…` (WebSocket), with the bearer token from `:token`, `:token-file` or
//! `$OML_ACP_TOKEN`. It reads the options; the transport is `acp_client::remote`'s.

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
        (None, None) => std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty()),
    };
    Ok(Some(Remote {
        url: target.to_owned(),
        token,
    }))
}
