//! FS-77: `read` of an image returns it as a picture and counts as an observation.

use std::sync::{Arc, Mutex};

use dsh_core::ContentBlock;
use serde_json::json;

use super::common::Env;

/// A 1×1 transparent PNG.
pub const PNG_1X1: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae,
    0x42, 0x60, 0x82,
];

#[tokio::test]
async fn fs_77_an_image_read_is_a_picture_and_one_observation() {
    let (env, _p) = Env::with_policy();
    // Named like text: an image is known by its bytes.
    std::fs::write(env.path("pixel.txt"), PNG_1X1).unwrap();
    let seen: Arc<Mutex<Vec<std::path::PathBuf>>> = Arc::default();
    let s = seen.clone();
    let _l = env.tools.hooks().observed().on(move |e| {
        s.lock().unwrap().push(e.path.clone());
        Ok(())
    });
    let out = env
        .call("read", json!({"file_path": "pixel.txt"}))
        .await
        .ok();
    assert_eq!(*seen.lock().unwrap(), vec![env.path("pixel.txt")]);
    let content = out.0.content();
    assert_eq!(content.len(), 2);
    let ContentBlock::Text { text } = &content[0] else {
        panic!("{content:?}")
    };
    assert!(
        text.contains("<type>image</type>") && text.contains("pixel.txt"),
        "{text}"
    );
    let ContentBlock::Image { data, mime_type } = &content[1] else {
        panic!("{content:?}")
    };
    assert_eq!(&**mime_type, "image/png");
    use base64::Engine;
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(&**data)
            .unwrap(),
        PNG_1X1
    );
    assert_eq!(out.value()["type"], "image");
    // The read observed the file: it may now be written over.
    env.call(
        "write",
        json!({"file_path": "pixel.txt", "content": "text now"}),
    )
    .await
    .ok();
    assert_eq!(env.get("pixel.txt"), "text now");
    // Bytes that are no image are still refused as binary text.
    std::fs::write(env.path("blob.bin"), [0u8, 159, 146, 150]).unwrap();
    let bad = env.call("read", json!({"file_path": "blob.bin"})).await;
    assert!(bad.is_error());
}
