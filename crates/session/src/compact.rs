//! Walking canonical compact JSON text (what the scan accepts, see [`crate::scan`]) without
//! building or checking anything: where a value ends, an object's members, a string's
//! contents (an array's elements are read by `skim.rs`, with the members of each object).
//!
//! Reading an id out of a logged message used to go through `serde_json` (a deserializer and
//! a `RawValue` per member, every nested value read again at each level it was reached from).
//! The scan has already checked the text, so finding the boundaries is all that is left: a
//! string ends at its first unescaped `"`, a container at the bracket that brings its depth
//! back to zero, any other value at the next `,`, `}` or `]`.
//!
//! Guarantees: on canonical compact JSON text each function gives exactly the value's own text
//! (the members of an object in text order, its keys unescaped; a string unescaped), as a tree built from the same text would hold it (property tests below).
//! On any other text it never panics nor loops: it stops where it can no longer read (an
//! iterator ends early, a lookup gives `None`), but what it gives is then not meaningful. Every
//! caller reads only text the scan accepted.

use std::borrow::Cow;

use crate::payload::skip_plain;

/// The index just past the string whose opening `"` is at `i`, and whether it holds an escape
/// (`None`: the text ends first).
fn string_end(b: &[u8], i: usize) -> Option<(usize, bool)> {
    let mut j = i + 1;
    let mut escaped = false;
    loop {
        // Eight bytes at a time up to the next `"` or `\` (control bytes are flagged too; in
        // canonical text there are none, elsewhere they are stepped over below).
        j = skip_plain(b, j);
        match *b.get(j)? {
            b'"' => return Some((j + 1, escaped)),
            b'\\' => {
                escaped = true;
                j += 2;
            }
            _ => j += 1,
        }
    }
}

/// The index just past the value starting at `i` (`None`: the text ends first or is not a
/// value there).
pub(crate) fn value_end(b: &[u8], i: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut j = i;
    loop {
        match *b.get(j)? {
            b'"' => j = string_end(b, j)?.0,
            b'{' | b'[' => {
                depth += 1;
                j += 1;
                continue;
            }
            b'}' | b']' => {
                depth = depth.checked_sub(1)?;
                j += 1;
            }
            b',' | b':' => {
                if depth == 0 {
                    return None;
                }
                j += 1;
                continue;
            }
            // A number or a literal: up to the next delimiter.
            _ => {
                j += 1;
                while b
                    .get(j)
                    .is_some_and(|c| !matches!(c, b',' | b':' | b'}' | b']' | b'"' | b'{' | b'['))
                {
                    j += 1;
                }
            }
        }
        if depth == 0 {
            return Some(j);
        }
    }
}

/// A key of an object as its text holds it (without its quotes).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RawKey<'a> {
    /// The text between the quotes.
    inner: &'a str,
    /// Whether it holds an escape.
    escaped: bool,
}

impl<'a> RawKey<'a> {
    /// Whether this key is `key`.
    pub(crate) fn is(&self, key: &str) -> bool {
        if self.escaped {
            self.text() == key
        } else {
            self.inner == key
        }
    }

    /// The key, unescaped.
    pub(crate) fn text(&self) -> Cow<'a, str> {
        if !self.escaped {
            return Cow::Borrowed(self.inner);
        }
        match unescape(self.inner) {
            Some(key) => Cow::Owned(key),
            // An escape canonical text never holds: `serde_json` reads it.
            None => serde_json::from_str::<String>(&format!("\"{}\"", self.inner))
                .map(Cow::Owned)
                .unwrap_or(Cow::Borrowed(self.inner)),
        }
    }
}

/// The members of the object whose text is `text`, in text order: each key with its value's
/// text. Empty when `text` is not an object.
pub(crate) fn members(text: &str) -> Members<'_> {
    Members {
        text,
        at: if text.starts_with('{') { Some(1) } else { None },
        closed: None,
    }
}

/// Iterator of [`members`].
#[derive(Clone, Debug)]
pub(crate) struct Members<'a> {
    text: &'a str,
    /// Where the next member (or the closing `}`) starts; `None` once done.
    at: Option<usize>,
    /// The index just past the closing `}`, once the walk reached it.
    closed: Option<usize>,
}

impl Members<'_> {
    /// The index just past the object's closing `}`, once every member was read (`None`
    /// before, or when the text ended first). The text may go on after the object.
    pub(crate) fn closed(&self) -> Option<usize> {
        self.closed
    }
}

impl<'a> Iterator for Members<'a> {
    type Item = (RawKey<'a>, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        let i = self.at.take()?;
        let b = self.text.as_bytes();
        match *b.get(i)? {
            b'"' => {}
            // Only right after the `{`: an empty object.
            b'}' if i == 1 => {
                self.closed = Some(2);
                return None;
            }
            _ => return None,
        }
        let (key_end, escaped) = string_end(b, i)?;
        if b.get(key_end) != Some(&b':') {
            return None;
        }
        let key = RawKey {
            inner: self.text.get(i + 1..key_end - 1)?,
            escaped,
        };
        let value_start = key_end + 1;
        let end = value_end(b, value_start)?;
        let value = self.text.get(value_start..end)?;
        match b.get(end) {
            Some(b',') => self.at = Some(end + 1),
            Some(b'}') => self.closed = Some(end + 1),
            _ => {}
        }
        Some((key, value))
    }
}

/// The text of member `key` of the object whose text is `text` (`None`: no such member, or
/// not an object).
pub(crate) fn member<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    members(text).find(|(k, _)| k.is(key)).map(|(_, v)| v)
}

/// The string whose JSON text is `text`, borrowed when it holds no escape (`None`: `text` is
/// not a string).
pub(crate) fn string(text: &str) -> Option<Cow<'_, str>> {
    let inner = text.strip_prefix('"')?.strip_suffix('"')?;
    if !inner.contains('\\') {
        return Some(Cow::Borrowed(inner));
    }
    match unescape(inner) {
        Some(s) => Some(Cow::Owned(s)),
        // An escape canonical text never holds (`\u` past ASCII): `serde_json` reads it.
        None => serde_json::from_str::<String>(text).ok().map(Cow::Owned),
    }
}

/// The text between a string's quotes with its escapes read, when they are all ones
/// `serde_json` writes or `\/` (`None`: another `\u` escape, or a lone `\` at the end).
fn unescape(inner: &str) -> Option<String> {
    let mut out = String::with_capacity(inner.len());
    let mut rest = inner;
    while let Some(at) = rest.find('\\') {
        out.push_str(rest.get(..at)?);
        let b = rest.as_bytes();
        let c = match *b.get(at + 1)? {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let hex = b.get(at + 2..at + 6)?;
                if !hex.iter().all(u8::is_ascii_hexdigit) {
                    return None;
                }
                let hex = std::str::from_utf8(hex).ok()?;
                let code = u8::from_str_radix(hex, 16).ok().filter(u8::is_ascii)?;
                rest = rest.get(at + 6..)?;
                out.push(char::from(code));
                continue;
            }
            _ => return None,
        };
        out.push(c);
        rest = rest.get(at + 2..)?;
    }
    out.push_str(rest);
    Some(out)
}

#[cfg(test)]
#[path = "compact_tests.rs"]
mod tests;
