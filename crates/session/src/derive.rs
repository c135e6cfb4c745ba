//! The model-visible history rebuilt from the log alone (spec I3, L5).
//!
//! Guarantees: only `user/message`, `assistant/message` and `tool/result` events reach the
//! history; Code Mode dispatch records and every other log-only event are left out; a surface
//! operation `{op: "replace", startSeq, endSeq}` replaces the messages of that seq range in place
//! (any other surface operation, unknown to this crate, leaves its message out of the history);
//! an assistant message with no content (a step cut short before any block) is left out. Both the
//! current reference shapes and the older flat ones read.

use serde_json::{Map, Value};

use dsh_core::Json;

use crate::compact;
use crate::deep;
use crate::event::{Event, SurfaceOp, types};
use crate::snapshot::Events;

/// The model-visible messages of a session's events, in order.
pub fn derive_messages(events: &Events) -> Vec<Json> {
    derive_messages_from(events.pairs())
}

/// [`derive_messages`] over any `(seq, event)` sequence in seq order.
pub fn derive_messages_from<'a>(events: impl IntoIterator<Item = (u64, &'a Event)>) -> Vec<Json> {
    derive_logged(events)
        .iter()
        .map(LoggedMessage::to_json)
        .collect()
}

/// A model-visible message as the log keeps it: the text of its line, when it was read from a
/// log file, or a tree. Reading the text straight into another shape (a provider's request)
/// saves building a tree only to take it apart.
#[derive(Clone, Debug)]
pub struct LoggedMessage<'a>(Logged<'a>);

#[derive(Clone, Debug)]
enum Logged<'a> {
    /// Canonical compact JSON text, from a line the scan accepted.
    Text {
        text: &'a str,
        depth: usize,
        event: &'a Event,
    },
    Tree(Json),
}

impl<'a> LoggedMessage<'a> {
    /// The message's JSON text (canonical compact JSON, as its log line holds it), when it is
    /// kept as text.
    pub fn text(&self) -> Option<&'a str> {
        match &self.0 {
            Logged::Text { text, .. } => Some(text),
            Logged::Tree(_) => None,
        }
    }

    /// The message as a tree: the one [`derive_messages`] gives.
    pub fn to_json(&self) -> Json {
        match &self.0 {
            Logged::Tree(json) => json.clone(),
            Logged::Text { text, depth, event } => match Json::parse_at_depth(text, *depth) {
                Ok(json) => json,
                // Text the scan accepted always parses; should it not, the tree has it.
                Err(_) => tree_message_of(event).unwrap_or_else(|| Json::from_shallow(Value::Null)),
            },
        }
    }
}

/// [`derive_messages_from`], each message as the log keeps it (see [`LoggedMessage`]).
pub fn derive_logged<'a>(
    events: impl IntoIterator<Item = (u64, &'a Event)>,
) -> Vec<LoggedMessage<'a>> {
    let mut items: Vec<(u64, LoggedMessage<'a>)> = Vec::new();
    for (seq, event) in events {
        if !matches!(
            event.event_type(),
            types::USER_MESSAGE | types::ASSISTANT_MESSAGE | types::TOOL_RESULT
        ) {
            continue;
        }
        let replace = match event.surface_op() {
            None | Some(SurfaceOp::Append) => None,
            Some(SurfaceOp::Other(op)) => match replace_range(op.value()) {
                Some(range) => Some(range),
                None => continue,
            },
        };
        let Some(message) = message_of(event) else {
            continue;
        };
        match replace {
            None => items.push((seq, message)),
            Some((start, end)) => {
                let at = items.iter().position(|(s, _)| (start..=end).contains(s));
                items.retain(|(s, _)| !(start..=end).contains(s));
                let at = at.unwrap_or(items.len()).min(items.len());
                items.insert(at, (seq, message));
            }
        }
    }
    items.into_iter().map(|(_, m)| m).collect()
}

fn replace_range(op: &Value) -> Option<(u64, u64)> {
    if op.get("op").and_then(Value::as_str) != Some("replace") {
        return None;
    }
    Some((
        op.get("startSeq").and_then(Value::as_u64)?,
        op.get("endSeq").and_then(Value::as_u64)?,
    ))
}

fn subtree(value: &Value) -> Json {
    Json::from_shallow(deep::clone_value(value))
}

/// The message an event puts on the surface, if any: the text of its `message` when the event
/// keeps its data as text and knows where that sits (its tree is never built), else a tree.
fn message_of(event: &Event) -> Option<LoggedMessage<'_>> {
    let kind = event.event_type();
    if matches!(kind, types::ASSISTANT_MESSAGE | types::TOOL_RESULT)
        && let Some((text, depth)) = event.message_text_at()
    {
        if kind == types::ASSISTANT_MESSAGE && !has_content(text) {
            return None;
        }
        return Some(LoggedMessage(Logged::Text { text, depth, event }));
    }
    tree_message_of(event).map(|json| LoggedMessage(Logged::Tree(json)))
}

/// Whether a message's text has content: a non-empty array or string (as the tree check in
/// [`tree_message_of`] reads it).
fn has_content(text: &str) -> bool {
    // Only `content` is needed: the walk stops there.
    match compact::member(text, "content") {
        Some(raw) if raw.starts_with('[') => raw != "[]",
        Some(raw) if raw.starts_with('"') => raw != "\"\"",
        _ => false,
    }
}

/// [`message_of`], read from the tree (or from text written from typed fields).
fn tree_message_of(event: &Event) -> Option<Json> {
    match event.event_type() {
        types::USER_MESSAGE => {
            let data = event.data().value();
            if data.get("role").is_some() {
                return Some(event.data().clone());
            }
            let content = data.get("content")?;
            let mut m = Map::new();
            m.insert("content".into(), deep::clone_value(content));
            if let Some(source) = data.get("source") {
                m.insert("source".into(), deep::clone_value(source));
            }
            m.insert("role".into(), Value::from("user"));
            Some(Json::from_shallow(Value::Object(m)))
        }
        types::ASSISTANT_MESSAGE => {
            let message = match event.message_from_text() {
                Some(message) => message,
                None => assistant_message(event.data().value())?,
            };
            let empty = match message.value().get("content") {
                Some(Value::Array(blocks)) => blocks.is_empty(),
                Some(Value::String(s)) => s.is_empty(),
                _ => true,
            };
            (!empty).then_some(message)
        }
        types::TOOL_RESULT => {
            if let Some(message) = event.message_from_text() {
                return Some(message);
            }
            match event.data().value().get("message") {
                Some(message) => Some(subtree(message)),
                None => flat_tool_result(event),
            }
        }
        _ => None,
    }
}

/// The message of an `assistant/message` read from its tree: `message`, or the older flat
/// `{content}`.
fn assistant_message(data: &Value) -> Option<Json> {
    Some(match data.get("message") {
        Some(message) => subtree(message),
        None => {
            let mut m = Map::new();
            m.insert("role".into(), Value::from("assistant"));
            m.insert("content".into(), deep::clone_value(data.get("content")?));
            Json::from_shallow(Value::Object(m))
        }
    })
}

/// The message of a `tool/result` in the older flat shape `{callId, content, isError}`.
fn flat_tool_result(event: &Event) -> Option<Json> {
    let result = event.as_tool_result()?;
    let mut source = Map::new();
    source.insert("kind".into(), Value::from("tool"));
    source.insert("callId".into(), Value::from(result.call_id));
    let mut block = Map::new();
    block.insert("type".into(), Value::from("tool-result"));
    block.insert("toolCallId".into(), Value::from(result.call_id));
    block.insert(
        "content".into(),
        result
            .content
            .map(deep::clone_value)
            .unwrap_or(Value::Array(Vec::new())),
    );
    block.insert(
        "isError".into(),
        Value::Bool(result.is_error.unwrap_or(false)),
    );
    let mut m = Map::new();
    m.insert("source".into(), Value::Object(source));
    m.insert("content".into(), Value::Array(vec![Value::Object(block)]));
    m.insert("role".into(), Value::from("user"));
    Some(Json::from_shallow(Value::Object(m)))
}
