//! The precheck of a schema whose only constraint is its `type`: it lets a value through
//! without walking the schema, and must never let through a value the walk would refuse.

use dsh_core::validate::{Precheck, validate};
use dsh_core::{ExecutionToken, Json, ToolDefinition, ToolOutput};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Any JSON value, nested a little.
fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(|n| json!(n)),
        prop_oneof![Just(1.0f64), Just(1.5), Just(-0.0), Just(2e20)].prop_map(|f| json!(f)),
        "[a-c]{0,3}".prop_map(Value::String),
    ];
    leaf.prop_recursive(2, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map("[a-c]", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// A `type` keyword: one name, a list of names, or something malformed.
fn type_keyword() -> impl Strategy<Value = Value> {
    let name = prop::sample::select(vec![
        "string", "number", "integer", "boolean", "object", "array", "null", "strnig",
    ]);
    prop_oneof![
        name.clone().prop_map(|n| json!(n)),
        prop::collection::vec(name, 0..3).prop_map(|ns| json!(ns)),
        Just(json!(7)),
    ]
}

/// A schema: maybe a `type`, maybe other keywords the validator reads (with values that may
/// or may not be well formed), maybe annotations it ignores; or a boolean schema.
fn schema() -> impl Strategy<Value = Value> {
    let other = prop::sample::select(vec![
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
        "description",
        "title",
        "minimum",
        "format",
    ]);
    let object = (
        prop::option::of(type_keyword()),
        prop::collection::vec((other, value()), 0..3),
    )
        .prop_map(|(ty, others)| {
            let mut obj = Map::new();
            if let Some(ty) = ty {
                obj.insert("type".to_owned(), ty);
            }
            for (k, v) in others {
                let v = match k {
                    "$ref" => json!("#"),
                    "oneOf" | "anyOf" | "allOf" | "prefixItems" => json!([v]),
                    "required" => json!(["a"]),
                    _ => v,
                };
                obj.insert(k.to_owned(), v);
            }
            Value::Object(obj)
        });
    prop_oneof![4 => object, 1 => any::<bool>().prop_map(Value::Bool)]
}

proptest! {
    /// Whatever the schema and the value, a value the precheck passes is one the validator
    /// finds nothing wrong with.
    #[test]
    fn a_value_the_precheck_passes_is_valid(schema in schema(), value in value()) {
        if Precheck::of(&schema).passes(&value) {
            prop_assert_eq!(validate(&schema, &value, "value"), Ok(Vec::new()), "{}", schema);
        }
    }
}

#[test]
fn type_only_schemas_pass_values_of_their_types_and_nothing_else() {
    let cases = [
        (json!({"type": "string"}), json!("ok"), true),
        (json!({"type": "string"}), json!(1), false),
        (
            json!({"type": "string", "description": "kept"}),
            json!("ok"),
            true,
        ),
        (json!({"type": ["string", "null"]}), json!(null), true),
        (json!({"type": ["string", "null"]}), json!(false), false),
        (json!({"type": "integer"}), json!(2.0), true),
        (json!({"type": "integer"}), json!(2.5), false),
        (json!({}), json!([1, {"a": null}]), true),
        (json!(true), json!("anything"), true),
        // Constrained beyond the type: the walk decides.
        (json!({"type": "string", "enum": ["a"]}), json!("a"), false),
        (
            json!({"type": "object", "properties": {}}),
            json!({}),
            false,
        ),
        (json!(false), json!(null), false),
        // Malformed: the walk reports it.
        (json!({"type": "strnig"}), json!("ok"), false),
    ];
    for (schema, value, passes) in cases {
        assert_eq!(
            Precheck::of(&schema).passes(&value),
            passes,
            "{schema} {value}"
        );
    }
}

#[test]
fn an_output_of_the_wrong_type_is_still_refused_in_the_validators_words() {
    let tool = ToolDefinition::builder("t", "d")
        .output(ToolOutput::string())
        .execute(|_| async { Ok(Json::null()) })
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let token = ExecutionToken::fresh();
    let refused = tool
        .render_success(token, Json::from_shallow(json!(3)), true)
        .err()
        .map(|f| f.message().to_owned());
    assert_eq!(
        refused.as_deref(),
        Some("tool \"t\" returned invalid output: \"value\" must be a string")
    );
    assert!(tool.render_success(token, Json::string("ok"), true).is_ok());
}
