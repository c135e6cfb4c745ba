//! A tool call's arguments read straight from the program's values, when nothing in them could
//! run the program's code or come out other than `JSON.stringify` with the lossless check
//! (engine/lossless.rs) would write them: then the call skips the text, its parse and the
//! replacer's calls. Anything else takes that path as before, with the same result and the
//! same errors.
//!
//! Plain data is:
//! - `null`, booleans, strings of well-formed UTF-16 (no lone surrogate);
//! - finite numbers that JSON text would give back unchanged: integers below 2^53 in size,
//!   numbers with a fraction, and integers of 1e21 or more (written with an exponent);
//! - ordinary objects (not a proxy, not an instance of any class) whose prototype is the
//!   run's own `Object.prototype` or `null`, and arrays whose prototype is the run's own
//!   `Array.prototype`, without holes, with only data properties (no getter to run), with no
//!   own `toJSON`, and no `toJSON` on the prototypes `JSON.stringify` would meet (an object's
//!   `Object.prototype`; an array's `Array.prototype` and the chain above it), checked at each
//!   call: a program may add one at any time; nested at most [`MAX_DEPTH`] deep, so a cycle is
//!   not plain.
//!
//! Guarantees: no JavaScript runs while a value is read (an ordinary object's properties and
//! prototype are read from its shape; a proxy or any other exotic object is not plain); the
//! keys keep the order `JSON.stringify` writes them in (`JS_GetOwnPropertyNames`'s, which it
//! uses too); a number is the one the text would parse to (`float_roundtrip`).

use std::ffi::c_char;

use dsh_core::Json;
use rquickjs::atom::PredefinedAtom;
use rquickjs::{Ctx, Object, Value, qjs};
use serde_json::{Map, Number, Value as JsonValue};

/// How deep plain data may nest; deeper (or cyclic) values take the `JSON.stringify` path.
pub(crate) const MAX_DEPTH: usize = 32;

/// 2^53: integers below it in size are written and read back exactly.
const EXACT_INTEGERS: f64 = 9_007_199_254_740_992.0;

/// From here on, `JSON.stringify` writes an integer with an exponent (`1e+21`), which reads
/// back as the same double; below it (and from 2^53) it pads the shortest digits with zeros,
/// which may read back as another integer.
const EXPONENT_FORM: f64 = 1e21;

/// The run's own prototypes and classes, captured before the program ran.
pub(crate) struct Plain<'js> {
    object_proto: Object<'js>,
    array_proto: Object<'js>,
    object_class: qjs::JSClassID,
    array_class: qjs::JSClassID,
}

/// An own property, read without running code.
enum Own<'js> {
    Absent,
    Data(Value<'js>),
    Accessor,
}

impl<'js> Plain<'js> {
    /// Captures the prototypes and the classes of a fresh object and array.
    pub(crate) fn capture(ctx: &Ctx<'js>, object_proto: Object<'js>) -> rquickjs::Result<Self> {
        let object = Object::new(ctx.clone())?;
        let array = rquickjs::Array::new(ctx.clone())?;
        let array_proto = array
            .as_object()
            .get_prototype()
            .ok_or(rquickjs::Error::Unknown)?;
        Ok(Plain {
            object_class: class_id(object.as_value()),
            array_class: class_id(array.as_value()),
            object_proto,
            array_proto,
        })
    }

    /// `value` as JSON, if it is plain data; `None` otherwise (nothing of the program ran).
    pub(crate) fn json(&self, ctx: &Ctx<'js>, value: &Value<'js>) -> Option<Json> {
        let mut read = Read {
            plain: self,
            ctx,
            protos: Protos::default(),
        };
        let walked = read.walk(value, 0)?;
        Json::new(walked).ok()
    }
}

/// One read of a value: the run's prototypes, the context, and what this read found of the
/// prototypes so far.
struct Read<'a, 'js> {
    plain: &'a Plain<'js>,
    ctx: &'a Ctx<'js>,
    protos: Protos,
}

impl<'js> Read<'_, 'js> {
    fn walk(&mut self, value: &Value<'js>, depth: usize) -> Option<JsonValue> {
        if value.is_null() {
            return Some(JsonValue::Null);
        }
        if let Some(b) = value.as_bool() {
            return Some(JsonValue::Bool(b));
        }
        if let Some(i) = value.as_int() {
            return Some(JsonValue::Number(i.into()));
        }
        if let Some(f) = value.as_float() {
            return number(f).map(JsonValue::Number);
        }
        if value.is_string() {
            // A lone surrogate comes out of QuickJS as WTF-8, which is not UTF-8.
            return value.as_string()?.to_string().ok().map(JsonValue::String);
        }
        // Tags are tested, not `type_of` (`as_object`), which asks an object six more questions.
        if !value.is_object() || depth >= MAX_DEPTH {
            return None;
        }
        let class = class_id(value);
        let array = class == self.plain.array_class;
        if !array && class != self.plain.object_class {
            return None;
        }
        if !self.shell_is_plain(value, array) {
            return None;
        }
        if array {
            self.items(value, depth)
        } else {
            self.entries(value, depth)
        }
    }

    /// Whether `JSON.stringify` would find no `toJSON` for `value`, an ordinary object or
    /// array: its prototype is the run's own (or `null`, for an object) and clean, and it has
    /// no own `toJSON`.
    fn shell_is_plain(&mut self, value: &Value<'js>, array: bool) -> bool {
        // SAFETY: `walk` found the value's tag to be an object, all `ref_object` asks.
        #[allow(unsafe_code)]
        let object = unsafe { value.ref_object() };
        let proto_ok = match (object.get_prototype(), array) {
            (None, false) => true,
            (Some(proto), false) => proto == self.plain.object_proto && self.object_proto_clean(),
            (Some(proto), true) => proto == self.plain.array_proto && self.array_proto_clean(),
            (None, true) => false,
        };
        proto_ok && matches!(own(self.ctx, value, to_json()), Some(Own::Absent))
    }

    /// An object's enumerable own properties, each plain.
    fn entries(&mut self, value: &Value<'js>, depth: usize) -> Option<JsonValue> {
        let ctx = self.ctx;
        let keys = Keys::of(ctx, value)?;
        let mut map = Map::with_capacity(keys.len());
        for atom in keys.atoms() {
            let Own::Data(v) = own(ctx, value, atom)? else {
                return None;
            };
            let key = atom_string(ctx, atom)?;
            let v = self.walk(&v, depth + 1)?;
            map.insert(key, v);
        }
        Some(JsonValue::Object(map))
    }

    /// An array's elements, each present and plain.
    fn items(&mut self, value: &Value<'js>, depth: usize) -> Option<JsonValue> {
        let ctx = self.ctx;
        let Own::Data(length) = own(ctx, value, PredefinedAtom::Length as qjs::JSAtom)? else {
            return None;
        };
        let length = u32::try_from(length.as_int()?).ok()?;
        let mut items = Vec::with_capacity(length as usize);
        for index in 0..length {
            let atom = IndexAtom::new(ctx, index)?;
            // A hole reads through the prototypes: not plain.
            let Own::Data(v) = own(ctx, value, atom.0)? else {
                return None;
            };
            drop(atom);
            items.push(self.walk(&v, depth + 1)?);
        }
        Some(JsonValue::Array(items))
    }

    /// Whether `JSON.stringify` would find no `toJSON` on the run's `Object.prototype` (asked
    /// once a read). Its own prototype is always `null`: `Object.prototype`'s cannot be set.
    fn object_proto_clean(&mut self) -> bool {
        if let Some(clean) = self.protos.object {
            return clean;
        }
        let clean = matches!(
            own(self.ctx, self.plain.object_proto.as_value(), to_json()),
            Some(Own::Absent)
        );
        self.protos.object = Some(clean);
        clean
    }

    /// Whether `JSON.stringify` would find no `toJSON` on the run's `Array.prototype`, nor a
    /// prototype between it and a clean `Object.prototype` (asked once a read).
    fn array_proto_clean(&mut self) -> bool {
        if let Some(clean) = self.protos.array {
            return clean;
        }
        let plain = self.plain;
        let clean = plain.array_proto.get_prototype().as_ref() == Some(&plain.object_proto)
            && self.object_proto_clean()
            && matches!(
                own(self.ctx, plain.array_proto.as_value(), to_json()),
                Some(Own::Absent)
            );
        self.protos.array = Some(clean);
        clean
    }
}

/// What one read found of the run's prototypes (`None`: not asked yet).
#[derive(Clone, Copy, Default)]
struct Protos {
    object: Option<bool>,
    array: Option<bool>,
}

/// The number JSON text of `f` would read back as, if it is that same number.
fn number(f: f64) -> Option<Number> {
    if !f.is_finite() {
        return None;
    }
    if f.fract() != 0.0 || f.abs() >= EXPONENT_FORM {
        return Number::from_f64(f);
    }
    if f.abs() < EXACT_INTEGERS {
        // Exact: |f| < 2^53 is an integer. -0 is written `0`.
        #[allow(clippy::cast_possible_truncation)]
        return Some(Number::from(f as i64));
    }
    None
}

fn to_json() -> qjs::JSAtom {
    PredefinedAtom::ToJSON as qjs::JSAtom
}

/// The class of an object (0 for anything else).
fn class_id(value: &Value<'_>) -> qjs::JSClassID {
    // SAFETY: `JS_GetClassID` reads the value's tag and, for an object, its class field; the
    // value is alive (borrowed for the call) and nothing is allocated or run.
    #[allow(unsafe_code)]
    unsafe {
        qjs::JS_GetClassID(value.as_raw())
    }
}

/// An own property of `object` (an ordinary object or array of this context, or one of the
/// captured prototypes), read without running code: they have no exotic behaviour, so
/// `JS_GetOwnProperty` reads the shape (or a fast array's slots). `None` if it threw (out of
/// memory), with the exception cleared: the `JSON.stringify` path then meets it itself.
fn own<'js>(ctx: &Ctx<'js>, object: &Value<'js>, atom: qjs::JSAtom) -> Option<Own<'js>> {
    let mut desc = qjs::JSPropertyDescriptor {
        flags: 0,
        value: qjs::JS_UNDEFINED,
        getter: qjs::JS_UNDEFINED,
        setter: qjs::JS_UNDEFINED,
    };
    // SAFETY: the context pointer is this live context's; `object` is alive for the call;
    // `desc` is a valid, initialised descriptor. On 1, QuickJS stored owned references in
    // `value`, `getter` and `setter` (`undefined` when unused); each is taken into a `Value`
    // below exactly once, whose drop releases it. On 0 or -1 they are left `undefined`.
    #[allow(unsafe_code)]
    let found =
        unsafe { qjs::JS_GetOwnProperty(ctx.as_raw().as_ptr(), &mut desc, object.as_raw(), atom) };
    if found < 0 {
        let _ = ctx.catch();
        return None;
    }
    if found == 0 {
        return Some(Own::Absent);
    }
    // An accessor holds its getter and setter (`value` is `undefined`), a data property its
    // value (`getter` and `setter` are `undefined`): only what is held is wrapped.
    if desc.flags & qjs::JS_PROP_GETSET as i32 != 0 {
        // SAFETY: see above: the two owned references of an accessor, each wrapped once.
        #[allow(unsafe_code)]
        drop(unsafe {
            (
                Value::from_raw(ctx.clone(), desc.getter),
                Value::from_raw(ctx.clone(), desc.setter),
            )
        });
        return Some(Own::Accessor);
    }
    // SAFETY: see above: the owned reference of a data property's value, wrapped once.
    #[allow(unsafe_code)]
    let value = unsafe { Value::from_raw(ctx.clone(), desc.value) };
    Some(Own::Data(value))
}

/// The enumerable own string keys of an ordinary object, in property order.
struct Keys<'a, 'js> {
    ctx: &'a Ctx<'js>,
    tab: *mut qjs::JSPropertyEnum,
    len: u32,
}

impl<'a, 'js> Keys<'a, 'js> {
    fn of(ctx: &'a Ctx<'js>, object: &Value<'js>) -> Option<Keys<'a, 'js>> {
        let mut tab: *mut qjs::JSPropertyEnum = std::ptr::null_mut();
        let mut len: u32 = 0;
        let flags = (qjs::JS_GPN_STRING_MASK | qjs::JS_GPN_ENUM_ONLY) as i32;
        // SAFETY: valid out-pointers and a live object of this context, which is ordinary
        // (its class was checked), so no code runs. On success QuickJS hands over `tab` (with
        // `len` entries, each holding an atom reference), released by `Drop` below.
        #[allow(unsafe_code)]
        let r = unsafe {
            qjs::JS_GetOwnPropertyNames(
                ctx.as_raw().as_ptr(),
                &mut tab,
                &mut len,
                object.as_raw(),
                flags,
            )
        };
        if r < 0 {
            let _ = ctx.catch();
            return None;
        }
        Some(Keys { ctx, tab, len })
    }

    fn len(&self) -> usize {
        self.len as usize
    }

    fn atoms(&self) -> impl Iterator<Item = qjs::JSAtom> + '_ {
        (0..self.len as usize).map(|i| {
            // SAFETY: `tab` holds `len` initialised entries until `Drop`, and `i < len`.
            #[allow(unsafe_code)]
            unsafe {
                (*self.tab.add(i)).atom
            }
        })
    }
}

impl Drop for Keys<'_, '_> {
    fn drop(&mut self) {
        if self.tab.is_null() {
            return;
        }
        // SAFETY: `tab` and `len` are what `JS_GetOwnPropertyNames` returned, released once.
        #[allow(unsafe_code)]
        unsafe {
            qjs::JS_FreePropertyEnum(self.ctx.as_raw().as_ptr(), self.tab, self.len);
        }
    }
}

/// The atom of an array index, released on drop.
struct IndexAtom<'a, 'js>(qjs::JSAtom, &'a Ctx<'js>);

impl<'a, 'js> IndexAtom<'a, 'js> {
    fn new(ctx: &'a Ctx<'js>, index: u32) -> Option<IndexAtom<'a, 'js>> {
        // SAFETY: a live context; the returned atom reference is released once, on drop.
        #[allow(unsafe_code)]
        let atom = unsafe { qjs::JS_NewAtomUInt32(ctx.as_raw().as_ptr(), index) };
        if atom == qjs::JS_ATOM_NULL {
            let _ = ctx.catch();
            return None;
        }
        Some(IndexAtom(atom, ctx))
    }
}

impl Drop for IndexAtom<'_, '_> {
    fn drop(&mut self) {
        // SAFETY: the atom reference `new` got, released once.
        #[allow(unsafe_code)]
        unsafe {
            qjs::JS_FreeAtom(self.1.as_raw().as_ptr(), self.0);
        }
    }
}

/// A key's text, if it is well-formed UTF-16 (a lone surrogate comes out as WTF-8).
fn atom_string(ctx: &Ctx<'_>, atom: qjs::JSAtom) -> Option<String> {
    let mut len: qjs::size_t = 0;
    // SAFETY: a live context and an atom held by the property table for the call; the
    // returned buffer (`len` bytes) is read once and released once with `JS_FreeCString`.
    #[allow(unsafe_code)]
    let ptr: *const c_char =
        unsafe { qjs::JS_AtomToCStringLen(ctx.as_raw().as_ptr(), &mut len, atom) };
    if ptr.is_null() {
        let _ = ctx.catch();
        return None;
    }
    // SAFETY: `ptr` points at `len` initialised bytes until it is freed below.
    #[allow(unsafe_code)]
    let bytes = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len as usize) };
    let text = std::str::from_utf8(bytes).ok().map(str::to_owned);
    // SAFETY: released once, after its last use above.
    #[allow(unsafe_code)]
    unsafe {
        qjs::JS_FreeCString(ctx.as_raw().as_ptr(), ptr);
    }
    text
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)]

    use dsh_core::Json;
    use proptest::prelude::*;
    use rquickjs::{Context, Ctx, Object, Runtime, Value};

    use super::Plain;

    /// Evaluates `expr` in a fresh context and hands `f` the plain reader and the value.
    fn with_value<R>(
        expr: &str,
        f: impl for<'js> FnOnce(&Ctx<'js>, &Plain<'js>, Value<'js>) -> R,
    ) -> R {
        let runtime = Runtime::new().expect("runtime");
        let context = Context::full(&runtime).expect("context");
        context.with(|ctx| {
            let object: Object = ctx.globals().get("Object").expect("Object");
            let proto: Object = object.get("prototype").expect("prototype");
            let plain = Plain::capture(&ctx, proto).expect("capture");
            let value: Value = ctx
                .eval(format!("globalThis.counted = 0; ({expr})"))
                .expect("expr");
            f(&ctx, &plain, value)
        })
    }

    /// What the plain reader gives, and what `JSON.stringify` writes (parsed), for `expr`.
    fn both(expr: &str) -> (Option<Json>, Option<Json>) {
        with_value(expr, |ctx, plain, value| {
            let read = plain.json(ctx, &value);
            // A cycle or a BigInt throws: no JSON to compare with.
            let text: Option<String> = match ctx.json_stringify(value) {
                Ok(s) => s.map(|s| s.to_string().expect("text")),
                Err(_) => {
                    let _ = ctx.catch();
                    None
                }
            };
            (read, text.and_then(|t| Json::parse(&t).ok()))
        })
    }

    /// JavaScript source of values, and whether each is plain data.
    fn js_value() -> impl Strategy<Value = (String, bool)> {
        let numbers = prop_oneof![
            any::<i32>().prop_map(|n| (n.to_string(), true)),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| {
                    let exact =
                        f.fract() != 0.0 || f.abs() < 9_007_199_254_740_992.0 || f.abs() >= 1e21;
                    (format!("{f:e}"), exact)
                }),
            prop::sample::select(vec![
                ("2**53 - 1", true),
                ("-(2**53 - 1)", true),
                ("2**53", false),
                ("2**60", false),
                ("123456789012345680000", false),
                ("1e21", true),
                ("-3e300", true),
                ("-0", true),
                ("0.1", true),
                ("1/3", true),
                ("5e-324", true),
                ("2**31", true),
                ("-(2**31)", true),
                ("NaN", false),
                ("-Infinity", false),
            ])
            .prop_map(|(s, p)| (s.to_owned(), p)),
        ];
        let strings = prop_oneof![
            "\\PC{0,8}".prop_map(|s| (serde_json::to_string(&s).expect("literal"), true)),
            prop::sample::select(vec![
                ("'\\ud800'", false),
                ("'a\\udc00b'", false),
                ("'\\ud83d\\ude00'", true),
                ("'\\u2028\\n\\t\"\\\\'", true),
            ])
            .prop_map(|(s, p)| (s.to_owned(), p)),
        ];
        let others = prop::sample::select(vec![
            ("null", true),
            ("true", true),
            ("false", true),
            ("undefined", false),
            ("({get a() { counted++; return 1 }})", false),
            ("new Proxy({a: 1}, {get() { counted++; return 2 }})", false),
            ("new Proxy([1], {})", false),
            ("[1, , 2]", false),
            ("({toJSON: 1})", false),
            ("new Date(0)", false),
            ("Object.create({})", false),
            ("Object.create(null)", true),
            ("(() => { const o = {}; o.self = o; return o })()", false),
            ("(() => { const a = []; a.push(a); return a })()", false),
            ("Object.defineProperty({}, 'hidden', {value: 1})", true),
            ("({[Symbol('s')]: 1, k: 2})", true),
            ("Object.setPrototypeOf([1], null)", false),
            ("(() => { const a = [1]; a.extra = 2; return a })()", true),
            ("10n", false),
            ("(function f() {})", false),
        ])
        .prop_map(|(s, p)| (s.to_owned(), p));
        let leaf = prop_oneof![numbers, strings, others];
        let keys = prop::sample::select(vec![
            "a",
            "b",
            "10",
            "2",
            "0",
            "__proto__",
            "toString",
            "k k",
            "é",
        ]);
        leaf.prop_recursive(5, 40, 5, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(|items| {
                    let plain = items.iter().all(|(_, p)| *p);
                    let body: Vec<String> = items.into_iter().map(|(s, _)| s).collect();
                    (format!("[{}]", body.join(", ")), plain)
                }),
                prop::collection::vec((keys.clone(), inner), 0..5).prop_map(|entries| {
                    // A key given twice holds its last value.
                    let last: std::collections::HashMap<&str, bool> =
                        entries.iter().map(|(k, (_, p))| (*k, *p)).collect();
                    let plain = last.values().all(|p| *p);
                    let body: Vec<String> = entries
                        .into_iter()
                        .map(|(k, (v, _))| {
                            format!("[{}]: {v}", serde_json::to_string(k).expect("key"))
                        })
                        .collect();
                    (format!("({{{}}})", body.join(", ")), plain)
                }),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Plain data is read, and read as `JSON.stringify` writes it; anything else is left to
        /// it, and no code of the value ran.
        #[test]
        fn plain_values_read_as_json_stringify_writes_them((expr, plain) in js_value()) {
            let (read, written) = both(&expr);
            if plain {
                prop_assert!(read.is_some(), "not read: {expr}");
            }
            if let Some(read) = &read {
                prop_assert!(plain, "read, but not plain: {expr}");
                let written = written.expect("plain data is JSON");
                prop_assert_eq!(read.value(), written.value(), "{}", expr);
            }
        }
    }

    #[test]
    fn no_code_runs_while_a_value_is_read() {
        for expr in [
            "({get a() { counted++; return 1 }})",
            "[{b: new Proxy({}, {ownKeys() { counted++; return [] }, get() { counted++ }})}]",
            "({a: 1, get z() { counted++; return 2 }})",
        ] {
            let counted = with_value(expr, |ctx, plain, value| {
                assert!(plain.json(ctx, &value).is_none(), "{expr}");
                ctx.globals().get::<_, i32>("counted").expect("counted")
            });
            assert_eq!(counted, 0, "{expr}");
        }
    }

    #[test]
    fn a_to_json_the_program_added_to_a_prototype_is_not_skipped() {
        for (setup, expr) in [
            ("Object.prototype.toJSON = () => 'x';", "({a: 1})"),
            ("Array.prototype.toJSON = () => 'x';", "[1]"),
            (
                "Object.setPrototypeOf(Array.prototype, {toJSON: () => 'x'});",
                "[1]",
            ),
            ("Array.prototype.toJSON = () => 'x';", "({a: [1]})"),
        ] {
            let read = with_value(
                &format!("(() => {{ {setup} return {expr} }})()"),
                |ctx, plain, value| plain.json(ctx, &value).is_some(),
            );
            assert!(!read, "{setup} {expr}");
        }
        // An object holding no array meets no `Array.prototype`: it is read as it is. Nor can
        // a program put a prototype above `Object.prototype` (it is immutable), which the read
        // relies on when it asks `Object.prototype` alone.
        for setup in [
            "Array.prototype.toJSON = () => 'x';",
            "try { Object.setPrototypeOf(Object.prototype, {toJSON: () => 'x'}) } catch (_) {}",
        ] {
            let (read, text) = both(&format!("(() => {{ {setup} return {{a: 1}} }})()"));
            assert!(read.is_some(), "{setup}");
            assert_eq!(read, text, "{setup}");
        }
    }

    #[test]
    fn nesting_past_the_limit_is_left_to_json_stringify() {
        let at = |depth: usize| {
            let expr = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
            with_value(&expr, |ctx, plain, value| plain.json(ctx, &value).is_some())
        };
        assert!(at(super::MAX_DEPTH));
        assert!(!at(super::MAX_DEPTH + 1));
    }
}
