//! Frozen, shared, lossless JSON values: what arguments, results, metadata and log payloads are made of.
//!
//! Guarantees: a [`Json`] never changes after construction; cloning it is a reference-count bump;
//! values nested up to [`MAX_DEPTH`] levels parse, serialize and drop without overflowing the
//! stack (deep values are handled on a grown stack or dismantled iteratively); deeper values are
//! refused with [`JsonError::TooDeep`], never truncated.

use std::fmt;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// The deepest nesting a [`Json`] may hold. Deeper input is an error naming this limit.
pub const MAX_DEPTH: usize = 20_000;

/// Nesting at or below which a value is handled on the current stack with plain recursion.
const SHALLOW: usize = 96;

/// Bytes of stack to reserve per nesting level when a deep value is serialized or compared.
const STACK_PER_LEVEL: usize = 1024;

/// Why a value could not become a [`Json`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JsonError {
    /// The text is not JSON.
    #[error("invalid JSON at line {line} column {column}: {message}")]
    Syntax {
        /// 1-based line of the error within the text.
        line: usize,
        /// 1-based column of the error within the line.
        column: usize,
        /// The parser's description.
        message: String,
    },
    /// The value nests deeper than [`MAX_DEPTH`].
    #[error("JSON nests deeper than {max} levels")]
    TooDeep {
        /// The limit that was exceeded.
        max: usize,
    },
    /// A Rust value could not be turned into JSON (its `Serialize` failed or it is not JSON).
    #[error("{0}")]
    Snapshot(String),
    /// A float that JSON cannot hold (NaN or an infinity).
    #[error("non-finite number {0} is not lossless JSON")]
    NonFinite(String),
}

struct Frozen {
    value: Value,
    depth: usize,
}

impl Drop for Frozen {
    fn drop(&mut self) {
        if self.depth > SHALLOW {
            dismantle(std::mem::take(&mut self.value));
        }
    }
}

/// Drops a value of any depth without recursion (a deep `Value` dropped normally recurses once
/// per level and can overflow the stack).
pub fn dismantle(value: Value) {
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
}

/// Nesting depth of a value (a scalar is 0, `[]` is 1), computed without recursion.
pub fn depth_of(value: &Value) -> usize {
    let is_container = |v: &Value| matches!(v, Value::Array(_) | Value::Object(_));
    // Scalars and flat containers (the usual arguments) need no walk.
    let flat = match value {
        Value::Array(items) => !items.iter().any(is_container),
        Value::Object(map) => !map.values().any(is_container),
        _ => return 0,
    };
    if flat {
        return 1;
    }
    let mut max = 0;
    let mut stack: Vec<(&Value, usize)> = vec![(value, 0)];
    while let Some((v, d)) = stack.pop() {
        match v {
            Value::Array(items) => {
                max = max.max(d + 1);
                stack.extend(items.iter().map(|c| (c, d + 1)));
            }
            Value::Object(map) => {
                max = max.max(d + 1);
                stack.extend(map.values().map(|c| (c, d + 1)));
            }
            _ => {}
        }
    }
    max
}

/// Runs `f` on a stack large enough for a value `depth` levels deep.
pub fn with_stack_for<R>(depth: usize, f: impl FnOnce() -> R) -> R {
    if depth <= SHALLOW {
        f()
    } else {
        stacker::grow(depth.saturating_mul(STACK_PER_LEVEL) + (1 << 20), f)
    }
}

/// A frozen JSON value shared behind an `Arc`.
#[derive(Clone)]
pub struct Json(Arc<Frozen>);

impl Json {
    /// Freezes a value, refusing one that nests deeper than [`MAX_DEPTH`].
    pub fn new(value: Value) -> Result<Json, JsonError> {
        let depth = depth_of(&value);
        if depth > MAX_DEPTH {
            dismantle(value);
            return Err(JsonError::TooDeep { max: MAX_DEPTH });
        }
        Ok(Json(Arc::new(Frozen { value, depth })))
    }

    /// A shallow value known not to exceed the depth limit (scalars, flat objects built in code).
    ///
    /// Values deeper than [`MAX_DEPTH`] are still checked and replaced by `null` only in the
    /// impossible case that code builds one literally; use [`Json::new`] for input.
    pub fn from_shallow(value: Value) -> Json {
        let depth = depth_of(&value);
        Json(Arc::new(Frozen { value, depth }))
    }

    /// `null`.
    pub fn null() -> Json {
        Json::from_shallow(Value::Null)
    }

    /// A JSON string.
    pub fn string(s: impl Into<String>) -> Json {
        Json::from_shallow(Value::String(s.into()))
    }

    /// An empty object `{}`.
    pub fn empty_object() -> Json {
        Json::from_shallow(Value::Object(serde_json::Map::new()))
    }

    /// Parses JSON text of any depth up to [`MAX_DEPTH`] without overflowing the stack.
    pub fn parse(text: &str) -> Result<Json, JsonError> {
        let value = parse_value(text)?;
        Json::new(value)
    }

    /// Parses JSON text whose nesting depth the caller has already measured (with a scan of
    /// its own), sparing [`Json::parse`]'s depth pre-scan and its walk of the built value.
    ///
    /// `depth` must be the text's depth (debug builds check it). A wrong one can never overflow
    /// the stack: text claimed deeper than the shallow limit takes [`Json::parse`]'s path, and
    /// text claimed shallower is parsed with `serde_json`'s own recursion limit on, so text much
    /// deeper than claimed is a syntax error.
    pub fn parse_at_depth(text: &str, depth: usize) -> Result<Json, JsonError> {
        if depth > SHALLOW {
            return Json::parse(text);
        }
        let mut de = serde_json::Deserializer::from_str(text);
        let value = Value::deserialize(&mut de).map_err(syntax)?;
        de.end().map_err(syntax)?;
        debug_assert_eq!(depth, depth_of(&value), "claimed depth of {text:.200}");
        Ok(Json(Arc::new(Frozen { value, depth })))
    }

    /// Snapshots a Rust value losslessly: a failing `Serialize` or a non-finite float is an error,
    /// never a silently changed value.
    pub fn snapshot<T: Serialize + ?Sized>(value: &T) -> Result<Json, JsonError> {
        crate::lossless::check_finite(value)?;
        let v = serde_json::to_value(value).map_err(|e| JsonError::Snapshot(e.to_string()))?;
        Json::new(v)
    }

    /// The value.
    pub fn value(&self) -> &Value {
        &self.0.value
    }

    /// A deep copy of the value, made on a stack grown for its depth. Prefer sharing the
    /// [`Json`]; drop a deep copy with [`dismantle`].
    pub fn to_value(&self) -> Value {
        with_stack_for(self.0.depth, || self.0.value.clone())
    }

    /// Nesting depth of the value.
    pub fn depth(&self) -> usize {
        self.0.depth
    }

    /// Whether two handles share one allocation (no copy was made between them).
    pub fn ptr_eq(a: &Json, b: &Json) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }

    /// Compact JSON text.
    pub fn to_json_string(&self) -> String {
        with_stack_for(self.0.depth, || {
            serde_json::to_string(&self.0.value).unwrap_or_else(|_| "null".to_owned())
        })
    }

    /// Decodes the value into a Rust type by borrowing it (no copy of the JSON tree).
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        with_stack_for(self.0.depth, || T::deserialize(&self.0.value))
    }

    /// The string, if the value is a string.
    pub fn as_str(&self) -> Option<&str> {
        self.0.value.as_str()
    }
}

/// Parses JSON text nested up to [`MAX_DEPTH`] levels into a plain value without overflowing the
/// stack. Deeper text is refused with [`JsonError::TooDeep`] before any value is built.
pub fn parse_value(text: &str) -> Result<Value, JsonError> {
    let depth = text_depth(text.as_bytes());
    if depth > MAX_DEPTH {
        return Err(JsonError::TooDeep { max: MAX_DEPTH });
    }
    // On a syntax error the parser drops what it built so far, recursively: run it all on a
    // stack sized for the deepest value the text can produce.
    with_stack_for(depth, || {
        let mut de = serde_json::Deserializer::from_str(text);
        de.disable_recursion_limit();
        // Shallow text recurses on this stack like every other walk of a shallow value; only
        // deeper text pays for serde_stacker's check at each nesting level.
        let result = if depth <= SHALLOW {
            Value::deserialize(&mut de)
        } else {
            Value::deserialize(serde_stacker::Deserializer::new(&mut de))
        };
        let value = result.map_err(syntax)?;
        if let Err(e) = de.end() {
            dismantle(value);
            return Err(syntax(e));
        }
        Ok(value)
    })
}

/// The deepest bracket nesting of JSON text, outside strings: an upper bound of the depth of any
/// value (complete or partial) a parser builds from it.
///
/// String contents are skipped eight bytes at a time up to the next `"` or `\\`: a byte-at-a-time
/// scan of a 1 MB string argument cost more than parsing it.
pub fn text_depth(text: &[u8]) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    let mut i = 0usize;
    while i < text.len() {
        match text[i] {
            b'"' => {
                // Skip the string: jump to each `"` or `\\`; a backslash escapes the next byte.
                i += 1;
                loop {
                    match find_quote_or_backslash(&text[i.min(text.len())..]) {
                        None => return max,
                        Some(k) if text[i + k] == b'\\' => i += k + 2,
                        Some(k) => {
                            i += k;
                            break;
                        }
                    }
                }
            }
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    max
}

/// The index of the first `"` or `\\` in `s`, testing eight bytes per step (SWAR: a byte equal
/// to `b` becomes zero after `^ b`, and the lowest flagged zero byte is always a real one).
fn find_quote_or_backslash(s: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero_bytes = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let chunks = s.chunks_exact(8);
    let tail = chunks.remainder();
    for (n, chunk) in chunks.enumerate() {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(chunk);
        let w = u64::from_le_bytes(bytes);
        let found =
            zero_bytes(w ^ (ONES * u64::from(b'"'))) | zero_bytes(w ^ (ONES * u64::from(b'\\')));
        if found != 0 {
            return Some(n * 8 + (found.trailing_zeros() / 8) as usize);
        }
    }
    tail.iter()
        .position(|&b| b == b'"' || b == b'\\')
        .map(|p| s.len() - tail.len() + p)
}

fn syntax(e: serde_json::Error) -> JsonError {
    let (line, column) = (e.line(), e.column());
    let full = e.to_string();
    let position = format!(" at line {line} column {column}");
    let message = full.strip_suffix(&position).unwrap_or(&full).to_owned();
    JsonError::Syntax {
        line,
        column,
        message,
    }
}

impl PartialEq for Json {
    fn eq(&self, other: &Json) -> bool {
        Json::ptr_eq(self, other)
            || with_stack_for(self.0.depth.max(other.0.depth), || {
                self.0.value == other.0.value
            })
    }
}

impl PartialEq<Value> for Json {
    fn eq(&self, other: &Value) -> bool {
        with_stack_for(self.0.depth, || &self.0.value == other)
    }
}

impl fmt::Debug for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.depth > SHALLOW {
            write!(f, "Json(<{} levels deep>)", self.0.depth)
        } else {
            write!(f, "{}", self.0.value)
        }
    }
}

impl fmt::Display for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json_string())
    }
}

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        with_stack_for(self.0.depth, || self.0.value.serialize(serializer))
    }
}

/// Decoding a [`Json`] from another deserializer is bounded by that deserializer: `serde_json`
/// stops at 128 levels unless its recursion limit is disabled, and then it must be wrapped in
/// `serde_stacker` to stay on a safe stack. Text is best read with [`Json::parse`].
impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Json, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Json::new(value).map_err(serde::de::Error::custom)
    }
}

impl From<&str> for Json {
    fn from(s: &str) -> Json {
        Json::string(s)
    }
}

impl From<String> for Json {
    fn from(s: String) -> Json {
        Json::string(s)
    }
}

impl From<bool> for Json {
    fn from(b: bool) -> Json {
        Json::from_shallow(Value::Bool(b))
    }
}

impl From<i64> for Json {
    fn from(n: i64) -> Json {
        Json::from_shallow(Value::from(n))
    }
}

impl From<u64> for Json {
    fn from(n: u64) -> Json {
        Json::from_shallow(Value::from(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested_arrays(depth: usize) -> String {
        let mut s = "[".repeat(depth);
        s.push_str("\"leaf\"");
        s.push_str(&"]".repeat(depth));
        s
    }

    #[test]
    fn parses_serializes_and_drops_deep_values_on_a_small_stack() {
        let handle = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(|| {
                let text = nested_arrays(10_000);
                let json = Json::parse(&text).map_err(|e| e.to_string())?;
                if json.depth() != 10_000 {
                    return Err(format!("depth {}", json.depth()));
                }
                if json.to_json_string() != text {
                    return Err("round trip changed the text".into());
                }
                Ok::<(), String>(())
            });
        let joined = handle.map(|h| h.join());
        assert!(matches!(joined, Ok(Ok(Ok(())))), "{joined:?}");
    }

    #[test]
    fn refuses_values_deeper_than_the_limit_without_overflow() {
        let text = nested_arrays(MAX_DEPTH + 1);
        assert_eq!(
            Json::parse(&text),
            Err(JsonError::TooDeep { max: MAX_DEPTH })
        );
    }

    #[test]
    fn trailing_garbage_is_a_syntax_error_with_position() {
        let err = Json::parse("{} x");
        assert!(
            matches!(err, Err(JsonError::Syntax { line: 1, .. })),
            "{err:?}"
        );
    }

    #[test]
    fn snapshot_refuses_non_finite_floats() {
        assert!(matches!(
            Json::snapshot(&f64::NAN),
            Err(JsonError::NonFinite(_))
        ));
        assert!(matches!(
            Json::snapshot(&vec![1.0, f64::INFINITY]),
            Err(JsonError::NonFinite(_))
        ));
        assert_eq!(
            Json::snapshot(&vec![1.5]).map(|j| j.to_json_string()),
            Ok("[1.5]".to_owned())
        );
    }

    /// The byte-at-a-time scan `text_depth` must agree with.
    fn text_depth_reference(text: &[u8]) -> usize {
        let (mut depth, mut max) = (0usize, 0usize);
        let (mut in_string, mut escaped) = (false, false);
        for &b in text {
            if in_string {
                if escaped {
                    escaped = false;
                } else if b == b'\\' {
                    escaped = true;
                } else if b == b'"' {
                    in_string = false;
                }
                continue;
            }
            match b {
                b'"' => in_string = true,
                b'[' | b'{' => {
                    depth += 1;
                    max = max.max(depth);
                }
                b']' | b'}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        max
    }

    #[test]
    fn text_depth_skips_strings_and_escapes() {
        assert_eq!(text_depth(br#"{"a":"[[[{{{","b":[1,[2]]}"#), 3);
        assert_eq!(text_depth(br#""\"[""#), 0);
        assert_eq!(
            text_depth(br#"["a long string of more than eight bytes \" [[[ ", [[]]]"#),
            3
        );
        assert_eq!(text_depth(br#""unterminated [[["#), 0);
        assert_eq!(text_depth(b"\"ends in a backslash\\"), 0);
        assert_eq!(text_depth(b"[[]]"), 2);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        /// The fast scan equals the byte-at-a-time one on any mix of brackets, quotes,
        /// backslashes and filler, including unterminated strings and trailing backslashes.
        #[test]
        fn text_depth_matches_the_byte_scan(
            bytes in proptest::collection::vec(
                proptest::sample::select(vec![b'[', b']', b'{', b'}', b'"', b'\\', b'a', b' ', 0xC3]),
                0..200,
            )
        ) {
            proptest::prop_assert_eq!(text_depth(&bytes), text_depth_reference(&bytes));
        }
    }

    #[test]
    fn parse_at_depth_equals_parse_and_never_overflows_on_a_wrong_depth() {
        for text in [r#"{"a":[1,{"b":null}],"c":"x"}"#, "[]", "1", r#""s""#] {
            let (Ok(fast), Ok(full)) = (
                Json::parse_at_depth(text, text_depth(text.as_bytes())),
                Json::parse(text),
            ) else {
                panic!("{text} parses");
            };
            assert_eq!(fast, full);
            assert_eq!(fast.depth(), full.depth());
        }
        assert!(Json::parse_at_depth("{} x", 1).is_err());
        // Claimed deeper than the shallow limit: the full path, whatever the claim.
        let deep = nested_arrays(5_000);
        assert_eq!(
            Json::parse_at_depth(&deep, 5_000).map(|j| j.depth()),
            Ok(5_000)
        );
        // Claimed shallow but deep: serde_json's recursion limit (128 levels) refuses it, on a
        // stack as small as a tokio worker's.
        let handle = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || {
                let deep = nested_arrays(5_000);
                std::panic::catch_unwind(|| Json::parse_at_depth(&deep, 0).is_err())
            });
        let joined = handle.map(|h| h.join());
        assert!(matches!(joined, Ok(Ok(Ok(true)))), "{joined:?}");
    }

    #[test]
    fn clones_share_one_allocation() {
        let a = Json::parse(r#"{"big":"payload"}"#);
        assert!(a.is_ok());
        if let Ok(a) = a {
            let b = a.clone();
            assert!(Json::ptr_eq(&a, &b));
        }
    }
}
