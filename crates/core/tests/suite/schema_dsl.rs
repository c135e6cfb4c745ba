//! REG-34..50 and REG-67..74: the "schema DSL". In dsh-core a tool's parameters are either a raw
//! JSON Schema (`ToolBuilder::parameters` / `validated_parameters`) or derived from a Rust input
//! type (`schemars`, `ToolBuilder::execute_typed`); each line is ported to that meaning.
//!
//! Executing a tool here runs the part of a call dsh-core owns (argument check, body, output
//! stage); the staged pipeline around it is covered end to end in dsh-scheduler.

use dsh_core::typed::schema_for;
use dsh_core::{CoreError, Failure, Json, ToolDefinition, ToolOutput, ToolRegistry};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::fixtures::{args, call, call_def, keep, shape, text};

fn schema<T: JsonSchema>() -> Value {
    schema_for::<T>().value().clone()
}

/// Arguments of a file read.
#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct ReadArgs {
    /// The file to read.
    path: String,
    offset: Option<f64>,
    /// How many lines at most.
    limit: Option<f64>,
}

#[test]
fn reg_34_required_fields_become_the_required_list_and_descriptions_stay() {
    let s = schema::<ReadArgs>();
    assert_eq!(s["type"], "object");
    assert_eq!(s["required"], json!(["path"]));
    assert_eq!(
        s["properties"]["path"],
        json!({"description": "The file to read.", "type": "string"})
    );
    assert_eq!(
        s["properties"]["limit"]["description"],
        "How many lines at most."
    );
    assert!(s["properties"]["offset"].get("description").is_none());
    for (name, prop) in s["properties"].as_object().expect("properties") {
        assert!(
            prop.get("required").is_none(),
            "{name} carries a required flag"
        );
    }
    assert!(s.get("$schema").is_none() && s.get("title").is_none());
}

#[derive(Deserialize, JsonSchema)]
struct NoArgs {}

#[test]
fn reg_35_an_empty_spec_is_an_object_with_no_properties_and_no_required() {
    assert_eq!(
        schema::<NoArgs>(),
        json!({"type": "object", "properties": {}})
    );
}

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Connect {
    config: ServerConfig,
}

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct ServerConfig {
    host: String,
    port: Option<u16>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

#[test]
fn reg_36_nested_required_lists_and_open_objects_are_kept() {
    let s = schema::<Connect>();
    assert_eq!(s["required"], json!(["config"]));
    let inner = &s["properties"]["config"];
    assert_eq!(inner["type"], "object");
    assert_eq!(inner["required"], json!(["host"]));
    assert_eq!(inner["additionalProperties"], json!(true));
    assert!(inner["properties"].get("port").is_some());

    // A raw schema is kept verbatim, `additionalProperties: true` included.
    let raw = json!({"type": "object", "properties": {"config": {"type": "object",
        "properties": {"host": {"type": "string"}}, "required": ["host"],
        "additionalProperties": true}}, "required": ["config"]});
    let def = ToolDefinition::builder("raw", "d")
        .validated_parameters(Json::from_shallow(raw.clone()))
        .output(ToolOutput::string())
        .execute(|_ctx| async { Ok(Json::string("")) })
        .build()
        .expect("builds");
    assert_eq!(def.parameters().value(), &raw);
}

#[derive(Deserialize, JsonSchema)]
struct Shout {
    text: String,
    uppercase: Option<bool>,
}

fn shout() -> ToolDefinition {
    ToolDefinition::builder("shout", "repeat, maybe louder")
        .output(ToolOutput::string())
        .execute_typed(|input: Shout, _ctx| async move {
            Ok(if input.uppercase == Some(true) {
                input.text.to_uppercase()
            } else {
                input.text
            })
        })
        .build()
        .expect("builds")
}

#[tokio::test]
async fn reg_37_a_typed_tool_validates_decodes_and_renders() {
    let def = shout();
    assert_eq!(def.parameters().value()["required"], json!(["text"]));
    let r = call_def(
        &def,
        args(json!({"text": "hello", "uppercase": true})),
        None,
    )
    .await;
    assert_eq!(
        shape(&r),
        json!({"content": [{"type": "text", "text": "HELLO"}], "isError": false, "value": "HELLO"})
    );
    let r = call_def(&def, args(json!({"text": "hello"})), None).await;
    assert_eq!(text(&r), "hello");
}

#[tokio::test]
async fn reg_38_required_fields_are_plain_optional_ones_are_option() {
    // Rust analogue of the compile-time inference test: `text: String` is required, `uppercase:
    // Option<bool>` may be omitted (and `null` decodes as absent).
    let def = shout();
    let required = &def.parameters().value()["required"];
    assert_eq!(required, &json!(["text"]));
    let r = call_def(&def, args(json!({"text": "a", "uppercase": null})), None).await;
    assert_eq!(text(&r), "a");
    let r = call_def(&def, args(json!({"uppercase": true})), None).await;
    assert_eq!(
        text(&r),
        "Error: invalid arguments: missing required property \"text\""
    );
}

#[derive(Deserialize, JsonSchema)]
struct ReqOpt {
    req: String,
    opt: Option<String>,
}

#[tokio::test]
async fn reg_39_register_project_and_execute_a_typed_definition() {
    let reg = ToolRegistry::new();
    keep(
        &reg,
        ToolDefinition::builder("reqopt", "required and optional")
            .output(ToolOutput::string())
            .execute_typed(|i: ReqOpt, _ctx| async move {
                Ok(format!("{}:{}", i.req, i.opt.as_deref().unwrap_or("none")))
            })
            .build()
            .expect("builds"),
    );
    let schemas = reg.schemas(None);
    assert_eq!(schemas[0].parameters.value()["required"], json!(["req"]));
    let r = call(&reg, "reqopt", None, args(json!({"req": "hello"}))).await;
    assert_eq!(text(&r), "hello:none");
    let r = call(&reg, "reqopt", None, args(json!({"req": "a", "opt": "b"}))).await;
    assert_eq!(text(&r), "a:b");
}

#[tokio::test]
async fn reg_40_raw_json_schema_is_projected_verbatim_and_not_validated() {
    let raw = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"path": {"type": "string", "x-mcp-hint": {"kind": "path"}}},
        "required": ["path"]
    });
    let reg = ToolRegistry::new();
    keep(
        &reg,
        ToolDefinition::builder("mcp_read", "from an MCP server")
            .parameters(Json::from_shallow(raw.clone()))
            .output(ToolOutput::string())
            .execute(|ctx| async move {
                let path = ctx
                    .arguments()
                    .json()
                    .and_then(|j| j.value()["path"].as_str().map(str::to_owned));
                Ok(Json::string(path.unwrap_or_default()))
            })
            .build()
            .expect("builds"),
    );
    assert_eq!(reg.schemas(None)[0].parameters.value(), &raw);
    let r = call(&reg, "mcp_read", None, args(json!({"path": "/tmp"}))).await;
    assert_eq!(
        shape(&r)["content"],
        json!([{"type": "text", "text": "/tmp"}])
    );
    assert!(!r.is_error());
}

/// A color.
#[derive(Deserialize, Serialize, JsonSchema, Debug, PartialEq)]
#[serde(rename_all = "lowercase")]
enum Color {
    Red,
    Green,
}

fn twenty_five() -> u32 {
    25
}

fn green() -> Color {
    Color::Green
}

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Props {
    color: Color,
    #[serde(default = "twenty_five")]
    #[schemars(default = "twenty_five")]
    lines: u32,
    tags: Vec<String>,
    #[serde(default = "green")]
    #[schemars(default = "green")]
    shade: Color,
    bare: String,
    anything: Vec<Value>,
}

#[test]
fn reg_41_an_enum_property_carries_type_enum_and_description() {
    let s = schema::<Props>();
    assert_eq!(
        s["properties"]["color"],
        json!({"description": "A color.", "type": "string", "enum": ["red", "green"]})
    );
}

#[test]
fn reg_42_a_default_is_emitted() {
    assert_eq!(
        schema::<Props>()["properties"]["lines"]["default"],
        json!(25)
    );
}

#[test]
fn reg_43_an_array_of_scalars_is_emitted_with_items() {
    assert_eq!(
        schema::<Props>()["properties"]["tags"],
        json!({"type": "array", "items": {"type": "string"}})
    );
}

#[test]
fn reg_44_enum_and_default_are_both_emitted() {
    let shade = &schema::<Props>()["properties"]["shade"];
    assert_eq!(shade["enum"], json!(["red", "green"]));
    assert_eq!(shade["default"], json!("green"));
}

#[test]
fn reg_45_a_bare_property_is_exactly_its_type() {
    assert_eq!(
        schema::<Props>()["properties"]["bare"],
        json!({"type": "string"})
    );
}

#[test]
fn reg_46_an_array_without_item_constraint_is_exactly_type_array() {
    assert_eq!(
        schema::<Props>()["properties"]["anything"],
        json!({"type": "array"})
    );
}

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct AllOptional {
    nested: Inner,
}

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Inner {
    a: Option<String>,
    #[serde(default)]
    b: Vec<u8>,
}

#[test]
fn reg_47_a_nested_object_with_only_optional_properties_has_no_required() {
    let s = schema::<AllOptional>();
    assert_eq!(s["required"], json!(["nested"]));
    assert!(s["properties"]["nested"].get("required").is_none());
}

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Fleet {
    #[serde(default)]
    servers: Vec<Server>,
}

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Server {
    host: String,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

#[test]
fn reg_48_omittable_keys_decode_as_absent() {
    // Rust analogue of the type test: `Option` and `#[serde(default)]` fields may be omitted.
    let exec = super::fixtures::exec("t", args(json!({})), None);
    let ctx = super::fixtures::ctx(exec, dsh_core::Signal::never());
    let fleet: Fleet = dsh_core::typed::decode_input(&ctx).expect("decodes");
    assert!(fleet.servers.is_empty());
}

#[test]
fn reg_49_inference_recurses_into_arrays_of_open_objects() {
    let input = json!({"servers": [{"host": "a", "port": 1}, {"host": "b", "tls": true}]});
    let exec = super::fixtures::exec("t", args(input), None);
    let ctx = super::fixtures::ctx(exec, dsh_core::Signal::never());
    let fleet: Fleet = dsh_core::typed::decode_input(&ctx).expect("decodes");
    assert_eq!(fleet.servers[1].host, "b");
    assert_eq!(fleet.servers[1].extra.get("tls"), Some(&json!(true)));
}

#[test]
fn reg_50_array_items_keep_their_own_required_list() {
    let s = schema::<Fleet>();
    assert!(s.get("required").is_none());
    let items = &s["properties"]["servers"]["items"];
    assert_eq!(items["type"], "object");
    assert_eq!(items["additionalProperties"], json!(true));
    assert_eq!(items["required"], json!(["host"]));
    assert_eq!(items["properties"]["host"], json!({"type": "string"}));
}

fn budgeted(ms: Option<f64>) -> Result<ToolDefinition, CoreError> {
    let b = ToolDefinition::builder("t", "d")
        .output(ToolOutput::string())
        .execute(|_ctx| async { Ok(Json::string("")) });
    match ms {
        Some(ms) => b.timeout_ms_from_config(ms).build(),
        None => b.build(),
    }
}

#[test]
fn reg_67_a_declared_budget_is_kept() {
    assert_eq!(
        budgeted(Some(30_000.0)).expect("builds").timeout_ms(),
        Some(30_000)
    );
}

#[test]
fn reg_68_no_budget_means_none() {
    assert_eq!(budgeted(None).expect("builds").timeout_ms(), None);
}

#[test]
fn reg_69_zero_or_negative_budgets_are_refused() {
    for ms in [0.0, -5.0] {
        let e = budgeted(Some(ms)).expect_err("refused");
        assert_eq!(e.to_string(), "timeoutMs must be a positive finite number");
    }
}

#[test]
fn reg_70_an_infinite_budget_is_refused() {
    let e = budgeted(Some(f64::INFINITY)).expect_err("refused");
    assert!(e.to_string().contains("positive finite number"), "{e}");
}

#[derive(Deserialize, JsonSchema)]
struct Paint {
    color: Color,
}

#[tokio::test]
async fn reg_71_string_enums_are_serde_enums() {
    let def = ToolDefinition::builder("paint", "d")
        .output(ToolOutput::string())
        .execute_typed(|p: Paint, _ctx| async move { Ok(format!("{:?}", p.color)) })
        .build()
        .expect("builds");
    assert_eq!(
        text(&call_def(&def, args(json!({"color": "red"})), None).await),
        "Red"
    );
    assert_eq!(
        text(&call_def(&def, args(json!({"color": "blue"})), None).await),
        "Error: invalid arguments: \"color\" must be one of [\"red\",\"green\"]"
    );
}

// REG-72 and REG-73 are presentation only (`presentCall` / `presentResult`); dsh-core keeps no
// presenters, so there is nothing to port here.

#[tokio::test]
async fn reg_74_the_body_fails_malformed_arguments_with_invalid_args() {
    let def = ToolDefinition::builder("read", "d")
        .output(ToolOutput::string())
        .execute_typed(|a: ReadArgs, _ctx| async move { Ok(a.path) })
        .build()
        .expect("builds");
    for bad in [
        json!({}),
        json!({"unexpected": {"shape": [1, 2]}}),
        json!({"path": 7}),
    ] {
        let r = call_def(&def, args(bad), None).await;
        assert!(r.is_error());
        assert_eq!(r.error().and_then(Failure::code), Some("INVALID_ARGS"));
    }
}

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Tree {
    label: String,
    #[serde(default)]
    kids: Vec<Tree>,
}

#[tokio::test]
async fn typed_recursive_inputs_validate_through_their_definitions() {
    let def = ToolDefinition::builder("tree", "d")
        .output(ToolOutput::json())
        .execute_typed(|t: Tree, _ctx| async move { Ok(t.kids.len()) })
        .build()
        .expect("builds");
    let ok = call_def(
        &def,
        args(json!({"label": "root", "kids": [{"label": "a", "kids": [{"label": "b"}]}, {"label": "c"}]})),
        None,
    )
    .await;
    assert_eq!(shape(&ok)["value"], json!(2), "{ok:?}");
    let bad = call_def(
        &def,
        args(json!({"label": "root", "kids": [{"kids": []}]})),
        None,
    )
    .await;
    assert_eq!(
        text(&bad),
        "Error: invalid arguments: missing required property \"kids[0].label\""
    );
}

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Shapes {
    pair: (u32, String),
    counts: std::collections::BTreeMap<String, u32>,
}

#[tokio::test]
async fn typed_tuples_and_maps_validate_by_position_and_by_value() {
    let def = ToolDefinition::builder("shapes", "d")
        .output(ToolOutput::string())
        .execute_typed(|s: Shapes, _ctx| async move { Ok(s.pair.1) })
        .build()
        .expect("builds");
    let ok = call_def(
        &def,
        args(json!({"pair": [1, "one"], "counts": {"a": 1}})),
        None,
    )
    .await;
    assert_eq!(text(&ok), "one");
    let bad = call_def(
        &def,
        args(json!({"pair": [1, 2], "counts": {"a": "x"}})),
        None,
    )
    .await;
    assert_eq!(
        text(&bad),
        "Error: invalid arguments: \"pair[1]\" must be a string; \"counts.a\" must be an integer"
    );
}

#[tokio::test]
async fn a_typed_value_that_is_not_lossless_json_is_an_output_error() {
    let def = ToolDefinition::builder("lossy", "d")
        .output(ToolOutput::json())
        .execute_typed(|_: NoArgs, _ctx| async move { Ok(vec![1.0, f64::NAN]) })
        .build()
        .expect("builds");
    let r = call_def(&def, args(json!({})), None).await;
    let err = r.error().expect("fails");
    assert_eq!(err.code(), Some("INVALID_TOOL_OUTPUT"), "{err:?}");
    assert_eq!(err.info().map(|i| &*i.name), Some("ToolOutputError"));
    assert!(
        text(&r).starts_with("Error: tool \"lossy\" value snapshot failed: "),
        "{}",
        text(&r)
    );
    assert!(text(&r).contains("not lossless JSON"), "{}", text(&r));
}
