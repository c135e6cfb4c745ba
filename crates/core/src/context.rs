//! Additional contexts: user-role messages a tool, wrapper or policy attaches to a result, delivered
//! to the model after all the results of the batch (spec F2, F6).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::content::{Content, ContentBlock};
use crate::json::Json;

/// A user-role message with a source, as logged in a `user/message` event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContextMessage {
    /// The content.
    pub content: Content,
    /// Who produced it, e.g. `{kind: "plugin", plugin: "test"}`.
    pub source: Json,
    /// Always `user`.
    pub role: Arc<str>,
    /// A unique id.
    pub id: Arc<str>,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A fresh message id, unique within this process and across processes with high probability.
pub fn fresh_message_id() -> Arc<str> {
    use std::hash::{BuildHasher, Hasher};
    // Random bits from the standard library's per-process random hasher keys, mixed with a
    // counter and the clock: unique in-process by construction, across processes with high
    // probability. Shaped as a version-4 UUID, like the reference's ids.
    let n = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let word = |salt: u64| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(salt);
        h.write_u64(n);
        h.write_u128(t);
        h.write_u32(std::process::id());
        h.finish()
    };
    let (a, b) = (word(1), word(2));
    Arc::from(format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0x0fff,
        0x8000 | ((b >> 48) & 0x3fff),
        b & 0xffff_ffff_ffff
    ))
}

impl ContextMessage {
    /// A context from a plugin (source `{kind: "plugin", plugin}`).
    pub fn from_plugin(plugin: &str, content: Content) -> ContextMessage {
        let mut src = Map::new();
        src.insert("kind".into(), Value::String("plugin".into()));
        src.insert("plugin".into(), Value::String(plugin.into()));
        ContextMessage {
            content,
            source: Json::from_shallow(Value::Object(src)),
            role: Arc::from("user"),
            id: fresh_message_id(),
        }
    }

    /// A one-text-block context from a plugin.
    pub fn plugin_text(plugin: &str, text: impl Into<Arc<str>>) -> ContextMessage {
        ContextMessage::from_plugin(plugin, Arc::from(vec![ContentBlock::text(text)]))
    }

    /// The `source.plugin` name, if the source is a plugin.
    pub fn plugin(&self) -> Option<&str> {
        self.source.value().get("plugin").and_then(Value::as_str)
    }

    /// The first text block, if any.
    pub fn first_text(&self) -> Option<&str> {
        self.content.iter().find_map(ContentBlock::as_text)
    }
}
