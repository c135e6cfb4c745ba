//! The calls the model made, as the model sees them: the `tool-call` blocks of committed
//! `assistant/message` events (spec I1 where the user meets it: every call of the history sent
//! back to a model has exactly one result).
//!
//! Guarantees: [`calls_of`] reads an assistant message's calls in block order, whatever shape the
//! message was logged in (current `message`, older flat `content`); arguments given as a JSON
//! value are turned into their JSON text, as the exports do.

use std::sync::Arc;

use serde_json::Value;

use crate::deep;
use crate::event::{Event, types};
use crate::skim;

/// One call of an assistant message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct VisibleCall {
    /// The file line of its `assistant/message`.
    pub line: usize,
    /// The model's call id.
    pub call_id: Arc<str>,
    /// The tool the model named.
    pub name: Arc<str>,
    /// The raw arguments.
    pub arguments: Arc<str>,
    /// The message's turn.
    pub turn: Option<u64>,
    /// The message's step.
    pub step: Option<u64>,
}

/// The calls of an `assistant/message` read from file line `line`, in block order; empty for any
/// other event.
pub(crate) fn calls_of(line: usize, event: &Event) -> Vec<VisibleCall> {
    if event.event_type() != types::ASSISTANT_MESSAGE {
        return Vec::new();
    }
    let (turn, step) = (event.data_u64("turn"), event.data_u64("step"));
    if let Some(blocks) = event.message_text().and_then(skim::call_blocks) {
        return blocks
            .into_iter()
            .map(|b| VisibleCall {
                line,
                call_id: Arc::from(&*b.id),
                name: Arc::from(&*b.name),
                arguments: Arc::from(&*b.arguments),
                turn,
                step,
            })
            .collect();
    }
    let from_text = event.message_from_text();
    let content = match &from_text {
        Some(message) => message.value().get("content"),
        None => {
            let data = event.data().value();
            data.get("message")
                .and_then(|m| m.get("content"))
                .or_else(|| data.get("content"))
        }
    };
    let Some(Value::Array(blocks)) = content else {
        return Vec::new();
    };
    blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool-call"))
        .map(|b| {
            let text = |key: &str| -> Arc<str> {
                match b.get(key) {
                    Some(Value::String(s)) => Arc::from(s.as_str()),
                    Some(other) => Arc::from(deep::to_text(other)),
                    None => Arc::from(""),
                }
            };
            VisibleCall {
                line,
                call_id: text("id"),
                name: text("name"),
                arguments: text("arguments"),
                turn,
                step,
            }
        })
        .collect()
}
