//! `RuntimeConfig::step_timing`: one `dsh/step-timing` event after a step's last result, with
//! each call's stage marks in order; none when timing is off (the default), so the log holds only
//! the reference's event types.

// Tests state their expectations with `unwrap`/`expect`: a panic is the failure report.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;

use super::support::*;
use async_trait::async_trait;
use dsh_core::{Failure, PreToolDecision, Signal, ToolExecution, ToolRegistry};
use dsh_guard::{Hooks, Scope};
use dsh_scheduler::{Approver, Runtime, RuntimeConfig, STEP_TIMING, StepContext, ToolCallBlock};
use dsh_session::Session;
use dsh_test_support::PreFn;

fn step(session: &Session) -> StepContext {
    StepContext {
        session: session.clone(),
        turn: 1,
        step: 1,
        agent: None,
        signal: Signal::never(),
        max_parallel: 4,
    }
}

fn runtime_with(timing: bool) -> Arc<Runtime> {
    let registry = ToolRegistry::new();
    registry
        .register(dsh_test_support::echo_tool())
        .unwrap()
        .keep();
    Arc::new(
        Runtime::new(registry, Hooks::new()).with_config(RuntimeConfig {
            step_timing: timing,
            ..RuntimeConfig::default()
        }),
    )
}

#[tokio::test]
async fn step_timing_event_follows_the_last_result_with_ordered_marks() {
    let rt = runtime_with(true);
    let session = Session::in_memory("timing");
    rt.run_step(
        &step(&session),
        &[
            ToolCallBlock::new("c1", "echo", r#"{"text":"a"}"#),
            ToolCallBlock::new("c2", "echo", r#"{"text":"b"}"#),
        ],
    )
    .await
    .unwrap();
    let types = types(&session);
    assert_eq!(
        types.last().map(String::as_str),
        Some(STEP_TIMING),
        "{types:?}"
    );
    assert_eq!(types.iter().filter(|t| *t == STEP_TIMING).count(), 1);
    assert_eq!(
        types.len(),
        5,
        "two calls, two results, one timing: {types:?}"
    );
    let events = log(&session);
    let data = events.last().unwrap().1.data().value().clone();
    assert_eq!(data["turn"], 1);
    assert_eq!(data["step"], 1);
    assert!(data["startedAt"].as_u64().unwrap() > 1_600_000_000_000);
    let calls = data["calls"].as_array().unwrap();
    let ids: Vec<_> = calls
        .iter()
        .map(|c| c["callId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["c1", "c2"], "model order");
    for c in calls {
        assert_ordered_marks(c);
    }
    // The history a model is sent back is the same with or without it.
    let timing_seq = events.last().unwrap().0;
    assert_eq!(
        history_before(&session, u64::MAX),
        history_before(&session, timing_seq)
    );
    assert!(!history_before(&session, u64::MAX).is_empty());
}

/// Every mark of a call's entry is there, in stage order, and no question was asked.
fn assert_ordered_marks(c: &serde_json::Value) {
    let marks: Vec<u64> = [
        "recorded",
        "prepare",
        "dispatch",
        "dispatched",
        "finalize",
        "done",
    ]
    .iter()
    .map(|k| {
        c[*k]
            .as_u64()
            .unwrap_or_else(|| panic!("{k} missing in {c}"))
    })
    .collect();
    assert!(marks.windows(2).all(|w| w[0] <= w[1]), "{c}");
    assert!(c.get("approval").is_none(), "no question was asked: {c}");
}

#[tokio::test]
async fn step_timing_of_a_one_call_step_has_every_mark_in_order() {
    let rt = runtime_with(true);
    let session = Session::in_memory("timing-one");
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    rt.run_step(
        &step(&session),
        &[ToolCallBlock::new("c1", "echo", r#"{"text":"a"}"#)],
    )
    .await
    .unwrap();
    let after = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert_eq!(
        types(&session).last().map(String::as_str),
        Some(STEP_TIMING)
    );
    let events = log(&session);
    let data = events.last().unwrap().1.data().value().clone();
    let started = data["startedAt"].as_u64().unwrap();
    // The wall clock is carried forward from a reading at most a second old.
    assert!(
        started + 1_000 >= before && started <= after + 1_000,
        "{before} <= {started} <= {after}"
    );
    let calls = data["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{data}");
    assert_eq!(calls[0]["callId"], "c1");
    assert_ordered_marks(&calls[0]);
    // Alone in its step, the call's prepare begins as it is recorded (one clock read: only
    // its making runs between); finalize begins as its body returns.
    assert!(calls[0]["recorded"].is_u64(), "{data}");
    assert_eq!(calls[0]["prepare"], calls[0]["recorded"], "{data}");
    assert_eq!(calls[0]["finalize"], calls[0]["dispatched"], "{data}");
}

#[tokio::test]
async fn step_timing_is_off_by_default() {
    assert!(!RuntimeConfig::default().step_timing);
    let rt = runtime_with(false);
    let session = Session::in_memory("no-timing");
    rt.run_step(&step(&session), &[ToolCallBlock::new("c1", "echo", "{}")])
        .await
        .unwrap();
    assert_eq!(types(&session), ["tool/call", "tool/result"]);
}

/// Grants every question after a moment, so the approval has a length of its own.
struct SlowYes;

#[async_trait]
impl Approver for SlowYes {
    async fn approve(&self, _exec: &ToolExecution, _reason: Option<&str>) -> Result<(), Failure> {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        Ok(())
    }
}

#[tokio::test]
async fn step_timing_marks_an_approval_inside_prepare_before_dispatch() {
    let registry = ToolRegistry::new();
    registry
        .register(dsh_test_support::echo_tool())
        .unwrap()
        .keep();
    let hooks = Hooks::new();
    hooks
        .on_pre_execute(
            Scope::Global,
            PreFn(|_e: &ToolExecution| Ok(Some(PreToolDecision::ask("a human decides")))),
        )
        .keep();
    let rt = Arc::new(
        Runtime::new(registry, hooks)
            .with_approver(Arc::new(SlowYes))
            .with_config(RuntimeConfig {
                step_timing: true,
                ..RuntimeConfig::default()
            }),
    );
    let session = Session::in_memory("approval-timing");
    rt.run_step(&step(&session), &[ToolCallBlock::new("c1", "echo", "{}")])
        .await
        .unwrap();
    let events = log(&session);
    let c = events.last().unwrap().1.data().value()["calls"][0].clone();
    let asked = c["approval"][0].as_u64().unwrap();
    let answered = c["approval"][1].as_u64().unwrap();
    assert!(c["prepare"].as_u64().unwrap() <= asked, "{c}");
    assert!(answered - asked >= 20_000, "the approver took 20 ms: {c}");
    assert!(answered <= c["dispatch"].as_u64().unwrap(), "{c}");
}
