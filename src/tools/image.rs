//! Image files for `read`: which files are images (by their first bytes, not their names), and
//! an image's bytes as the base64 a data URL carries.
//!
//! Only the formats chat-completions endpoints take are recognised: PNG, JPEG, GIF and WebP.
//! This module does not decide whether the model gets the image (the setting `llm.images?`, in
//! the Lisp `read` tool) nor how it is put into a request.

use std::io::Read;
use std::path::Path;

use base64::Engine as _;

use super::ToolError;

/// The largest image `read` gives the model, in bytes (OpenAI's own cap on an image input is
/// 20 MB); a bigger one is refused with a note.
pub const IMAGE_MAX_BYTES: u64 = 20 * 1024 * 1024;

/// An image file read for the model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
    pub mime: &'static str,
    /// The file's bytes, base64-encoded (standard alphabet, padded).
    pub base64: String,
    /// The file's size in bytes.
    pub bytes: u64,
}

impl Image {
    /// The image as a `data:` URL, as an `image_url` content part carries it.
    pub fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.mime, self.base64)
    }
}

/// The image type of a file that starts with `head`, if it is one of the recognised formats.
pub fn image_mime(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if head.starts_with(b"\xff\xd8\xff") {
        Some("image/jpeg")
    } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// The image type of the file at `path`, from its first bytes; `None` for anything else
/// (a text file, a directory, a file that cannot be opened).
pub fn file_image_mime(path: &Path) -> Option<&'static str> {
    let mut head = [0u8; 16];
    let mut file = crate::regular::open_regular(path).ok()?;
    let mut n = 0;
    while n < head.len() {
        match file.read(&mut head[n..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
    }
    image_mime(&head[..n])
}

/// Whether `mime` names an image type the model may get (`image/…`).
pub fn is_image_mime(mime: &str) -> bool {
    mime.get(..6)
        .is_some_and(|p| p.eq_ignore_ascii_case("image/"))
}

/// Why an image is not given to the model.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("{} is not a PNG, JPEG, GIF or WebP image", .0.display())]
    NotAnImage(std::path::PathBuf),
    #[error("{} is {bytes} bytes, more than the {IMAGE_MAX_BYTES} an image may have", path.display())]
    TooBig {
        path: std::path::PathBuf,
        bytes: u64,
    },
    #[error(transparent)]
    Tool(#[from] ToolError),
}

/// The image at `path`, read whole; an error when it is not a recognised image, is larger than
/// [`IMAGE_MAX_BYTES`], or cannot be read.
pub fn read_image(path: &Path) -> Result<Image, ImageError> {
    let bytes = std::fs::metadata(path)
        .map_err(|e| ToolError::io("read", path, e))?
        .len();
    if bytes > IMAGE_MAX_BYTES {
        return Err(ImageError::TooBig {
            path: path.to_path_buf(),
            bytes,
        });
    }
    let data = crate::regular::read_regular(path).map_err(|e| ToolError::io("read", path, e))?;
    let mime = image_mime(&data).ok_or_else(|| ImageError::NotAnImage(path.to_path_buf()))?;
    Ok(Image {
        mime,
        base64: base64::engine::general_purpose::STANDARD.encode(&data),
        bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_known_by_their_first_bytes() {
        assert_eq!(image_mime(b"\x89PNG\r\n\x1a\n...."), Some("image/png"));
        assert_eq!(image_mime(b"\xff\xd8\xff\xe0"), Some("image/jpeg"));
        assert_eq!(image_mime(b"GIF89a.."), Some("image/gif"));
        assert_eq!(image_mime(b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(image_mime(b"fn main() {}"), None);
        assert_eq!(image_mime(b""), None);
        assert!(is_image_mime("image/png") && is_image_mime("IMAGE/JPEG"));
        assert!(!is_image_mime("application/pdf") && !is_image_mime("img"));
    }

    #[test]
    fn a_read_image_becomes_a_data_url() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dot.png");
        std::fs::write(&path, b"\x89PNG\r\n\x1a\nxyz").unwrap();
        let image = read_image(&path).unwrap();
        assert_eq!(image.bytes, 11);
        assert_eq!(image.data_url(), "data:image/png;base64,iVBORw0KGgp4eXo=");
        std::fs::write(&path, b"text").unwrap();
        assert!(matches!(read_image(&path), Err(ImageError::NotAnImage(_))));
    }
}
