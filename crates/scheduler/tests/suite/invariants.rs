//! LOG-18..20: the tool-pipeline invariant checker, fed by hand and by the runtime itself.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use dsh_core::{Arguments, ToolExecution, ToolExecutionInput, ToolRegistry};
use dsh_guard::Hooks;
use dsh_scheduler::{PipelineChecker, Runtime, Stage};
use dsh_test_support::{PreFn, echo_tool, input};
use serde_json::json;

fn exec(call_id: &str, name: &str) -> std::sync::Arc<ToolExecution> {
    ToolExecution::new(ToolExecutionInput::new(
        call_id,
        name,
        Arguments::from_raw("{}"),
    ))
}

#[test]
fn log_18_full_and_denial_orders_pass_and_a_registry_change_is_no_violation() {
    let checker = PipelineChecker::new();
    let full = exec("c1", "echo");
    for stage in [
        Stage::PreExecute,
        Stage::Execute,
        Stage::PostExecute,
        Stage::Result,
    ] {
        assert_eq!(checker.observe(stage, &full), Ok(()));
    }
    let denied = exec("c2", "echo");
    for stage in [Stage::PreExecute, Stage::PostExecute, Stage::Result] {
        assert_eq!(checker.observe(stage, &denied), Ok(()));
    }
    checker.registry_changed();
    assert_eq!(checker.in_flight(), 0, "finished executions are forgotten");
}

#[test]
fn log_19_repeated_and_out_of_order_stages_are_rejected() {
    let checker = PipelineChecker::new();
    let twice = exec("a", "echo");
    checker.observe(Stage::PreExecute, &twice).unwrap();
    let err = checker.observe(Stage::PreExecute, &twice).unwrap_err();
    assert!(err.0.contains("repeated"), "{err}");

    let bare = exec("b", "echo");
    let err = checker.observe(Stage::Execute, &bare).unwrap_err();
    assert!(err.0.contains("must follow tools/pre-execute"), "{err}");

    let post_only = exec("c", "echo");
    let err = checker.observe(Stage::PostExecute, &post_only).unwrap_err();
    assert!(
        err.0
            .contains("must follow tools/pre-execute or tools/execute"),
        "{err}"
    );
}

#[test]
fn log_20_a_result_needs_a_non_empty_name_and_call_id() {
    let checker = PipelineChecker::new();
    for (id, name) in [("c1", ""), ("", "echo")] {
        let err = checker.observe(Stage::Result, &exec(id, name)).unwrap_err();
        assert!(err.0.contains("non-empty name and callId"), "{err}");
    }
}

#[tokio::test]
async fn log_18_the_runtime_keeps_its_own_stages_in_order() {
    // Debug builds check every call's stages as they happen: an allowed call, a denied one and
    // an unknown tool all finish without tripping the check.
    let registry = ToolRegistry::new();
    registry.register(echo_tool()).unwrap().keep();
    let hooks = Hooks::new();
    hooks
        .on_pre_execute(
            dsh_guard::Scope::Global,
            PreFn(|e: &ToolExecution| {
                Ok((e.call_id() == "deny").then(|| dsh_core::PreToolDecision::deny("no")))
            }),
        )
        .keep();
    let rt = Runtime::new(registry, hooks);
    for (id, name) in [("ok", "echo"), ("deny", "echo"), ("missing", "nope")] {
        let r = rt.execute(input(id, name, json!({"text": "x"}))).await;
        assert_eq!(r.is_error(), id != "ok", "{id}: {r:?}");
    }
}
