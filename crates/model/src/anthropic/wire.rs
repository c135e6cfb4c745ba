//! The Messages request body built from a [`Request`].
//!
//! Guarantees: system messages are joined into the top-level `system`; consecutive messages of
//! one role are merged, so roles alternate; each tool result is a `tool_result` block in the user
//! message right after its `tool_use`, placed before any other block of that message; a tool
//! call's `input` is the model's raw argument text embedded verbatim when it is a JSON object
//! (`{}` when empty, `{"_raw_arguments": "<text>"}` otherwise, since the API needs an object);
//! reasoning goes back as `thinking` with its signature or `redacted_thinking` with its data, and
//! reasoning without either (which the API would refuse) is left out; empty text is left out.

use dsh_core::ContentBlock;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::request::{AssistantBlock, Effort, Message, Reasoning, Request};

/// A block of the request, either a built value or the model's raw `input` text.
#[derive(Serialize)]
#[serde(untagged)]
enum Block {
    Value(Value),
    ToolUse {
        #[serde(rename = "type")]
        kind: &'static str,
        id: String,
        name: String,
        input: Box<RawValue>,
    },
}

#[derive(Serialize)]
struct Wire {
    role: &'static str,
    content: Vec<Block>,
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    max_tokens: u32,
    messages: Vec<Wire>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Value>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stop_sequences: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Value>,
    #[serde(flatten)]
    extra: &'a Map<String, Value>,
}

fn media(b: &ContentBlock) -> Option<Value> {
    match b {
        ContentBlock::Text { text } if text.is_empty() => None,
        ContentBlock::Text { text } => Some(json!({"type": "text", "text": &**text})),
        ContentBlock::Image { data, mime_type } => Some(json!({
            "type": "image",
            "source": {"type": "base64", "media_type": &**mime_type, "data": &**data},
        })),
        other => Some(json!({"type": "text", "text": format!("[{} content]", other.block_type())})),
    }
}

fn input(arguments: &str) -> Box<RawValue> {
    let raw = arguments.trim();
    let object = serde_json::from_str::<Map<String, Value>>(raw).is_ok();
    let text = if raw.is_empty() {
        "{}".to_owned()
    } else if object {
        raw.to_owned()
    } else {
        json!({"_raw_arguments": arguments}).to_string()
    };
    // The text is a JSON object by construction; the fallback is never reached in practice.
    RawValue::from_string(text).unwrap_or_else(|_| RawValue::NULL.to_owned())
}

fn assistant(blocks: &[AssistantBlock]) -> Vec<Block> {
    let mut out = Vec::new();
    for b in blocks {
        match b {
            AssistantBlock::Text { text } if !text.is_empty() => {
                out.push(Block::Value(json!({"type": "text", "text": text})));
            }
            AssistantBlock::Text { .. } => {}
            AssistantBlock::Reasoning {
                redacted: Some(data),
                ..
            } => out.push(Block::Value(
                json!({"type": "redacted_thinking", "data": data}),
            )),
            AssistantBlock::Reasoning {
                text,
                signature: Some(signature),
                ..
            } => out.push(Block::Value(
                json!({"type": "thinking", "thinking": text, "signature": signature}),
            )),
            AssistantBlock::Reasoning { .. } => {}
            AssistantBlock::ToolCall(c) => out.push(Block::ToolUse {
                kind: "tool_use",
                id: c.id.clone(),
                name: c.name.clone(),
                input: input(&c.arguments),
            }),
        }
    }
    out
}

/// Adds `content` as a message of `role`, merged into the last message if it has that role;
/// in a user message, tool results stay in front of other blocks.
fn push(out: &mut Vec<Wire>, role: &'static str, content: Vec<Block>, results: bool) {
    if content.is_empty() {
        return;
    }
    match out.last_mut() {
        Some(last) if last.role == role => {
            if results {
                let at = last
                    .content
                    .iter()
                    .take_while(|b| is_tool_result(b))
                    .count();
                last.content.splice(at..at, content);
            } else {
                last.content.extend(content);
            }
        }
        _ => out.push(Wire { role, content }),
    }
}

fn is_tool_result(b: &Block) -> bool {
    matches!(b, Block::Value(v) if v.get("type").and_then(Value::as_str) == Some("tool_result"))
}

fn effort_budget(e: Effort) -> u32 {
    match e {
        Effort::Low => 1_024,
        Effort::Medium => 4_096,
        Effort::High => 16_384,
    }
}

/// The JSON body of a streaming Messages request; `default_max_tokens` when the request sets
/// no limit (the API requires one).
pub(crate) fn body(
    request: &Request,
    default_max_tokens: u32,
) -> Result<Vec<u8>, serde_json::Error> {
    let mut system: Vec<&str> = Vec::new();
    let mut messages: Vec<Wire> = Vec::new();
    for m in &request.messages {
        match m {
            Message::System { text } => system.push(text),
            Message::User { content } => {
                let blocks = content.iter().filter_map(media).map(Block::Value).collect();
                push(&mut messages, "user", blocks, false);
            }
            Message::Assistant { blocks } => {
                push(&mut messages, "assistant", assistant(blocks), false)
            }
            Message::ToolResult {
                call_id,
                content,
                is_error,
            } => {
                let inner: Vec<Value> = content.iter().filter_map(media).collect();
                let block = json!({
                    "type": "tool_result",
                    "tool_use_id": &**call_id,
                    "content": inner,
                    "is_error": is_error,
                });
                push(&mut messages, "user", vec![Block::Value(block)], true);
            }
        }
    }
    let o = &request.options;
    let tools = request
        .tools
        .iter()
        .map(|t| {
            json!({
                "name": &*t.name,
                "description": &*t.description,
                "input_schema": t.parameters.value(),
            })
        })
        .collect::<Vec<_>>();
    let tool_choice = match o.parallel_tool_calls {
        Some(false) if !tools.is_empty() => {
            Some(json!({"type": "auto", "disable_parallel_tool_use": true}))
        }
        _ => None,
    };
    let budget = match o.reasoning {
        Some(Reasoning::Budget(n)) => Some(n),
        Some(Reasoning::Effort(e)) => Some(effort_budget(e)),
        None => None,
    };
    let body = Body {
        model: &request.model,
        max_tokens: o.max_tokens.unwrap_or(default_max_tokens),
        messages,
        system: (!system.is_empty()).then(|| system.join("\n\n")),
        tools,
        tool_choice,
        stream: true,
        temperature: o.temperature,
        top_p: o.top_p,
        stop_sequences: &o.stop,
        thinking: budget.map(|n| json!({"type": "enabled", "budget_tokens": n})),
        extra: &o.extra,
    };
    serde_json::to_vec(&body)
}
