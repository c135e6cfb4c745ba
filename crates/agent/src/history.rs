//! The model-visible history, from the log to a provider request.
//!
//! Guarantees: the messages sent are exactly `derive_messages` of the session (dsh-session,
//! rules I3/L5) turned into the provider-neutral [`Message`]s one for one, in order, behind the
//! system prompt: a user message's blocks as they were logged, an assistant message's text,
//! reasoning and tool calls (each call's arguments as the raw text logged), and every
//! `tool-result` block as its own tool result. Nothing is added, reordered or dropped here, so
//! the request a provider receives can be rebuilt from the log alone (the test beside this
//! crate compares the two byte for byte).

use std::sync::Arc;

use dsh_core::{ContentBlock, Json};
use dsh_model::{AssistantBlock, Message, ToolCall};
use serde_json::Value;

/// The provider messages of the derived history `messages` (reference shape), in order.
pub fn to_provider_messages(messages: &[Json]) -> Vec<Message> {
    let mut out = Vec::with_capacity(messages.len());
    for message in messages {
        push_message(message.value(), &mut out);
    }
    out
}

fn push_message(message: &Value, out: &mut Vec<Message>) {
    let role = message
        .get("role")
        .and_then(Value::as_str)
        .unwrap_or("user");
    let blocks: &[Value] = match message.get("content") {
        Some(Value::Array(blocks)) => blocks,
        Some(Value::String(text)) => {
            out.push(match role {
                "assistant" => Message::Assistant {
                    blocks: vec![AssistantBlock::Text { text: text.clone() }],
                },
                _ => Message::user(text.as_str()),
            });
            return;
        }
        _ => return,
    };
    if role == "assistant" {
        let blocks: Vec<AssistantBlock> = blocks.iter().filter_map(assistant_block).collect();
        if !blocks.is_empty() {
            out.push(Message::Assistant { blocks });
        }
        return;
    }
    let mut user: Vec<ContentBlock> = Vec::new();
    for block in blocks {
        if block.get("type").and_then(Value::as_str) == Some("tool-result") {
            if !user.is_empty() {
                out.push(Message::User {
                    content: Arc::from(std::mem::take(&mut user)),
                });
            }
            out.push(tool_result(block));
        } else {
            user.push(content_block(block));
        }
    }
    if !user.is_empty() {
        out.push(Message::User {
            content: Arc::from(user),
        });
    }
}

fn content_block(block: &Value) -> ContentBlock {
    let field = |key: &str| block.get(key).and_then(Value::as_str);
    match (
        field("type"),
        field("text"),
        field("data"),
        field("mimeType"),
    ) {
        (Some("text"), Some(text), _, _) => ContentBlock::text(text),
        (Some("image"), _, Some(data), Some(mime)) => ContentBlock::Image {
            data: Arc::from(data),
            mime_type: Arc::from(mime),
        },
        _ => ContentBlock::Other(Json::from_shallow(block.clone())),
    }
}

fn tool_result(block: &Value) -> Message {
    let call_id = block
        .get("toolCallId")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let content: Vec<ContentBlock> = match block.get("content") {
        Some(Value::Array(items)) => items.iter().map(content_block).collect(),
        Some(Value::String(text)) => vec![ContentBlock::text(text.as_str())],
        _ => Vec::new(),
    };
    Message::ToolResult {
        call_id: Arc::from(call_id),
        content: Arc::from(content),
        is_error: block
            .get("isError")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    }
}

fn str_field(block: &Value, key: &str) -> Option<String> {
    block.get(key).and_then(Value::as_str).map(str::to_owned)
}

fn assistant_block(block: &Value) -> Option<AssistantBlock> {
    match block.get("type").and_then(Value::as_str)? {
        "text" => Some(AssistantBlock::Text {
            text: str_field(block, "text").unwrap_or_default(),
        }),
        "reasoning" => Some(AssistantBlock::Reasoning {
            text: str_field(block, "text").unwrap_or_default(),
            signature: str_field(block, "signature"),
            redacted: str_field(block, "redactedData"),
        }),
        "tool-call" => Some(AssistantBlock::ToolCall(ToolCall {
            id: str_field(block, "id").unwrap_or_default(),
            name: str_field(block, "name").unwrap_or_default(),
            arguments: match block.get("arguments") {
                Some(Value::String(raw)) => raw.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            },
        })),
        _ => None,
    }
}

/// An assistant block in the reference shape (`{type: "text", text}`, `{type: "reasoning",
/// text, signature?, redactedData?}`, `{type: "tool-call", id, name, arguments}`).
pub fn block_json(block: &AssistantBlock) -> Value {
    let mut m = serde_json::Map::new();
    match block {
        AssistantBlock::Text { text } => {
            m.insert("type".into(), "text".into());
            m.insert("text".into(), text.as_str().into());
        }
        AssistantBlock::Reasoning {
            text,
            signature,
            redacted,
        } => {
            m.insert("type".into(), "reasoning".into());
            m.insert("text".into(), text.as_str().into());
            if let Some(signature) = signature {
                m.insert("signature".into(), signature.as_str().into());
            }
            if let Some(data) = redacted {
                m.insert("redactedData".into(), data.as_str().into());
            }
        }
        AssistantBlock::ToolCall(call) => {
            m.insert("type".into(), "tool-call".into());
            m.insert("id".into(), call.id.as_str().into());
            m.insert("name".into(), call.name.as_str().into());
            m.insert("arguments".into(), call.arguments.as_str().into());
        }
    }
    Value::Object(m)
}
