//! An event's `data`: its compact JSON text (typed constructors, and lines read in the canonical
//! form, see [`crate::scan`]), the typed fields that text is written from whenever it is needed
//! (`tool/call`, `tool/result` built from shared values, see [`crate::deferred`]), or its frozen
//! tree (other events read or built from a [`Json`]); the tree is built at most once, on first
//! use.
//!
//! Guarantees: the text is exactly what serializing the tree gives, so splicing it into a line
//! and parsing it back agree; depth is known without building the tree; text of any depth is
//! parsed on a stack sized for it.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use dsh_core::Json;
use dsh_core::json::{MAX_DEPTH, text_depth};

use crate::deep;
use crate::deferred::Deferred;
use crate::on_demand::OnDemandData;

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

/// A [`StrFact`] packed into eight bytes (the facts sit beside every event in memory).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PackedStr(u32, u32);

impl PackedStr {
    /// A start no string value can have: the second number tells absent (0) from parse (1).
    const NONE: u32 = u32::MAX;

    /// The fact.
    pub fn get(self) -> StrFact {
        match self {
            PackedStr(PackedStr::NONE, 0) => StrFact::Absent,
            PackedStr(PackedStr::NONE, _) => StrFact::Parse,
            PackedStr(start, end) => StrFact::At(start, end),
        }
    }
}

impl Default for PackedStr {
    fn default() -> PackedStr {
        PackedStr::from(StrFact::Absent)
    }
}

impl From<StrFact> for PackedStr {
    fn from(fact: StrFact) -> PackedStr {
        match fact {
            StrFact::Absent => PackedStr(PackedStr::NONE, 0),
            StrFact::At(start, end) if start != PackedStr::NONE => PackedStr(start, end),
            StrFact::At(..) | StrFact::Parse => PackedStr(PackedStr::NONE, 1),
        }
    }
}

/// Where a top-level object field of the data sits in its text, and how deep it nests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SubText {
    /// Byte offset of the value's first byte.
    pub start: u32,
    /// Byte offset just past the value.
    pub end: u32,
    /// Nesting depth of the value.
    pub depth: u32,
}

impl SubText {
    /// The span `start..end` at `depth`, if its offsets fit.
    pub fn new(start: usize, end: usize, depth: usize) -> Option<SubText> {
        Some(SubText {
            start: u32::try_from(start).ok()?,
            end: u32::try_from(end).ok()?,
            depth: u32::try_from(depth).ok()?,
        })
    }
}

/// What the session reads from an event's data on the append, check and derive paths, kept so
/// that reading it does not build the tree. When `known` is false every read goes to the tree.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Facts {
    /// Whether the fields below describe the data (absent means absent).
    pub known: bool,
    /// `data.turn`, when it is an integer that fits (absent or any other value: `None`; data
    /// whose `turn` or `step` is an integer past `u32::MAX` has no known facts).
    pub turn: Option<u32>,
    /// `data.step`, likewise.
    pub step: Option<u32>,
    /// `data.callId`.
    pub call_id: PackedStr,
    /// `data.name`.
    pub name: PackedStr,
    /// `data.arguments`.
    pub arguments: PackedStr,
    /// Where `data.message` sits, when known (`None`: read it from the tree, whether or not
    /// `known` is set).
    pub message: Option<SubText>,
    /// Which of `callId`, `name`, `arguments` hold a string with an escape (bits
    /// [`Facts::ESCAPED_CALL_ID`], [`Facts::ESCAPED_NAME`], [`Facts::ESCAPED_ARGUMENTS`]): their
    /// fact says "parse" because their text is not the string, yet they are known to be strings.
    pub escaped: u8,
}

impl Facts {
    /// `callId` is a string holding an escape.
    pub const ESCAPED_CALL_ID: u8 = 1;
    /// `name` is a string holding an escape.
    pub const ESCAPED_NAME: u8 = 2;
    /// `arguments` is a string holding an escape.
    pub const ESCAPED_ARGUMENTS: u8 = 4;

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

/// Where an event's data comes from, read through [`Source::kind`]. Each kind of source sits
/// inline at the end of its [`Payload`], which is then shared as `Arc<Payload>` (unsized): typed
/// fields cost no box of their own, and a text event is no larger for them.
pub(crate) trait Source: Send + Sync + 'static {
    /// What the source holds.
    fn kind(&self) -> Kind<'_>;
}

/// What a [`Source`] holds.
pub(crate) enum Kind<'a> {
    /// Given as a tree (kept in `json`).
    Tree,
    /// Compact JSON text written by a typed constructor.
    Text(&'a str),
    /// Typed fields whose text is written on demand.
    Fields(&'a Deferred),
    /// A caller's typed fields whose text is written on demand.
    OnDemand(&'a dyn OnDemandData),
}

/// The source of data given as a tree.
struct Tree;

impl Source for Tree {
    fn kind(&self) -> Kind<'_> {
        Kind::Tree
    }
}

impl Source for Box<str> {
    fn kind(&self) -> Kind<'_> {
        Kind::Text(self)
    }
}

impl Source for Deferred {
    fn kind(&self) -> Kind<'_> {
        Kind::Fields(self)
    }
}

/// The source of a caller's typed fields.
struct Caller<D>(D);

impl<D: OnDemandData> Source for Caller<D> {
    fn kind(&self) -> Kind<'_> {
        Kind::OnDemand(&self.0)
    }
}

/// An event's data: shared as `Arc<Payload>`, its source of any kind inline at the end.
pub(crate) struct Payload<S: ?Sized = dyn Source> {
    /// Nesting depth of the data (a `u32` keeps the payload in its malloc size class; a depth
    /// is at most the text's length, and lines are far shorter than 4 GiB).
    depth: u32,
    /// The tree: given, or built from `text` on first use.
    json: OnceLock<Json>,
    facts: Facts,
    /// Where the data comes from.
    source: S,
}

impl Payload {
    /// Data given as a tree.
    pub fn from_json(json: Json) -> Arc<Payload> {
        Arc::new(Payload {
            depth: depth_u32(json.depth()),
            json: OnceLock::from(json),
            facts: Facts::unknown(),
            source: Tree,
        })
    }

    /// Data given as compact JSON text written by this crate.
    pub fn from_text(text: Box<str>, facts: Facts) -> Arc<Payload> {
        Arc::new(Payload {
            depth: depth_u32(text_depth(text.as_bytes())),
            json: OnceLock::new(),
            facts,
            source: text,
        })
    }

    /// Data given as compact JSON text whose nesting depth the writer knows (a flat object of
    /// strings and numbers is 1), so the text need not be scanned.
    pub fn from_text_at_depth(text: Box<str>, depth: usize, facts: Facts) -> Arc<Payload> {
        debug_assert_eq!(
            depth,
            text_depth(text.as_bytes()),
            "known depth of {text:.200}"
        );
        Arc::new(Payload {
            depth: depth_u32(depth),
            json: OnceLock::new(),
            facts,
            source: text,
        })
    }

    /// Data kept as typed fields whose text is written on first use; `depth` follows from
    /// their shape.
    pub fn deferred(deferred: Deferred, depth: usize, facts: Facts) -> Arc<Payload> {
        Arc::new(Payload {
            depth: depth_u32(depth),
            json: OnceLock::new(),
            facts,
            source: deferred,
        })
    }

    /// Data kept as a caller's typed fields, written on first use (see `on_demand.rs`).
    pub fn on_demand<D: OnDemandData>(data: D) -> Arc<Payload> {
        Arc::new(Payload {
            depth: depth_u32(data.depth()),
            json: OnceLock::new(),
            facts: Facts::unknown(),
            source: Caller(data),
        })
    }

    /// The text, when the data was written as text.
    pub fn text(&self) -> Option<&str> {
        match self.source.kind() {
            Kind::Text(text) => Some(text),
            _ => None,
        }
    }

    /// The text, written now from the typed fields when the data is kept as such. Not kept:
    /// holding both the fields and their text would double what a log holds in memory, and
    /// writing it again gives the same bytes.
    pub fn text_or_written(&self) -> Option<Cow<'_, str>> {
        match self.source.kind() {
            Kind::Text(text) => Some(Cow::Borrowed(text)),
            Kind::Fields(d) => {
                let text = d.write();
                debug_assert_eq!(self.depth(), text_depth(text.as_bytes()), "{text:.200}");
                Some(Cow::Owned(text))
            }
            Kind::OnDemand(data) => Some(Cow::Owned(crate::on_demand::written(data).0)),
            Kind::Tree => None,
        }
    }

    /// The typed fields, when the data is kept as such.
    pub fn fields(&self) -> Option<&Deferred> {
        match self.source.kind() {
            Kind::Fields(d) => Some(d),
            _ => None,
        }
    }

    /// Nesting depth of the data.
    pub fn depth(&self) -> usize {
        self.depth as usize
    }

    /// The facts kept beside the text.
    pub fn facts(&self) -> &Facts {
        &self.facts
    }

    /// The tree, if it was given or has been built.
    pub fn tree(&self) -> Option<&Json> {
        self.json.get()
    }

    /// The tree, built from the text on first use.
    pub fn json(&self) -> &Json {
        self.json.get_or_init(|| match self.source.kind() {
            // Parsed at the depth of what was written (`{}` when the writer failed).
            Kind::OnDemand(data) => {
                let (text, depth) = crate::on_demand::written(data);
                parse_own(&text, depth)
            }
            _ => match self.text_or_written() {
                Some(text) => parse_own(&text, self.depth()),
                None => Json::null(),
            },
        })
    }
}

fn depth_u32(depth: usize) -> u32 {
    u32::try_from(depth).unwrap_or(u32::MAX)
}

/// Parses text this crate wrote (valid JSON by construction) of any depth, even past
/// [`MAX_DEPTH`] (a typed event may wrap a value already at the limit; appending refuses it).
fn parse_own(text: &str, depth: usize) -> Json {
    if depth <= MAX_DEPTH
        && let Ok(json) = Json::parse_at_depth(text, depth)
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
        push_json_str(&mut self.buf, value);
        let end = self.buf.len();
        if end - start == value.len() + 2
            && let (Ok(s), Ok(e)) = (u32::try_from(start + 1), u32::try_from(end - 1))
        {
            StrFact::At(s, e)
        } else {
            StrFact::Parse
        }
    }

    /// Appends literal JSON text (object structure the caller spells out): the object is no
    /// longer empty afterwards.
    pub fn raw(&mut self, text: &str) {
        self.buf.extend_from_slice(text.as_bytes());
        self.first = false;
    }

    /// Appends a JSON string value with no key (after a [`TextWriter::raw`] that ends in `:`).
    pub fn string(&mut self, value: &str) {
        push_json_str(&mut self.buf, value);
    }

    /// Appends content blocks with no key: text blocks written directly, others serialized.
    pub fn blocks(&mut self, blocks: &[dsh_core::ContentBlock]) {
        self.buf.push(b'[');
        for (i, block) in blocks.iter().enumerate() {
            if i > 0 {
                self.buf.push(b',');
            }
            match block {
                dsh_core::ContentBlock::Text { text } => {
                    self.buf.extend_from_slice(b"{\"type\":\"text\",\"text\":");
                    push_json_str(&mut self.buf, text);
                    self.buf.push(b'}');
                }
                other => self.serialize(other),
            }
        }
        self.buf.push(b']');
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

    /// [`TextWriter::value`], returning where the value sits in the text.
    pub fn value_at<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> (usize, usize) {
        self.key(key);
        let start = self.buf.len();
        self.serialize(value);
        (start, self.buf.len())
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.buf.len()
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

    /// Closes the innermost object.
    pub fn close(&mut self) {
        self.buf.push(b'}');
        self.first = false;
    }

    /// Closes the outer object and returns the text, sized to fit (for text that is kept).
    pub fn finish(self) -> Box<str> {
        self.finish_string().into_boxed_str()
    }

    /// Closes the outer object and returns the text as written (for text used once).
    pub fn finish_string(mut self) -> String {
        self.buf.push(b'}');
        String::from_utf8(self.buf).unwrap_or_else(|_| "null".to_owned())
    }
}

/// The index of the first byte at or after `j` that is `"`, `\\` or a control character, found
/// eight bytes at a time; when the whole words from `j` hold none, the index past the last of
/// them (the caller reads what is left byte by byte).
pub(crate) fn skip_plain(b: &[u8], mut j: usize) -> usize {
    while let Some(word) = b.get(j..j + 8).and_then(|c| <[u8; 8]>::try_from(c).ok()) {
        let mask = special_mask(u64::from_le_bytes(word));
        if mask != 0 {
            return j + (mask.trailing_zeros() / 8) as usize;
        }
        j += 8;
    }
    j
}

/// The high bit of every byte of `w` that is `"`, `\\` or a control character below 0x20, and
/// possibly of bytes above such a byte (SWAR): the lowest flagged byte is always a real one.
pub(crate) fn special_mask(w: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero_bytes = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    zero_bytes(w ^ (ONES * u64::from(b'"')))
        | zero_bytes(w ^ (ONES * u64::from(b'\\')))
        | (w.wrapping_sub(ONES * 0x20) & !w & HIGH)
}

/// Appends `s` as a JSON string, byte for byte what `serde_json` writes: runs that need no
/// escaping are copied eight bytes at a time.
pub(crate) fn push_json_str(buf: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    buf.reserve(bytes.len() + 2);
    buf.push(b'"');
    let (mut start, mut i) = (0, 0);
    while i < bytes.len() {
        if let Some(word) = bytes
            .get(i..i + 8)
            .and_then(|c| <[u8; 8]>::try_from(c).ok())
        {
            let mask = special_mask(u64::from_le_bytes(word));
            if mask == 0 {
                i += 8;
                continue;
            }
            // Jump straight to the first byte that needs escaping.
            i += (mask.trailing_zeros() / 8) as usize;
        }
        let b = bytes[i];
        let short = match b {
            b'"' => Some(b'"'),
            b'\\' => Some(b'\\'),
            0x08 => Some(b'b'),
            0x0c => Some(b'f'),
            b'\n' => Some(b'n'),
            b'\r' => Some(b'r'),
            b'\t' => Some(b't'),
            _ => None,
        };
        if short.is_some() || b < 0x20 {
            buf.extend_from_slice(&bytes[start..i]);
            match short {
                Some(c) => buf.extend_from_slice(&[b'\\', c]),
                None => buf.extend_from_slice(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(b >> 4)],
                    HEX[usize::from(b & 0xf)],
                ]),
            }
            start = i + 1;
        }
        i += 1;
    }
    buf.extend_from_slice(&bytes[start..]);
    buf.push(b'"');
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{Payload, push_json_str};

    #[test]
    fn the_facts_add_nothing_to_an_events_allocation() {
        // 104 bytes of payload behind the Arc's two counts is 120, the malloc size class an
        // event's payload held before the message fact was added (resident memory, row 7): a
        // text event, the most common kind, stays within it.
        assert!(
            std::mem::size_of::<Payload<Box<str>>>() <= 104,
            "{}",
            std::mem::size_of::<Payload<Box<str>>>()
        );
    }

    fn ours(s: &str) -> String {
        let mut buf = Vec::new();
        push_json_str(&mut buf, s);
        String::from_utf8(buf).unwrap_or_default()
    }

    #[test]
    fn escapes_exactly_as_serde_json_does() {
        let mut all = String::new();
        for c in (0u8..0x80).map(char::from) {
            all.push(c);
        }
        all.push_str("é漢🦀\u{2028}\u{7f}");
        for s in ["", "plain", "a\"b\\c", &all, "0123456\n89abcdef\"x"] {
            assert_eq!(
                ours(s),
                serde_json::to_string(s).unwrap_or_default(),
                "{s:?}"
            );
        }
    }

    proptest! {
        #[test]
        fn any_string_matches_serde_json(s in any::<String>()) {
            prop_assert_eq!(ours(&s), serde_json::to_string(&s).unwrap_or_default());
        }
    }
}
