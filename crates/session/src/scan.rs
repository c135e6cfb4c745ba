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
use crate::payload::{Facts, StrFact, SubText, special_mask};

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
            while let Some(word) = b.get(j..j + 8).and_then(|c| <[u8; 8]>::try_from(c).ok()) {
                let mask = special_mask(u64::from_le_bytes(word));
                if mask != 0 {
                    j += (mask.trailing_zeros() / 8) as usize;
                    break;
                }
                j += 8;
            }
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
mod tests {
    use proptest::prelude::*;
    use serde_json::Value;

    use dsh_core::{ContentBlock, Json};

    use super::*;
    use crate::deep;
    use crate::event::{Event, SurfaceOp};

    fn accepts(line: &str) -> bool {
        scan_line(line, &mut Scratch::default()).is_some()
    }

    #[test]
    fn canonical_lines_are_accepted_with_their_facts() {
        let line = r#"{"type":"tool/call","data":{"turn":1,"step":2,"callId":"c1","name":"read","arguments":"{\"a\":1}"},"sourceEventSeqs":[0,7],"surfaceOp":"append"}"#;
        let mut scratch = Scratch::default();
        let Some(s) = scan_line(line, &mut scratch) else {
            panic!("accepted");
        };
        assert_eq!(s.event_type, "tool/call");
        assert_eq!(s.data_depth, 1);
        assert_eq!((s.facts.turn, s.facts.step), (Some(1), Some(2)));
        let at = |f: crate::payload::PackedStr| match f.get() {
            StrFact::At(a, b) => &s.data[a as usize..b as usize],
            _ => "?",
        };
        assert_eq!((at(s.facts.call_id), at(s.facts.name)), ("c1", "read"));
        assert_eq!(s.facts.arguments.get(), StrFact::Parse);
        assert_eq!(s.source_event_seqs, Some(vec![0, 7]));
        assert_eq!(s.surface_op, Some("\"append\""));
        let message =
            r#"{"type":"assistant/message","data":{"turn":1,"message":{"content":[[]],"x":{}}}}"#;
        let Some(s) = scan_line(message, &mut scratch) else {
            panic!("accepted");
        };
        let m = s
            .facts
            .message
            .map(|m| (&s.data[m.start as usize..m.end as usize], m.depth));
        assert_eq!(m, Some((r#"{"content":[[]],"x":{}}"#, 3)));
        assert_eq!(s.data_depth, 4);
    }

    #[test]
    fn anything_not_canonical_is_left_to_the_eager_reader() {
        for line in [
            r#"{"type":"x","data":{} }"#,
            r#"{"type":"x", "data":{}}"#,
            r#"{"type":"x","data":{"a":1,"a":2}}"#,
            r#"{"type":"x","data":{"a":"\/"}}"#,
            r#"{"type":"x","data":{"a":"\u0041"}}"#,
            r#"{"type":"x","data":{"a":"\u000a"}}"#,
            r#"{"type":"x","data":{"a":"\u001F"}}"#,
            r#"{"type":"x","data":[1.50]}"#,
            r#"{"type":"x","data":[1e5]}"#,
            r#"{"type":"x","data":[1e300]}"#,
            r#"{"type":"x","data":[-0]}"#,
            r#"{"type":"x","data":[01]}"#,
            r#"{"type":"x","data":[18446744073709551616]}"#,
            r#"{"type":"x","data":[1,]}"#,
            r#"{"type":"x","data":[,1]}"#,
            r#"{"type":"x","data":{,}}"#,
            r#"{"type":"x","data":{"a"}}"#,
            r#"{"type":"x","data":[tru]}"#,
            r#"{"type":"x","data":"unterminated}"#,
            r#"{"type":"x","data":{}}x"#,
            r#"{"type":"x","data":{},"sourceEventSeqs":[-1]}"#,
            r#"{"type":"x","data":{},"surfaceOp":"append","sourceEventSeqs":[1]}"#,
            r#"{"type":"x","data":{},"other":1}"#,
            r#"{"data":{},"type":"x"}"#,
            r#"{"type":"text-chunks","data":{"texts":["a"]}}"#,
            r#"{"type":"t\"x","data":{}}"#,
            "{\"type\":\"x\",\"data\":\"\t\"}",
        ] {
            assert!(!accepts(line), "{line}");
        }
        for line in [
            r#"{"type":"x","data":[1.5]}"#,
            r#"{"type":"x","data":[-2,0]}"#,
            r#"{"type":"x","data":[-0.0]}"#,
            r#"{"type":"x","data":[1e+300]}"#,
            r#"{"type":"x","data":[18446744073709551615]}"#,
            r#"{"type":"x","data":["\u001f\n"]}"#,
            r#"{"type":"x","data":[1.5,-2,0,-0.0,1e+300,18446744073709551615,"\u001f\n"]}"#,
            r#"{"type":"x","data":{"a":{"a":{"a":1}},"b":[{"a":1,"b":2}]}}"#,
            r#"{"type":"x","data":null,"sourceEventSeqs":[]}"#,
        ] {
            assert!(accepts(line), "{line}");
        }
    }

    fn leaf() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            (0u64..1 << 32).prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            any::<String>().prop_map(Value::from),
            prop::collection::vec(
                prop::sample::select(vec!['a', '"', '\\', '\u{1}', '\u{1f}', '\n', '\u{7f}', 'é']),
                0..6
            )
            .prop_map(|c| Value::from(c.into_iter().collect::<String>())),
        ]
    }

    fn json_value() -> impl Strategy<Value = Value> {
        leaf().prop_recursive(4, 32, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::vec((key(), inner), 0..5)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    /// Keys the scan keeps facts of, and others.
    fn key() -> impl Strategy<Value = String> {
        prop_oneof![
            prop::sample::select(vec![
                "turn",
                "step",
                "callId",
                "name",
                "arguments",
                "message",
                "content",
                "role"
            ])
            .prop_map(str::to_owned),
            any::<String>(),
        ]
    }

    /// Data: any value, or an object holding some of the fact fields with any values.
    fn data() -> impl Strategy<Value = Value> {
        prop_oneof![
            json_value(),
            prop::collection::vec((key(), json_value()), 0..7)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    }

    fn any_event() -> impl Strategy<Value = Event> {
        let ty = prop::sample::select(vec![
            types::TOOL_CALL,
            types::TOOL_RESULT,
            types::USER_MESSAGE,
            types::ASSISTANT_MESSAGE,
            types::TURN_START,
            types::STEP_END,
            "hook/x",
            "text-chunks",
        ]);
        let typed = (
            any::<u32>(),
            any::<u32>(),
            any::<String>(),
            any::<String>(),
            json_value(),
        )
            .prop_map(|(t, s, id, text, v)| {
                let content = [ContentBlock::text(text)];
                let meta = Json::new(v.clone()).ok();
                match t % 3 {
                    0 => Event::tool_call(t, s, id.as_str(), id.as_str(), id.as_str()),
                    1 => Event::tool_result(
                        t,
                        s,
                        id.as_str(),
                        3,
                        &content[..],
                        s % 2 == 0,
                        None,
                        meta.as_ref(),
                    ),
                    _ => Event::assistant_message(
                        t,
                        s,
                        Json::from_shallow(serde_json::json!({"role": "assistant", "content": v})),
                    ),
                }
            });
        let other = (
            ty,
            data(),
            prop::option::of(prop::collection::vec(any::<u64>(), 0..3)),
            prop::option::of(json_value()),
        )
            .prop_map(|(ty, data, seqs, op)| {
                let mut e = Event::other(ty, Json::from_shallow(data));
                if let Some(seqs) = seqs {
                    e = e.with_source_event_seqs(seqs);
                }
                if let Some(op) = op {
                    e = e.with_surface_op(match op {
                        Value::Bool(true) => SurfaceOp::Append,
                        other => SurfaceOp::Other(Json::from_shallow(other)),
                    });
                }
                e
            });
        prop_oneof![typed, other]
    }

    /// Text edits that keep the line JSON (or break it) but not canonical.
    fn perturb(line: &str, how: u8, at: usize) -> String {
        let at = (0..=at.min(line.len()))
            .rev()
            .find(|&i| line.is_char_boundary(i))
            .unwrap_or(0);
        let (a, b) = line.split_at(at);
        match how % 5 {
            0 => format!("{a} {b}"),
            1 => format!("{a}x{b}"),
            2 => line.replacen(":1", ":1.0", 1),
            3 => line
                .replacen("\\n", "\\u000a", 1)
                .replacen("a", "\\u0061", 1),
            _ => b.to_owned(),
        }
    }

    /// What a reader can observe of an event without comparing trees.
    fn views(e: &Event) -> String {
        let strings = ["callId", "name", "arguments"].map(|k| e.data_is_str(k));
        format!(
            "{strings:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?}",
            e.kind(),
            e.as_tool_call(),
            e.as_tool_result(),
            e.data_u64("turn"),
            e.data_u64("step"),
            e.data_str("callId"),
            e.data_str("name"),
            e.data_str("arguments"),
            e.data_depth(),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// A lazily read event equals the eagerly parsed one: same type, data, seqs, surface
        /// operation, views and facts, same `data.message`, and the same line written back; a
        /// line this crate wrote is read lazily.
        #[test]
        fn a_lazily_read_event_equals_the_eagerly_parsed_one(
            e in any_event(), how in any::<u8>(), at in any::<usize>(),
        ) {
            let line = e.to_json_line();
            let mut scratch = Scratch::default();
            for (text, canonical) in [(line.clone(), true), (perturb(&line, how, at), false)] {
                let eager = deep::parse_with(&text, Event::from_value);
                let lazy = Event::read_line(&text, &mut scratch);
                let (eager, lazy) = match (eager, lazy) {
                    (Ok(a), Ok(b)) => (a, b),
                    (Err(a), Err(b)) => { prop_assert_eq!(a, b); continue; }
                    (a, b) => { prop_assert!(false, "{text}: {a:?} vs {b:?}"); unreachable!() }
                };
                let was_lazy = lazy.keeps_text();
                if canonical && !e.is_chunk_run() {
                    prop_assert!(was_lazy, "{text} was read eagerly");
                }
                let message = lazy.message_from_text();
                prop_assert_eq!(views(&lazy), views(&eager));
                prop_assert_eq!(lazy.to_json_line(), eager.to_json_line());
                prop_assert_eq!(&lazy, &eager);
                prop_assert_eq!(lazy.data().depth(), eager.data().depth());
                if let Some(m) = message {
                    prop_assert_eq!(Some(m.value()), eager.data().value().get("message"));
                    prop_assert_eq!(m.depth(), eager.data().value().get("message").map_or(0, dsh_core::json::depth_of));
                }
            }
        }
    }

    /// A block of a message's `content`: objects shaped like the blocks the views read (any
    /// member may be missing or of another type), or any other value.
    fn block() -> impl Strategy<Value = Value> {
        let kind = prop_oneof![
            3 => prop::sample::select(vec!["tool-result", "tool-call", "text"]).prop_map(Value::from),
            1 => leaf(),
        ];
        let member = || prop::option::of(prop_oneof![3 => leaf(), 1 => json_value()]);
        let shaped = (
            prop::option::of(kind),
            member(),
            member(),
            member(),
            member(),
            member(),
        )
            .prop_map(|(kind, tool_call_id, id, name, arguments, is_error)| {
                let mut m = serde_json::Map::new();
                for (k, v) in [
                    ("type", kind),
                    ("toolCallId", tool_call_id),
                    ("id", id),
                    ("name", name),
                    ("arguments", arguments),
                    ("isError", is_error),
                ] {
                    if let Some(v) = v {
                        m.insert(k.to_owned(), v);
                    }
                }
                Value::Object(m)
            });
        prop_oneof![4 => shaped, 1 => json_value()]
    }

    /// A message as `tool/result` and `assistant/message` events hold it, with every member
    /// the views read sometimes missing, of another type, or the message not an object.
    fn message() -> impl Strategy<Value = Value> {
        let source = prop_oneof![
            prop::option::of(leaf()).prop_map(|id| match id {
                Some(id) => serde_json::json!({"kind": "tool", "callId": id}),
                None => serde_json::json!({"kind": "tool"}),
            }),
            leaf(),
        ];
        let content = prop_oneof![
            4 => prop::collection::vec(block(), 0..4).prop_map(Value::Array),
            1 => leaf(),
        ];
        let shaped =
            (prop::option::of(source), prop::option::of(content)).prop_map(|(source, content)| {
                let mut m = serde_json::Map::new();
                m.insert("role".into(), Value::from("user"));
                if let Some(source) = source {
                    m.insert("source".into(), source);
                }
                if let Some(content) = content {
                    m.insert("content".into(), content);
                }
                Value::Object(m)
            });
        prop_oneof![6 => shaped, 1 => json_value()]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Reading a result's call and a message's calls from the text (`skim.rs`) gives what
        /// the tree-based views give for the same line.
        #[test]
        fn l4_l5_the_skimmed_call_ids_equal_the_tree_views(
            message in message(),
            flat in prop::option::of(json_value()),
            assistant in any::<bool>(),
        ) {
            let ty = if assistant { types::ASSISTANT_MESSAGE } else { types::TOOL_RESULT };
            let mut data = serde_json::Map::new();
            data.insert("turn".into(), Value::from(1));
            data.insert("step".into(), Value::from(2));
            data.insert("message".into(), message);
            if let Some(flat) = flat {
                data.insert("content".into(), flat);
            }
            let line = Event::other(ty, Json::from_shallow(Value::Object(data))).to_json_line();
            let mut scratch = Scratch::default();
            let lazy = Event::read_line(&line, &mut scratch).expect("a line it wrote");
            let eager = deep::parse_with(&line, Event::from_value).expect("a line it wrote");
            prop_assert!(lazy.keeps_text(), "{line} was read eagerly");
            let skimmed_calls = crate::visible::calls_of(1, &lazy);
            let skimmed_id = lazy.result_call_id().map(|id| id.into_owned());
            prop_assert_eq!(
                skimmed_id,
                eager.as_tool_result().map(|r| r.call_id.to_owned()),
                "{}", line
            );
            prop_assert_eq!(skimmed_calls, crate::visible::calls_of(1, &eager), "{}", line);
        }
    }

    #[test]
    fn deep_lines_scan_without_recursion_and_past_the_limit_are_refused() {
        let handle = std::thread::Builder::new()
            .stack_size(128 * 1024)
            .spawn(|| {
                let nested = |n: usize| {
                    format!(
                        "{{\"type\":\"x\",\"data\":{}{}}}",
                        "[".repeat(n),
                        "]".repeat(n)
                    )
                };
                let mut scratch = Scratch::default();
                let at_limit =
                    scan_line(&nested(MAX_DEPTH - 1), &mut scratch).map(|s| s.data_depth);
                let past = scan_line(&nested(MAX_DEPTH), &mut scratch).is_some();
                (at_limit, past)
            });
        let joined = handle.map(|h| h.join());
        assert!(
            matches!(joined, Ok(Ok((Some(d), false))) if d == MAX_DEPTH - 1),
            "{joined:?}"
        );
    }
}
