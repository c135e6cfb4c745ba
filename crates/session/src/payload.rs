//! An event's `data`: its compact JSON text (typed constructors) or its frozen tree (events read
//! or built from a [`Json`]), with the tree built from the text at most once, on first use.
//!
//! Guarantees: the text is exactly what serializing the tree gives, so splicing it into a line
//! and parsing it back agree; depth is known without building the tree; text of any depth is
//! parsed on a stack sized for it.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use dsh_core::Json;
use dsh_core::json::{MAX_DEPTH, text_depth};

use crate::deep;

/// Where a top-level string field of a typed event sits in its text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum StrFact {
    /// The field is not in the data.
    #[default]
    Absent,
    /// The field's value is `text[start..end]` verbatim (it needed no escaping).
    At(u32, u32),
    /// Read it from the tree.
    Parse,
}

/// What the session reads from a typed event's data on the append path, kept so that reading
/// it does not build the tree. When `known` is false every read goes to the tree.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Facts {
    /// Whether the fields below describe the data (absent means absent).
    pub known: bool,
    /// `data.turn`.
    pub turn: Option<u32>,
    /// `data.step`.
    pub step: Option<u32>,
    /// `data.callId`.
    pub call_id: StrFact,
    /// `data.name`.
    pub name: StrFact,
    /// `data.arguments`.
    pub arguments: StrFact,
}

impl Facts {
    /// Facts of data holding none of the tracked fields (until fields are set).
    pub fn known() -> Facts {
        Facts {
            known: true,
            ..Facts::default()
        }
    }

    /// No facts: every read builds the tree.
    pub fn unknown() -> Facts {
        Facts::default()
    }
}

/// An event's data.
pub(crate) struct Payload {
    /// Compact JSON text, for data written by a typed constructor.
    text: Option<Box<str>>,
    /// Nesting depth of the data.
    depth: usize,
    /// The tree: given, or built from `text` on first use.
    json: OnceLock<Json>,
    facts: Facts,
}

impl Payload {
    /// Data given as a tree.
    pub fn from_json(json: Json) -> Payload {
        Payload {
            text: None,
            depth: json.depth(),
            json: OnceLock::from(json),
            facts: Facts::unknown(),
        }
    }

    /// Data given as compact JSON text written by this crate.
    pub fn from_text(text: Box<str>, facts: Facts) -> Payload {
        Payload {
            depth: text_depth(text.as_bytes()),
            text: Some(text),
            json: OnceLock::new(),
            facts,
        }
    }

    /// The text, when the data was written as text.
    pub fn text(&self) -> Option<&str> {
        self.text.as_deref()
    }

    /// Nesting depth of the data.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// The facts kept beside the text.
    pub fn facts(&self) -> &Facts {
        &self.facts
    }

    /// The tree, built from the text on first use.
    pub fn json(&self) -> &Json {
        self.json.get_or_init(|| match &self.text {
            Some(text) => parse_own(text, self.depth),
            None => Json::null(),
        })
    }
}

/// Parses text this crate wrote (valid JSON by construction) of any depth, even past
/// [`MAX_DEPTH`] (a typed event may wrap a value already at the limit; appending refuses it).
fn parse_own(text: &str, depth: usize) -> Json {
    if depth <= MAX_DEPTH
        && let Ok(json) = Json::parse(text)
    {
        return json;
    }
    let value = deep::with_stack(depth + 4, || {
        let mut de = serde_json::Deserializer::from_str(text);
        de.disable_recursion_limit();
        Value::deserialize(serde_stacker::Deserializer::new(&mut de)).unwrap_or(Value::Null)
    });
    Json::from_shallow(value)
}

/// Writes the compact JSON text of an object field by field, in the order given: the same
/// bytes `serde_json` writes for a `Value` object built with the same keys in that order.
pub(crate) struct TextWriter {
    buf: Vec<u8>,
    first: bool,
}

impl TextWriter {
    /// An open object.
    pub fn with_capacity(capacity: usize) -> TextWriter {
        let mut buf = Vec::with_capacity(capacity);
        buf.push(b'{');
        TextWriter { buf, first: true }
    }

    fn separate(&mut self) {
        if !self.first {
            self.buf.push(b',');
        }
        self.first = false;
    }

    /// Writes `"key":`; keys are ASCII literals that need no escaping.
    fn key(&mut self, key: &str) {
        self.separate();
        self.buf.push(b'"');
        self.buf.extend_from_slice(key.as_bytes());
        self.buf.extend_from_slice(b"\":");
    }

    /// A string field; returns where its value sits when it needed no escaping.
    pub fn str(&mut self, key: &str, value: &str) -> StrFact {
        self.key(key);
        let start = self.buf.len();
        self.serialize(value);
        let end = self.buf.len();
        if end - start == value.len() + 2
            && let (Ok(s), Ok(e)) = (u32::try_from(start + 1), u32::try_from(end - 1))
        {
            StrFact::At(s, e)
        } else {
            StrFact::Parse
        }
    }

    /// An integer field.
    pub fn u32(&mut self, key: &str, value: u32) {
        self.key(key);
        self.serialize(&value);
    }

    /// A boolean field.
    pub fn bool(&mut self, key: &str, value: bool) {
        self.key(key);
        self.buf
            .extend_from_slice(if value { b"true" } else { b"false" });
    }

    /// A field holding any serializable value ([`Json`] serializes on a stack sized for it).
    pub fn value<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) {
        self.key(key);
        self.serialize(value);
    }

    fn serialize<T: Serialize + ?Sized>(&mut self, value: &T) {
        let start = self.buf.len();
        if serde_json::to_writer(&mut self.buf, value).is_err() {
            // Only a failing `Serialize` gets here (none of this crate's inputs do).
            self.buf.truncate(start);
            self.buf.extend_from_slice(b"null");
        }
    }

    /// Opens an object field.
    pub fn open(&mut self, key: &str) {
        self.key(key);
        self.buf.push(b'{');
        self.first = true;
    }

    /// Opens an array field.
    pub fn open_array(&mut self, key: &str) {
        self.key(key);
        self.buf.push(b'[');
        self.first = true;
    }

    /// Opens an object as the next array item.
    pub fn open_item(&mut self) {
        self.separate();
        self.buf.push(b'{');
        self.first = true;
    }

    /// Closes the innermost object.
    pub fn close(&mut self) {
        self.buf.push(b'}');
        self.first = false;
    }

    /// Closes the innermost array.
    pub fn close_array(&mut self) {
        self.buf.push(b']');
        self.first = false;
    }

    /// Closes the outer object and returns the text.
    pub fn finish(mut self) -> Box<str> {
        self.buf.push(b'}');
        String::from_utf8(self.buf)
            .unwrap_or_else(|_| "null".to_owned())
            .into_boxed_str()
    }
}
