//! What a stored message says, as an ATIF message: its text, or parts when it holds images,
//! each image a file to be written beside the trajectory ([`Media`]).
//!
//! It knows nothing of steps or of where the trajectory is written.

use base64::Engine as _;
use serde_json::Value;

use super::types::{ImageSource, Message, Part};
use crate::session::stored::message_text;

/// Where the images of an export go.
#[derive(Clone, Debug)]
pub enum Media {
    /// Into files under the directory `dir`, named relative to the trajectory's file.
    Files { dir: String },
    /// Nowhere: each image shows as a text part naming its type and size (a trajectory
    /// written to stdout has no place for files).
    Omitted,
}

/// An image of a message, to be written at `path` (relative to the trajectory's file).
#[derive(Debug, PartialEq)]
pub struct Image {
    pub path: String,
    pub bytes: Vec<u8>,
}

/// The image types ATIF knows, with the extension each file gets.
const IMAGE_TYPES: &[(&str, &str)] = &[
    ("image/png", "png"),
    ("image/jpeg", "jpg"),
    ("image/gif", "gif"),
    ("image/webp", "webp"),
];

/// The ATIF message of a stored message's `content`: its text when it holds no image, else
/// its parts in order, each image named `{prefix}-image{n}` after the `count` images before it
/// and added to `images`.
pub fn message(
    content: &Value,
    media: &Media,
    prefix: &str,
    count: &mut usize,
    images: &mut Vec<Image>,
) -> Message {
    let Value::Array(parts) = content else {
        return Message::Text(message_text(content));
    };
    if !parts.iter().any(|p| p.get("image_url").is_some()) {
        return Message::Text(message_text(content));
    }
    let mut out = Vec::new();
    for part in parts {
        if let Some(text) = part.get("text").and_then(Value::as_str) {
            out.push(Part::Text {
                text: text.to_owned(),
            });
        } else if let Some(url) = part.pointer("/image_url/url").and_then(Value::as_str) {
            *count += 1;
            let name = format!("{prefix}-image{count}");
            out.push(image(url, media, &name, images));
        }
    }
    Message::Parts(out)
}

/// The part of one image at `url` (a data URL as oml stores them, or a link).
fn image(url: &str, media: &Media, name: &str, images: &mut Vec<Image>) -> Part {
    let Some((mime, data)) = url
        .strip_prefix("data:")
        .and_then(|rest| rest.split_once(";base64,"))
    else {
        return Part::Text {
            text: format!("[image: {url}]"),
        };
    };
    let decoded = base64::engine::general_purpose::STANDARD.decode(data.trim());
    let ext = IMAGE_TYPES
        .iter()
        .find(|(m, _)| *m == mime)
        .map(|(_, e)| *e);
    match (decoded, ext, media) {
        (Ok(bytes), Some(ext), Media::Files { dir }) => {
            let path = format!("{dir}/{name}.{ext}");
            images.push(Image {
                path: path.clone(),
                bytes,
            });
            Part::Image {
                source: ImageSource {
                    media_type: mime.to_owned(),
                    path,
                },
            }
        }
        (Ok(bytes), _, _) => Part::Text {
            text: format!("[image: {mime}, {} bytes, not exported]", bytes.len()),
        },
        (Err(_), _, _) => Part::Text {
            text: format!("[image: {mime}, not valid base64]"),
        },
    }
}
