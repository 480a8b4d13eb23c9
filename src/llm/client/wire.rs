//! What a request of each protocol ([`Api`]) looks like on the wire: where it is
//! posted, its body translated from the chat shape, and how the key is sent.
//!
//! It knows the protocols' URLs, headers and translations; not retries, streams or timeouts.

use crate::llm::api::Api;
use crate::llm::{LlmConfig, LlmError, anthropic, gemini, responses};

/// The URL and body of a call of `config`'s protocol, from the chat-shaped `body`.
pub(in crate::llm) fn outgoing(
    config: &LlmConfig,
    body: Vec<u8>,
) -> Result<(String, Vec<u8>), LlmError> {
    let api = config.api();
    let translated = match api {
        Api::Chat => Ok((body, String::new())),
        Api::Anthropic => {
            anthropic::request::translate(&body, config.prompt_caching).map(|b| (b, String::new()))
        }
        Api::Responses => responses::request::translate(&body).map(|b| (b, String::new())),
        Api::Gemini => gemini::request::translate(&body),
    };
    let (body, model) = translated
        .map_err(|error| LlmError::Config(format!("cannot translate the request: {error}")))?;
    Ok((api.call_url(&config.base_url, &model), body))
}

/// `builder` with `config`'s API key (a bearer token on the chat protocol; `x-api-key`, with
/// `anthropic-version`, on Anthropic's) and `llm.headers`.
pub(in crate::llm) fn authorize(
    mut builder: reqwest::RequestBuilder,
    config: &LlmConfig,
) -> Result<reqwest::RequestBuilder, LlmError> {
    let key = config.api_key.as_deref().filter(|key| !key.is_empty());
    match (config.api(), key) {
        (Api::Chat | Api::Responses, Some(key)) => builder = builder.bearer_auth(key),
        (Api::Chat | Api::Responses, None) => {}
        (Api::Gemini, key) => {
            if let Some(key) = key {
                builder = builder.header("x-goog-api-key", sensitive(key)?);
            }
        }
        (Api::Anthropic, key) => {
            builder = builder.header("anthropic-version", anthropic::VERSION);
            if let Some(key) = key {
                builder = builder.header("x-api-key", sensitive(key)?);
            }
        }
    }
    for (name, value) in &config.headers {
        let name = reqwest::header::HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
            LlmError::Config(format!("llm.headers: {name:?} is not a valid header name"))
        })?;
        let value = reqwest::header::HeaderValue::from_str(value).map_err(|_| {
            LlmError::Config(format!(
                "llm.headers: the value of {name} is not a valid header value"
            ))
        })?;
        builder = builder.header(name, value);
    }
    Ok(builder)
}

/// `key` as a header value that is never shown (in logs, in `Debug`).
fn sensitive(key: &str) -> Result<reqwest::header::HeaderValue, LlmError> {
    let mut value = reqwest::header::HeaderValue::from_str(key)
        .map_err(|_| LlmError::Config("llm.api-key is not a valid header value".to_owned()))?;
    value.set_sensitive(true);
    Ok(value)
}
