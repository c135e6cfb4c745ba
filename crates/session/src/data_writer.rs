//! Writing an event's `data` straight as canonical compact JSON text, for a caller that builds
//! its own event type on a hot path: no tree of maps, and no scan of the line afterwards
//! ([`crate::Event::from_data`], or [`crate::Event::on_demand`] to write it only when needed,
//! as `dsh/step-timing` does).
//!
//! Guarantees: whatever a caller does, the text a [`DataWriter`] hands to an event is in the
//! canonical form the log reader accepts without a tree ([`crate::scan`]): compact, strings
//! escaped exactly as `serde_json` escapes them, integers written as it writes them, and no key
//! twice in an object. The last holds by construction: an object's keys come from a [`Keys`]
//! shape (checked once for duplicates) and must be written in the shape's order, each at most
//! once. A misuse (a key out of order, an item where a key is due, a container left open) is
//! not written: it makes [`crate::Event::from_data`] return an error (data written on demand
//! becomes `{}`, reported; see `on_demand.rs`).

use crate::payload::{Facts, PackedStr, StrFact, SubText, push_json_str};

/// Why a [`Keys`] shape or a [`DataWriter`]'s text was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum DataError {
    /// The shape names one key twice.
    #[error("key `{0}` appears twice in one object shape")]
    DuplicateKey(String),
    /// A value was written where the writer did not allow it.
    #[error("data writer misused: {0}")]
    Misuse(&'static str),
    /// The event type names a chunk run, whose span the writer does not compute.
    #[error("`{0}` is a chunk run; build it with `Event::other`")]
    ChunkRun(String),
}

/// The fact of [`Facts`] a top-level key carries.
#[derive(Clone, Copy, PartialEq, Eq)]
enum FactKey {
    None,
    Turn,
    Step,
    CallId,
    Name,
    Arguments,
    Message,
}

/// The keys of one object shape, in the order they are written: each escaped once, no key
/// twice.
#[derive(Debug)]
pub struct Keys {
    /// `"key":` for each key.
    written: Box<[Box<[u8]>]>,
    facts: Box<[u8]>,
}

impl Keys {
    /// The shape; refused when a key appears twice.
    pub fn new(names: &[&str]) -> Result<Keys, DataError> {
        for (i, a) in names.iter().enumerate() {
            if names[..i].contains(a) {
                return Err(DataError::DuplicateKey((*a).to_owned()));
            }
        }
        let written = names
            .iter()
            .map(|name| {
                let mut buf = Vec::with_capacity(name.len() + 3);
                push_json_str(&mut buf, name);
                buf.push(b':');
                buf.into_boxed_slice()
            })
            .collect();
        let facts = names
            .iter()
            .map(|name| {
                (match *name {
                    "turn" => FactKey::Turn,
                    "step" => FactKey::Step,
                    "callId" => FactKey::CallId,
                    "name" => FactKey::Name,
                    "arguments" => FactKey::Arguments,
                    "message" => FactKey::Message,
                    _ => FactKey::None,
                }) as u8
            })
            .collect();
        Ok(Keys { written, facts })
    }

    fn fact(&self, key: usize) -> FactKey {
        const ALL: [FactKey; 7] = [
            FactKey::None,
            FactKey::Turn,
            FactKey::Step,
            FactKey::CallId,
            FactKey::Name,
            FactKey::Arguments,
            FactKey::Message,
        ];
        ALL[usize::from(self.facts[key])]
    }
}

/// An open container.
#[derive(Clone, Copy)]
enum Frame<'k> {
    Object {
        keys: &'k Keys,
        /// The first key index still allowed.
        next: usize,
        /// Deepest value inside so far (0: only scalars or nothing).
        inner: usize,
        /// Where the object starts.
        start: usize,
    },
    Array {
        empty: bool,
        inner: usize,
        start: usize,
    },
}

/// Open containers kept inline up to [`Frames::INLINE`] deep (no allocation for the usual
/// shallow data), deeper ones in a vector.
struct Frames<'k> {
    inline: [Frame<'k>; Frames::INLINE],
    len: usize,
    deeper: Vec<Frame<'k>>,
}

impl<'k> Frames<'k> {
    const INLINE: usize = 8;

    fn new(top: Frame<'k>) -> Frames<'k> {
        Frames {
            inline: [top; Frames::INLINE],
            len: 1,
            deeper: Vec::new(),
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn last_mut(&mut self) -> Option<&mut Frame<'k>> {
        if self.len > Frames::INLINE {
            self.deeper.last_mut()
        } else {
            self.len.checked_sub(1).map(|i| &mut self.inline[i])
        }
    }

    fn push(&mut self, frame: Frame<'k>) {
        if self.len < Frames::INLINE {
            self.inline[self.len] = frame;
        } else {
            self.deeper.push(frame);
        }
        self.len += 1;
    }

    fn pop(&mut self) -> Option<Frame<'k>> {
        let frame = if self.len > Frames::INLINE {
            self.deeper.pop()
        } else {
            self.len.checked_sub(1).map(|i| self.inline[i])
        };
        self.len = self.len.saturating_sub(1);
        frame
    }
}

/// Writes an object's text value by value; see the module docs for what it guarantees.
pub struct DataWriter<'k> {
    buf: Vec<u8>,
    frames: Frames<'k>,
    /// A top-level `message` container is open.
    pending_message: bool,
    facts: Facts,
    misuse: Option<&'static str>,
}

impl<'k> DataWriter<'k> {
    /// A writer with the top-level object open, its keys from `keys`.
    pub fn new(keys: &'k Keys, capacity: usize) -> DataWriter<'k> {
        let mut buf = Vec::with_capacity(capacity.max(2));
        buf.push(b'{');
        let frames = Frames::new(Frame::Object {
            keys,
            next: 0,
            inner: 0,
            start: 0,
        });
        DataWriter {
            buf,
            frames,
            pending_message: false,
            facts: Facts::known(),
            misuse: None,
        }
    }

    fn fail(&mut self, why: &'static str) {
        if self.misuse.is_none() {
            self.misuse = Some(why);
        }
    }

    /// Writes the separator and key `key` of the innermost object; the key's fact if it is a
    /// top-level one (`FactKey::None` otherwise), or `None` when the call is a misuse.
    fn key(&mut self, key: usize) -> Option<FactKey> {
        if self.misuse.is_some() {
            return None;
        }
        let top = self.frames.len() == 1;
        let Some(Frame::Object { keys, next, .. }) = self.frames.last_mut() else {
            self.fail("a keyed value inside an array");
            return None;
        };
        let keys: &'k Keys = keys;
        if key < *next || key >= keys.written.len() {
            self.fail("a key out of its shape's order");
            return None;
        }
        // No key of this object written yet: it is the first.
        let first = *next == 0;
        *next = key + 1;
        if !first {
            self.buf.push(b',');
        }
        self.buf.extend_from_slice(&keys.written[key]);
        Some(if top { keys.fact(key) } else { FactKey::None })
    }

    /// Writes the separator of the innermost array; `false` on a misuse.
    fn item(&mut self) -> bool {
        if self.misuse.is_some() {
            return false;
        }
        let Some(Frame::Array { empty, .. }) = self.frames.last_mut() else {
            self.fail("an item inside an object");
            return false;
        };
        if !std::mem::replace(empty, false) {
            self.buf.push(b',');
        }
        true
    }

    /// An integer field of the innermost object (`key` indexes its [`Keys`]).
    pub fn u64(&mut self, key: usize, value: u64) {
        let Some(fact) = self.key(key) else { return };
        let start = self.buf.len();
        push_u64(&mut self.buf, value);
        let fits = u32::try_from(value).ok();
        // An integer past u32::MAX leaves every fact to the tree, as the scan does.
        match fact {
            FactKey::Turn | FactKey::Step if fits.is_none() => self.facts.known = false,
            FactKey::Turn => self.facts.turn = fits,
            FactKey::Step => self.facts.step = fits,
            FactKey::None => {}
            _ => self.scalar_fact(fact, start, false),
        }
    }

    /// A string field of the innermost object.
    pub fn str(&mut self, key: usize, value: &str) {
        let Some(fact) = self.key(key) else { return };
        let start = self.buf.len();
        push_json_str(&mut self.buf, value);
        if fact != FactKey::None {
            let escaped = self.buf.len() - start != value.len() + 2;
            self.scalar_fact(fact, start, !escaped);
            if escaped {
                self.facts.escaped |= match fact {
                    FactKey::CallId => Facts::ESCAPED_CALL_ID,
                    FactKey::Name => Facts::ESCAPED_NAME,
                    FactKey::Arguments => Facts::ESCAPED_ARGUMENTS,
                    _ => 0,
                };
            }
        }
    }

    /// Records the fact of a top-level scalar just written from `start` (`plain`: an unescaped
    /// string, whose text between the quotes is the string).
    fn scalar_fact(&mut self, fact: FactKey, start: usize, plain: bool) {
        let end = self.buf.len();
        let at = match (plain, u32::try_from(start + 1), u32::try_from(end - 1)) {
            (true, Ok(s), Ok(e)) => PackedStr::from(StrFact::At(s, e)),
            _ => PackedStr::from(StrFact::Parse),
        };
        match fact {
            FactKey::CallId => self.facts.call_id = at,
            FactKey::Name => self.facts.name = at,
            FactKey::Arguments => self.facts.arguments = at,
            FactKey::Message => self.facts.message = SubText::new(start, end, 0),
            FactKey::None | FactKey::Turn | FactKey::Step => {}
        }
    }

    /// Opens an array field of the innermost object.
    pub fn open_array(&mut self, key: usize) {
        if let Some(fact) = self.key(key) {
            self.open(fact, None);
        }
    }

    /// Opens an object field of the innermost object, its keys from `keys`.
    pub fn open_object(&mut self, key: usize, keys: &'k Keys) {
        if let Some(fact) = self.key(key) {
            self.open(fact, Some(keys));
        }
    }

    /// An integer item of the innermost array.
    pub fn item_u64(&mut self, value: u64) {
        if self.item() {
            push_u64(&mut self.buf, value);
        }
    }

    /// A string item of the innermost array.
    pub fn item_str(&mut self, value: &str) {
        if self.item() {
            push_json_str(&mut self.buf, value);
        }
    }

    /// Opens an object item of the innermost array, its keys from `keys`.
    pub fn item_object(&mut self, keys: &'k Keys) {
        if self.item() {
            self.open(FactKey::None, Some(keys));
        }
    }

    /// Opens an array item of the innermost array.
    pub fn item_array(&mut self) {
        if self.item() {
            self.open(FactKey::None, None);
        }
    }

    fn open(&mut self, fact: FactKey, keys: Option<&'k Keys>) {
        let start = self.buf.len();
        match fact {
            FactKey::Message => self.pending_message = true,
            // Not a string: read from the tree, as the scan leaves it.
            FactKey::CallId | FactKey::Name | FactKey::Arguments => {
                self.scalar_fact(fact, start, false)
            }
            FactKey::None | FactKey::Turn | FactKey::Step => {}
        }
        self.frames.push(match keys {
            Some(keys) => {
                self.buf.push(b'{');
                Frame::Object {
                    keys,
                    next: 0,
                    inner: 0,
                    start,
                }
            }
            None => {
                self.buf.push(b'[');
                Frame::Array {
                    empty: true,
                    inner: 0,
                    start,
                }
            }
        });
    }

    /// Closes the innermost container (not the top-level object: [`crate::Event::from_data`]
    /// does).
    pub fn close(&mut self) {
        if self.misuse.is_some() {
            return;
        }
        if self.frames.len() < 2 {
            self.fail("close with no container open");
            return;
        }
        let (inner, start) = match self.frames.pop() {
            Some(Frame::Object { inner, start, .. }) => {
                self.buf.push(b'}');
                (inner, start)
            }
            Some(Frame::Array { inner, start, .. }) => {
                self.buf.push(b']');
                (inner, start)
            }
            None => return,
        };
        let depth = inner + 1;
        if self.frames.len() == 1 && std::mem::take(&mut self.pending_message) {
            self.facts.message = SubText::new(start, self.buf.len(), depth);
        }
        if let Some(Frame::Object { inner, .. } | Frame::Array { inner, .. }) =
            self.frames.last_mut()
        {
            *inner = (*inner).max(depth);
        }
    }

    /// Closes the top-level object: its text, nesting depth and facts.
    pub(crate) fn finish(mut self) -> Result<(Box<str>, usize, Facts), DataError> {
        if let Some(why) = self.misuse {
            return Err(DataError::Misuse(why));
        }
        let inner = match (self.frames.len(), self.frames.last_mut()) {
            (1, Some(Frame::Object { inner, .. })) => *inner,
            _ => return Err(DataError::Misuse("a container left open")),
        };
        self.buf.push(b'}');
        // Only `str` text and ASCII were written.
        let text = String::from_utf8(self.buf)
            .map_err(|_| DataError::Misuse("not UTF-8"))?
            .into_boxed_str();
        Ok((text, inner + 1, self.facts))
    }
}

/// Appends `value` in decimal, as `serde_json` writes an unsigned integer: two digits per
/// step, from a table.
fn push_u64(buf: &mut Vec<u8>, mut value: u64) {
    const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
        2021222324252627282930313233343536373839\
        4041424344454647484950515253545556575859\
        6061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899";
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    while value >= 100 {
        let pair = (value % 100) as usize * 2;
        value /= 100;
        i -= 2;
        digits[i..i + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    }
    if value >= 10 {
        let pair = value as usize * 2;
        i -= 2;
        digits[i..i + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    } else {
        i -= 1;
        digits[i] = b'0' + value as u8;
    }
    buf.extend_from_slice(&digits[i..]);
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Map, Value};

    use super::*;
    use crate::Event;
    use crate::scan::{Scratch, scan_line};

    /// A value to write, objects with distinct keys in order.
    #[derive(Clone, Debug)]
    enum Node {
        U(u64),
        S(String),
        Arr(Vec<Node>),
        Obj(Vec<(String, Node)>),
    }

    fn key() -> impl Strategy<Value = String> {
        prop_oneof![
            prop::sample::select(vec![
                "turn",
                "step",
                "callId",
                "name",
                "arguments",
                "message"
            ])
            .prop_map(str::to_owned),
            any::<String>(),
            "[a-z\"\\\\]{0,4}",
        ]
    }

    fn object(inner: impl Strategy<Value = Node>) -> impl Strategy<Value = Vec<(String, Node)>> {
        prop::collection::vec((key(), inner), 0..6).prop_map(|mut fields| {
            let mut seen = std::collections::HashSet::new();
            fields.retain(|(k, _)| seen.insert(k.clone()));
            fields
        })
    }

    fn node() -> impl Strategy<Value = Node> {
        let leaf = prop_oneof![
            any::<u64>().prop_map(Node::U),
            (0u64..10).prop_map(Node::U),
            any::<String>().prop_map(Node::S),
            "[a-z]{0,6}".prop_map(Node::S),
        ];
        leaf.prop_recursive(4, 32, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Node::Arr),
                object(inner).prop_map(Node::Obj),
            ]
        })
    }

    fn value(node: &Node) -> Value {
        match node {
            Node::U(v) => Value::from(*v),
            Node::S(s) => Value::from(s.as_str()),
            Node::Arr(items) => Value::Array(items.iter().map(value).collect()),
            Node::Obj(fields) => Value::Object(
                fields
                    .iter()
                    .map(|(k, v)| (k.clone(), value(v)))
                    .collect::<Map<_, _>>(),
            ),
        }
    }

    /// Every object's shape, in the order [`write`] opens them.
    fn shapes(node: &Node, out: &mut Vec<Keys>) {
        match node {
            Node::Obj(fields) => {
                let names: Vec<&str> = fields.iter().map(|(k, _)| k.as_str()).collect();
                out.push(Keys::new(&names).expect("distinct keys"));
                fields.iter().for_each(|(_, v)| shapes(v, out));
            }
            Node::Arr(items) => items.iter().for_each(|v| shapes(v, out)),
            _ => {}
        }
    }

    fn write<'k>(
        w: &mut DataWriter<'k>,
        key: Option<usize>,
        node: &Node,
        keys: &'k [Keys],
        next: &mut usize,
    ) {
        match (node, key) {
            (Node::U(v), Some(k)) => w.u64(k, *v),
            (Node::U(v), None) => w.item_u64(*v),
            (Node::S(s), Some(k)) => w.str(k, s),
            (Node::S(s), None) => w.item_str(s),
            (Node::Arr(items), k) => {
                match k {
                    Some(k) => w.open_array(k),
                    None => w.item_array(),
                }
                for item in items {
                    write(w, None, item, keys, next);
                }
                w.close();
            }
            (Node::Obj(fields), k) => {
                let shape = &keys[*next];
                *next += 1;
                match k {
                    Some(k) => w.open_object(k, shape),
                    None => w.item_object(shape),
                }
                for (i, (_, v)) in fields.iter().enumerate() {
                    write(w, Some(i), v, keys, next);
                }
                w.close();
            }
        }
    }

    proptest! {
        #[test]
        fn written_data_is_canonical_and_reads_back_byte_for_byte(
            fields in object(node()),
            skip in any::<u8>(),
        ) {
            // Some fields left out: a shape's keys need not all be written.
            let kept: Vec<(usize, &(String, Node))> = fields
                .iter()
                .enumerate()
                .filter(|(i, _)| skip >> (i % 8) & 1 == 0)
                .collect();
            let mut keys = Vec::new();
            let top = Keys::new(&fields.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>())
                .expect("distinct keys");
            kept.iter().for_each(|(_, (_, v))| shapes(v, &mut keys));
            let mut w = DataWriter::new(&top, 16);
            let mut next = 0;
            for (i, (_, v)) in &kept {
                write(&mut w, Some(*i), v, &keys, &mut next);
            }
            let event = Event::from_data("x/y".into(), w).expect("well used");
            let expected = Value::Object(
                kept.iter().map(|(_, (k, v))| (k.clone(), value(v))).collect(),
            );
            let line = event.to_json_line();
            // The text is what serializing the tree gives.
            let tree_line = serde_json::to_string(&serde_json::json!({"type": "x/y", "data": expected}))
                .expect("serializes");
            prop_assert_eq!(&line, &tree_line);
            prop_assert_eq!(event.data().value(), &expected);
            // The full scan accepts it, with the same facts and depth the writer kept.
            let mut scratch = Scratch::default();
            let scanned = scan_line(&line, &mut scratch);
            prop_assert!(scanned.is_some(), "{}", line);
            let scanned = scanned.expect("scanned");
            prop_assert_eq!(scanned.facts, *event.data_facts());
            prop_assert_eq!(scanned.data_depth, event.data_depth());
            // And reads back to the same event, written back byte for byte.
            let read = Event::from_json_line(&line).expect("reads");
            prop_assert_eq!(&read, &event);
            prop_assert_eq!(read.to_json_line(), line);
        }
    }

    #[test]
    fn data_nested_past_the_inline_frames_is_written_and_closed_in_order() {
        let keys = Keys::new(&["a", "b"]).expect("shape");
        let mut w = DataWriter::new(&keys, 8);
        w.open_array(0);
        for _ in 0..20 {
            w.item_object(&keys);
            w.open_array(0);
        }
        w.item_u64(7);
        for _ in 0..20 {
            w.close();
            w.u64(1, 1);
            w.close();
        }
        w.close();
        let event = Event::from_data("x/y".into(), w).expect("well used");
        let line = event.to_json_line();
        let inner = "[7]";
        let mut expected = inner.to_owned();
        for _ in 0..20 {
            expected = format!("[{{\"a\":{expected},\"b\":1}}]");
        }
        assert_eq!(
            line,
            format!("{{\"type\":\"x/y\",\"data\":{{\"a\":{expected}}}}}")
        );
        assert_eq!(event.data_depth(), 42);
        let read = Event::from_json_line(&line).expect("reads");
        assert_eq!(read, event);
    }

    #[test]
    fn integers_are_written_as_serde_json_writes_them() {
        let mut values = vec![0, 9, 10, 99, 100, 101, 999, 1000, u64::MAX, u64::MAX / 10];
        values.extend((0..20).map(|p| 10u64.pow(p)));
        values.extend((1..20).map(|p| 10u64.pow(p) - 1));
        for v in values {
            let mut buf = Vec::new();
            push_u64(&mut buf, v);
            assert_eq!(String::from_utf8(buf).ok(), serde_json::to_string(&v).ok());
        }
    }

    #[test]
    fn a_shape_naming_a_key_twice_is_refused() {
        assert_eq!(
            Keys::new(&["a", "b", "a"]).err(),
            Some(DataError::DuplicateKey("a".to_owned()))
        );
    }

    /// A misuse of a writer, named.
    type Misuse = (&'static str, fn(&mut DataWriter<'_>));

    #[test]
    fn misuse_is_refused_rather_than_written() {
        let keys = Keys::new(&["a", "b"]).expect("shape");
        let misuses: [Misuse; 5] = [
            ("key twice", |w| {
                w.u64(1, 1);
                w.u64(1, 2);
            }),
            ("keys out of order", |w| {
                w.u64(1, 1);
                w.u64(0, 2);
            }),
            ("key past the shape", |w| w.u64(2, 1)),
            ("item in an object", |w| w.item_u64(1)),
            ("array left open", |w| w.open_array(0)),
        ];
        for (what, misuse) in misuses {
            let mut w = DataWriter::new(&keys, 8);
            misuse(&mut w);
            assert!(
                matches!(Event::from_data("x/y".into(), w), Err(DataError::Misuse(_))),
                "{what}"
            );
        }
        let mut w = DataWriter::new(&keys, 8);
        w.open_array(0);
        w.u64(0, 1);
        w.close();
        assert!(
            Event::from_data("x/y".into(), w).is_err(),
            "a key inside an array"
        );
        let mut w = DataWriter::new(&keys, 8);
        w.close();
        assert!(
            Event::from_data("x/y".into(), w).is_err(),
            "closing the top object"
        );
        assert!(matches!(
            Event::from_data("text-chunks".into(), DataWriter::new(&keys, 8)),
            Err(DataError::ChunkRun(_))
        ));
    }
}
