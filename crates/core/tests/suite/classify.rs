//! SCH-01..09: fail-closed classification (`ToolRegistry::execution_mode`,
//! `ToolDefinition::is_concurrency_safe`): only an exact `true` for these arguments is parallel.
//! SCH-10 is tested where the scheduler runs each mode (`dsh-scheduler`, `sch_barriers`).

use std::sync::Arc;

use dsh_core::{AgentId, Arguments, ExecutionMode, Json, ToolDefinition, ToolOutput, ToolRegistry};
use parking_lot::Mutex;
use serde_json::{Value, json};

use super::fixtures::{args, keep, keep_scoped};

fn builder(name: &str) -> dsh_core::ToolBuilder {
    ToolDefinition::builder(name, "d")
        .output(ToolOutput::string())
        .execute(|_ctx| async { Ok(Json::string("")) })
}

fn mode(reg: &ToolRegistry, name: &str, a: Value) -> ExecutionMode {
    reg.execution_mode(name, None, &args(a))
}

#[test]
fn sch_01_a_classifier_that_always_says_true_is_parallel() {
    let reg = ToolRegistry::new();
    keep(
        &reg,
        builder("always")
            .classify(|_| true)
            .build()
            .expect("builds"),
    );
    keep(
        &reg,
        builder("flag")
            .concurrency_safe(true)
            .build()
            .expect("builds"),
    );
    assert_eq!(mode(&reg, "always", json!({})), ExecutionMode::Parallel);
    assert_eq!(mode(&reg, "flag", json!({})), ExecutionMode::Parallel);
}

#[test]
fn sch_02_no_classifier_is_exclusive() {
    let reg = ToolRegistry::new();
    keep(&reg, builder("plain").build().expect("builds"));
    keep(
        &reg,
        builder("off")
            .concurrency_safe(false)
            .build()
            .expect("builds"),
    );
    assert_eq!(mode(&reg, "plain", json!({})), ExecutionMode::Exclusive);
    assert_eq!(mode(&reg, "off", json!({})), ExecutionMode::Exclusive);
}

#[test]
fn sch_03_an_unknown_or_hidden_tool_is_exclusive() {
    let reg = ToolRegistry::new();
    assert_eq!(mode(&reg, "ghost", json!({})), ExecutionMode::Exclusive);
    let a = AgentId::new("a");
    keep_scoped(
        &reg,
        &a,
        builder("mine").classify(|_| true).build().expect("builds"),
    );
    assert_eq!(
        reg.execution_mode("mine", Some(&a), &args(json!({}))),
        ExecutionMode::Parallel
    );
    assert_eq!(mode(&reg, "mine", json!({})), ExecutionMode::Exclusive);
}

#[test]
fn sch_04_classification_is_per_call_from_its_arguments() {
    let reg = ToolRegistry::new();
    keep(
        &reg,
        builder("fs")
            .classify(|a| a.get("mode") == Some(&json!("read")))
            .build()
            .expect("builds"),
    );
    assert_eq!(
        mode(&reg, "fs", json!({"mode": "read"})),
        ExecutionMode::Parallel
    );
    assert_eq!(
        mode(&reg, "fs", json!({"mode": "write"})),
        ExecutionMode::Exclusive
    );
}

#[test]
fn sch_05_arguments_that_fail_the_schema_are_exclusive() {
    let reg = ToolRegistry::new();
    let schema =
        json!({"type": "object", "properties": {"mode": {"type": "string"}}, "required": ["mode"]});
    keep(
        &reg,
        builder("checked")
            .validated_parameters(Json::from_shallow(schema.clone()))
            .classify(|_| true)
            .build()
            .expect("builds"),
    );
    keep(
        &reg,
        builder("checked-flag")
            .validated_parameters(Json::from_shallow(schema))
            .concurrency_safe(true)
            .build()
            .expect("builds"),
    );
    for name in ["checked", "checked-flag"] {
        assert_eq!(mode(&reg, name, json!({})), ExecutionMode::Exclusive);
        assert_eq!(
            mode(&reg, name, json!({"mode": "x"})),
            ExecutionMode::Parallel
        );
    }
}

#[test]
fn sch_06_a_panicking_classifier_is_exclusive_and_contained() {
    let reg = ToolRegistry::new();
    keep(
        &reg,
        builder("panicky")
            .classify(|_| panic!("classifier exploded"))
            .build()
            .expect("builds"),
    );
    assert_eq!(mode(&reg, "panicky", json!({})), ExecutionMode::Exclusive);
}

#[test]
fn sch_07_only_an_exact_true_is_parallel() {
    // A Rust classifier returns `bool`, so a truthy non-boolean cannot be expressed. The dynamic
    // input that remains is the model's argument text: text that is not JSON (even "yes" or
    // "true" spelled loosely) is never parallel, whatever the classifier would say.
    let reg = ToolRegistry::new();
    let called = Arc::new(Mutex::new(0));
    let seen = called.clone();
    keep(
        &reg,
        builder("always")
            .classify(move |_| {
                *seen.lock() += 1;
                true
            })
            .build()
            .expect("builds"),
    );
    for raw in ["yes", "True", "{not json"] {
        let a = Arguments::from_raw(raw);
        assert!(matches!(a, Arguments::Raw(_)));
        assert_eq!(
            reg.execution_mode("always", None, &a),
            ExecutionMode::Exclusive
        );
    }
    assert_eq!(*called.lock(), 0, "raw text never reaches the classifier");
    assert_eq!(
        reg.execution_mode("always", None, &Arguments::from_raw("true")),
        ExecutionMode::Parallel,
        "the JSON text `true` parses, and the classifier decides"
    );
}

#[test]
fn sch_08_the_classifier_receives_the_parsed_arguments_unchanged() {
    let reg = ToolRegistry::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    keep(
        &reg,
        builder("rec")
            .classify(move |a| {
                log.lock().push(a.clone());
                true
            })
            .build()
            .expect("builds"),
    );
    assert_eq!(
        reg.execution_mode("rec", None, &Arguments::from_raw(r#"{"anything":1}"#)),
        ExecutionMode::Parallel
    );
    assert_eq!(*seen.lock(), vec![json!({"anything": 1})]);
}

#[test]
fn sch_09_the_classifier_never_reaches_the_projection() {
    let reg = ToolRegistry::new();
    keep(
        &reg,
        builder("c").classify(|_| true).build().expect("builds"),
    );
    let v = serde_json::to_value(&reg.schemas(None)[0]).expect("serializes");
    let mut keys: Vec<&String> = v.as_object().expect("object").keys().collect();
    keys.sort();
    assert_eq!(keys, ["description", "name", "parameters"]);
}
