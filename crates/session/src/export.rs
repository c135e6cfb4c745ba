//! Exports of the model-visible history (spec L5) to the OpenAI Chat Completions and the
//! Anthropic Messages request shapes.
//!
//! Guarantees: every tool call of an assistant message is exported with its id, and every
//! tool-result block becomes the provider's result record for that id (`tool` message by
//! `tool_call_id`; `tool_result` block by `tool_use_id`), in log order. An id the provider would
//! refuse is mapped, the same way for the call and its result ([`crate::provider_ids`]).
//! Reasoning blocks reach the Anthropic export as `thinking` (with their `signature`) or
//! `redacted_thinking` (with their `data`), where they were logged with them, in their place
//! in the message; reasoning without a signature (which the API would refuse) and all reasoning
//! in the OpenAI export (Chat Completions has no field for it) are left out. Empty text blocks,
//! which Anthropic refuses, are left out.

use std::borrow::Cow;

use serde_json::{Map, Value};

use dsh_core::Json;

use crate::deep;
use crate::provider_ids::{anthropic_id, openai_id};

fn obj(entries: Vec<(&str, Value)>) -> Value {
    let mut m = Map::with_capacity(entries.len());
    for (k, v) in entries {
        m.insert(k.to_owned(), v);
    }
    Value::Object(m)
}

fn block_type(block: &Value) -> &str {
    block
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("unknown")
}

fn str_field<'a>(block: &'a Value, key: &str) -> &'a str {
    block.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// A message's blocks, borrowed; a string content counts as one text block.
fn blocks(message: &Value) -> Vec<Cow<'_, Value>> {
    match message.get("content") {
        Some(Value::Array(items)) => items.iter().map(Cow::Borrowed).collect(),
        Some(Value::String(s)) => vec![Cow::Owned(obj(vec![
            ("type", Value::from("text")),
            ("text", Value::from(s.as_str())),
        ]))],
        _ => Vec::new(),
    }
}

fn role(message: &Value) -> &str {
    message
        .get("role")
        .and_then(Value::as_str)
        .unwrap_or("user")
}

/// The text of content blocks: texts joined by newlines, other blocks as `[<type> content]`.
fn text_of(content: Option<&Value>) -> String {
    let Some(Value::Array(items)) = content else {
        return content
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
    };
    let parts: Vec<String> = items
        .iter()
        .map(|b| match block_type(b) {
            "text" => str_field(b, "text").to_owned(),
            other => format!("[{other} content]"),
        })
        .collect();
    parts.join("\n")
}

fn arguments_string(block: &Value) -> String {
    match block.get("arguments") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => deep::to_text(other),
        None => String::new(),
    }
}

/// The history in the OpenAI Chat Completions `messages` shape: assistant messages carry
/// `tool_calls` (`function.arguments` is the raw argument string), each tool result is a
/// `{role: "tool", tool_call_id, content}` message, and user content follows the results.
pub fn to_openai(messages: &[Json]) -> Json {
    let mut out: Vec<Value> = Vec::new();
    for message in messages {
        let m = message.value();
        let blocks = blocks(m);
        match role(m) {
            "assistant" => {
                let mut text = String::new();
                let mut calls = Vec::new();
                for b in &blocks {
                    match block_type(b) {
                        "text" => text.push_str(str_field(b, "text")),
                        "tool-call" => calls.push(obj(vec![
                            ("id", Value::from(openai_id(str_field(b, "id")))),
                            ("type", Value::from("function")),
                            (
                                "function",
                                obj(vec![
                                    ("name", Value::from(str_field(b, "name"))),
                                    ("arguments", Value::from(arguments_string(b))),
                                ]),
                            ),
                        ])),
                        _ => {}
                    }
                }
                if text.is_empty() && calls.is_empty() {
                    continue;
                }
                let content = if text.is_empty() {
                    Value::Null
                } else {
                    Value::from(text)
                };
                let mut entries = vec![("role", Value::from("assistant")), ("content", content)];
                if !calls.is_empty() {
                    entries.push(("tool_calls", Value::Array(calls)));
                }
                out.push(obj(entries));
            }
            r => {
                let mut parts = Vec::new();
                for b in &blocks {
                    match block_type(b) {
                        "tool-result" => out.push(obj(vec![
                            ("role", Value::from("tool")),
                            (
                                "tool_call_id",
                                Value::from(openai_id(str_field(b, "toolCallId"))),
                            ),
                            ("content", Value::from(text_of(b.get("content")))),
                        ])),
                        "text" => parts.push(obj(vec![
                            ("type", Value::from("text")),
                            ("text", Value::from(str_field(b, "text"))),
                        ])),
                        "image" => parts.push(obj(vec![
                            ("type", Value::from("image_url")),
                            (
                                "image_url",
                                obj(vec![(
                                    "url",
                                    Value::from(format!(
                                        "data:{};base64,{}",
                                        str_field(b, "mimeType"),
                                        str_field(b, "data")
                                    )),
                                )]),
                            ),
                        ])),
                        other => parts.push(obj(vec![
                            ("type", Value::from("text")),
                            ("text", Value::from(format!("[{other} content]"))),
                        ])),
                    }
                }
                if parts.is_empty() {
                    continue;
                }
                let role = if r == "system" { "system" } else { "user" };
                let content = match parts.as_slice() {
                    [only] if block_type(only) == "text" => Value::from(str_field(only, "text")),
                    _ => Value::Array(parts),
                };
                out.push(obj(vec![("role", Value::from(role)), ("content", content)]));
            }
        }
    }
    Json::from_shallow(Value::Array(out))
}

/// Anthropic `input` for a tool call: the parsed arguments when they are a JSON object, `{}`
/// for empty arguments, otherwise `{"_raw_arguments": "<raw string>"}` (the API needs an object).
fn anthropic_input(block: &Value) -> Value {
    let raw = arguments_string(block);
    if raw.trim().is_empty() {
        return Value::Object(Map::new());
    }
    match deep::parse_with(&raw, Ok) {
        Ok(v @ Value::Object(_)) => v,
        _ => obj(vec![("_raw_arguments", Value::from(raw))]),
    }
}

fn anthropic_media(b: &Value) -> Value {
    match block_type(b) {
        "text" => obj(vec![
            ("type", Value::from("text")),
            ("text", Value::from(str_field(b, "text"))),
        ]),
        "image" => obj(vec![
            ("type", Value::from("image")),
            (
                "source",
                obj(vec![
                    ("type", Value::from("base64")),
                    ("media_type", Value::from(str_field(b, "mimeType"))),
                    ("data", Value::from(str_field(b, "data"))),
                ]),
            ),
        ]),
        other => obj(vec![
            ("type", Value::from("text")),
            ("text", Value::from(format!("[{other} content]"))),
        ]),
    }
}

/// A reasoning block as Anthropic takes it back: `thinking` with its `signature`, or
/// `redacted_thinking` with its `data` (both kept under `providerMetadata.anthropic`); `None`
/// for reasoning the API cannot verify.
fn anthropic_thinking(b: &Value) -> Option<Value> {
    let meta = b.get("providerMetadata")?.get("anthropic")?;
    if let Some(data) = meta.get("redactedData").and_then(Value::as_str) {
        return Some(obj(vec![
            ("type", Value::from("redacted_thinking")),
            ("data", Value::from(data)),
        ]));
    }
    let signature = meta.get("signature").and_then(Value::as_str)?;
    Some(obj(vec![
        ("type", Value::from("thinking")),
        ("thinking", Value::from(str_field(b, "text"))),
        ("signature", Value::from(signature)),
    ]))
}

/// The history in the Anthropic Messages `messages` shape: tool calls are `tool_use` blocks,
/// results `tool_result` blocks (`tool_use_id`, `content`, `is_error`); consecutive messages of
/// the same role are merged, as the API requires alternating roles.
pub fn to_anthropic(messages: &[Json]) -> Json {
    let mut out: Vec<(String, Vec<Value>)> = Vec::new();
    for message in messages {
        let m = message.value();
        let role = if role(m) == "assistant" {
            "assistant"
        } else {
            "user"
        };
        let mut content = Vec::new();
        for b in blocks(m).iter().map(|b| &**b) {
            match (role, block_type(b)) {
                (_, "text") if str_field(b, "text").is_empty() => {}
                ("assistant", "text") => content.push(anthropic_media(b)),
                ("assistant", "reasoning") => content.extend(anthropic_thinking(b)),
                ("assistant", "tool-call") => content.push(obj(vec![
                    ("type", Value::from("tool_use")),
                    ("id", Value::from(anthropic_id(str_field(b, "id")))),
                    ("name", Value::from(str_field(b, "name"))),
                    ("input", anthropic_input(b)),
                ])),
                ("assistant", _) => {}
                (_, "tool-result") => {
                    let inner: Vec<Value> = match b.get("content") {
                        Some(Value::Array(items)) => items.iter().map(anthropic_media).collect(),
                        Some(Value::String(s)) => vec![obj(vec![
                            ("type", Value::from("text")),
                            ("text", Value::from(s.as_str())),
                        ])],
                        _ => Vec::new(),
                    };
                    content.push(obj(vec![
                        ("type", Value::from("tool_result")),
                        (
                            "tool_use_id",
                            Value::from(anthropic_id(str_field(b, "toolCallId"))),
                        ),
                        ("content", Value::Array(inner)),
                        (
                            "is_error",
                            Value::Bool(b.get("isError").and_then(Value::as_bool).unwrap_or(false)),
                        ),
                    ]));
                }
                _ => content.push(anthropic_media(b)),
            }
        }
        if content.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some((last_role, last)) if last_role == role => last.extend(content),
            _ => out.push((role.to_owned(), content)),
        }
    }
    let messages = out
        .into_iter()
        .map(|(role, content)| {
            obj(vec![
                ("role", Value::from(role)),
                ("content", Value::Array(content)),
            ])
        })
        .collect();
    Json::from_shallow(Value::Array(messages))
}
