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

/// Any JSON value up to four levels deep (finite numbers; any strings, keys included): at most
/// `nodes` values in all and `width` items in an array or object.
pub fn json_value(nodes: u32, width: usize) -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        any::<String>().prop_map(Value::from),
    ];
    leaf.prop_recursive(4, nodes, width as u32, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..width).prop_map(Value::Array),
            prop::collection::vec((any::<String>(), inner), 0..width)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}
