//! A prompt's content blocks as an agent reads them: text, an image, a resource link, or an
//! embedded resource (its text, or its bytes in base64), each member borrowed from the message
//! and read leniently (of another type, it counts as absent), since what a client sends is
//! shown to the model as well as it can be.
//!
//! It knows the shapes, not what the loop makes of them.

use serde::Deserialize;
use serde_json::Value;

use super::LooseStr;

/// One content block.
#[derive(Debug, PartialEq, Eq)]
pub enum ContentBlock<'a> {
    Text(Option<&'a str>),
    Image {
        data: Option<&'a str>,
        mime_type: Option<&'a str>,
        uri: Option<&'a str>,
    },
    ResourceLink {
        uri: Option<&'a str>,
        name: Option<&'a str>,
    },
    Resource(Resource<'a>),
    /// A block of another type, or not a block.
    Other,
}

/// An embedded resource: its text, or its bytes (`blob`, base64).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Resource<'a> {
    pub uri: Option<&'a str>,
    pub mime_type: Option<&'a str>,
    pub text: Option<&'a str>,
    pub blob: Option<&'a str>,
}

/// The members of a block (and of an embedded resource), as sent.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Wire<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: LooseStr<'a>,
    #[serde(borrow, default)]
    text: LooseStr<'a>,
    #[serde(borrow, default)]
    data: LooseStr<'a>,
    #[serde(borrow, default)]
    mime_type: LooseStr<'a>,
    #[serde(borrow, default)]
    uri: LooseStr<'a>,
    #[serde(borrow, default)]
    name: LooseStr<'a>,
    #[serde(borrow, default)]
    blob: LooseStr<'a>,
}

/// A block's `resource` member, when it is an object.
#[derive(Default, Deserialize)]
struct Embedded<'a> {
    #[serde(borrow, default)]
    resource: Option<Wire<'a>>,
}

impl<'a> ContentBlock<'a> {
    /// The block `block` is.
    pub fn read(block: &'a Value) -> ContentBlock<'a> {
        let wire = Wire::deserialize(block).unwrap_or_default();
        match wire.kind.get() {
            Some("text") => ContentBlock::Text(wire.text.get()),
            Some("image") => ContentBlock::Image {
                data: wire.data.get(),
                mime_type: wire.mime_type.get(),
                uri: wire.uri.get(),
            },
            Some("resource_link") => ContentBlock::ResourceLink {
                uri: wire.uri.get(),
                name: wire.name.get(),
            },
            Some("resource") => {
                let embedded = Embedded::deserialize(block).unwrap_or_default();
                let res = embedded.resource.unwrap_or_default();
                ContentBlock::Resource(Resource {
                    uri: res.uri.get(),
                    mime_type: res.mime_type.get(),
                    text: res.text.get(),
                    blob: res.blob.get(),
                })
            }
            _ => ContentBlock::Other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn blocks_are_read_leniently() {
        let text = json!({"type": "text", "text": "hi"});
        assert_eq!(ContentBlock::read(&text), ContentBlock::Text(Some("hi")));
        let image = json!({"type": "image", "data": "AA", "mimeType": 5});
        assert_eq!(
            ContentBlock::read(&image),
            ContentBlock::Image {
                data: Some("AA"),
                mime_type: None,
                uri: None
            }
        );
        let res = json!({"type": "resource", "resource": {"uri": "file:///a", "text": "x"}});
        let ContentBlock::Resource(r) = ContentBlock::read(&res) else {
            panic!("a resource");
        };
        assert_eq!(
            (r.uri, r.text, r.blob),
            (Some("file:///a"), Some("x"), None)
        );
        let bad = json!({"type": "resource", "resource": "no"});
        assert_eq!(
            ContentBlock::read(&bad),
            ContentBlock::Resource(Resource::default())
        );
        assert_eq!(ContentBlock::read(&json!(3)), ContentBlock::Other);
    }
}
