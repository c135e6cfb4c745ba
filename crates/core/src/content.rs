//! Content blocks, the presentation a model sees: text, images, and any other block kept verbatim.

use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::json::Json;

/// One block of content in the reference shapes (`{type: "text", text}`, `{type: "image", data, mimeType}`).
///
/// Blocks of any other shape (reasoning, tool results, future kinds) are kept verbatim as
/// [`ContentBlock::Other`], so a log round-trips exactly.
#[derive(Clone, Debug, PartialEq)]
pub enum ContentBlock {
    /// `{type: "text", text}`.
    Text {
        /// The text.
        text: Arc<str>,
    },
    /// `{type: "image", data, mimeType}` with base64 `data`.
    Image {
        /// Base64 bytes.
        data: Arc<str>,
        /// MIME type, e.g. `image/png`.
        mime_type: Arc<str>,
    },
    /// Any other block, kept exactly as it was.
    Other(Json),
}

/// An immutable, shared list of content blocks.
pub type Content = Arc<[ContentBlock]>;

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<Arc<str>>) -> ContentBlock {
        ContentBlock::Text { text: text.into() }
    }

    /// The block's `type` field.
    pub fn block_type(&self) -> &str {
        match self {
            ContentBlock::Text { .. } => "text",
            ContentBlock::Image { .. } => "image",
            ContentBlock::Other(v) => v
                .value()
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("unknown"),
        }
    }

    /// The text of a text block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            ContentBlock::Text { text } => Some(text),
            _ => None,
        }
    }

    /// Decodes one block from a JSON value, keeping unknown shapes verbatim.
    pub fn from_value(value: Value) -> Result<ContentBlock, crate::json::JsonError> {
        if let Value::Object(map) = &value {
            let ty = map.get("type").and_then(Value::as_str);
            match (ty, map.len()) {
                (Some("text"), 2) => {
                    if let Some(Value::String(t)) = map.get("text") {
                        return Ok(ContentBlock::text(t.as_str()));
                    }
                }
                (Some("image"), 3) => {
                    if let (Some(Value::String(d)), Some(Value::String(m))) =
                        (map.get("data"), map.get("mimeType"))
                    {
                        return Ok(ContentBlock::Image {
                            data: d.as_str().into(),
                            mime_type: m.as_str().into(),
                        });
                    }
                }
                _ => {}
            }
        }
        Ok(ContentBlock::Other(Json::new(value)?))
    }

    /// The block as a JSON value in the reference shape.
    pub fn to_value(&self) -> Value {
        match self {
            ContentBlock::Text { text } => {
                let mut m = Map::new();
                m.insert("type".into(), Value::String("text".into()));
                m.insert("text".into(), Value::String(text.to_string()));
                Value::Object(m)
            }
            ContentBlock::Image { data, mime_type } => {
                let mut m = Map::new();
                m.insert("type".into(), Value::String("image".into()));
                m.insert("data".into(), Value::String(data.to_string()));
                m.insert("mimeType".into(), Value::String(mime_type.to_string()));
                Value::Object(m)
            }
            ContentBlock::Other(v) => v.value().clone(),
        }
    }
}

impl Serialize for ContentBlock {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            ContentBlock::Text { text } => {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("type", "text")?;
                m.serialize_entry("text", &**text)?;
                m.end()
            }
            ContentBlock::Image { data, mime_type } => {
                let mut m = s.serialize_map(Some(3))?;
                m.serialize_entry("type", "image")?;
                m.serialize_entry("data", &**data)?;
                m.serialize_entry("mimeType", &**mime_type)?;
                m.end()
            }
            ContentBlock::Other(v) => v.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for ContentBlock {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ContentBlock, D::Error> {
        let v = Value::deserialize(d)?;
        ContentBlock::from_value(v).map_err(serde::de::Error::custom)
    }
}

/// One text block.
pub fn text_content(text: impl Into<Arc<str>>) -> Content {
    Arc::from([ContentBlock::text(text)])
}

/// Summarizes content as text: text blocks joined by newlines, other blocks as `[<type> content]`.
pub fn summarize(content: &[ContentBlock]) -> String {
    let parts: Vec<String> = content
        .iter()
        .map(|b| match b {
            ContentBlock::Text { text } => text.to_string(),
            other => format!("[{} content]", other.block_type()),
        })
        .collect();
    parts.join("\n")
}
