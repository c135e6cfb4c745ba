//! Images `read` returns as pictures (FS-77/78): a PNG, JPEG, GIF or WebP file, known by its
//! first bytes (never by its name), becomes the reference's text envelope
//! (`<path>…</path>`, `<type>image</type>`) followed by an image block the model can look at.
//!
//! Guarantees: only those four formats, recognised by their signatures, are images; anything
//! else goes on to the text path (and a binary file is refused there as before); an image over
//! [`MAX_IMAGE_BYTES`] (what the providers accept) is refused naming its size and the limit;
//! an image read records its observation like any read (the file's version), so it may then be
//! written over.

use base64::Engine;
use dsh_core::{ContentBlock, Failure};
use serde_json::{Value, json};

/// The largest image `read` returns (5 MiB, the providers' limit for one image).
pub const MAX_IMAGE_BYTES: usize = 5 * 1024 * 1024;

/// The MIME type of an image file, from its first bytes.
pub fn sniff(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(b"\xff\xd8\xff") {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// The value of an image read: `{path, type: "image", mimeType, bytes, data, version}` (the
/// data base64-encoded), or why it cannot be sent.
pub(crate) fn value(path: &str, mime: &str, bytes: &[u8], version: &str) -> Result<Value, Failure> {
    if bytes.len() > MAX_IMAGE_BYTES {
        return Err(Failure::new(format!(
            "{path} is an image of {} bytes, over the {MAX_IMAGE_BYTES} bytes a model accepts",
            bytes.len()
        )));
    }
    Ok(json!({
        "path": path,
        "type": "image",
        "mimeType": mime,
        "bytes": bytes.len(),
        "data": base64::engine::general_purpose::STANDARD.encode(bytes),
        "version": version,
    }))
}

/// The content of an image read: the text envelope, then the picture.
pub(crate) fn content(v: &Value) -> Vec<ContentBlock> {
    let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default();
    let size = v.get("bytes").and_then(Value::as_u64).unwrap_or(0);
    let envelope = format!(
        "<path>{}</path>\n<type>image</type>\n<content>\nImage file ({}, {size} bytes), shown below.\n</content>",
        s("path"),
        s("mimeType")
    );
    vec![
        ContentBlock::text(envelope),
        ContentBlock::Image {
            data: s("data").into(),
            mime_type: s("mimeType").into(),
        },
    ]
}

/// The output schema branch of an image read.
pub(crate) fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "type": {"const": "image"},
            "mimeType": {"type": "string"},
            "bytes": {"type": "integer"},
            "data": {"type": "string"},
            "version": {"type": "string"}
        },
        "required": ["path", "type", "mimeType", "bytes", "data", "version"]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_known_by_their_bytes_not_their_names() {
        assert_eq!(sniff(b"\x89PNG\r\n\x1a\n...."), Some("image/png"));
        assert_eq!(sniff(b"\xff\xd8\xff\xe0"), Some("image/jpeg"));
        assert_eq!(sniff(b"GIF89a.."), Some("image/gif"));
        assert_eq!(sniff(b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(sniff(b"RIFF\0\0\0\0WAVEfmt "), None);
        assert_eq!(sniff(b"\x89PN"), None);
        assert_eq!(sniff(b"plain text"), None);
    }

    #[test]
    fn an_image_over_the_limit_is_refused_with_its_size() {
        let big = vec![0u8; MAX_IMAGE_BYTES + 1];
        let e = value("a.png", "image/png", &big, "v").unwrap_err();
        assert!(
            e.message()
                .contains(&format!("{} bytes", MAX_IMAGE_BYTES + 1))
        );
        let v = value("a.png", "image/png", b"\x89PNG", "v").unwrap();
        assert_eq!(v["data"], "iVBORw==");
        let c = content(&v);
        assert!(
            matches!(&c[1], ContentBlock::Image { mime_type, .. } if &**mime_type == "image/png")
        );
    }
}
