//! A `tools/call` result, as rmcp reads it, turned into what oml's tools return: one text
//! for the model and the card, and whether the tool failed.
//!
//! Text blocks are kept as they are; an embedded text resource is fenced with its URI; images,
//! audio, binary resources and resource links become one-line notes (their bytes are never
//! pasted as text), and images are handed out apart (as data URLs) for a model that takes
//! them; `structuredContent` is the text when there is no content block; `isError` marks the
//! result as a failure. Pure: truncation is the caller's (it knows the setting).

use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

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
pub fn render(result: &CallToolResult) -> Rendered {
    let is_error = result.is_error == Some(true);
    let parts: Vec<String> = result.content.iter().map(block).collect();
    let mut text = parts.join("\n");
    if text.is_empty()
        && let Some(structured) = &result.structured_content
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
    let images = result.content.iter().filter_map(image_url).collect();
    Rendered {
        text,
        is_error,
        images,
    }
}

/// The `data:` URL of an image block small enough to hand on.
fn image_url(b: &ContentBlock) -> Option<String> {
    let ContentBlock::Image(image) = b else {
        return None;
    };
    (image.mime_type.starts_with("image/") && decoded_len(image.data.len()) <= IMAGE_MAX_BYTES)
        .then(|| format!("data:{};base64,{}", image.mime_type, image.data))
}

/// The bytes a base64 text of `len` characters holds, about.
fn decoded_len(len: usize) -> usize {
    len / 4 * 3
}

fn block(b: &ContentBlock) -> String {
    let media = |kind: &str, mime: &str, data: &str| {
        format!(
            "[{kind} {mime}, {} bytes, not shown as text]",
            decoded_len(data.len())
        )
    };
    match b {
        ContentBlock::Text(t) => t.text.clone(),
        ContentBlock::Image(i) => media("image", &i.mime_type, &i.data),
        ContentBlock::Audio(a) => media("audio", &a.mime_type, &a.data),
        ContentBlock::Resource(r) => resource(&r.resource),
        ContentBlock::ResourceLink(link) => format!(
            "[resource link: {} <{}>]",
            if link.name.is_empty() {
                "(unnamed)"
            } else {
                &link.name
            },
            link.uri
        ),
        // rmcp's list of blocks is open: one it learns later is named, not dropped silently.
        other => format!(
            "[a {:?} content block, not shown]",
            serde_json::to_value(other)
                .ok()
                .and_then(|v| v.get("type").cloned())
                .unwrap_or_default()
        ),
    }
}

fn resource(r: &ResourceContents) -> String {
    match r {
        ResourceContents::TextResourceContents { uri, text, .. } => {
            format!("<resource uri=\"{uri}\">\n{text}\n</resource>")
        }
        ResourceContents::BlobResourceContents {
            uri,
            mime_type,
            blob,
            ..
        } => format!(
            "[resource {uri}: {} {} bytes, binary, not shown]",
            mime_type.as_deref().unwrap_or_default(),
            decoded_len(blob.len())
        ),
        _ => "[a resource of a kind oml does not know, not shown]".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// `value`, a result as a server sends it, read as rmcp reads it.
    fn render(value: Value) -> Rendered {
        super::render(&serde_json::from_value(value).expect("a CallToolResult"))
    }

    #[test]
    fn blocks_become_text() {
        let r = render(json!({"content": [
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
        let r = render(json!({"content": [], "structuredContent": {"n": 1}}));
        assert_eq!(r.text, "{\n  \"n\": 1\n}");
        let e = render(json!({"content": [{"type": "text", "text": "boom"}], "isError": true}));
        assert_eq!((e.text.as_str(), e.is_error), ("boom", true));
        assert_eq!(
            render(json!({"isError": true})).text,
            "(the tool failed without a message)"
        );
        assert_eq!(render(json!({"content": []})).text, "(no output)");
    }
}
