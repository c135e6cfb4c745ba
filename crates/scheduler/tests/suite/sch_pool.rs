//! SCH-17..22: the size of the rolling pool: validation of the configured size, the default of
//! ten, a call logged only when it starts, a pool of one, and the cap of an agent-scoped driver.

// Tests state their expectations with `unwrap`/`expect`: a panic is the failure report.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use super::support::*;
use dsh_core::codes::messages;
use dsh_core::{AgentId, ExecutionMode, Signal, ToolRegistry};
use dsh_guard::Hooks;
use dsh_scheduler::{
    DEFAULT_MAX_PARALLEL, SchedulerError, StepContext, ToolCallBlock, TurnDriver,
    max_parallel_from_config, validate_max_parallel,
};
use dsh_session::Session;
use dsh_test_support::Gate;
use serde_json::json;

#[test]
fn sch_17_configured_pool_size_must_be_a_positive_integer() {
    for bad in [
        json!(0),
        json!(1.5),
        json!(-1),
        json!(0.0),
        json!("3"),
        json!(null),
    ] {
        let err = max_parallel_from_config(&bad).expect_err("rejected");
        assert_eq!(
            err.to_string(),
            messages::MAX_PARALLEL_POSITIVE,
            "for {bad}"
        );
    }
    assert_eq!(max_parallel_from_config(&json!(1)).unwrap(), 1);
    assert_eq!(max_parallel_from_config(&json!(10.0)).unwrap(), 10);
    assert!(validate_max_parallel(0).is_err());
    assert_eq!(validate_max_parallel(4).unwrap(), 4);
}

// SCH-18: a fractional cap cannot be expressed when constructing directly (the field is a
// `usize`); the zero cap must fail rather than be silently raised.
#[tokio::test]
async fn sch_18_direct_construction_with_zero_cap_fails_before_logging() {
    let registry = ToolRegistry::new();
    registry
        .register(dsh_test_support::echo_tool())
        .unwrap()
        .keep();
    let rt = runtime(&registry, &Hooks::new());
    let session = Session::in_memory("sch-18");
    let cx = StepContext {
        session: session.clone(),
        turn: 1,
        step: 1,
        agent: None,
        signal: Signal::never(),
        max_parallel: 0,
    };
    let err = rt
        .run_step(&cx, &[ToolCallBlock::new("c1", "echo", "{}")])
        .await
        .expect_err("a zero pool size is refused");
    assert!(matches!(err, SchedulerError::MaxParallel(_)), "{err:?}");
    assert_eq!(err.to_string(), messages::MAX_PARALLEL_POSITIVE);
    assert!(log(&session).is_empty(), "nothing was logged or run");
}

#[tokio::test(start_paused = true)]
async fn sch_19_default_pool_size_is_ten() {
    assert_eq!(DEFAULT_MAX_PARALLEL, 10);
    let gate = Gate::new();
    let registry = ToolRegistry::new();
    registry.register(gate.tool("g", true)).unwrap().keep();
    let rt = runtime(&registry, &Hooks::new());
    // No cap given: the driver's default applies.
    let d = TurnDriver::new(rt.clone(), Session::in_memory("sch-19"), None);
    let session = d.session().clone();
    let h = spawn_turn(
        d,
        vec![calls_to("g", 12), text_reply("done")],
        Signal::never(),
    );
    assert!(gate.wait_started(10, 2000).await);
    quiescent().await;
    assert_eq!(gate.started().len(), 10, "exactly ten run at once");
    assert_eq!(call_ids(&session).len(), 10);
    gate.release("c1");
    assert!(
        gate.wait_started(11, 2000).await,
        "a freed slot starts the eleventh"
    );
    quiescent().await;
    assert_eq!(gate.started().len(), 11);
    gate.release_all();
    let (_, report) = h.await.unwrap();
    report.unwrap();
    assert_eq!(gate.peak(), 10);
    assert_paired(&session);
}

#[tokio::test(start_paused = true)]
async fn sch_20_rolling_pool_logs_a_call_only_when_it_starts() {
    let gate = Gate::new();
    let registry = ToolRegistry::new();
    registry.register(gate.tool("g", true)).unwrap().keep();
    let rt = runtime(&registry, &Hooks::new());
    let d = driver(&rt, 2);
    let session = d.session().clone();
    let h = spawn_turn(
        d,
        vec![calls_to("g", 4), text_reply("done")],
        Signal::never(),
    );
    assert!(gate.wait_started(2, 2000).await);
    quiescent().await;
    assert_eq!(gate.started().len(), 2);
    assert_eq!(call_ids(&session), ["c1", "c2"]);
    gate.release("c1");
    assert!(gate.wait_started(3, 2000).await, "releasing 1 starts 3");
    quiescent().await;
    assert_eq!(
        gate.started().len(),
        3,
        "the pool holds two; c2 is still running"
    );
    assert!(gate.started().contains(&"c3".to_owned()));
    assert_eq!(
        tool_trace(&session)[..4],
        ["call c1", "call c2", "result c1", "call c3"]
    );
    gate.release_all();
    let (_, report) = h.await.unwrap();
    let report = report.unwrap();
    assert_eq!(result_ids(&session), ["c1", "c2", "c3", "c4"]);
    let texts: Vec<&str> = report.steps[0]
        .results
        .iter()
        .map(|r| r.first_text().unwrap())
        .collect();
    assert_eq!(texts, ["g:c1", "g:c2", "g:c3", "g:c4"]);
    assert!(gate.peak() <= 2);
    assert_paired(&session);
}

#[tokio::test(start_paused = true)]
async fn sch_21_pool_of_one_is_fully_serial() {
    let gate = Gate::new();
    let registry = ToolRegistry::new();
    registry.register(gate.tool("g", true)).unwrap().keep();
    let rt = runtime(&registry, &Hooks::new());
    let d = driver(&rt, 1);
    let session = d.session().clone();
    let h = spawn_turn(
        d,
        vec![calls_to("g", 2), text_reply("done")],
        Signal::never(),
    );
    assert!(gate.wait_started(1, 2000).await);
    quiescent().await;
    assert_eq!(gate.started(), ["c1"]);
    gate.release("c1");
    assert!(gate.wait_started(2, 2000).await);
    gate.release("c2");
    let (_, report) = h.await.unwrap();
    report.unwrap();
    assert_eq!(gate.events(), ["start:c1", "end:c1", "start:c2", "end:c2"]);
    assert_eq!(
        tool_trace(&session),
        ["call c1", "result c1", "call c2", "result c2"]
    );
    assert_paired(&session);
}

// SCH-22: there is no agent factory here; the closest behaviour is a driver for a scoped agent
// whose tools live in its own scope: the configured cap applies to that agent's batches too.
#[tokio::test(start_paused = true)]
async fn sch_22_cap_applies_to_an_agent_scoped_driver() {
    let gate = Gate::new();
    let registry = ToolRegistry::new();
    let agent = AgentId::new("child");
    registry
        .register_scoped(&agent, gate.tool("g", true))
        .unwrap()
        .keep();
    assert_eq!(
        registry.execution_mode("g", Some(&agent), &dsh_core::Arguments::from_raw("{}")),
        ExecutionMode::Parallel
    );
    let rt = runtime(&registry, &Hooks::new());
    let d =
        TurnDriver::new(rt.clone(), Session::in_memory("sch-22"), Some(agent)).with_max_parallel(1);
    let session = d.session().clone();
    let h = spawn_turn(
        d,
        vec![calls_to("g", 2), text_reply("done")],
        Signal::never(),
    );
    assert!(gate.wait_started(1, 2000).await);
    quiescent().await;
    assert_eq!(gate.started(), ["c1"], "the scoped agent is serial too");
    gate.release("c1");
    assert!(gate.wait_started(2, 2000).await);
    gate.release("c2");
    let (_, report) = h.await.unwrap();
    report.unwrap();
    assert_eq!(gate.events(), ["start:c1", "end:c1", "start:c2", "end:c2"]);
    assert_eq!(result_text(&result_event(&session, "c2").1), "g:c2");
    assert_paired(&session);
}
