//! MCP content to dsh content: text and images pass as they are (the same wire shapes); audio,
//! embedded resources and resource links become text saying what they are, so nothing the
//! server sent is silently dropped.

use serde_json::{Value, json};

/// The dsh content blocks (as a JSON array) for an MCP result's content and structured
/// content, taking the content: a text block's text moves into its dsh block, never copied.
pub(crate) fn into_blocks(
    content: Vec<rmcp::model::ContentBlock>,
    structured: Option<&Value>,
) -> Value {
    let mut out: Vec<Value> = content
        .into_iter()
        .map(|block| match block {
            rmcp::model::ContentBlock::Text(t) => json!({"type": "text", "text": t.text}),
            other => block_of(&other),
        })
        .collect();
    // A result with only structured content still says something.
    if out.is_empty()
        && let Some(s) = structured
    {
        out.push(json!({"type": "text", "text": s.to_string()}));
    }
    Value::Array(out)
}

/// The dsh content blocks (as a JSON array) for an MCP result's content and structured
/// content.
pub(crate) fn blocks(content: &[rmcp::model::ContentBlock], structured: Option<&Value>) -> Value {
    let mut out: Vec<Value> = content.iter().map(block_of).collect();
    // A result with only structured content still says something.
    if out.is_empty()
        && let Some(s) = structured
    {
        out.push(json!({"type": "text", "text": s.to_string()}));
    }
    Value::Array(out)
}

/// One MCP content block as a dsh block.
fn block_of(block: &rmcp::model::ContentBlock) -> Value {
    let wire = serde_json::to_value(block).unwrap_or(Value::Null);
    match wire["type"].as_str() {
        Some("text") => json!({"type": "text", "text": wire["text"]}),
        Some("image") => {
            json!({"type": "image", "data": wire["data"], "mimeType": wire["mimeType"]})
        }
        Some("audio") => json!({
            "type": "text",
            "text": format!(
                "[audio: {}, {} bytes of base64]",
                wire["mimeType"].as_str().unwrap_or("unknown type"),
                wire["data"].as_str().map_or(0, str::len)
            )
        }),
        Some("resource") => {
            let r = &wire["resource"];
            let text = match r["text"].as_str() {
                Some(t) => format!("[resource {}]\n{t}", r["uri"].as_str().unwrap_or("")),
                None => format!(
                    "[resource {}: {}, binary]",
                    r["uri"].as_str().unwrap_or(""),
                    r["mimeType"].as_str().unwrap_or("unknown type")
                ),
            };
            json!({"type": "text", "text": text})
        }
        Some("resource_link") => json!({
            "type": "text",
            "text": format!(
                "[resource link {}: {}]",
                wire["uri"].as_str().unwrap_or(""),
                wire["name"].as_str().unwrap_or("")
            )
        }),
        _ => json!({"type": "text", "text": wire.to_string()}),
    }
}

/// The text of a result's content (for an error result's message).
pub(crate) fn text(content: &[rmcp::model::ContentBlock]) -> String {
    let blocks = blocks(content, None);
    let texts: Vec<&str> = blocks
        .as_array()
        .map(|a| a.iter().filter_map(|b| b["text"].as_str()).collect())
        .unwrap_or_default();
    texts.join("\n")
}
