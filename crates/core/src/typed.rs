//! Typed tools: the input is a Rust struct (`serde` + `schemars`), the body an async fn returning
//! any `Serialize` value. The parameter schema comes from the input type; arguments are validated
//! against it (reference messages) and then decoded by borrowing, never copied.

use std::future::Future;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::failure::Failure;
use crate::json::Json;
use crate::tool::{ToolBuilder, ToolContext};

/// The parameter schema of `I`: inline, without `$schema` or `title`. Recursive types keep the
/// `definitions` their `$ref`s point into; an unconstrained `items: true` is left out (an array
/// property without `items` accepts anything). `Option` fields are optional and also accept
/// `null`, which decodes as absent (our decision for REG-52).
pub fn schema_for<I: schemars::JsonSchema>() -> Json {
    let settings = schemars::generate::SchemaSettings::draft07().with(|s| {
        s.inline_subschemas = true;
        s.meta_schema = None;
    });
    let schema = settings.into_generator().into_root_schema_for::<I>();
    let mut value = serde_json::to_value(schema).unwrap_or(Value::Null);
    let has_ref = tidy(&mut value);
    if let Value::Object(map) = &mut value {
        map.remove("title");
        map.remove("$schema");
        if !has_ref {
            map.remove("definitions");
            map.remove("$defs");
        }
        if !map.contains_key("properties") && map.get("type") == Some(&Value::from("object")) {
            map.insert("properties".into(), Value::Object(Default::default()));
        }
    }
    Json::new(value).unwrap_or_else(|_| Json::empty_object())
}

/// Drops `items: true` everywhere; returns whether any `$ref` remains.
fn tidy(v: &mut Value) -> bool {
    stacker::maybe_grow(64 * 1024, 1 << 20, || match v {
        Value::Object(map) => {
            if map.get("items") == Some(&Value::Bool(true)) {
                map.remove("items");
            }
            let mut has_ref = map.contains_key("$ref");
            for child in map.values_mut() {
                has_ref |= tidy(child);
            }
            has_ref
        }
        Value::Array(items) => items.iter_mut().fold(false, |acc, c| tidy(c) | acc),
        _ => false,
    })
}

/// Decodes typed input from a call's arguments (borrowing the frozen JSON).
pub fn decode_input<I: DeserializeOwned>(ctx: &ToolContext) -> Result<I, Failure> {
    let json = ctx
        .arguments()
        .json()
        .ok_or_else(|| Failure::invalid_args(&["arguments must be a JSON object".to_owned()]))?;
    json.decode::<I>()
        .map_err(|e| Failure::invalid_args(&[e.to_string()]))
}

impl ToolBuilder {
    /// Parameters from `I` and a body `f(input, ctx)` returning any serializable value.
    pub fn execute_typed<I, O, F, Fut>(self, f: F) -> Self
    where
        I: DeserializeOwned + schemars::JsonSchema + Send + 'static,
        O: Serialize + Send + 'static,
        F: Fn(I, ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, Failure>> + Send + 'static,
    {
        let f = Arc::new(f);
        let name = self.name().clone();
        self.typed_parameters::<I>()
            .execute(move |ctx: ToolContext| {
                let f = f.clone();
                let name = name.clone();
                async move {
                    let input = decode_input::<I>(&ctx)?;
                    let out = f(input, ctx).await?;
                    Json::snapshot(&out).map_err(|e| {
                        Failure::invalid_output(&name, format!("value snapshot failed: {e}"))
                    })
                }
            })
    }
}
