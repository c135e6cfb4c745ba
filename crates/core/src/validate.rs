//! Argument and output validation against a JSON Schema subset, with the reference's messages:
//! `missing required property "a.b"`, `"tags[1]" must be a string`, `"c" must be one of [..]`.
//!
//! Supported: `type` (one or a list), `properties`, `required`, `items` (one schema, or a tuple
//! list), `prefixItems`, `additionalItems`, `enum`, `const`, `additionalProperties` (`false` or a
//! schema), `oneOf`/`anyOf` (both: at least one branch), `allOf`, local `$ref`. Other keywords
//! (`minimum`, `format`, `pattern`, `not`, ...) are ignored, so validation is never stricter than
//! the schema says. Extra properties are allowed unless closed; defaults are never injected.
//! Validation never panics on any input; a malformed schema is a [`SchemaError`], not a
//! violation ([`check_schema`] finds them all up front). Depth is bounded only by the input, and
//! the stack grows as needed; paths are built only for the violations reported.

use serde_json::{Map, Value};

/// A schema that cannot be used for validation (a schema-authoring error, `JsonSchemaError`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("JsonSchemaError: {0}")]
pub struct SchemaError(pub String);

const TYPES: [&str; 7] = [
    "string", "number", "integer", "boolean", "object", "array", "null",
];

/// How many `$ref` hops may follow one another without the value descending: more is a cycle.
const MAX_REF_HOPS: usize = 256;

/// Validates `value` against `schema`; returns the violations in document order.
/// `root` names the top-level value in messages (`""` for arguments, `"value"` for outputs).
pub fn validate(schema: &Value, value: &Value, root: &str) -> Result<Vec<String>, SchemaError> {
    let mut out = Vec::new();
    let mut cx = Cx {
        root_schema: schema,
        out: &mut out,
        probing: false,
    };
    cx.check(schema, value, &Path::Root(root), 0)?;
    Ok(out)
}

/// Checks a whole schema for authoring errors (unknown type names, an `enum` that contradicts its
/// `type`, malformed keywords, `$ref`s that are not local or point nowhere), whatever input it
/// would later see.
pub fn check_schema(schema: &Value) -> Result<(), SchemaError> {
    SchemaWalk {
        root: schema,
        followed: std::cell::RefCell::new(std::collections::HashSet::new()),
    }
    .walk(schema)
}

/// Where a value sits, as a chain of segments on the stack; rendered only for a violation, so
/// deep values cost no path text unless something is reported about them.
#[derive(Clone, Copy)]
enum Path<'p> {
    Root(&'p str),
    Key(&'p Path<'p>, &'p str),
    Index(&'p Path<'p>, usize),
}

impl Path<'_> {
    /// `a.b[1].c` (`""` at the argument root).
    fn render(&self) -> String {
        let mut segments = Vec::new();
        let mut cur = self;
        let root = loop {
            match cur {
                Path::Root(r) => break *r,
                Path::Key(parent, _) | Path::Index(parent, _) => {
                    segments.push(cur);
                    cur = parent;
                }
            }
        };
        let mut out = root.to_owned();
        for seg in segments.iter().rev() {
            match seg {
                Path::Key(_, k) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(k);
                }
                Path::Index(_, i) => {
                    out.push('[');
                    out.push_str(&i.to_string());
                    out.push(']');
                }
                Path::Root(_) => {}
            }
        }
        out
    }

    /// The path quoted for a message; the argument root is called `arguments`.
    fn quoted(&self) -> String {
        let p = self.render();
        if p.is_empty() {
            "arguments".to_owned()
        } else {
            format!("\"{p}\"")
        }
    }
}

fn type_matches(ty: &str, v: &Value) -> bool {
    match ty {
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
        "boolean" => v.is_boolean(),
        "object" => v.is_object(),
        "array" => v.is_array(),
        "null" => v.is_null(),
        _ => false,
    }
}

fn article(ty: &str) -> &'static str {
    match ty {
        "array" | "integer" | "object" => "an",
        _ => "a",
    }
}

/// Every keyword the validator reads. [`Precheck`] trusts a schema holding none of them but
/// `type` to constrain nothing else; [`kw`] asserts (in debug builds) that it reads no other.
const KEYWORDS: [&str; 13] = [
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "prefixItems",
    "additionalItems",
    "oneOf",
    "anyOf",
    "allOf",
    "$ref",
];

/// What a schema asks of a value, decided once (when a tool is built) for the schemas whose only
/// constraint is their `type` (`{"type": "string"}`, `{}`, `true`): a value of such a type is
/// valid without walking the schema. [`Precheck::passes`] never says yes where [`validate`]
/// would report a violation; when it says no, [`validate`] decides (and words the message).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Precheck {
    /// One bit per name of [`TYPES`] the value may have (all of them when the schema names
    /// none); `None`: the schema constrains more than the type, so every value is walked.
    types: Option<u8>,
}

impl Precheck {
    /// The precheck of `schema`.
    pub fn of(schema: &Value) -> Precheck {
        const ANY: u8 = (1 << TYPES.len()) - 1;
        let types = match schema {
            Value::Bool(true) => Some(ANY),
            Value::Object(obj)
                if !obj
                    .keys()
                    .any(|k| k != "type" && KEYWORDS.contains(&k.as_str())) =>
            {
                match types_of(obj) {
                    Ok(types) if types.is_empty() => Some(ANY),
                    Ok(types) => Some(types.iter().fold(0, |mask, t| {
                        mask | TYPES
                            .iter()
                            .position(|known| known == t)
                            .map_or(0, |i| 1 << i)
                    })),
                    Err(_) => None,
                }
            }
            _ => None,
        };
        Precheck { types }
    }

    /// Whether `value` is valid for sure (`false`: ask [`validate`]).
    pub fn passes(&self, value: &Value) -> bool {
        let Some(mask) = self.types else {
            return false;
        };
        TYPES
            .iter()
            .enumerate()
            .any(|(i, t)| mask & (1 << i) != 0 && type_matches(t, value))
    }
}

/// A keyword of a schema object. Schemas are small objects, and a scan of a few keys is much
/// cheaper than hashing the keyword, which matters because every check asks for several.
fn kw<'s>(obj: &'s Map<String, Value>, key: &str) -> Option<&'s Value> {
    debug_assert!(KEYWORDS.contains(&key), "{key} is not among KEYWORDS");
    if obj.len() <= 8 {
        obj.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v)
    } else {
        obj.get(key)
    }
}

/// The names of a `type` keyword: the usual single name needs no allocation.
enum Types<'s> {
    One([&'s str; 1]),
    Many(Vec<&'s str>),
}

impl<'s> std::ops::Deref for Types<'s> {
    type Target = [&'s str];
    fn deref(&self) -> &[&'s str] {
        match self {
            Types::One(t) => t,
            Types::Many(ts) => ts,
        }
    }
}

/// The `type` keyword as a list of names; an error if it is malformed or names an unknown type.
fn types_of(obj: &Map<String, Value>) -> Result<Types<'_>, SchemaError> {
    let types = match kw(obj, "type") {
        None => Types::Many(Vec::new()),
        Some(Value::String(t)) => Types::One([t.as_str()]),
        Some(Value::Array(ts)) => {
            let mut out = Vec::with_capacity(ts.len());
            for t in ts {
                match t.as_str() {
                    Some(s) => out.push(s),
                    None => return Err(SchemaError(format!("invalid type {t}"))),
                }
            }
            Types::Many(out)
        }
        Some(other) => return Err(SchemaError(format!("invalid type {other}"))),
    };
    if let Some(t) = types.iter().find(|t| !TYPES.contains(t)) {
        return Err(SchemaError(format!("unknown type \"{t}\"")));
    }
    Ok(types)
}

/// The `enum` keyword, checked against the declared types.
fn enum_of<'s>(
    obj: &'s Map<String, Value>,
    types: &[&str],
) -> Result<Option<&'s [Value]>, SchemaError> {
    let Some(en) = kw(obj, "enum") else {
        return Ok(None);
    };
    let Some(list) = en.as_array() else {
        return Err(SchemaError("enum must be an array".into()));
    };
    if !types.is_empty()
        && list
            .iter()
            .any(|e| !types.iter().any(|t| type_matches(t, e)))
    {
        return Err(SchemaError(format!(
            "enum {} does not match type {}",
            en,
            types.join("|")
        )));
    }
    Ok(Some(list))
}

/// Resolves a local `$ref` chain (`#`, `#/definitions/x`, `#/$defs/x`, any JSON pointer).
fn resolve<'a>(root: &'a Value, mut schema: &'a Value) -> Result<&'a Value, SchemaError> {
    for _ in 0..MAX_REF_HOPS {
        let Some(r) = schema.get("$ref") else {
            return Ok(schema);
        };
        let Some(r) = r.as_str() else {
            return Err(SchemaError(format!("$ref must be a string, got {r}")));
        };
        let Some(pointer) = r.strip_prefix('#') else {
            return Err(SchemaError(format!(
                "only local $ref is supported, got {r}"
            )));
        };
        schema = root
            .pointer(pointer)
            .ok_or_else(|| SchemaError(format!("$ref {r} points nowhere")))?;
    }
    Err(SchemaError("$ref chain does not end".into()))
}

struct Cx<'a> {
    root_schema: &'a Value,
    out: &'a mut Vec<String>,
    /// Trying a `oneOf`/`anyOf` branch: only whether it fails matters, so messages (and their
    /// paths) are not rendered.
    probing: bool,
}

impl<'a> Cx<'a> {
    fn report(&mut self, message: impl FnOnce() -> String) {
        self.out.push(if self.probing {
            String::new()
        } else {
            message()
        });
    }

    /// `hops` counts schema indirections (`$ref`, applicators) at this same value; it resets when
    /// the value descends, so a `$ref` cycle that consumes no input is found, not followed forever.
    fn check(
        &mut self,
        schema: &'a Value,
        value: &Value,
        path: &Path<'_>,
        hops: usize,
    ) -> Result<(), SchemaError> {
        stacker::maybe_grow(64 * 1024, 2 << 20, || {
            self.check_inner(schema, value, path, hops)
        })
    }

    fn check_inner(
        &mut self,
        schema: &'a Value,
        value: &Value,
        path: &Path<'_>,
        hops: usize,
    ) -> Result<(), SchemaError> {
        let schema = if schema.as_object().is_some_and(|o| kw(o, "$ref").is_some()) {
            if hops >= MAX_REF_HOPS {
                return Err(SchemaError(
                    "$ref cycle that never descends into the value".into(),
                ));
            }
            resolve(self.root_schema, schema)?
        } else {
            schema
        };
        let obj = match schema {
            Value::Bool(true) => return Ok(()),
            Value::Bool(false) => {
                self.report(|| format!("{} is not allowed", path.quoted()));
                return Ok(());
            }
            Value::Object(obj) => obj,
            _ => {
                return Err(SchemaError(
                    "a schema must be an object or a boolean".into(),
                ));
            }
        };

        let types = types_of(obj)?;
        let en = enum_of(obj, &types)?;
        if !types.is_empty() && !types.iter().any(|t| type_matches(t, value)) {
            let t = types[0];
            self.report(|| format!("{} must be {} {t}", path.quoted(), article(t)));
            return Ok(());
        }
        if let Some(list) = en
            && !list.contains(value)
        {
            self.report(|| {
                let compact = serde_json::to_string(list).unwrap_or_default();
                format!("{} must be one of {compact}", path.quoted())
            });
            return Ok(());
        }
        if let Some(c) = kw(obj, "const")
            && c != value
        {
            self.report(|| format!("{} must be {}", path.quoted(), c));
            return Ok(());
        }
        match value {
            Value::Object(map) => self.check_object(obj, map, path)?,
            Value::Array(items) => self.check_array(obj, items, path)?,
            _ => {}
        }
        for key in ["oneOf", "anyOf"] {
            if let Some(Value::Array(branches)) = kw(obj, key) {
                let mut matched = false;
                for b in branches {
                    let mut scratch = Vec::new();
                    let mut sub = Cx {
                        root_schema: self.root_schema,
                        out: &mut scratch,
                        probing: true,
                    };
                    sub.check(b, value, path, hops + 1)?;
                    if scratch.is_empty() {
                        matched = true;
                        break;
                    }
                }
                if !matched {
                    self.report(|| {
                        format!("{} must match one of the allowed shapes", path.quoted())
                    });
                }
            }
        }
        if let Some(Value::Array(all)) = kw(obj, "allOf") {
            for s in all {
                self.check(s, value, path, hops + 1)?;
            }
        }
        Ok(())
    }

    fn check_object(
        &mut self,
        obj: &'a Map<String, Value>,
        map: &Map<String, Value>,
        path: &Path<'_>,
    ) -> Result<(), SchemaError> {
        if let Some(req) = kw(obj, "required") {
            let Some(req) = req.as_array() else {
                return Err(SchemaError("required must be an array".into()));
            };
            for k in req.iter().filter_map(Value::as_str) {
                if !map.contains_key(k) {
                    let at = Path::Key(path, k);
                    self.report(|| format!("missing required property \"{}\"", at.render()));
                }
            }
        }
        let props = kw(obj, "properties").and_then(Value::as_object);
        if let Some(props) = props {
            for (k, sub) in props {
                if let Some(v) = map.get(k) {
                    self.check(sub, v, &Path::Key(path, k), 0)?;
                }
            }
        }
        match kw(obj, "additionalProperties") {
            None | Some(Value::Bool(true)) => {}
            Some(Value::Bool(false)) => {
                for k in map.keys() {
                    if !props.is_some_and(|p| p.contains_key(k)) {
                        let at = Path::Key(path, k);
                        self.report(|| format!("unexpected property \"{}\"", at.render()));
                    }
                }
            }
            Some(extra) => {
                for (k, v) in map {
                    if !props.is_some_and(|p| p.contains_key(k)) {
                        self.check(extra, v, &Path::Key(path, k), 0)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn check_array(
        &mut self,
        obj: &'a Map<String, Value>,
        items: &[Value],
        path: &Path<'_>,
    ) -> Result<(), SchemaError> {
        // Positional schemas (`prefixItems`, or a tuple `items` list), then one for the rest.
        let (positional, rest): (&[Value], Option<&Value>) =
            match (kw(obj, "prefixItems"), kw(obj, "items")) {
                (Some(Value::Array(prefix)), rest) => (prefix, rest),
                (_, Some(Value::Array(tuple))) => (tuple, kw(obj, "additionalItems")),
                (_, rest) => (&[], rest),
            };
        for (i, v) in items.iter().enumerate() {
            let schema = match positional.get(i) {
                Some(s) => s,
                None => match rest {
                    Some(s) => s,
                    None => break,
                },
            };
            self.check(schema, v, &Path::Index(path, i), 0)?;
        }
        Ok(())
    }
}

/// Walks every subschema once, reporting the first authoring error.
struct SchemaWalk<'a> {
    root: &'a Value,
    /// The `$ref` targets already walked (by address), so a target outside `$defs` is checked
    /// once and a reference cycle is not followed forever.
    followed: std::cell::RefCell<std::collections::HashSet<usize>>,
}

impl SchemaWalk<'_> {
    fn walk(&self, schema: &Value) -> Result<(), SchemaError> {
        stacker::maybe_grow(64 * 1024, 2 << 20, || self.walk_inner(schema))
    }

    fn walk_all(&self, list: Option<&Value>, key: &str) -> Result<(), SchemaError> {
        match list {
            None => Ok(()),
            Some(Value::Array(items)) => items.iter().try_for_each(|s| self.walk(s)),
            Some(_) => Err(SchemaError(format!("{key} must be an array"))),
        }
    }

    fn walk_map(&self, map: Option<&Value>, key: &str) -> Result<(), SchemaError> {
        match map {
            None => Ok(()),
            Some(Value::Object(m)) => m.values().try_for_each(|s| self.walk(s)),
            Some(_) => Err(SchemaError(format!("{key} must be an object"))),
        }
    }

    fn walk_inner(&self, schema: &Value) -> Result<(), SchemaError> {
        let obj = match schema {
            Value::Bool(_) => return Ok(()),
            Value::Object(obj) => obj,
            _ => {
                return Err(SchemaError(
                    "a schema must be an object or a boolean".into(),
                ));
            }
        };
        if obj.contains_key("$ref") {
            let target = resolve(self.root, schema)?;
            // A target anywhere in the document (not only under `$defs`) is what validation
            // will use, so it is checked too.
            if self
                .followed
                .borrow_mut()
                .insert(std::ptr::from_ref(target) as usize)
            {
                self.walk(target)?;
            }
        }
        let types = types_of(obj)?;
        enum_of(obj, &types)?;
        if let Some(req) = obj.get("required") {
            match req.as_array() {
                Some(list) if list.iter().all(Value::is_string) => {}
                _ => return Err(SchemaError("required must be an array of strings".into())),
            }
        }
        self.walk_map(obj.get("properties"), "properties")?;
        for key in ["definitions", "$defs"] {
            self.walk_map(obj.get(key), key)?;
        }
        for key in ["additionalProperties", "additionalItems"] {
            if let Some(s) = obj.get(key) {
                self.walk(s)?;
            }
        }
        match obj.get("items") {
            Some(Value::Array(tuple)) => tuple.iter().try_for_each(|s| self.walk(s))?,
            Some(s) => self.walk(s)?,
            None => {}
        }
        for key in ["prefixItems", "oneOf", "anyOf", "allOf"] {
            self.walk_all(obj.get(key), key)?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_render_dots_and_indices() {
        let root = Path::Root("");
        let a = Path::Key(&root, "a");
        let i = Path::Index(&a, 1);
        let b = Path::Key(&i, "b");
        assert_eq!(b.render(), "a[1].b");
        assert_eq!(root.quoted(), "arguments");
        let value = Path::Root("value");
        assert_eq!(Path::Index(&value, 0).quoted(), "\"value[0]\"");
        assert_eq!(Path::Key(&value, "x").quoted(), "\"value.x\"");
    }

    #[test]
    fn a_ref_cycle_that_consumes_nothing_is_a_schema_error() {
        let schema = json!({"allOf": [{"$ref": "#"}]});
        let err = validate(&schema, &json!({}), "").expect_err("cycle");
        assert!(err.0.contains("cycle"), "{err}");
        let schema = json!({"definitions": {"a": {"$ref": "#/definitions/b"}, "b": {"$ref": "#/definitions/a"}},
            "properties": {"x": {"$ref": "#/definitions/a"}}});
        assert!(validate(&schema, &json!({"x": 1}), "").is_err());
        assert!(check_schema(&schema).is_err());
    }
}
