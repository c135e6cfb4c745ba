//! Reading a message's members from its text without building its tree: which call a
//! `tool/result` answers and the `tool-call` blocks of an `assistant/message` (for the checker),
//! and [`RawObject`], the reader the agent builds its provider messages with.
//!
//! Opening a log runs the checker over every event (repair's scan); building each message's
//! tree there only to read an id or two cost more than the parse of the whole log. This reads
//! the text once, borrowing every member it does not need as raw text (skipped, never built).
//!
//! Guarantees: on text the scanner accepted (canonical compact JSON, see [`crate::scan`]), each
//! function gives exactly what the tree-based view gives for the same message (tested against
//! it in `scan.rs`'s property test); on anything it cannot read it gives `None` and the caller
//! falls back to the tree.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

/// A JSON object read from its text: its members in text order, each value left as raw text
/// (read further only when asked, never built into a tree).
#[derive(Debug)]
pub struct RawObject<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'a> RawObject<'a> {
    /// The members of the object `text`, or `None` when `text` is not a JSON object.
    pub fn parse(text: &'a str) -> Option<RawObject<'a>> {
        if !text.starts_with('{') {
            return None;
        }
        serde_json::from_str(text).ok()
    }

    /// The raw value of member `key`.
    pub fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    /// Member `key` when it is a string.
    pub fn str(&self, key: &str) -> Option<Cow<'a, str>> {
        self.get(key).and_then(string)
    }

    /// The string the JSON text `raw` holds (`None` for any other value), borrowed when it
    /// holds no escape.
    pub fn string_of(raw: &str) -> Option<Cow<'_, str>> {
        string_text(raw)
    }

    /// The elements of the JSON text `raw` when it is an array (`None` for any other value).
    pub fn elements_of(raw: &str) -> Option<Vec<&RawValue>> {
        elements_text(raw)
    }
}

impl<'de> Deserialize<'de> for RawObject<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectVisitor;
        impl<'de> Visitor<'de> for ObjectVisitor {
            type Value = RawObject<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawObject<'de>, A::Error> {
                let mut out = Vec::new();
                while let Some(Text(key)) = map.next_key::<Text<'de>>()? {
                    let value: &'de RawValue = map.next_value()?;
                    out.push((key, value));
                }
                Ok(RawObject(out))
            }
        }
        deserializer.deserialize_map(ObjectVisitor)
    }
}

/// A JSON string, borrowed from the text when it holds no escape.
struct Text<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StrVisitor;
        impl<'de> Visitor<'de> for StrVisitor {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(StrVisitor)
    }
}

/// The string a raw value holds, `None` for any other value.
fn string(raw: &RawValue) -> Option<Cow<'_, str>> {
    string_text(raw.get())
}

/// The string the JSON text `raw` holds, `None` for any other value.
fn string_text(raw: &str) -> Option<Cow<'_, str>> {
    if !raw.starts_with('"') {
        return None;
    }
    serde_json::from_str::<Text<'_>>(raw).ok().map(|t| t.0)
}

/// The elements of an array's raw text, `None` when it is not an array.
fn elements(raw: &RawValue) -> Option<Vec<&RawValue>> {
    elements_text(raw.get())
}

/// The elements of the JSON text `raw`, `None` when it is not an array.
fn elements_text(raw: &str) -> Option<Vec<&RawValue>> {
    if !raw.starts_with('[') {
        return None;
    }
    serde_json::from_str(raw).ok()
}

/// Whether a block's `type` is the string `kind`.
fn is_block(block: &RawObject<'_>, kind: &str) -> bool {
    block.get("type").and_then(string).as_deref() == Some(kind)
}

/// The call a `tool/result` message answers: `source.callId`, else the `toolCallId` of its first
/// `tool-result` block. The outer `None`: the text could not be read (use the tree); the inner
/// one: the message names no call.
pub(crate) fn result_call_id(message: &str) -> Option<Option<Cow<'_, str>>> {
    let members = RawObject::parse(message)?;
    let from_source = match members.get("source") {
        Some(source) => match RawObject::parse(source.get()) {
            Some(source) => source.get("callId").and_then(string),
            None => None,
        },
        None => None,
    };
    if from_source.is_some() {
        return Some(from_source);
    }
    let Some(blocks) = members.get("content").and_then(elements) else {
        return Some(None);
    };
    for block in blocks {
        let Some(block) = RawObject::parse(block.get()) else {
            continue;
        };
        if is_block(&block, "tool-result") {
            return Some(block.get("toolCallId").and_then(string));
        }
    }
    Some(None)
}

/// One `tool-call` block: each member as a string, or a non-string value as its JSON text, or
/// empty when absent.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct CallBlock<'a> {
    /// `id`.
    pub id: Cow<'a, str>,
    /// `name`.
    pub name: Cow<'a, str>,
    /// `arguments`.
    pub arguments: Cow<'a, str>,
}

/// The `tool-call` blocks of an assistant message's `content`, in order (`None`: the text could
/// not be read, or holds no `content`; use the tree).
pub(crate) fn call_blocks<'a>(message: &'a str) -> Option<Vec<CallBlock<'a>>> {
    let members = RawObject::parse(message)?;
    // No `content` at all: the tree-based view looks for an older flat one beside the message.
    let content = members.get("content")?;
    let Some(blocks) = elements(content) else {
        return Some(Vec::new());
    };
    let mut out = Vec::new();
    for block in blocks {
        let Some(block) = RawObject::parse(block.get()) else {
            continue;
        };
        if !is_block(&block, "tool-call") {
            continue;
        }
        let text = |key: &str| -> Cow<'a, str> {
            match block.get(key) {
                Some(raw) => string(raw).unwrap_or(Cow::Borrowed(raw.get())),
                None => Cow::Borrowed(""),
            }
        };
        out.push(CallBlock {
            id: text("id"),
            name: text("name"),
            arguments: text("arguments"),
        });
    }
    Some(out)
}
