//! The tool calls of one assistant message, in model order, as the model wrote them.

use std::sync::Arc;

use dsh_core::Json;
use serde_json::Value;

/// One tool-call block: the model's call id, tool name and raw argument text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolCallBlock {
    /// The model's call id.
    pub call_id: Arc<str>,
    /// The tool name.
    pub name: Arc<str>,
    /// The raw argument string, logged verbatim.
    pub arguments: Arc<str>,
}

impl ToolCallBlock {
    /// A block.
    pub fn new(call_id: &str, name: &str, arguments: &str) -> ToolCallBlock {
        ToolCallBlock {
            call_id: Arc::from(call_id),
            name: Arc::from(name),
            arguments: Arc::from(arguments),
        }
    }
}

/// The tool-call blocks of an assistant message in the reference shape
/// (`content: [{type: "tool-call", id, name, arguments}]`), in order.
pub fn tool_calls_of(message: &Json) -> Vec<ToolCallBlock> {
    let Some(blocks) = message.value().get("content").and_then(Value::as_array) else {
        return Vec::new();
    };
    blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool-call"))
        .map(|b| {
            let s = |k: &str| b.get(k).and_then(Value::as_str).unwrap_or_default();
            let args = match b.get("arguments") {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            ToolCallBlock::new(s("id"), s("name"), &args)
        })
        .collect()
}
