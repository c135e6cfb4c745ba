//! Lossless values: REG-07 (a value that cannot round-trip is an error), frozen shared JSON,
//! argument materialization (`Arguments::from_raw`), and signal basics.

use dsh_core::json::JsonError;
use dsh_core::{
    AbortController, AbortReason, Arguments, CancelCause, CoreError, Json, Signal, ToolDefinition,
    ToolOutput, ToolRegistry,
};
use serde::Serialize;
use serde_json::json;

#[derive(Serialize)]
struct LossySchema {
    #[serde(rename = "type")]
    ty: &'static str,
    properties: Props,
}

#[derive(Serialize)]
struct Props {
    n: NumberProp,
}

#[derive(Serialize)]
struct NumberProp {
    #[serde(rename = "type")]
    ty: &'static str,
    default: f64,
}

fn lossy() -> LossySchema {
    LossySchema {
        ty: "object",
        properties: Props {
            n: NumberProp {
                ty: "number",
                default: f64::NAN,
            },
        },
    }
}

#[test]
fn reg_07_a_schema_with_a_non_finite_number_is_refused() {
    // serde_json would silently turn NaN into null; a snapshot refuses instead.
    let err = Json::snapshot(&lossy()).expect_err("NaN is not lossless");
    assert!(matches!(err, JsonError::NonFinite(_)), "{err:?}");
    assert!(err.to_string().contains("not lossless JSON"), "{err}");
    assert!(Json::snapshot(&f64::INFINITY).is_err());
    assert!(Json::snapshot(&Some(f32::NEG_INFINITY)).is_err());

    let err = ToolDefinition::builder("lossy-schema", "d")
        .parameters_from(&lossy())
        .output(ToolOutput::string())
        .execute(|_ctx| async { Ok(Json::string("")) })
        .build()
        .expect_err("refused");
    assert_eq!(err, CoreError::LossyParameters("lossy-schema".into()));
    assert_eq!(
        err.to_string(),
        "tool \"lossy-schema\" parameters must be lossless JSON before schema projection"
    );

    // The same schema with a finite default is accepted and projected as written.
    let mut fine = lossy();
    fine.properties.n.default = 2.5;
    let def = ToolDefinition::builder("fine", "d")
        .parameters_from(&fine)
        .output(ToolOutput::string())
        .execute(|_ctx| async { Ok(Json::string("")) })
        .build()
        .expect("builds");
    let reg = ToolRegistry::new();
    reg.register(def).expect("registers").keep();
    assert_eq!(
        reg.schemas(None)[0].parameters.value(),
        &json!({"type": "object", "properties": {"n": {"type": "number", "default": 2.5}}})
    );
}

#[test]
fn snapshots_and_clones_share_one_frozen_value() {
    let a = Json::parse(r#"{"big": [1, 2, 3]}"#).expect("parses");
    let b = a.clone();
    assert!(Json::ptr_eq(&a, &b));
    let args = Arguments::Json(a.clone());
    assert!(Json::ptr_eq(args.json().expect("json"), &a));
}

#[test]
fn arguments_from_raw_text() {
    assert_eq!(
        Arguments::from_raw(""),
        Arguments::Json(Json::empty_object())
    );
    assert_eq!(
        Arguments::from_raw("  \n"),
        Arguments::Json(Json::empty_object())
    );
    assert_eq!(
        Arguments::from_raw(r#"{"a":1}"#)
            .json()
            .map(|j| j.value().clone()),
        Some(json!({"a": 1}))
    );
    assert_eq!(
        Arguments::from_raw("not json"),
        Arguments::Raw("not json".into())
    );
    assert_eq!(Arguments::from_raw("not json").to_text(), "not json");
    assert_eq!(Arguments::from_raw("not json").value(), json!("not json"));
    assert_eq!(Arguments::from_raw(r#"{"a" : 1}"#).to_text(), r#"{"a":1}"#);
}

#[test]
fn syntax_errors_give_their_position() {
    let e = Json::parse("{\n  \"a\": 1,\n  x\n}").expect_err("bad");
    match &e {
        JsonError::Syntax {
            line,
            column,
            message,
        } => {
            assert_eq!((*line, *column), (3, 3));
            assert_eq!(message, "key must be a string");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        e.to_string(),
        "invalid JSON at line 3 column 3: key must be a string"
    );
}

#[test]
fn signals_keep_the_first_reason_and_fuse_one_way() {
    let a = AbortController::new();
    let b = AbortController::new();
    let fused = Signal::any(&a.signal(), &b.signal());
    assert!(!fused.is_aborted());
    a.abort(AbortReason::Cancelled(CancelCause::Parent));
    b.cancel();
    assert_eq!(
        fused.reason(),
        Some(AbortReason::Cancelled(CancelCause::Parent))
    );
    assert!(!Signal::same(&fused, &a.signal()));

    let (child, ctl) = Signal::never().child();
    ctl.cancel();
    assert!(child.is_aborted());
}

#[test]
fn json_output_renders_pretty_and_deep_values_compact() {
    use dsh_core::{PRETTY_MAX_DEPTH, render_value_text};
    let obj = Json::from_shallow(json!({"n": 42, "ok": true}));
    assert_eq!(
        render_value_text(&obj),
        "{\n  \"n\": 42,\n  \"ok\": true\n}"
    );
    assert_eq!(
        render_value_text(&Json::from_shallow(json!(["x", 2]))),
        "[\n  \"x\",\n  2\n]"
    );
    assert_eq!(render_value_text(&Json::from_shallow(json!({}))), "{}");
    assert_eq!(render_value_text(&Json::null()), "null");
    assert_eq!(render_value_text(&Json::string("raw")), "raw");
    let at_limit = format!(
        "{}1{}",
        "[".repeat(PRETTY_MAX_DEPTH),
        "]".repeat(PRETTY_MAX_DEPTH)
    );
    let pretty = render_value_text(&Json::parse(&at_limit).expect("parses"));
    assert!(pretty.contains('\n'));
    let deeper = format!("[{at_limit}]");
    assert_eq!(
        render_value_text(&Json::parse(&deeper).expect("parses")),
        deeper
    );
}

#[test]
fn a_long_chain_of_derived_signals_fires_without_overflow() {
    let root = AbortController::new();
    let mut leaf = root.signal();
    let mut keep = Vec::new();
    for _ in 0..100_000 {
        let (child, ctl) = leaf.child();
        keep.push(ctl);
        leaf = child;
    }
    root.abort(AbortReason::Cancelled(CancelCause::Parent));
    assert_eq!(
        leaf.reason(),
        Some(AbortReason::Cancelled(CancelCause::Parent))
    );
}

#[test]
fn a_budget_no_timer_can_arm_is_refused_when_defined() {
    let build = |ms: f64| {
        ToolDefinition::builder("t", "d")
            .output(ToolOutput::string())
            .execute(|_ctx| async { Ok(Json::null()) })
            .timeout_ms_from_config(ms)
            .build()
    };
    assert_eq!(
        build(2_147_483_647.0).map(|d| d.timeout_ms()),
        Ok(Some(2_147_483_647))
    );
    for too_large in [2_147_483_648.0, 1e19, 1e300] {
        let e = build(too_large).expect_err("refused");
        assert_eq!(
            e.to_string(),
            "timeoutMs must be no greater than 2147483647"
        );
    }
    let def = build(10.0).expect("builds");
    assert!(def.with_timeout_ms(Some(u64::MAX)).is_err());
    assert_eq!(def.with_timeout_ms(None).map(|d| d.timeout_ms()), Ok(None));
    assert_eq!(
        def.with_timeout_ms(Some(7)).map(|d| d.timeout_ms()),
        Ok(Some(7))
    );
}
