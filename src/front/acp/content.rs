//! A prompt's ACP content blocks as what the loop gets: the text of its user message, and the
//! images as OpenAI `image_url` content parts with data URLs.
//!
//! Every attachment reaches the model labelled and delimited: an embedded text resource as
//! `<file name="…" path="…">…</file>` (`<resource name="…" uri="…">` when it is not a file), a
//! resource link as `<resource_link name="…" uri="…" path="…"/>` (its content is not read: the
//! model reads the file when it needs it), an image block or an embedded image as a part, named
//! in the text. A binary resource that is not an image, and an image when the model does not
//! take images, become a note naming them; their bytes never go into the text.
//!
//! This module reads blocks only; it knows nothing of sessions or of the loop.

use serde_json::Value;

use crate::acp::content::{ContentBlock, Resource};
use crate::tools::image::is_image_mime;

/// Bytes of base64 an image block may carry at most (about 20 MiB of image, what OpenAI takes);
/// a larger one becomes a note.
pub const PROMPT_IMAGE_MAX_BASE64: usize = 27 * 1024 * 1024;

/// The loop's share of a prompt.
#[derive(Debug, Default, PartialEq)]
pub struct PromptContent {
    /// The user message's text, pieces joined with newlines.
    pub text: String,
    /// `{type: "image_url", image_url: {url: "data:…"}}` parts, in the prompt's order.
    pub images: Vec<Value>,
}

/// The prompt `blocks` as text and image parts; `images` says whether the model takes images
/// (`llm.images?`).
pub fn prompt_content(blocks: &[Value], images: bool) -> PromptContent {
    let mut out = PromptContent::default();
    let mut pieces = Vec::new();
    for block in blocks {
        match ContentBlock::read(block) {
            ContentBlock::Text(text) => pieces.extend(text.map(str::to_owned)),
            ContentBlock::ResourceLink { uri, name } => pieces.push(link(uri, name)),
            ContentBlock::Resource(res) => pieces.push(resource(&res, images, &mut out.images)),
            ContentBlock::Image {
                data,
                mime_type,
                uri,
            } => {
                let name = uri.map_or_else(
                    || "an image".to_owned(),
                    |u| format!("the image {}", attr(&name_of(u))),
                );
                let data = data.unwrap_or("");
                let mime = mime_type.unwrap_or("image/png");
                pieces.push(image(&name, mime, data, images, &mut out.images));
            }
            ContentBlock::Other => {}
        }
    }
    out.text = pieces.join("\n");
    out
}

/// The prompt `blocks` as the loop's text alone (images as notes).
pub fn prompt_text(blocks: &[Value]) -> String {
    prompt_content(blocks, false).text
}

/// A resource link: named, with its path for a file, and not read.
fn link(uri: Option<&str>, name: Option<&str>) -> String {
    let uri = uri.unwrap_or("");
    let name = name.map_or_else(|| name_of(uri), str::to_owned);
    let path = uri
        .strip_prefix("file://")
        .map(|p| format!(" path=\"{}\"", attr(p)))
        .unwrap_or_default();
    format!(
        "<resource_link name=\"{}\" uri=\"{}\"{path}/>",
        attr(&name),
        attr(uri)
    )
}

/// An embedded resource: its text fenced and labelled, an image as a part, other bytes a note.
fn resource(res: &Resource<'_>, images: bool, parts: &mut Vec<Value>) -> String {
    let uri = res.uri.unwrap_or("");
    let name = attr(&name_of(uri));
    let mime = res.mime_type;
    if let Some(text) = res.text {
        let end = if text.ends_with('\n') { "" } else { "\n" };
        return match uri.strip_prefix("file://") {
            Some(path) => format!(
                "<file name=\"{name}\" path=\"{}\">\n{text}{end}</file>",
                attr(path)
            ),
            None => format!(
                "<resource name=\"{name}\" uri=\"{}\">\n{text}{end}</resource>",
                attr(uri)
            ),
        };
    }
    let blob = res.blob.unwrap_or("");
    match mime.filter(|m| is_image_mime(m)) {
        Some(mime) => image(&format!("the image {name}"), mime, blob, images, parts),
        None => format!(
            "(the binary resource {name}{} was attached; it is not included: only text and \
             images reach the model)",
            mime.map(|m| format!(" ({m})")).unwrap_or_default()
        ),
    }
}

/// An image (`label`: "the image x.png", "an image"): a part when the model takes images and
/// the data is usable, else a note.
fn image(label: &str, mime: &str, data: &str, images: bool, parts: &mut Vec<Value>) -> String {
    if !images {
        return format!(
            "({label} was attached; it is not included: the model does not take images, \
             llm.images? is false)"
        );
    }
    if data.is_empty() || data.len() > PROMPT_IMAGE_MAX_BASE64 || !is_image_mime(mime) {
        return format!(
            "({label} was attached; it is not included: it is empty, too large or not an image)"
        );
    }
    parts.push(image_part(format!("data:{mime};base64,{data}")));
    format!("({label} is attached)")
}

/// The chat-shaped content part of an image at `url`: `{type: "image_url", image_url: {url}}`.
fn image_part(url: String) -> Value {
    #[derive(serde::Serialize)]
    struct Url {
        url: String,
    }
    #[derive(serde::Serialize)]
    #[serde(tag = "type", rename_all = "snake_case")]
    enum Part {
        ImageUrl { image_url: Url },
    }
    let part = Part::ImageUrl {
        image_url: Url { url },
    };
    serde_json::to_value(part).unwrap_or(Value::Null)
}

/// The last segment of a URI's path, or the URI itself.
fn name_of(uri: &str) -> String {
    let path = uri.split(['?', '#']).next().unwrap_or(uri);
    match path.trim_end_matches('/').rsplit('/').next() {
        Some(last) if !last.is_empty() => last.to_owned(),
        _ => uri.to_owned(),
    }
}

/// `s` fit for a double-quoted attribute.
fn attr(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn blocks() -> Vec<Value> {
        vec![
            json!({"type": "text", "text": "look at"}),
            json!({"type": "resource_link", "uri": "file:///a.rs", "name": "a.rs"}),
            json!({"type": "resource", "resource": {"uri": "file:///src/b.rs", "text": "B"}}),
            json!({"type": "resource", "resource": {"uri": "zed://notes", "text": "N\n"}}),
            json!({"type": "resource", "resource": {"uri": "file:///c.bin", "blob": "AA==",
                                                    "mimeType": "application/octet-stream"}}),
            json!({"type": "resource", "resource": {"uri": "file:///d.png", "blob": "iVBO",
                                                    "mimeType": "image/png"}}),
            json!({"type": "image", "data": "R0lG", "mimeType": "image/gif"}),
        ]
    }

    #[test]
    fn every_block_is_labelled_and_fenced() {
        let c = prompt_content(&blocks(), true);
        assert_eq!(
            c.text,
            "look at\n\
             <resource_link name=\"a.rs\" uri=\"file:///a.rs\" path=\"/a.rs\"/>\n\
             <file name=\"b.rs\" path=\"/src/b.rs\">\nB\n</file>\n\
             <resource name=\"notes\" uri=\"zed://notes\">\nN\n</resource>\n\
             (the binary resource c.bin (application/octet-stream) was attached; it is not \
             included: only text and images reach the model)\n\
             (the image d.png is attached)\n\
             (an image is attached)"
        );
        assert_eq!(
            c.images,
            [
                json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}}),
                json!({"type": "image_url", "image_url": {"url": "data:image/gif;base64,R0lG"}}),
            ]
        );
    }

    #[test]
    fn without_images_they_become_notes() {
        let c = prompt_content(&blocks(), false);
        assert!(c.images.is_empty());
        assert!(
            c.text.contains(
                "(the image d.png was attached; it is not included: the model does not take images"
            ),
            "{}",
            c.text
        );
        assert!(!c.text.contains("iVBO") && !c.text.contains("AA=="));
    }
}
