//! REG-51..66: argument validation (`dsh_core::validate`), the `INVALID_ARGS` failure, and which
//! definitions are validated. Executing a tool here runs the part of a call dsh-core owns; the
//! staged pipeline around it is covered end to end in dsh-scheduler.

use dsh_core::validate::{SchemaError, validate};
use dsh_core::{Arguments, Failure, Json, ToolContext, ToolDefinition, ToolOutput, text_content};
use serde_json::{Value, json};

use super::fixtures::{args, call_def, shape, text};

fn violations(schema: Value, value: Value) -> Vec<String> {
    validate(&schema, &value, "").expect("well-formed schema")
}

fn read_schema() -> Value {
    json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})
}

#[test]
fn reg_51_malformed_top_level_values_give_exactly_one_violation() {
    assert!(violations(read_schema(), json!({"path": "/x"})).is_empty());
    for bad in [json!(null), json!("a string"), json!(["an", "array"])] {
        let v = violations(read_schema(), bad.clone());
        assert_eq!(v, vec!["arguments must be an object"], "{bad}");
    }
}

#[test]
fn reg_52_missing_required_property_and_our_null_decision() {
    assert_eq!(
        violations(read_schema(), json!({})),
        vec!["missing required property \"path\""]
    );
    // Decision: JSON has no `undefined`; an explicit `null` is a present value, so it must match
    // the property's type. (Typed tools declare `Option<T>` fields as `[T, "null"]`, so a `null`
    // there is accepted and decodes as absent.)
    assert_eq!(
        violations(read_schema(), json!({"path": null})),
        vec!["\"path\" must be a string"]
    );
}

#[test]
fn reg_53_extra_keys_are_allowed() {
    assert!(violations(read_schema(), json!({"path": "/x", "extra": 1, "more": {}})).is_empty());
}

#[test]
fn reg_54_defaults_are_never_injected() {
    let schema = json!({"type": "object", "properties": {"n": {"type": "integer", "default": 25}}});
    let value = json!({});
    assert!(validate(&schema, &value, "").expect("ok").is_empty());
    assert_eq!(value, json!({}));
    let def = ToolDefinition::builder("d", "d")
        .validated_parameters(Json::from_shallow(schema))
        .output(ToolOutput::json())
        .execute(|ctx: ToolContext| async move {
            Ok(ctx.arguments().json().cloned().unwrap_or_else(Json::null))
        })
        .build()
        .expect("builds");
    let r = futures::executor::block_on(call_def(&def, args(json!({})), None));
    assert_eq!(
        shape(&r)["value"],
        json!({}),
        "the body sees no injected default"
    );
}

#[test]
fn reg_55_wrong_primitive_types() {
    let schema = json!({"type": "object", "properties": {
        "s": {"type": "string"}, "n": {"type": "number"}, "b": {"type": "boolean"}}});
    assert_eq!(
        violations(schema, json!({"s": 1, "n": "1", "b": "true"})),
        vec![
            "\"s\" must be a string",
            "\"n\" must be a number",
            "\"b\" must be a boolean"
        ]
    );
}

#[test]
fn reg_56_enum_violation_lists_compact_json() {
    let schema = json!({"type": "object", "properties": {
        "color": {"type": "string", "enum": ["red", "green"]}}});
    assert_eq!(
        violations(schema, json!({"color": "blue"})),
        vec!["\"color\" must be one of [\"red\",\"green\"]"]
    );
}

#[test]
fn reg_57_numeric_enum_and_an_enum_that_contradicts_its_type() {
    let schema = json!({"type": "object", "properties": {"n": {"type": "number", "enum": [1, 2]}}});
    assert_eq!(
        violations(schema, json!({"n": 3})),
        vec!["\"n\" must be one of [1,2]"]
    );
    let broken =
        json!({"type": "object", "properties": {"n": {"type": "number", "enum": ["1", "2"]}}});
    let err = validate(&broken, &json!({"n": 1}), "").expect_err("authoring error");
    assert!(err.to_string().starts_with("JsonSchemaError"), "{err}");
    // The whole schema is checked up front too (tools are checked when built), so the error is
    // found even when no input reaches the broken node.
    assert!(dsh_core::validate::check_schema(&broken).is_err());
    assert!(dsh_core::validate::check_schema(&read_schema()).is_ok());
}

#[test]
fn reg_58_an_unknown_type_name_is_an_authoring_error() {
    let broken = json!({"type": "object", "properties": {"x": {"type": "strnig"}}});
    let err: SchemaError = validate(&broken, &json!({"x": "a"}), "").expect_err("authoring error");
    assert!(err.to_string().contains("JsonSchemaError"), "{err}");
    assert!(err.to_string().contains("strnig"), "{err}");
}

#[test]
fn reg_59_nested_paths_are_dotted_and_in_order() {
    let schema = json!({"type": "object", "properties": {
        "config": {"type": "object", "properties": {"host": {"type": "string"}}, "required": ["host"]},
        "bag": {"type": "object", "additionalProperties": true}
    }});
    assert_eq!(
        violations(schema, json!({"config": {}, "bag": 3})),
        vec![
            "missing required property \"config.host\"",
            "\"bag\" must be an object"
        ]
    );
}

#[test]
fn reg_60_array_items_and_arrays_without_items() {
    let schema = json!({"type": "object", "properties": {
        "tags": {"type": "array", "items": {"type": "string"}},
        "any": {"type": "array"}
    }});
    assert_eq!(
        violations(
            schema.clone(),
            json!({"tags": ["a", 2], "any": [1, "x", null, {}]})
        ),
        vec!["\"tags[1]\" must be a string"]
    );
    assert_eq!(
        violations(schema, json!({"tags": "a"})),
        vec!["\"tags\" must be an array"]
    );
}

#[test]
fn reg_61_paths_through_arrays_of_objects() {
    let schema = json!({"type": "object", "properties": {"servers": {"type": "array", "items": {
        "type": "object", "properties": {"host": {"type": "string"}}, "required": ["host"]}}}});
    assert_eq!(
        violations(schema, json!({"servers": [{"host": "a"}, {"port": 1}]})),
        vec!["missing required property \"servers[1].host\""]
    );
}

fn validated_read() -> ToolDefinition {
    ToolDefinition::builder("read", "read a file")
        .validated_parameters(Json::from_shallow(read_schema()))
        .output(ToolOutput::content_blocks())
        .execute(|ctx: ToolContext| async move {
            let path = ctx.arguments().json().map(|j| j.value()["path"].clone());
            let text = format!(
                "read {}",
                path.as_ref().and_then(Value::as_str).unwrap_or("")
            );
            Ok(Json::from_shallow(json!([{"type": "text", "text": text}])))
        })
        .build()
        .expect("builds")
}

#[tokio::test]
async fn reg_62_invalid_arguments_fail_before_the_body() {
    let r = call_def(&validated_read(), args(json!({})), None).await;
    assert!(r.is_error());
    assert_eq!(
        text(&r),
        "Error: invalid arguments: missing required property \"path\""
    );
}

#[tokio::test]
async fn reg_63_valid_arguments_give_exactly_the_rendered_success() {
    let r = call_def(&validated_read(), args(json!({"path": "/x"})), None).await;
    assert_eq!(
        shape(&r),
        json!({
            "content": [{"type": "text", "text": "read /x"}],
            "isError": false,
            "value": [{"type": "text", "text": "read /x"}]
        })
    );
}

#[test]
fn reg_64_the_argument_error_keeps_its_violations() {
    let v = vec![
        "missing required property \"a\"".to_owned(),
        "\"b\" must be a string".to_owned(),
    ];
    let f = Failure::invalid_args(&v);
    assert_eq!(
        f.message(),
        "invalid arguments: missing required property \"a\"; \"b\" must be a string"
    );
    let info = f.info().expect("typed");
    assert_eq!(
        (&*info.name, &*info.code),
        ("ToolArgsError", "INVALID_ARGS")
    );
    assert_eq!(f.violations(), Some(&v[..]));
    assert_eq!(Failure::new("plain").violations(), None);
}

#[tokio::test]
async fn reg_65_the_error_shape_of_schema_invalid_arguments() {
    let r = call_def(&validated_read(), args(json!({})), None).await;
    assert_eq!(
        shape(&r)["error"],
        json!({
            "message": "invalid arguments: missing required property \"path\"",
            "info": {"name": "ToolArgsError", "code": "INVALID_ARGS"}
        })
    );
}

#[tokio::test]
async fn reg_66_raw_definitions_validate_themselves() {
    let raw = ToolDefinition::builder("raw", "validates itself")
        .parameters(Json::from_shallow(read_schema()))
        .output(ToolOutput::string())
        .execute(|_ctx| async { Ok(Json::string("body ran")) })
        .build()
        .expect("builds");
    assert!(!raw.validates_arguments());
    assert!(raw.check_arguments(&args(json!({}))).is_ok());
    let r = call_def(&raw, args(json!({})), None).await;
    assert!(!r.is_error());
    assert_eq!(text(&r), "body ran");
}

#[test]
fn raw_argument_text_fails_a_validated_tool_with_the_reason() {
    let def = validated_read();
    let err = def
        .check_arguments(&Arguments::from_raw("not json"))
        .expect_err("raw text is not an object");
    assert_eq!(err.code(), Some("INVALID_ARGS"));
    assert!(
        err.message()
            .starts_with("invalid arguments: arguments must be a JSON object"),
        "{err}"
    );
    assert!(err.message().contains("invalid JSON"), "{err}");
}

#[test]
fn a_validated_schema_without_a_type_still_requires_an_object() {
    let def = ToolDefinition::builder("loose", "d")
        .validated_parameters(Json::from_shallow(
            json!({"properties": {"a": {"type": "string"}}}),
        ))
        .output(ToolOutput::string())
        .execute(|_ctx| async { Ok(Json::string("")) })
        .build()
        .expect("builds");
    for bad in [json!(null), json!([1]), json!("s"), json!(3)] {
        let err = def
            .check_arguments(&args(bad.clone()))
            .expect_err("not an object");
        assert_eq!(
            err.message(),
            "invalid arguments: arguments must be an object",
            "{bad}"
        );
    }
    assert!(def.check_arguments(&args(json!({}))).is_ok());
}

#[test]
fn a_broken_validated_schema_is_refused_when_the_tool_is_built() {
    let e = ToolDefinition::builder("broken", "d")
        .validated_parameters(Json::from_shallow(
            json!({"type": "object", "properties": {"x": {"type": "strnig"}}}),
        ))
        .output(ToolOutput::string())
        .execute(|_ctx| async { Ok(Json::string("")) })
        .build()
        .expect_err("authoring error");
    assert!(e.to_string().contains("JsonSchemaError"), "{e}");
    assert!(e.to_string().contains("broken"), "{e}");
}

#[test]
fn output_validation_names_the_value_and_the_tool() {
    let def = ToolDefinition::builder("num", "d")
        .output(ToolOutput::string())
        .execute(|_ctx| async { Ok(Json::null()) })
        .build()
        .expect("builds");
    let token = dsh_core::ExecutionToken::fresh();
    let err = def
        .render_success(token, Json::from(3_i64), true)
        .expect_err("not a string");
    assert_eq!(err.code(), Some("INVALID_TOOL_OUTPUT"));
    assert!(err.message().starts_with("tool \"num\""), "{err}");
    assert!(
        err.message().contains("\"value\" must be a string"),
        "{err}"
    );

    let ok = def
        .render_success(token, Json::string("s"), true)
        .expect("renders");
    assert_eq!(ok.rendered_for(), Some(token));
    assert_eq!(ok.content(), &text_content("s"));
}

#[test]
fn a_failing_or_panicking_projector_is_an_output_error() {
    let def = ToolDefinition::builder("meta", "d")
        .output(ToolOutput::string().with_presentation_meta(|_| Err(Failure::new("no meta today"))))
        .execute(|_ctx| async { Ok(Json::null()) })
        .build()
        .expect("builds");
    let token = dsh_core::ExecutionToken::fresh();
    let err = def
        .render_success(token, Json::string("s"), true)
        .expect_err("projector fails");
    assert_eq!(err.code(), Some("INVALID_TOOL_OUTPUT"));
    assert!(err.message().contains("no meta today"), "{err}");
    // Without meta requested the projector is not consulted.
    assert!(def.render_success(token, Json::string("s"), false).is_ok());

    let panicky = ToolDefinition::builder("render", "d")
        .output(ToolOutput::new(Json::empty_object(), |_| {
            panic!("render exploded")
        }))
        .execute(|_ctx| async { Ok(Json::null()) })
        .build()
        .expect("builds");
    let err = panicky
        .render_success(token, Json::null(), true)
        .expect_err("render panics");
    assert_eq!(err.code(), Some("INVALID_TOOL_OUTPUT"));
    assert!(err.message().contains("render exploded"), "{err}");
}

#[tokio::test]
async fn a_panicking_body_is_a_failure_naming_the_tool() {
    let def = ToolDefinition::builder("boom", "d")
        .output(ToolOutput::string())
        .execute(|_ctx| async { panic!("kaboom") })
        .build()
        .expect("builds");
    let r = call_def(&def, args(json!({})), None).await;
    assert_eq!(text(&r), "Error: tool \"boom\" panicked: kaboom");
}

/// Found by the `schema_validate` fuzz target: a `$ref` into a location that is not a schema
/// keyword (`#/$devs/n`) was resolved but its target never checked, so `check_schema` accepted a
/// schema that validation then refused as malformed.
#[test]
fn reg_57_a_ref_target_outside_defs_is_checked_up_front() {
    let broken = json!({"$ref": "#/$devs/n", "$devs": {"n": {"anyOf": [
        {"type": "nubl"},
        {"type": "object", "properties": {"next": {"$ref": "#/$devs/n"}}}
    ]}}});
    assert!(validate(&broken, &json!({"next": 5}), "").is_err());
    let err = dsh_core::validate::check_schema(&broken).expect_err("authoring error");
    assert!(err.to_string().contains("nubl"), "{err}");
    // A well-formed target there (and a reference cycle through it) is accepted.
    let fine = json!({"$ref": "#/$devs/n", "$devs": {"n": {"anyOf": [
        {"type": "null"},
        {"type": "object", "properties": {"next": {"$ref": "#/$devs/n"}}}
    ]}}});
    assert!(dsh_core::validate::check_schema(&fine).is_ok());
    assert_eq!(
        violations(fine, json!({"next": {"next": null}})),
        Vec::<String>::new()
    );
}
