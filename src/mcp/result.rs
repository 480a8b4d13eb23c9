//! A `tools/call` result, as JSON on the wire, turned into what oml's tools return: one text
//! for the model and the card, and whether the tool failed.
//!
//! Text blocks are kept as they are; an embedded text resource is fenced with its URI; images,
//! audio, binary resources and resource links become one-line notes (their bytes are never
//! pasted as text), and images are handed out apart (as data URLs) for a model that takes
//! them; `structuredContent` is the text when there is no content block; `isError` marks the
//! result as a failure. Pure: truncation is the caller's (it knows the setting).

use serde_json::Value;

/// The text of a tool result, whether the tool reported an error, and its images.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rendered {
    pub text: String,
    pub is_error: bool,
    /// `data:` URLs of the result's image blocks (at most [`IMAGE_MAX_BYTES`] each).
    pub images: Vec<String>,
}

/// Bytes an image of a result may have to be handed to the model (as `read` does).
pub const IMAGE_MAX_BYTES: usize = 20 << 20;

/// Render a `CallToolResult`.
pub fn render(result: &Value) -> Rendered {
    let is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
    let blocks = result
        .get("content")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let parts: Vec<String> = blocks.iter().map(block).collect();
    let mut text = parts.join("\n");
    if text.is_empty()
        && let Some(structured) = result.get("structuredContent")
    {
        text = serde_json::to_string_pretty(structured).unwrap_or_default();
    }
    if text.is_empty() {
        text = if is_error {
            "(the tool failed without a message)"
        } else {
            "(no output)"
        }
        .to_owned();
    }
    let images = blocks.iter().filter_map(image_url).collect();
    Rendered {
        text,
        is_error,
        images,
    }
}

/// The `data:` URL of an image block small enough to hand on.
fn image_url(b: &Value) -> Option<String> {
    let data = b.get("data").and_then(Value::as_str)?;
    let mime = str_of(b, "mimeType");
    (str_of(b, "type") == "image"
        && mime.starts_with("image/")
        && decoded_len(data.len()) <= IMAGE_MAX_BYTES)
        .then(|| format!("data:{mime};base64,{data}"))
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// The bytes a base64 text of `len` characters holds, about.
fn decoded_len(len: usize) -> usize {
    len / 4 * 3
}

fn block(b: &Value) -> String {
    match str_of(b, "type") {
        "text" => str_of(b, "text").to_owned(),
        "image" | "audio" => format!(
            "[{} {}, {} bytes, not shown as text]",
            str_of(b, "type"),
            str_of(b, "mimeType"),
            decoded_len(str_of(b, "data").len())
        ),
        "resource" => resource(b.get("resource").unwrap_or(&Value::Null)),
        "resource_link" => {
            let name = str_of(b, "name");
            format!(
                "[resource link: {} <{}>]",
                if name.is_empty() { "(unnamed)" } else { name },
                str_of(b, "uri")
            )
        }
        other => format!("[a {other:?} content block, not shown]"),
    }
}

fn resource(r: &Value) -> String {
    let uri = str_of(r, "uri");
    match r.get("text").and_then(Value::as_str) {
        Some(text) => format!("<resource uri=\"{uri}\">\n{text}\n</resource>"),
        None => format!(
            "[resource {uri}: {} {} bytes, binary, not shown]",
            str_of(r, "mimeType"),
            decoded_len(str_of(r, "blob").len())
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn blocks_become_text() {
        let r = render(&json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "mimeType": "image/png", "data": "AAAA"},
            {"type": "resource", "resource": {"uri": "file:///a", "text": "body"}},
            {"type": "resource", "resource": {"uri": "file:///b", "mimeType": "application/zip", "blob": "AAAAAAAA"}},
            {"type": "resource_link", "uri": "file:///c", "name": "c"},
        ]}));
        assert_eq!(
            r.text,
            "hello\n[image image/png, 3 bytes, not shown as text]\n<resource uri=\"file:///a\">\nbody\n</resource>\n[resource file:///b: application/zip 6 bytes, binary, not shown]\n[resource link: c <file:///c>]"
        );
        assert!(!r.is_error);
        assert_eq!(r.images, ["data:image/png;base64,AAAA"]);
    }

    #[test]
    fn structured_and_errors() {
        let r = render(&json!({"content": [], "structuredContent": {"n": 1}}));
        assert_eq!(r.text, "{\n  \"n\": 1\n}");
        let e = render(&json!({"content": [{"type": "text", "text": "boom"}], "isError": true}));
        assert_eq!((e.text.as_str(), e.is_error), ("boom", true));
        assert_eq!(
            render(&json!({"isError": true})).text,
            "(the tool failed without a message)"
        );
        assert_eq!(render(&json!({})).text, "(no output)");
    }
}
