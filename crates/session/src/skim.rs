//! Reading a message's members from its text without building its tree: which call a
//! `tool/result` answers and the `tool-call` blocks of an `assistant/message` (for the checker),
//! and [`RawObject`], the reader the agent builds its provider messages with.
//!
//! Opening a log runs the checker over every event (repair's scan); building each message's
//! tree there only to read an id or two cost more than the parse of the whole log. This walks
//! the text ([`crate::compact`]: boundaries only, the scan has checked it), every member it
//! does not need skipped, never built.
//!
//! Guarantees: on text the scanner accepted (canonical compact JSON, see [`crate::scan`]), each
//! function gives exactly what the tree-based view gives for the same message (tested against
//! it in `scan.rs`'s property test); text that is not an object gives `None` and the caller
//! falls back to the tree. Only text the scan accepted is read here.

use std::borrow::Cow;

use crate::compact::{self, Members, RawKey};

/// Members a [`RawObject`] keeps at hand; any further ones are looked for in its text.
const KEPT: usize = 8;

/// A JSON object read from its canonical compact text (a log line the scan accepted): its
/// members found in one walk of the text, each value left as raw text (read further only when
/// asked, never built into a tree). On other text it never panics, but what it reads is not
/// meaningful.
#[derive(Clone, Debug)]
pub struct RawObject<'a> {
    /// The first [`KEPT`] members, in text order.
    kept: [(RawKey<'a>, &'a str); KEPT],
    /// How many of `kept` are members.
    len: usize,
    /// The members past `kept`.
    rest: Members<'a>,
}

impl<'a> RawObject<'a> {
    /// The object `text`, or `None` when `text` is not a JSON object. `text` must be canonical
    /// compact JSON, as a logged event's text is (the session's scan checked it): on any other
    /// text this never panics, but what it reads is not meaningful.
    pub fn parse(text: &'a str) -> Option<RawObject<'a>> {
        if !(text.starts_with('{') && text.ends_with('}')) {
            return None;
        }
        Some(RawObject::walk(text))
    }

    /// The object at the start of `text` (which may go on after it) and the length of its
    /// text (`None`: `text` does not start with a whole object).
    fn prefix(text: &'a str) -> Option<(RawObject<'a>, usize)> {
        if !text.starts_with('{') {
            return None;
        }
        let object = RawObject::walk(text);
        // Past the kept members the rest is walked to find the end (rare: few objects of a
        // message have more than `KEPT` members).
        let mut rest = object.rest.clone();
        for _ in rest.by_ref() {}
        let len = rest.closed()?;
        Some((object, len))
    }

    /// The members of the object opening `text`, the first [`KEPT`] of them kept.
    fn walk(text: &'a str) -> RawObject<'a> {
        let mut kept = [(RawKey::default(), ""); KEPT];
        let mut rest = compact::members(text);
        let mut len = 0;
        while len < KEPT {
            let Some(member) = rest.next() else {
                break;
            };
            kept[len] = member;
            len += 1;
        }
        RawObject { kept, len, rest }
    }

    /// The raw text of member `key`.
    pub fn get(&self, key: &str) -> Option<&'a str> {
        let kept = self.kept.get(..self.len).unwrap_or_default();
        match kept.iter().find(|(k, _)| k.is(key)) {
            Some((_, value)) => Some(value),
            None => self.rest.clone().find(|(k, _)| k.is(key)).map(|(_, v)| v),
        }
    }

    /// Member `key` when it is a string.
    pub fn str(&self, key: &str) -> Option<Cow<'a, str>> {
        self.get(key).and_then(compact::string)
    }

    /// The string the JSON text `raw` holds (`None` for any other value), borrowed when it
    /// holds no escape.
    pub fn string_of(raw: &str) -> Option<Cow<'_, str>> {
        compact::string(raw)
    }

    /// The elements of the JSON text `raw` when it is an array (`None` for any other value):
    /// each as its text, with its members when it is an object, both from one walk.
    pub fn items_of(raw: &'a str) -> Option<RawItems<'a>> {
        let at = match raw.as_bytes() {
            [b'[', b']', ..] => None,
            [b'[', ..] => Some(1),
            _ => return None,
        };
        Some(RawItems { text: raw, at })
    }
}

/// Iterator of [`RawObject::items_of`]: each element's text, and its members when it is an
/// object.
#[derive(Clone, Debug)]
pub struct RawItems<'a> {
    text: &'a str,
    /// Where the next element starts; `None` once done.
    at: Option<usize>,
}

impl<'a> Iterator for RawItems<'a> {
    type Item = (&'a str, Option<RawObject<'a>>);

    fn next(&mut self) -> Option<Self::Item> {
        let i = self.at.take()?;
        let rest = self.text.get(i..)?;
        let (object, end) = if rest.starts_with('{') {
            let (object, len) = RawObject::prefix(rest)?;
            (Some(object), i + len)
        } else {
            (None, compact::value_end(self.text.as_bytes(), i)?)
        };
        if self.text.as_bytes().get(end) == Some(&b',') {
            self.at = Some(end + 1);
        }
        Some((self.text.get(i..end)?, object))
    }
}

/// Whether a block's `type` is the string `kind`.
fn is_block(block: &RawObject<'_>, kind: &str) -> bool {
    block.str("type").as_deref() == Some(kind)
}

/// The call a `tool/result` message answers: `source.callId`, else the `toolCallId` of its first
/// `tool-result` block. The outer `None`: the text could not be read (use the tree); the inner
/// one: the message names no call.
pub(crate) fn result_call_id(message: &str) -> Option<Option<Cow<'_, str>>> {
    if !(message.starts_with('{') && message.ends_with('}')) {
        return None;
    }
    // One walk of the message, keeping `content` on the way; it stops at a `source` that
    // names the call.
    let mut content = None;
    for (key, value) in compact::members(message) {
        if key.is("source") {
            if let Some(id) = RawObject::parse(value).and_then(|s| s.str("callId")) {
                return Some(Some(id));
            }
        } else if key.is("content") {
            content = Some(value);
        }
    }
    let Some(blocks) = content.and_then(RawObject::items_of) else {
        return Some(None);
    };
    for (_, block) in blocks {
        let Some(block) = block else {
            continue;
        };
        if is_block(&block, "tool-result") {
            return Some(block.str("toolCallId"));
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
    let Some(blocks) = RawObject::items_of(content) else {
        return Some(Vec::new());
    };
    let mut out = Vec::new();
    for (_, block) in blocks {
        let Some(block) = block else {
            continue;
        };
        if !is_block(&block, "tool-call") {
            continue;
        }
        let text = |key: &str| -> Cow<'a, str> {
            match block.get(key) {
                Some(raw) => compact::string(raw).unwrap_or(Cow::Borrowed(raw)),
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
