//! The streamable HTTP transport to a server at a URL: rmcp's reqwest client with the
//! server's headers, message limits, and TLS through the `ring` provider.
//!
//! rmcp's reqwest is built without a TLS provider of its own (see Cargo.toml); the first HTTP
//! server installs `ring` as the process's default rustls provider. An `Authorization: Bearer`
//! header goes to rmcp's own bearer field, which it sends on every request.

use std::collections::HashMap;
use std::sync::Once;

use http::{HeaderName, HeaderValue};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

use super::McpError;

static PROVIDER: Once = Once::new();

/// The transport to `url` with `headers`, accepting messages up to `max_bytes`.
pub(super) fn transport(
    url: &str,
    headers: &[(String, String)],
    max_bytes: usize,
) -> Result<StreamableHttpClientTransport<reqwest_mcp::Client>, McpError> {
    PROVIDER.call_once(|| {
        // Fails only when a provider is installed already, which is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    let mut config = StreamableHttpClientTransportConfig::with_uri(url);
    let mut custom = HashMap::new();
    for (name, value) in headers {
        if name.eq_ignore_ascii_case("authorization")
            && let Some(token) = value.strip_prefix("Bearer ")
        {
            config.auth_header = Some(token.to_owned());
            continue;
        }
        let header = HeaderName::try_from(name.as_str())
            .map_err(|e| McpError::Start(format!("invalid header name {name:?}: {e}")))?;
        let value = HeaderValue::try_from(value.as_str())
            .map_err(|e| McpError::Start(format!("invalid value of header {name}: {e}")))?;
        custom.insert(header, value);
    }
    config.custom_headers = custom;
    config.max_json_response_size = max_bytes;
    config.max_sse_event_size = max_bytes;
    let client = reqwest_mcp::Client::builder()
        .build()
        .map_err(|e| McpError::Start(format!("cannot make an HTTP client: {e}")))?;
    Ok(StreamableHttpClientTransport::with_client(client, config))
}
