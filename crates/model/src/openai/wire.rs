//! The Chat Completions request body built from a [`Request`].
//!
//! Guarantees: tools in the request's order; an assistant message with tool calls carries them
//! as `tool_calls` with `function.arguments` the raw string the model produced, and is followed
//! by one `tool` message per `tool_call_id`, in the order the results were given; user text that
//! comes with tool results follows all of them; `stream: true` with
//! `stream_options.include_usage`.

use std::borrow::Cow;

use dsh_core::ContentBlock;
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::request::{AssistantBlock, Message, Reasoning, Request};

/// Which member carries the output limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MaxTokensField {
    /// `max_tokens` (DeepSeek, vLLM, llama.cpp, Ollama, OpenRouter).
    #[default]
    MaxTokens,
    /// `max_completion_tokens` (OpenAI's current models).
    MaxCompletionTokens,
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Vec<Wire<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Value>,
    stream: bool,
    stream_options: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stop: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_tool_calls: Option<bool>,
    #[serde(flatten)]
    extra: &'a Map<String, Value>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Content<'a> {
    Null,
    Text(Cow<'a, str>),
    Parts(Vec<Value>),
}

#[derive(Serialize)]
struct Wire<'a> {
    role: &'static str,
    content: Content<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
}

impl<'a> Wire<'a> {
    fn plain(role: &'static str, content: Content<'a>) -> Wire<'a> {
        Wire {
            role,
            content,
            reasoning_content: None,
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }
}

/// How the body is shaped for one server.
pub(crate) struct Shape {
    pub max_tokens_field: MaxTokensField,
    pub reasoning_in_history: bool,
    /// Whether images are sent as pictures (see `OpenAiConfig::images`).
    pub images: bool,
}

/// The line a picture becomes for a model that takes no images.
fn left_out(mime_type: &str) -> String {
    format!("[{mime_type} image left out: this model does not take images]")
}

/// Text of content blocks for a `tool` message: texts joined by newlines, other blocks as
/// `[<type> content]`.
fn text_of(content: &[ContentBlock]) -> String {
    dsh_core::summarize(content)
}

fn user_content(content: &[ContentBlock], images: bool) -> Content<'_> {
    if let [ContentBlock::Text { text }] = content {
        return Content::Text(Cow::Borrowed(text));
    }
    let parts = content
        .iter()
        .map(|b| match b {
            ContentBlock::Text { text } => json!({"type": "text", "text": &**text}),
            ContentBlock::Image { data, mime_type } if images => json!({
                "type": "image_url",
                "image_url": {"url": format!("data:{mime_type};base64,{data}")},
            }),
            ContentBlock::Image { mime_type, .. } => {
                json!({"type": "text", "text": left_out(mime_type)})
            }
            other => json!({"type": "text", "text": format!("[{} content]", other.block_type())}),
        })
        .collect();
    Content::Parts(parts)
}

fn assistant<'a>(blocks: &'a [AssistantBlock], shape: &Shape) -> Option<Wire<'a>> {
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut calls = Vec::new();
    for b in blocks {
        match b {
            AssistantBlock::Text { text: t } => text.push_str(t),
            AssistantBlock::Reasoning { text: r, .. } => reasoning.push_str(r),
            AssistantBlock::ToolCall(c) => calls.push(json!({
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            })),
        }
    }
    if text.is_empty() && calls.is_empty() {
        return None;
    }
    let content = if text.is_empty() {
        Content::Null
    } else {
        Content::Text(Cow::Owned(text))
    };
    Some(Wire {
        role: "assistant",
        content,
        reasoning_content: (shape.reasoning_in_history && !reasoning.is_empty())
            .then_some(reasoning),
        tool_calls: calls,
        tool_call_id: None,
    })
}

fn messages<'a>(request: &'a Request, shape: &Shape) -> Vec<Wire<'a>> {
    let mut out = Vec::with_capacity(request.messages.len());
    // Pictures of the tool results just sent, for the user message that follows them.
    let mut pictures: Vec<Value> = Vec::new();
    let flush = |out: &mut Vec<Wire<'a>>, pictures: &mut Vec<Value>| {
        if !pictures.is_empty() {
            let mut parts =
                vec![json!({"type": "text", "text": "The images of the tool results above:"})];
            parts.append(pictures);
            out.push(Wire::plain("user", Content::Parts(parts)));
        }
    };
    for m in &request.messages {
        if !matches!(m, Message::ToolResult { .. }) {
            flush(&mut out, &mut pictures);
        }
        match m {
            Message::System { text } => {
                out.push(Wire::plain("system", Content::Text(Cow::Borrowed(text))))
            }
            Message::User { content } => {
                if !content.is_empty() {
                    out.push(Wire::plain("user", user_content(content, shape.images)));
                }
            }
            Message::Assistant { blocks } => out.extend(assistant(blocks, shape)),
            Message::ToolResult {
                call_id, content, ..
            } => {
                let mut text = text_of(content);
                for b in content.iter() {
                    if let ContentBlock::Image { data, mime_type } = b {
                        if shape.images {
                            pictures.push(json!({
                                "type": "image_url",
                                "image_url": {"url": format!("data:{mime_type};base64,{data}")},
                            }));
                        } else {
                            text.push('\n');
                            text.push_str(&left_out(mime_type));
                        }
                    }
                }
                out.push(Wire {
                    tool_call_id: Some(call_id),
                    ..Wire::plain("tool", Content::Text(Cow::Owned(text)))
                })
            }
        }
    }
    flush(&mut out, &mut pictures);
    out
}

fn tools(request: &Request) -> Vec<Value> {
    request
        .tools
        .iter()
        .map(|t| {
            json!({
                "type": "function",
                "function": {
                    "name": &*t.name,
                    "description": &*t.description,
                    "parameters": t.parameters.value(),
                },
            })
        })
        .collect()
}

/// The JSON body of a streaming Chat Completions request.
pub(crate) fn body(request: &Request, shape: &Shape) -> Result<Vec<u8>, serde_json::Error> {
    let o = &request.options;
    let (max_tokens, max_completion_tokens) = match shape.max_tokens_field {
        MaxTokensField::MaxTokens => (o.max_tokens, None),
        MaxTokensField::MaxCompletionTokens => (None, o.max_tokens),
    };
    let body = Body {
        model: &request.model,
        messages: messages(request, shape),
        tools: tools(request),
        stream: true,
        stream_options: json!({"include_usage": true}),
        max_tokens,
        max_completion_tokens,
        temperature: o.temperature,
        top_p: o.top_p,
        stop: &o.stop,
        reasoning_effort: match o.reasoning {
            Some(Reasoning::Effort(e)) => Some(e.as_str()),
            _ => None,
        },
        parallel_tool_calls: o.parallel_tool_calls.filter(|_| !request.tools.is_empty()),
        extra: &o.extra,
    };
    serde_json::to_vec(&body)
}
