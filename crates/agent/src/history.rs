//! The model-visible history, from the log to a provider request.
//!
//! Guarantees: the messages sent are exactly `derive_messages` of the session (dsh-session,
//! rules I3/L5) turned into the provider-neutral [`Message`]s one for one, in order, behind the
//! system prompt: a user message's blocks as they were logged, an assistant message's text,
//! reasoning and tool calls (each call's arguments as the raw text logged), and every
//! `tool-result` block as its own tool result. Nothing is added, reordered or dropped here, so
//! the request a provider receives can be rebuilt from the log alone (the test beside this
//! crate compares the two byte for byte).

use std::borrow::Cow;
use std::sync::Arc;

use dsh_core::{ContentBlock, Json};
use dsh_model::{AssistantBlock, Message, ToolCall};
use dsh_session::{Event, RawObject, derive_logged};
use serde_json::Value;

/// The provider messages of the derived history `messages` (reference shape), in order.
pub fn to_provider_messages(messages: &[Json]) -> Vec<Message> {
    let mut out = Vec::with_capacity(messages.len());
    for message in messages {
        push_message(&message.value(), &mut out);
    }
    out
}

/// The provider messages of a session's history, `(seq, event)` in seq order (for example
/// `session.events().pairs()`): [`to_provider_messages`] of `derive_messages_from(events)`,
/// reading each message logged as text straight into its provider message (no tree built only
/// to be taken apart).
pub fn provider_messages<'a>(events: impl IntoIterator<Item = (u64, &'a Event)>) -> Vec<Message> {
    let logged = derive_logged(events);
    let mut out = Vec::with_capacity(logged.len());
    for message in &logged {
        match message.text() {
            Some(text) => push_message(&Raw::new(text), &mut out),
            None => push_message(&message.to_json().value(), &mut out),
        }
    }
    out
}

/// A JSON value as the history reads it: a tree, or text read member by member ([`Raw`]). The
/// rules below are written once over this, so both give the same messages.
trait Node<'a>: Sized {
    /// Member `key` (`None` when this is not an object or has no such member).
    fn member(&self, key: &str) -> Option<Self>;
    /// The string this is.
    fn string(&self) -> Option<Cow<'a, str>>;
    /// The boolean this is.
    fn boolean(&self) -> Option<bool>;
    /// The elements of the array this is.
    fn items(&self) -> Option<Vec<Self>>;
    /// This value as a tree, kept as it is.
    fn to_json(&self) -> Json;
    /// This value's compact JSON text.
    fn to_text(&self) -> String;
    /// Member `key` when it is a string.
    fn str_member(&self, key: &str) -> Option<Cow<'a, str>> {
        self.member(key).and_then(|m| m.string())
    }
}

impl<'a> Node<'a> for &'a Value {
    fn member(&self, key: &str) -> Option<Self> {
        self.get(key)
    }
    fn string(&self) -> Option<Cow<'a, str>> {
        self.as_str().map(Cow::Borrowed)
    }
    fn boolean(&self) -> Option<bool> {
        self.as_bool()
    }
    fn items(&self) -> Option<Vec<Self>> {
        self.as_array().map(|a| a.iter().collect())
    }
    fn to_json(&self) -> Json {
        Json::from_shallow((*self).clone())
    }
    fn to_text(&self) -> String {
        self.to_string()
    }
}

/// A value read from a log line's canonical JSON text (see [`RawObject`]): an object's
/// members are found once, when it is read.
struct Raw<'a> {
    text: &'a str,
    object: Option<RawObject<'a>>,
}

impl<'a> Raw<'a> {
    fn new(text: &'a str) -> Raw<'a> {
        Raw {
            text,
            object: RawObject::parse(text),
        }
    }
}

impl<'a> Node<'a> for Raw<'a> {
    fn member(&self, key: &str) -> Option<Self> {
        self.object.as_ref()?.get(key).map(Raw::new)
    }
    fn string(&self) -> Option<Cow<'a, str>> {
        RawObject::string_of(self.text)
    }
    fn boolean(&self) -> Option<bool> {
        match self.text {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        }
    }
    fn items(&self) -> Option<Vec<Self>> {
        Some(
            RawObject::items_of(self.text)?
                .map(|(text, object)| Raw { text, object })
                .collect(),
        )
    }
    fn to_json(&self) -> Json {
        // The text of a line the log's scan accepted, so it parses; should it not, the block
        // is passed on as its text.
        Json::parse(self.text).unwrap_or_else(|_| Json::from_shallow(Value::from(self.text)))
    }
    fn to_text(&self) -> String {
        self.text.to_owned()
    }
}

fn push_message<'a, N: Node<'a>>(message: &N, out: &mut Vec<Message>) {
    let role = message.str_member("role");
    let role = role.as_deref().unwrap_or("user");
    let Some(content) = message.member("content") else {
        return;
    };
    if let Some(text) = content.string() {
        out.push(match role {
            "assistant" => Message::Assistant {
                blocks: vec![AssistantBlock::Text {
                    text: text.into_owned(),
                }],
            },
            _ => Message::user(&*text),
        });
        return;
    }
    let Some(blocks) = content.items() else {
        return;
    };
    if role == "assistant" {
        let blocks: Vec<AssistantBlock> = blocks.iter().filter_map(assistant_block).collect();
        if !blocks.is_empty() {
            out.push(Message::Assistant { blocks });
        }
        return;
    }
    let mut user: Vec<ContentBlock> = Vec::new();
    for block in &blocks {
        if block.str_member("type").as_deref() == Some("tool-result") {
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

fn content_block<'a, N: Node<'a>>(block: &N) -> ContentBlock {
    match (
        block.str_member("type").as_deref(),
        block.str_member("text"),
        block.str_member("data"),
        block.str_member("mimeType"),
    ) {
        (Some("text"), Some(text), _, _) => ContentBlock::text(&*text),
        (Some("image"), _, Some(data), Some(mime)) => ContentBlock::Image {
            data: Arc::from(&*data),
            mime_type: Arc::from(&*mime),
        },
        _ => ContentBlock::Other(block.to_json()),
    }
}

fn tool_result<'a, N: Node<'a>>(block: &N) -> Message {
    let call_id = block.str_member("toolCallId").unwrap_or_default();
    let content: Vec<ContentBlock> = match block.member("content") {
        Some(content) => match (content.items(), content.string()) {
            (Some(items), _) => items.iter().map(content_block).collect(),
            (None, Some(text)) => vec![ContentBlock::text(&*text)],
            (None, None) => Vec::new(),
        },
        None => Vec::new(),
    };
    Message::ToolResult {
        call_id: Arc::from(&*call_id),
        content: Arc::from(content),
        is_error: block
            .member("isError")
            .and_then(|b| b.boolean())
            .unwrap_or(false),
    }
}

fn assistant_block<'a, N: Node<'a>>(block: &N) -> Option<AssistantBlock> {
    let text = |key: &str| block.str_member(key).map(Cow::into_owned);
    match block.str_member("type")?.as_ref() {
        "text" => Some(AssistantBlock::Text {
            text: text("text").unwrap_or_default(),
        }),
        "reasoning" => Some(AssistantBlock::Reasoning {
            text: text("text").unwrap_or_default(),
            signature: text("signature"),
            redacted: text("redactedData"),
        }),
        "tool-call" => Some(AssistantBlock::ToolCall(ToolCall {
            id: text("id").unwrap_or_default(),
            name: text("name").unwrap_or_default(),
            arguments: match block.member("arguments") {
                Some(raw) => match raw.string() {
                    Some(text) => text.into_owned(),
                    None => raw.to_text(),
                },
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
