//! The chat shape as the native translations (`anthropic`, `responses`, `gemini`) read and write
//! it: a content part's image URL and the inline data of a `data:` URL on the way out, and the
//! chat chunks the one fold folds on the way in. Pure.
//!
//! It knows the chat shape only; each protocol's own shape stays in its module.

use serde_json::{Value, json};

/// The URL of an `image_url` content part (`{image_url: {url}}`, or a bare string), if any.
pub fn image_url(part: &Value) -> Option<&str> {
    part.pointer("/image_url/url")
        .or_else(|| part.get("image_url"))
        .and_then(Value::as_str)
}

/// The media type and base64 data of a `data:<type>;base64,<data>` URL.
pub fn inline_data(url: &str) -> Option<(&str, &str)> {
    url.strip_prefix("data:")
        .and_then(|rest| rest.split_once(";base64,"))
}

/// A chunk whose first choice carries `delta`.
pub fn delta_chunk(delta: Value) -> Value {
    json!({"choices": [{"index": 0, "delta": delta}]})
}

/// A chunk carrying `fields` of tool call number `call`.
pub fn tool_chunk(call: usize, mut fields: Value) -> Value {
    fields["index"] = json!(call);
    delta_chunk(json!({ "tool_calls": [fields] }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_urls_and_inline_data() {
        let nested = json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}});
        assert_eq!(image_url(&nested), Some("data:image/png;base64,AA"));
        assert_eq!(
            image_url(&json!({"image_url": "https://x"})),
            Some("https://x")
        );
        assert_eq!(image_url(&json!({"type": "text"})), None);
        assert_eq!(
            inline_data("data:image/png;base64,AA"),
            Some(("image/png", "AA"))
        );
        assert_eq!(inline_data("https://x/y.png"), None);
    }
}
