//! Argument and output validation against a JSON Schema subset, with the reference's messages:
//! `missing required property "a.b"`, `"tags[1]" must be a string`, `"c" must be one of [..]`.
//!
//! Supported: `type` (one or a list), `properties`, `required`, `items`, `enum`, `const`,
//! `additionalProperties: false`, `oneOf`/`anyOf`/`allOf`, local `$ref`. Extra properties are
//! allowed unless closed; defaults are never injected. Validation never panics on any input;
//! a malformed schema is a [`SchemaError`], not a violation. Depth is bounded only by the stack,
//! which grows as needed.

use serde_json::Value;

/// A schema that cannot be used for validation (a schema-authoring error, `JsonSchemaError`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("JsonSchemaError: {0}")]
pub struct SchemaError(pub String);

const TYPES: [&str; 7] = [
    "string", "number", "integer", "boolean", "object", "array", "null",
];

/// Validates `value` against `schema`; returns the violations in document order.
/// `root` names the top-level value in messages (`""` for arguments, `"value"` for outputs).
pub fn validate(schema: &Value, value: &Value, root: &str) -> Result<Vec<String>, SchemaError> {
    let mut out = Vec::new();
    let mut cx = Cx {
        root_schema: schema,
        out: &mut out,
        depth: 0,
    };
    cx.check(schema, value, root)?;
    Ok(out)
}

struct Cx<'a> {
    root_schema: &'a Value,
    out: &'a mut Vec<String>,
    depth: usize,
}

fn quote(path: &str) -> String {
    if path.is_empty() {
        "arguments".to_owned()
    } else {
        format!("\"{path}\"")
    }
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
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

impl<'a> Cx<'a> {
    fn resolve(&self, schema: &'a Value) -> Result<&'a Value, SchemaError> {
        let Some(r) = schema.get("$ref").and_then(Value::as_str) else {
            return Ok(schema);
        };
        let Some(pointer) = r.strip_prefix('#') else {
            return Err(SchemaError(format!(
                "only local $ref is supported, got {r}"
            )));
        };
        self.root_schema
            .pointer(pointer)
            .ok_or_else(|| SchemaError(format!("$ref {r} points nowhere")))
    }

    fn check(&mut self, schema: &'a Value, value: &Value, path: &str) -> Result<(), SchemaError> {
        self.depth += 1;
        let r = stacker::maybe_grow(64 * 1024, 2 << 20, || self.check_inner(schema, value, path));
        self.depth -= 1;
        r
    }

    fn check_inner(
        &mut self,
        schema: &'a Value,
        value: &Value,
        path: &str,
    ) -> Result<(), SchemaError> {
        if schema == &Value::Bool(true) {
            return Ok(());
        }
        if schema == &Value::Bool(false) {
            self.out.push(format!("{} is not allowed", quote(path)));
            return Ok(());
        }
        let schema = self.resolve(schema)?;
        let Some(obj) = schema.as_object() else {
            return Err(SchemaError(
                "a schema must be an object or a boolean".into(),
            ));
        };

        let types: Vec<&str> = match obj.get("type") {
            None => Vec::new(),
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            Some(other) => return Err(SchemaError(format!("invalid type {other}"))),
        };
        for t in &types {
            if !TYPES.contains(t) {
                return Err(SchemaError(format!("unknown type \"{t}\"")));
            }
        }
        if let Some(en) = obj.get("enum") {
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
        }
        if !types.is_empty() && !types.iter().any(|t| type_matches(t, value)) {
            let t = types[0];
            self.out
                .push(format!("{} must be {} {t}", quote(path), article(t)));
            return Ok(());
        }
        if let Some(Value::Array(list)) = obj.get("enum")
            && !list.contains(value)
        {
            let compact = serde_json::to_string(list).unwrap_or_default();
            self.out
                .push(format!("{} must be one of {compact}", quote(path)));
            return Ok(());
        }
        if let Some(c) = obj.get("const")
            && c != value
        {
            self.out.push(format!("{} must be {}", quote(path), c));
            return Ok(());
        }
        if let Value::Object(map) = value {
            if let Some(req) = obj.get("required") {
                let Some(req) = req.as_array() else {
                    return Err(SchemaError("required must be an array".into()));
                };
                for k in req.iter().filter_map(Value::as_str) {
                    if !map.contains_key(k) {
                        self.out
                            .push(format!("missing required property \"{}\"", child(path, k)));
                    }
                }
            }
            let props = obj.get("properties").and_then(Value::as_object);
            if let Some(props) = props {
                for (k, sub) in props {
                    if let Some(v) = map.get(k) {
                        self.check(sub, v, &child(path, k))?;
                    }
                }
            }
            if obj.get("additionalProperties") == Some(&Value::Bool(false)) {
                for k in map.keys() {
                    if !props.is_some_and(|p| p.contains_key(k)) {
                        self.out
                            .push(format!("unexpected property \"{}\"", child(path, k)));
                    }
                }
            }
        }
        if let (Value::Array(items), Some(item_schema)) = (value, obj.get("items")) {
            for (i, v) in items.iter().enumerate() {
                self.check(item_schema, v, &format!("{path}[{i}]"))?;
            }
        }
        for key in ["oneOf", "anyOf"] {
            if let Some(Value::Array(branches)) = obj.get(key) {
                let mut matched = false;
                for b in branches {
                    let mut scratch = Vec::new();
                    let mut sub = Cx {
                        root_schema: self.root_schema,
                        out: &mut scratch,
                        depth: self.depth,
                    };
                    sub.check(b, value, path)?;
                    if scratch.is_empty() {
                        matched = true;
                        break;
                    }
                }
                if !matched {
                    self.out.push(format!(
                        "{} must match one of the allowed shapes",
                        quote(path)
                    ));
                }
            }
        }
        if let Some(Value::Array(all)) = obj.get("allOf") {
            for s in all {
                self.check(s, value, path)?;
            }
        }
        Ok(())
    }
}
