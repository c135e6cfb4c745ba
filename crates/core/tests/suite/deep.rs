//! Deep input: REG-06 (a 5,000-deep `oneOf` parameter chain projected on the default test thread)
//! and argument text nested far beyond the limit, refused with a clear error and no overflow.

use dsh_core::json::{JsonError, MAX_DEPTH};
use dsh_core::{Arguments, Json, ToolContext, ToolDefinition, ToolOutput, ToolRegistry};
use serde_json::{Map, Value, json};

use super::fixtures::{args, call_def, keep};

const LAYERS: usize = 5_000;

/// `{oneOf: [{oneOf: [... {type: string} ...], {type: null}]}, {type: null}]}`, built iteratively.
fn one_of_chain(layers: usize) -> Value {
    let mut v = json!({"type": "string"});
    for _ in 0..layers {
        let mut m = Map::new();
        m.insert(
            "oneOf".into(),
            Value::Array(vec![v, json!({"type": "null"})]),
        );
        v = Value::Object(m);
    }
    v
}

/// Counts `oneOf` layers down the first branch and returns the innermost node, iteratively.
fn unwind(mut v: &Value) -> (usize, &Value) {
    let mut layers = 0;
    while let Some(Value::Array(branches)) = v.get("oneOf") {
        layers += 1;
        v = &branches[0];
    }
    (layers, v)
}

fn nested_arrays(depth: usize, leaf: &str) -> String {
    let mut s = "[".repeat(depth);
    s.push_str(leaf);
    s.push_str(&"]".repeat(depth));
    s
}

#[test]
fn reg_06_a_5000_deep_parameter_chain_is_projected_without_overflow() {
    let chain = Json::new(one_of_chain(LAYERS)).expect("within the depth limit");
    let reg = ToolRegistry::new();
    keep(
        &reg,
        ToolDefinition::builder("deep", "deep parameters")
            .parameters(chain)
            .output(ToolOutput::string())
            .execute(|_ctx| async { Ok(Json::string("")) })
            .build()
            .expect("builds"),
    );
    let schemas = reg.schemas(None);
    let (layers, innermost) = unwind(schemas[0].parameters.value());
    assert_eq!(layers, LAYERS);
    assert_eq!(innermost, &json!({"type": "string"}));

    // The projection serializes, parses back equal, and everything drops, all on this thread.
    let text = serde_json::to_string(&schemas).expect("serializes");
    let back = Json::parse(&text).expect("parses");
    let (layers, innermost) = unwind(&back.value()[0]["parameters"]);
    assert_eq!((layers, innermost), (LAYERS, &json!({"type": "string"})));
    // (`Json` compares deep values on a grown stack; plain `Value == Value` would recurse here.)
    assert!(schemas[0].parameters == back.value()[0]["parameters"]);
    assert!(format!("{:?}", schemas[0]).contains("levels deep"));
}

#[tokio::test]
async fn reg_06_a_deep_validated_schema_checks_arguments_without_overflow() {
    let def = ToolDefinition::builder("deep", "deep parameters")
        .validated_parameters(Json::new(one_of_chain(LAYERS)).expect("within the limit"))
        .output(ToolOutput::string())
        .execute(|_ctx| async { Ok(Json::string("ran")) })
        .build()
        .expect("builds");
    // A top-level string matches the innermost branch, but arguments must be an object.
    let err = def
        .check_arguments(&args(json!("s")))
        .expect_err("not an object");
    assert_eq!(err.code(), Some("INVALID_ARGS"));
    let err = def
        .check_arguments(&args(json!({})))
        .expect_err("matches no branch");
    assert_eq!(
        err.message(),
        "invalid arguments: arguments must match one of the allowed shapes"
    );
}

#[test]
fn a_100k_deep_argument_text_is_refused_with_a_clear_error() {
    let text = nested_arrays(100_000, "1");
    assert_eq!(
        Json::parse(&text),
        Err(JsonError::TooDeep { max: MAX_DEPTH })
    );
    assert_eq!(
        JsonError::TooDeep { max: MAX_DEPTH }.to_string(),
        "JSON nests deeper than 20000 levels"
    );
    // The loop passes unparseable text on verbatim (spec S1); a validated tool refuses it with
    // the reason, and classification is exclusive.
    let raw = Arguments::from_raw(&text);
    assert_eq!(raw, Arguments::Raw(text.as_str().into()));
    let def = ToolDefinition::builder("t", "d")
        .validated_parameters(Json::from_shallow(json!({"type": "object"})))
        .output(ToolOutput::string())
        .concurrency_safe(true)
        .execute(|_ctx| async { Ok(Json::string("")) })
        .build()
        .expect("builds");
    let err = def.check_arguments(&raw).expect_err("refused");
    assert_eq!(err.code(), Some("INVALID_ARGS"));
    assert!(
        err.message().contains("nests deeper than 20000 levels"),
        "{err}"
    );
    assert!(!def.is_concurrency_safe(&raw));
}

#[test]
fn deep_text_followed_by_a_syntax_error_does_not_overflow() {
    // The parser has built a deep value by the time it meets the error; dropping it must not
    // recurse on this thread's stack.
    for depth in [MAX_DEPTH, 100_000] {
        let text = format!("[{}, oops]", nested_arrays(depth, "1"));
        assert!(Json::parse(&text).is_err());
        let text = format!("{{\"a\": {}, \"b\": }}", nested_arrays(depth, "1"));
        assert!(Json::parse(&text).is_err());
        assert!(matches!(Arguments::from_raw(&text), Arguments::Raw(_)));
        let objects = format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth));
        assert!(Json::parse(&format!("[{objects}, oops]")).is_err());
    }
}

#[test]
fn brackets_inside_strings_do_not_count_as_nesting() {
    let inner = "[".repeat(100_000);
    let text = serde_json::to_string(&json!({"s": inner})).expect("serializes");
    let parsed = Json::parse(&text).expect("a flat object with a long string");
    assert_eq!(parsed.depth(), 1);
    let escaped = format!("[\"\\\"{}\"]", "{".repeat(50_000));
    assert_eq!(Json::parse(&escaped).expect("parses").depth(), 1);
}

#[tokio::test]
async fn deep_arguments_within_the_limit_flow_through_every_core_stage() {
    let text = nested_arrays(MAX_DEPTH - 1, "\"leaf\"");
    let wrapped = format!("{{\"deep\":{text}}}");
    let a = Arguments::from_raw(&wrapped);
    let json = a.json().expect("parses").clone();
    assert_eq!(json.depth(), MAX_DEPTH);
    assert!(a.to_text() == wrapped, "compact text round-trips");
    let copy = a.value();
    assert_eq!(json, copy);
    // A deep copy is the caller's to dismantle (a plain drop would recurse once per level).
    dsh_core::json::dismantle(copy);

    let def = ToolDefinition::builder("echo_args", "returns its arguments")
        .validated_parameters(Json::from_shallow(
            json!({"type": "object", "properties": {"deep": {"type": "array", "items":
                {"anyOf": [{"type": "string"}, {"$ref": "#/properties/deep"}]}}}}),
        ))
        .output(ToolOutput::json())
        .classify(|_| true)
        .execute(|ctx: ToolContext| async move {
            Ok(ctx.arguments().json().cloned().unwrap_or_else(Json::null))
        })
        .build()
        .expect("builds");
    assert!(def.is_concurrency_safe(&a));
    let r = call_def(&def, a.clone(), None).await;
    assert!(!r.is_error(), "{:?}", r.error());
    assert!(
        Json::ptr_eq(r.value().expect("value"), &json),
        "the value is the same allocation"
    );
    // Pretty text would grow with the square of the depth: deep values render compact.
    let rendered = r.first_text().expect("rendered");
    assert!(rendered == wrapped, "compact rendering");
    let _ = serde_json::to_string(&r).expect("serializes");
}
