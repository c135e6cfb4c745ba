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
    let id = fresh_message_id_ascii();
    Arc::from(std::str::from_utf8(&id).unwrap_or("00000000-0000-4000-8000-000000000000"))
}

/// [`fresh_message_id`] as its 36 ASCII bytes, for writers that copy it straight into a buffer.
pub fn fresh_message_id_ascii() -> [u8; 36] {
    message_id_ascii(fresh_message_number())
}

/// A fresh message number: [`message_id_ascii`] turns it into the id. Cheaper to keep than the
/// id when the id is written later (each number is drawn once, so its id is fresh).
pub fn fresh_message_number() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// The id of a message number from [`fresh_message_number`], as 36 ASCII bytes.
pub fn message_id_ascii(n: u64) -> [u8; 36] {
    // A per-process random key (from the standard library's randomly keyed hasher, drawn once)
    // mixed with a counter through splitmix64: unique in-process by construction, across
    // processes with high probability, and cheap (no hashing or formatting machinery per id).
    // Shaped as a version-4 UUID, like the reference's ids.
    static KEY: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let key = *KEY.get_or_init(|| {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        );
        h.finish()
    });
    let a = splitmix64(key ^ n.wrapping_mul(2));
    let b = splitmix64(key ^ n.wrapping_mul(2).wrapping_add(1));
    let mut out = [0u8; 36];
    let mut hex = |range: std::ops::Range<usize>, mut v: u64| {
        for i in range.rev() {
            out[i] = b"0123456789abcdef"[(v & 0xf) as usize];
            v >>= 4;
        }
    };
    hex(0..8, a >> 32);
    hex(9..13, (a >> 16) & 0xffff);
    hex(14..18, 0x4000 | (a & 0x0fff));
    hex(19..23, 0x8000 | ((b >> 48) & 0x3fff));
    hex(24..36, b & 0xffff_ffff_ffff);
    for i in [8, 13, 18, 23] {
        out[i] = b'-';
    }
    out
}

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
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

#[cfg(test)]
mod tests {
    use super::fresh_message_id;

    #[test]
    fn ids_are_distinct_version_4_uuids() {
        let ids: std::collections::HashSet<String> = (0..10_000)
            .map(|_| fresh_message_id().to_string())
            .collect();
        assert_eq!(ids.len(), 10_000);
        for id in ids.iter().take(100) {
            let b = id.as_bytes();
            assert_eq!(b.len(), 36, "{id}");
            assert_eq!(
                (b[8], b[13], b[18], b[23]),
                (b'-', b'-', b'-', b'-'),
                "{id}"
            );
            assert_eq!(b[14], b'4', "{id}");
            assert!(matches!(b[19], b'8' | b'9' | b'a' | b'b'), "{id}");
        }
    }
}
