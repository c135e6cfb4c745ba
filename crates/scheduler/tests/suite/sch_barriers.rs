//! SCH-11..16: the step scheduler driven through the turn driver: parallel calls start together,
//! an exclusive call is a barrier, classification happens right before each start, and results
//! commit in model order.

// Tests state their expectations with `unwrap`/`expect`: a panic is the failure report.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;

use super::support::*;
use dsh_core::{Json, Signal, ToolDefinition, ToolExecution, ToolOutput, ToolRegistry, ToolResult};
use dsh_guard::{Hooks, Scope};
use dsh_scheduler::{DEFAULT_MAX_PARALLEL, TurnEnd};
use dsh_test_support::Gate;
use parking_lot::Mutex;
use serde_json::json;

// SCH-10's type test (a two-case enum) is the compiler's; what can fail at run time is that the
// mode a classifier gives each call is how the scheduler runs it. One tool, classified per call
// from its arguments: the parallel calls overlap, the exclusive one is a barrier between them.
#[tokio::test(start_paused = true)]
async fn sch_10_the_mode_the_classifier_gives_each_call_is_how_it_runs() {
    let gate = Gate::new();
    let registry = ToolRegistry::new();
    registry
        .register(gate.tool_classified("m", |args| args["parallel"] == json!(true)))
        .unwrap()
        .keep();
    let rt = runtime(&registry, &Hooks::new());
    let d = driver(&rt, DEFAULT_MAX_PARALLEL);
    let session = d.session().clone();
    let (p, x) = (r#"{"parallel":true}"#, r#"{"parallel":false}"#);
    let msg = assistant(&[
        ("p1", "m", p),
        ("p2", "m", p),
        ("x", "m", x),
        ("p3", "m", p),
    ]);
    let h = spawn_turn(d, vec![msg, text_reply("done")], Signal::never());

    assert!(gate.wait_started(2, 2000).await);
    quiescent().await;
    assert_eq!(gate.started(), ["p1", "p2"], "two parallel calls overlap");
    gate.release("p1");
    gate.release("p2");
    assert!(gate.wait_started(3, 2000).await);
    quiescent().await;
    assert_eq!(
        gate.started(),
        ["p1", "p2", "x"],
        "the exclusive call runs alone"
    );
    gate.release("x");
    assert!(gate.wait_started(4, 2000).await);
    gate.release("p3");
    let (_, report) = h.await.unwrap();
    assert_eq!(report.unwrap().end, TurnEnd::Completed);
    let events = gate.events();
    let pos = |e: &str| events.iter().position(|x| x == e).unwrap();
    assert!(pos("start:p2") < pos("end:p1"), "{events:?}");
    assert!(pos("end:p1") < pos("start:x") && pos("end:p2") < pos("start:x"));
    assert!(pos("end:x") < pos("start:p3"));
    assert_paired(&session);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sch_11_three_safe_calls_all_start_before_any_release() {
    let gate = Gate::new();
    let registry = ToolRegistry::new();
    registry.register(gate.tool("g", true)).unwrap().keep();
    let rt = runtime(&registry, &Hooks::new());
    let d = driver(&rt, DEFAULT_MAX_PARALLEL);
    let session = d.session().clone();
    let h = spawn_turn(
        d,
        vec![calls_to("g", 3), text_reply("done")],
        Signal::never(),
    );

    assert!(
        gate.wait_started(3, 2000).await,
        "all three bodies start with none released"
    );
    assert!(
        gate.events().iter().all(|e| e.starts_with("start:")),
        "{:?}",
        gate.events()
    );
    let mut started = gate.started();
    started.sort();
    assert_eq!(started, ["c1", "c2", "c3"]);
    // Calls start (their tool/call is logged) in model order.
    assert_eq!(call_ids(&session), ["c1", "c2", "c3"]);
    assert!(!h.is_finished(), "the turn waits for its bodies");

    gate.release_all();
    let (_, report) = h.await.unwrap();
    assert_eq!(report.unwrap().end, TurnEnd::Completed);
    assert_eq!(result_ids(&session), ["c1", "c2", "c3"]);
    assert_paired(&session);
}

#[tokio::test(start_paused = true)]
async fn sch_12_exclusive_call_is_a_barrier_between_two_groups() {
    let gate = Gate::new();
    let registry = ToolRegistry::new();
    registry.register(gate.tool("r", true)).unwrap().keep();
    registry.register(gate.tool("w", false)).unwrap().keep();
    let rt = runtime(&registry, &Hooks::new());
    let d = driver(&rt, DEFAULT_MAX_PARALLEL);
    let session = d.session().clone();
    let msg = assistant(&[("A1", "r", "{}"), ("A2", "w", "{}"), ("A3", "r", "{}")]);
    let h = spawn_turn(d, vec![msg, text_reply("done")], Signal::never());

    assert!(gate.wait_started(1, 2000).await);
    quiescent().await;
    assert_eq!(gate.started(), ["A1"], "the exclusive call waits for A1");
    gate.release("A1");
    assert!(gate.wait_started(2, 2000).await);
    quiescent().await;
    assert_eq!(
        gate.started(),
        ["A1", "A2"],
        "A3 waits for the exclusive call"
    );
    gate.release("A2");
    assert!(gate.wait_started(3, 2000).await);
    gate.release("A3");
    let (_, report) = h.await.unwrap();
    assert_eq!(report.unwrap().end, TurnEnd::Completed);
    assert_eq!(
        gate.events(),
        [
            "start:A1", "end:A1", "start:A2", "end:A2", "start:A3", "end:A3"
        ]
    );
    assert_eq!(
        tool_trace(&session),
        [
            "call A1",
            "result A1",
            "call A2",
            "result A2",
            "call A3",
            "result A3"
        ]
    );
    assert_paired(&session);
}

#[tokio::test(start_paused = true)]
async fn sch_13_pending_calls_are_reclassified_right_before_each_start() {
    let gate = Gate::new();
    let registry = ToolRegistry::new();
    // x starts out concurrency-safe and ungated.
    let old_x = ToolDefinition::builder("x", "safe x")
        .output(ToolOutput::string())
        .concurrency_safe(true)
        .execute(|_| async { Ok(Json::string("old x")) })
        .build()
        .unwrap();
    let old_reg = Arc::new(Mutex::new(Some(registry.register(old_x).unwrap())));
    let (reg2, gate2, slot) = (registry.clone(), gate.clone(), old_reg.clone());
    let replace = ToolDefinition::builder("replace", "swap x for an exclusive gated x")
        .output(ToolOutput::string())
        .execute(move |_| {
            let (reg2, gate2, slot) = (reg2.clone(), gate2.clone(), slot.clone());
            async move {
                if let Some(r) = slot.lock().take() {
                    r.dispose();
                }
                reg2.register(gate2.tool("x", false)).unwrap().keep();
                Ok(Json::string("replaced"))
            }
        })
        .build()
        .unwrap();
    registry.register(replace).unwrap().keep();
    let rt = runtime(&registry, &Hooks::new());
    let d = driver(&rt, DEFAULT_MAX_PARALLEL);
    let session = d.session().clone();
    let msg = assistant(&[("r", "replace", "{}"), ("c1", "x", "{}"), ("c2", "x", "{}")]);
    let h = spawn_turn(d, vec![msg, text_reply("done")], Signal::never());

    assert!(gate.wait_started(1, 2000).await);
    quiescent().await;
    assert_eq!(
        gate.started(),
        ["c1"],
        "the new exclusive x runs call 1 alone"
    );
    assert_eq!(
        call_ids(&session),
        ["r", "c1"],
        "call 2 has not even started"
    );
    gate.release("c1");
    assert!(gate.wait_started(2, 2000).await);
    assert_eq!(gate.events()[..3], ["start:c1", "end:c1", "start:c2"]);
    gate.release("c2");
    let (_, report) = h.await.unwrap();
    assert_eq!(report.unwrap().end, TurnEnd::Completed);
    assert_eq!(result_text(&result_event(&session, "c1").1), "x:c1");
    assert_eq!(result_text(&result_event(&session, "c2").1), "x:c2");
    assert_paired(&session);
}

#[tokio::test(start_paused = true)]
async fn sch_14_result_observer_swap_makes_the_next_call_wait_as_exclusive() {
    let gate1 = Gate::new();
    let gate2 = Gate::new();
    let registry = ToolRegistry::new();
    let slot = Arc::new(Mutex::new(Some(
        registry.register(gate1.tool("x", true)).unwrap(),
    )));
    let hooks = Hooks::new();
    let (reg2, g2, s2) = (registry.clone(), gate2.clone(), slot.clone());
    hooks
        .on_result(Scope::Global, move |e: &ToolExecution, _r: &ToolResult| {
            if e.call_id() == "c1" {
                if let Some(r) = s2.lock().take() {
                    r.dispose();
                }
                reg2.register(g2.tool("x", false)).unwrap().keep();
            }
        })
        .keep();
    let rt = runtime(&registry, &hooks);
    let d = driver(&rt, 2);
    let session = d.session().clone();
    let h = spawn_turn(
        d,
        vec![calls_to("x", 3), text_reply("done")],
        Signal::never(),
    );

    assert!(gate1.wait_started(2, 2000).await);
    gate1.release("c1");
    assert!(wait_until(2000, || result_ids(&session) == ["c1"]).await);
    quiescent().await;
    assert!(
        gate2.started().is_empty(),
        "c3 now classifies as exclusive and waits for c2"
    );
    assert_eq!(gate1.started().len(), 2);
    assert_eq!(call_ids(&session), ["c1", "c2"]);
    gate1.release("c2");
    assert!(
        gate2.wait_started(1, 2000).await,
        "the replacement runs call 3"
    );
    assert_eq!(gate2.started(), ["c3"]);
    assert_eq!(
        tool_trace(&session)[..5],
        ["call c1", "call c2", "result c1", "result c2", "call c3"]
    );
    gate2.release("c3");
    let (_, report) = h.await.unwrap();
    assert_eq!(report.unwrap().end, TurnEnd::Completed);
    assert_paired(&session);
}

#[tokio::test(start_paused = true)]
async fn sch_15_no_result_is_committed_while_an_earlier_call_is_pending() {
    let gate = Gate::new();
    let registry = ToolRegistry::new();
    registry.register(gate.tool("g", true)).unwrap().keep();
    let rt = runtime(&registry, &Hooks::new());
    let d = driver(&rt, DEFAULT_MAX_PARALLEL);
    let session = d.session().clone();
    let h = spawn_turn(
        d,
        vec![calls_to("g", 2), text_reply("done")],
        Signal::never(),
    );

    assert!(gate.wait_started(2, 2000).await);
    gate.release("c2");
    assert!(wait_until(2000, || gate.events().contains(&"end:c2".to_owned())).await);
    quiescent().await;
    assert!(
        result_ids(&session).is_empty(),
        "c2 finished but c1 is pending"
    );
    gate.release("c1");
    let (_, report) = h.await.unwrap();
    report.unwrap();
    assert_eq!(result_ids(&session), ["c1", "c2"]);
    assert_paired(&session);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sch_16_history_pairs_results_in_model_order_whatever_the_completion_order() {
    let gate = Gate::new();
    let registry = ToolRegistry::new();
    registry.register(gate.tool("g", true)).unwrap().keep();
    let rt = runtime(&registry, &Hooks::new());
    let d = driver(&rt, DEFAULT_MAX_PARALLEL);
    let session = d.session().clone();
    let h = spawn_turn(
        d,
        vec![calls_to("g", 2), text_reply("done")],
        Signal::never(),
    );
    assert!(gate.wait_started(2, 2000).await);
    gate.release("c2");
    assert!(wait_until(2000, || gate.events().contains(&"end:c2".to_owned())).await);
    gate.release("c1");
    let (_, report) = h.await.unwrap();
    report.unwrap();
    // The model-visible history is derived from the log alone.
    let blocks: Vec<(String, String)> = tool_result_blocks(&history_before(&session, u64::MAX))
        .iter()
        .map(|b| {
            (
                b["toolCallId"].as_str().unwrap().to_owned(),
                b["content"][0]["text"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        blocks,
        [
            ("c1".to_owned(), "g:c1".to_owned()),
            ("c2".to_owned(), "g:c2".to_owned())
        ]
    );
    assert_paired(&session);
}
