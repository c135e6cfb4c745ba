//! Reading an event line without building its JSON tree: one pass that checks the line is
//! compact JSON exactly as this crate (and `serde_json`) writes it, and finds on the way what an
//! event needs (its type, the span and depth of its `data`, the facts of [`Facts`],
//! `sourceEventSeqs`, the span of `surfaceOp`).
//!
//! Guarantees: a line the scan accepts is valid JSON that reads (eagerly, through a tree) to an
//! event with the same type, data, seqs and surface operation, and that event writes the line
//! back byte for byte. That holds because only text already in the canonical form is accepted:
//! no whitespace; strings escaped exactly as `serde_json` escapes them; numbers written exactly
//! as it writes them; no key twice in an object; top-level keys `type, data, sourceEventSeqs?,
//! surfaceOp?` in that order; no chunk run; no nesting past `MAX_DEPTH`. Any other line, every
//! malformed one included, is refused (`None`) and left to the eager reader, which reads it or
//! reports it. The scan is iterative: no nesting depth can overflow the stack.

use dsh_core::json::MAX_DEPTH;

use crate::event::types;
use crate::payload::{Facts, StrFact, SubText, skip_plain};

/// Keys an object may hold before the scan gives up checking them for duplicates (pairwise) and
/// leaves the line to the eager reader.
const MAX_CHECKED_KEYS: usize = 64;

/// Buffers reused from one line to the next.
#[derive(Default)]
pub(crate) struct Scratch {
    /// Open containers, innermost last.
    frames: Vec<Frame>,
    /// The raw text span of every key of the open objects.
    keys: Vec<(usize, usize)>,
}

#[derive(Clone, Copy)]
enum Frame {
    Array,
    /// An object whose keys start at this index of [`Scratch::keys`].
    Object(usize),
}

/// What an accepted line holds.
pub(crate) struct Scanned<'a> {
    /// `type` (it needed no escaping).
    pub event_type: &'a str,
    /// The text of `data`.
    pub data: &'a str,
    /// Nesting depth of `data`.
    pub data_depth: usize,
    /// Facts of `data`, offsets relative to its text.
    pub facts: Facts,
    /// `sourceEventSeqs`.
    pub source_event_seqs: Option<Vec<u64>>,
    /// The text of `surfaceOp`.
    pub surface_op: Option<&'a str>,
}

/// What a scanned value is, as far as facts need to know.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A string; `true` when it holds an escape.
    Str(bool),
    /// A non-negative integer.
    UInt(u64),
    Other,
}

/// Scans one line (without its newline); `None` means "not canonical: read it eagerly".
pub(crate) fn scan_line<'a>(line: &'a str, scratch: &mut Scratch) -> Option<Scanned<'a>> {
    const TYPE: &[u8] = b"{\"type\":";
    const DATA: &[u8] = b",\"data\":";
    const SEQS: &[u8] = b",\"sourceEventSeqs\":[";
    const OP: &[u8] = b",\"surfaceOp\":";
    let b = line.as_bytes();
    // Offsets of facts are kept as u32.
    u32::try_from(b.len()).ok()?;
    scratch.frames.clear();
    scratch.keys.clear();
    let mut s = Scan { b, scratch };
    if !b.starts_with(TYPE) {
        return None;
    }
    let mut i = TYPE.len();
    if s.byte(i) != Some(b'"') {
        return None;
    }
    let (end, escaped) = s.string(i)?;
    let event_type = line.get(i + 1..end - 1)?;
    if escaped || event_type.ends_with(types::CHUNKS_SUFFIX) {
        return None;
    }
    i = s.literal(end, DATA)?;
    let (data_end, data_depth, facts) = s.data(i)?;
    let data = line.get(i..data_end)?;
    i = data_end;
    let mut depth = data_depth;
    let mut source_event_seqs = None;
    if b[i..].starts_with(SEQS) {
        i += SEQS.len();
        let mut seqs = Vec::new();
        if s.byte(i) == Some(b']') {
            i += 1;
        } else {
            loop {
                let (end, value) = s.number(i)?;
                seqs.push(value?);
                i = end + 1;
                match s.byte(end)? {
                    b',' => {}
                    b']' => break,
                    _ => return None,
                }
            }
        }
        depth = depth.max(1);
        source_event_seqs = Some(seqs);
    }
    let mut surface_op = None;
    if b[i..].starts_with(OP) {
        i += OP.len();
        let (end, op_depth, _) = s.value(i)?;
        surface_op = Some(line.get(i..end)?);
        depth = depth.max(op_depth);
        i = end;
    }
    if i + 1 != b.len() || s.byte(i) != Some(b'}') || depth + 1 > MAX_DEPTH {
        return None;
    }
    Some(Scanned {
        event_type,
        data,
        data_depth,
        facts,
        source_event_seqs,
        surface_op,
    })
}

struct Scan<'a, 's> {
    b: &'a [u8],
    scratch: &'s mut Scratch,
}

impl Scan<'_, '_> {
    fn byte(&self, i: usize) -> Option<u8> {
        self.b.get(i).copied()
    }

    /// The index just past `lit`, which must sit at `i`.
    fn literal(&self, i: usize, lit: &[u8]) -> Option<usize> {
        self.b.get(i..)?.starts_with(lit).then_some(i + lit.len())
    }

    /// The string opening at `i` (a `"`): the index just past it, and whether it holds an
    /// escape. Only `serde_json`'s escapes are canonical: `\"`, `\\`, `\b`, `\f`, `\n`, `\r`,
    /// `\t`, and `\u00xx` (lowercase hex) for the other control characters.
    fn string(&self, i: usize) -> Option<(usize, bool)> {
        let b = self.b;
        let mut j = i + 1;
        let mut escaped = false;
        loop {
            // Eight bytes at a time up to the next `"`, `\` or control byte.
            j = skip_plain(b, j);
            match *b.get(j)? {
                b'"' => return Some((j + 1, escaped)),
                b'\\' => {
                    escaped = true;
                    match *b.get(j + 1)? {
                        b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't' => j += 2,
                        b'u' => {
                            let hex = b.get(j + 2..j + 6)?;
                            let low = match hex[3] {
                                c @ b'0'..=b'9' => c - b'0',
                                c @ b'a'..=b'f' => c - b'a' + 10,
                                _ => return None,
                            };
                            let code = match (hex[0], hex[1], hex[2]) {
                                (b'0', b'0', b'0') => low,
                                (b'0', b'0', b'1') => 0x10 + low,
                                _ => return None,
                            };
                            if matches!(code, 0x08 | 0x09 | 0x0a | 0x0c | 0x0d) {
                                return None;
                            }
                            j += 6;
                        }
                        _ => return None,
                    }
                }
                c if c < 0x20 => return None,
                _ => j += 1,
            }
        }
    }

    /// The number starting at `i`: the index just past it, and its value when it is a
    /// non-negative integer. Plain integers of up to 18 digits are canonical as they stand; any
    /// other number is canonical only if `serde_json` writes it back the same.
    fn number(&self, i: usize) -> Option<(usize, Option<u64>)> {
        let b = self.b;
        let negative = b.get(i) == Some(&b'-');
        let digits = i + usize::from(negative);
        let mut j = digits;
        while b.get(j).is_some_and(u8::is_ascii_digit) {
            j += 1;
        }
        let n = j - digits;
        // `0` alone is canonical; `01`, `-0` are not.
        let leading_zero = b.get(digits) == Some(&b'0') && (n > 1 || negative);
        let plain =
            (1..=18).contains(&n) && !leading_zero && !matches!(b.get(j), Some(b'.' | b'e' | b'E'));
        if plain {
            let value = b[digits..j]
                .iter()
                .fold(0u64, |v, d| v * 10 + u64::from(d - b'0'));
            return Some((j, (!negative).then_some(value)));
        }
        while matches!(
            b.get(j),
            Some(b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-')
        ) {
            j += 1;
        }
        let token = std::str::from_utf8(b.get(i..j)?).ok()?;
        let number: serde_json::Number = serde_json::from_str(token).ok()?;
        // What serializing writes (ryu for floats), not `Display`.
        let written = serde_json::to_string(&number).ok()?;
        (written == token).then_some((j, number.as_u64()))
    }

    /// The key opening at `i` of the innermost object, refused if the object already has it;
    /// returns the index just past its `:`.
    fn key(&mut self, i: usize) -> Option<usize> {
        if self.byte(i) != Some(b'"') {
            return None;
        }
        let (end, _) = self.string(i)?;
        let from = match self.scratch.frames.last() {
            Some(Frame::Object(from)) => *from,
            _ => return None,
        };
        let key = &self.b[i + 1..end - 1];
        let same = &self.scratch.keys[from..];
        if same.len() >= MAX_CHECKED_KEYS || same.iter().any(|&(s, e)| &self.b[s..e] == key) {
            return None;
        }
        self.scratch.keys.push((i + 1, end - 1));
        self.literal(end, b":")
    }

    /// The value starting at `i`: the index just past it, its nesting depth and its kind.
    fn value(&mut self, mut i: usize) -> Option<(usize, usize, Kind)> {
        let base = self.scratch.frames.len();
        let (mut depth, mut max) = (0usize, 0usize);
        let mut kind = Kind::Other;
        loop {
            // A value starts at `i`.
            match self.byte(i)? {
                open @ (b'{' | b'[') => {
                    depth += 1;
                    max = max.max(depth);
                    if depth > MAX_DEPTH {
                        return None;
                    }
                    i += 1;
                    let close = if open == b'{' { b'}' } else { b']' };
                    self.scratch.frames.push(if open == b'{' {
                        Frame::Object(self.scratch.keys.len())
                    } else {
                        Frame::Array
                    });
                    if self.byte(i) != Some(close) {
                        if open == b'{' {
                            i = self.key(i)?;
                        }
                        continue;
                    }
                    // Empty: closed below.
                }
                b'"' => {
                    let (end, escaped) = self.string(i)?;
                    if depth == 0 {
                        kind = Kind::Str(escaped);
                    }
                    i = end;
                }
                b'-' | b'0'..=b'9' => {
                    let (end, value) = self.number(i)?;
                    if depth == 0 {
                        kind = value.map_or(Kind::Other, Kind::UInt);
                    }
                    i = end;
                }
                b't' => i = self.literal(i, b"true")?,
                b'f' => i = self.literal(i, b"false")?,
                b'n' => i = self.literal(i, b"null")?,
                _ => return None,
            }
            // After a value: close what ends here, then go on to the next value.
            loop {
                if self.scratch.frames.len() == base {
                    return Some((i, max, kind));
                }
                match (self.scratch.frames.last().copied()?, self.byte(i)?) {
                    (Frame::Array, b',') => {
                        i += 1;
                        break;
                    }
                    (Frame::Object(_), b',') => {
                        i = self.key(i + 1)?;
                        break;
                    }
                    (Frame::Array, b']') => {}
                    (Frame::Object(from), b'}') => self.scratch.keys.truncate(from),
                    _ => return None,
                }
                self.scratch.frames.pop();
                depth -= 1;
                i += 1;
            }
        }
    }

    /// `data` starting at `i`: the index just past it, its depth and its facts (offsets
    /// relative to `i`).
    fn data(&mut self, i: usize) -> Option<(usize, usize, Facts)> {
        let mut facts = Facts::known();
        if self.byte(i) != Some(b'{') {
            // Not an object: it has none of the fields.
            let (end, depth, _) = self.value(i)?;
            return Some((end, depth, facts));
        }
        self.scratch
            .frames
            .push(Frame::Object(self.scratch.keys.len()));
        let mut j = i + 1;
        let mut depth = 1usize;
        if self.byte(j) == Some(b'}') {
            self.scratch.frames.clear();
            self.scratch.keys.clear();
            return Some((j + 1, depth, facts));
        }
        loop {
            let key_start = j + 1;
            j = self.key(j)?;
            let key = &self.b[key_start..j - 2];
            let (end, value_depth, kind) = self.value(j)?;
            depth = depth.max(value_depth + 1);
            let (start, stop) = (j - i, end - i);
            let string = |kind: Kind| match kind {
                // The value with its quotes cut, exactly as it reads.
                Kind::Str(false) => match (u32::try_from(start + 1), u32::try_from(stop - 1)) {
                    (Ok(s), Ok(e)) => StrFact::At(s, e),
                    _ => StrFact::Parse,
                },
                _ => StrFact::Parse,
            };
            // An integer past u32::MAX leaves every fact to the tree.
            let mut uint = |kind: Kind| match kind {
                Kind::UInt(v) => u32::try_from(v).map_err(|_| facts.known = false).ok(),
                _ => None,
            };
            match key {
                b"turn" => facts.turn = uint(kind),
                b"step" => facts.step = uint(kind),
                b"callId" => facts.call_id = string(kind).into(),
                b"name" => facts.name = string(kind).into(),
                b"arguments" => facts.arguments = string(kind).into(),
                b"message" => facts.message = SubText::new(start, stop, value_depth),
                _ => {}
            }
            if kind == Kind::Str(true) {
                facts.escaped |= match key {
                    b"callId" => Facts::ESCAPED_CALL_ID,
                    b"name" => Facts::ESCAPED_NAME,
                    b"arguments" => Facts::ESCAPED_ARGUMENTS,
                    _ => 0,
                };
            }
            j = end;
            match self.byte(j)? {
                b',' => j += 1,
                b'}' => break,
                _ => return None,
            }
        }
        self.scratch.frames.clear();
        self.scratch.keys.clear();
        if depth > MAX_DEPTH {
            return None;
        }
        Some((j + 1, depth, facts))
    }
}

#[cfg(test)]
#[path = "scan_tests.rs"]
mod tests;
