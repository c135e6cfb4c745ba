//! Shared helpers: fixture paths, temporary logs, small event builders.

use std::path::PathBuf;

use dsh_core::{ContentBlock, Json};
use dsh_session::{Event, Session};
use serde_json::{Value, json};

/// The reference fixture directory (copied into this crate so a clean clone has it).
pub fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reference-sessions")
}

/// Every `.jsonl` fixture, sorted.
pub fn fixtures() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixture_dir())
        .expect("fixture dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    assert!(files.len() >= 12, "fixtures missing: {files:?}");
    files
}

/// A JSON value as a frozen `Json`.
pub fn j(v: Value) -> Json {
    Json::new(v).expect("json")
}

/// One text block.
pub fn text(t: &str) -> Vec<ContentBlock> {
    vec![ContentBlock::text(t)]
}

/// Appends and unwraps.
pub async fn put(session: &Session, event: Event) -> u64 {
    session.append(event).await.expect("append")
}

/// `{kind: completed}`.
pub fn completed() -> Json {
    j(json!({"kind": "completed"}))
}

/// A temporary directory that lives as long as the value.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}
