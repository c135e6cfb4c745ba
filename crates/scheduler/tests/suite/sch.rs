//! SCH-11..27: the step scheduler driven through the turn driver — barriers, the rolling pool,
//! classification right before each start, model-order prepare/finalize/commit — plus the
//! no-starvation check of issue 4 (item 3). The helpers at the top are shared by the other
//! loop-level files (`can_loop`, `log`, `loop_tool`, `props`, `interleavings`).

// Tests state their expectations with `unwrap`/`expect`: a panic is the failure report.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use dsh_core::codes::messages;
use dsh_core::{
    AgentId, ExecutionMode, Failure, Json, PreExecuteHook, PreNext, PreToolDecision, Signal,
    ToolDefinition, ToolExecution, ToolOutput, ToolRegistry, ToolResult,
};
use dsh_guard::{Hooks, Scope};
use dsh_scheduler::{
    DEFAULT_MAX_PARALLEL, Runtime, SchedulerError, StepContext, ToolCallBlock, TurnDriver, TurnEnd,
    TurnReport, max_parallel_from_config, validate_max_parallel,
};
use dsh_session::{Event, Session, SurfaceOp};
use dsh_test_support::{Gate, PostFn, PreFn, Recorder};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

// ---------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------

/// An assistant message holding tool-call blocks `(id, name, raw arguments)`, in order.
pub(super) fn assistant(calls: &[(&str, &str, &str)]) -> Json {
    let content: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| json!({"type": "tool-call", "id": id, "name": name, "arguments": args}))
        .collect();
    Json::from_shallow(json!({"role": "assistant", "content": content}))
}

/// An assistant message holding only text (the model's final answer).
pub(super) fn text_reply(text: &str) -> Json {
    Json::from_shallow(json!({"role": "assistant", "content": [{"type": "text", "text": text}]}))
}

/// `n` calls `c1..cn` to `name` with `{}` arguments.
pub(super) fn calls_to(name: &str, n: usize) -> Json {
    let ids: Vec<String> = (1..=n).map(|i| format!("c{i}")).collect();
    let calls: Vec<(&str, &str, &str)> = ids.iter().map(|id| (id.as_str(), name, "{}")).collect();
    assistant(&calls)
}

/// Every durable event with its seq.
pub(super) fn log(s: &Session) -> Vec<(u64, Arc<Event>)> {
    s.events().to_vec()
}

/// The model-visible history derived from the log (spec I3), limited to events before `before`
/// (a seq), as each message's JSON value.
pub(super) fn history_before(s: &Session, before: u64) -> Vec<Value> {
    let events = log(s);
    dsh_session::derive_messages_from(
        events
            .iter()
            .filter(|(seq, _)| *seq < before)
            .map(|(seq, e)| (*seq, &**e)),
    )
    .into_iter()
    .map(|m| m.value().clone())
    .collect()
}

/// The tool-result blocks of a derived history, in order.
pub(super) fn tool_result_blocks(history: &[Value]) -> Vec<Value> {
    history
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool-result")
        .collect()
}

/// The event types, in order.
pub(super) fn types(s: &Session) -> Vec<String> {
    log(s)
        .iter()
        .map(|(_, e)| e.event_type().to_owned())
        .collect()
}

/// `call <id>` / `result <id>` for every tool event, in log order.
pub(super) fn tool_trace(s: &Session) -> Vec<String> {
    log(s)
        .iter()
        .filter_map(|(_, e)| {
            if let Some(c) = e.as_tool_call() {
                Some(format!("call {}", c.call_id))
            } else {
                e.as_tool_result().map(|r| format!("result {}", r.call_id))
            }
        })
        .collect()
}

/// The call ids of the `tool/result` events, in log order.
pub(super) fn result_ids(s: &Session) -> Vec<String> {
    log(s)
        .iter()
        .filter_map(|(_, e)| e.as_tool_result().map(|r| r.call_id.to_owned()))
        .collect()
}

/// The call ids of the `tool/call` events, in log order.
pub(super) fn call_ids(s: &Session) -> Vec<String> {
    log(s)
        .iter()
        .filter_map(|(_, e)| e.as_tool_call().map(|c| c.call_id.to_owned()))
        .collect()
}

/// The `tool/result` event for `call_id` (panics if there is not exactly one).
pub(super) fn result_event(s: &Session, call_id: &str) -> (u64, Arc<Event>) {
    let found: Vec<(u64, Arc<Event>)> = log(s)
        .into_iter()
        .filter(|(_, e)| e.as_tool_result().is_some_and(|r| r.call_id == call_id))
        .collect();
    assert_eq!(found.len(), 1, "exactly one tool/result for {call_id}");
    found.into_iter().next().unwrap()
}

/// The `tool/call` event for `call_id` (panics if there is not exactly one).
pub(super) fn call_event(s: &Session, call_id: &str) -> (u64, Arc<Event>) {
    let found: Vec<(u64, Arc<Event>)> = log(s)
        .into_iter()
        .filter(|(_, e)| e.as_tool_call().is_some_and(|c| c.call_id == call_id))
        .collect();
    assert_eq!(found.len(), 1, "exactly one tool/call for {call_id}");
    found.into_iter().next().unwrap()
}

/// The texts of a `tool/result`'s tool-result block content, joined by newlines.
pub(super) fn result_text(e: &Event) -> String {
    let view = e.as_tool_result().expect("a tool/result");
    view.content
        .and_then(Value::as_array)
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// `isError` of a `tool/result`.
pub(super) fn result_is_error(e: &Event) -> bool {
    e.as_tool_result()
        .and_then(|r| r.is_error)
        .expect("isError")
}

/// The `error` of a `tool/result` (`{name, code}`), if typed.
pub(super) fn result_error(e: &Event) -> Option<Value> {
    e.as_tool_result().and_then(|r| r.error.cloned())
}

/// `error.code` of a `tool/result`, if typed.
pub(super) fn result_code(e: &Event) -> Option<String> {
    result_error(e).and_then(|v| v.get("code").and_then(Value::as_str).map(str::to_owned))
}

/// Whether a `user/message` comes from a plugin.
pub(super) fn is_plugin_message(e: &Event) -> bool {
    e.event_type() == "user/message"
        && e.data()
            .value()
            .pointer("/source/kind")
            .and_then(Value::as_str)
            == Some("plugin")
}

/// The first text of a `user/message`.
pub(super) fn message_text(e: &Event) -> String {
    e.data()
        .value()
        .pointer("/content/0/text")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// `(seq, text)` of every plugin `user/message`, in order.
pub(super) fn plugin_messages(s: &Session) -> Vec<(u64, String)> {
    log(s)
        .iter()
        .filter(|(_, e)| is_plugin_message(e))
        .map(|(seq, e)| (*seq, message_text(e)))
        .collect()
}

/// The texts of the contexts waiting in a driver's inbox.
pub(super) fn inbox_texts(d: &TurnDriver) -> Vec<String> {
    d.inbox()
        .iter()
        .filter_map(|c| c.first_text().map(str::to_owned))
        .collect()
}

/// Checks spec I1 and F5 over a whole log: every `tool/call` has exactly one `tool/result`, in
/// the same turn and step, after it, with `surfaceOp: "append"` and `sourceEventSeqs: [call
/// seq]`; no result without its call. Also asks the session crate's own checker.
pub(super) fn assert_paired(s: &Session) {
    let events = log(s);
    let problems = dsh_session::check_events(events.iter().map(|(seq, e)| (*seq, &**e)));
    assert!(problems.is_empty(), "log checker: {problems:?}");
    let mut calls: Vec<(u64, String, Option<u64>, Option<u64>)> = Vec::new();
    for (seq, e) in &events {
        if let Some(c) = e.as_tool_call() {
            calls.push((*seq, c.call_id.to_owned(), c.turn, c.step));
        }
    }
    let mut paired = vec![0usize; calls.len()];
    for (seq, e) in &events {
        let Some(r) = e.as_tool_result() else {
            continue;
        };
        assert_eq!(
            e.surface_op(),
            Some(&SurfaceOp::Append),
            "F5: result {} surfaceOp",
            r.call_id
        );
        let seqs = e.source_event_seqs().expect("F5: sourceEventSeqs present");
        assert_eq!(seqs.len(), 1, "F5: one source seq for {}", r.call_id);
        let idx = calls
            .iter()
            .position(|(cs, _, _, _)| *cs == seqs[0])
            .unwrap_or_else(|| {
                panic!(
                    "I1: result {} points at seq {} which is no call",
                    r.call_id, seqs[0]
                )
            });
        let (cs, cid, turn, step) = &calls[idx];
        assert_eq!(cid, r.call_id, "I1: result points at its own call");
        assert!(cs < seq, "I1: result after its call");
        assert_eq!((turn, step), (&r.turn, &r.step), "I1: same turn and step");
        paired[idx] += 1;
    }
    for (i, n) in paired.iter().enumerate() {
        assert_eq!(*n, 1, "I1: call {} has {n} results", calls[i].1);
    }
}

/// A runtime over a registry and hooks.
pub(super) fn runtime(registry: &ToolRegistry, hooks: &Hooks) -> Arc<Runtime> {
    Arc::new(Runtime::new(registry.clone(), hooks.clone()))
}

/// A driver over a fresh in-memory session, with pool size `cap`.
pub(super) fn driver(rt: &Arc<Runtime>, cap: usize) -> TurnDriver {
    TurnDriver::new(rt.clone(), Session::in_memory("loop-test"), None).with_max_parallel(cap)
}

/// What a spawned turn gives back.
pub(super) type TurnJoin = JoinHandle<(TurnDriver, Result<TurnReport, SchedulerError>)>;

/// Runs one turn on a task, so the test can steer gates meanwhile.
pub(super) fn spawn_turn(mut d: TurnDriver, steps: Vec<Json>, signal: Signal) -> TurnJoin {
    tokio::spawn(async move {
        let r = d.run_turn(steps, signal).await;
        (d, r)
    })
}

/// Waits (yielding) until `cond` holds, up to `ms` milliseconds.
pub(super) async fn wait_until(ms: u64, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_millis(ms);
    loop {
        if cond() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// A short real pause ("a few ticks later").
pub(super) async fn settle() {
    tokio::time::sleep(Duration::from_millis(40)).await;
}

/// A pre-execute listener that records every call id it sees.
pub(super) fn record_pre(hooks: &Hooks, rec: &Recorder) {
    let rec = rec.clone();
    hooks
        .on_pre_execute(
            Scope::Global,
            PreFn(move |e: &ToolExecution| {
                rec.push(format!("pre:{}", e.call_id()));
                Ok(None)
            }),
        )
        .keep();
}

/// A post-execute listener that records every call id it sees.
pub(super) fn record_post(hooks: &Hooks, rec: &Recorder) {
    let rec = rec.clone();
    hooks
        .on_post_execute(
            Scope::Global,
            PostFn(move |e: &ToolExecution, _r: &ToolResult, d| {
                rec.push(format!("post:{}", e.call_id()));
                Ok(d)
            }),
        )
        .keep();
}

/// A post-execute listener adding a plugin context `ctx-<callId>` to every call.
pub(super) fn post_ctx_per_call(hooks: &Hooks) {
    hooks
        .on_post_execute(
            Scope::Global,
            PostFn(
                |e: &ToolExecution, _r: &ToolResult, d: dsh_core::PostToolDecision| {
                    Ok(d.push_context(dsh_test_support::ctx(
                        "test",
                        &format!("ctx-{}", e.call_id()),
                    )))
                },
            ),
        )
        .keep();
}

/// Entries of a recorder with a prefix, prefix stripped.
pub(super) fn seen(rec: &Recorder, prefix: &str) -> Vec<String> {
    rec.entries()
        .iter()
        .filter_map(|e| e.strip_prefix(prefix).map(str::to_owned))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// SCH-11..26
// ---------------------------------------------------------------------------------------------

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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
    settle().await;
    assert_eq!(gate.started(), ["A1"], "the exclusive call waits for A1");
    gate.release("A1");
    assert!(gate.wait_started(2, 2000).await);
    settle().await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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
    settle().await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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
    settle().await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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
    settle().await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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
    settle().await;
    assert_eq!(gate.started().len(), 10, "exactly ten run at once");
    assert_eq!(call_ids(&session).len(), 10);
    gate.release("c1");
    assert!(
        gate.wait_started(11, 2000).await,
        "a freed slot starts the eleventh"
    );
    settle().await;
    assert_eq!(gate.started().len(), 11);
    gate.release_all();
    let (_, report) = h.await.unwrap();
    report.unwrap();
    assert_eq!(gate.peak(), 10);
    assert_paired(&session);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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
    settle().await;
    assert_eq!(gate.started().len(), 2);
    assert_eq!(call_ids(&session), ["c1", "c2"]);
    gate.release("c1");
    assert!(gate.wait_started(3, 2000).await, "releasing 1 starts 3");
    settle().await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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
    settle().await;
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
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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
    settle().await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sch_23_pre_and_post_execute_run_in_model_order() {
    let gate = Gate::new();
    let registry = ToolRegistry::new();
    registry.register(gate.tool("g", true)).unwrap().keep();
    let hooks = Hooks::new();
    let rec = Recorder::new();
    record_pre(&hooks, &rec);
    record_post(&hooks, &rec);
    let rt = runtime(&registry, &hooks);
    let d = driver(&rt, DEFAULT_MAX_PARALLEL);
    let session = d.session().clone();
    let h = spawn_turn(
        d,
        vec![calls_to("g", 3), text_reply("done")],
        Signal::never(),
    );
    assert!(gate.wait_started(3, 2000).await);
    for id in ["c3", "c2", "c1"] {
        gate.release(id);
        let end = format!("end:{id}");
        assert!(wait_until(2000, || gate.events().contains(&end)).await);
    }
    let (_, report) = h.await.unwrap();
    report.unwrap();
    assert_eq!(seen(&rec, "pre:"), ["c1", "c2", "c3"]);
    assert_eq!(seen(&rec, "post:"), ["c1", "c2", "c3"]);
    assert_paired(&session);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sch_24_contexts_follow_the_last_result_in_model_order() {
    let gate = Gate::new();
    let registry = ToolRegistry::new();
    registry.register(gate.tool("g", true)).unwrap().keep();
    let hooks = Hooks::new();
    post_ctx_per_call(&hooks);
    let rt = runtime(&registry, &hooks);
    let d = driver(&rt, 2);
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
    let ctx = plugin_messages(&session);
    let texts: Vec<&str> = ctx.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(texts, ["ctx-c1", "ctx-c2"]);
    let last_result = log(&session)
        .iter()
        .filter(|(_, e)| e.event_type() == "tool/result")
        .map(|(s, _)| *s)
        .max()
        .unwrap();
    assert!(
        ctx[0].0 > last_result,
        "the first context comes after the last result"
    );
    assert_paired(&session);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sch_25_denied_and_throwing_prepare_keep_model_order() {
    let gate = Gate::new();
    gate.release_all();
    let registry = ToolRegistry::new();
    registry.register(gate.tool("g", true)).unwrap().keep();
    let hooks = Hooks::new();
    hooks
        .on_pre_execute(
            Scope::Global,
            PreFn(|e: &ToolExecution| match e.call_id() {
                "c2" => Ok(Some(PreToolDecision::deny("blocked by policy"))),
                "c3" => Err(Failure::new("pre exploded")),
                _ => Ok(None),
            }),
        )
        .keep();
    let rec = Recorder::new();
    record_post(&hooks, &rec);
    let rt = runtime(&registry, &hooks);
    let mut d = driver(&rt, DEFAULT_MAX_PARALLEL);
    let session = d.session().clone();
    let report = d
        .run_turn(vec![calls_to("g", 3), text_reply("done")], Signal::never())
        .await
        .unwrap();
    assert_eq!(report.end, TurnEnd::Completed);
    assert_eq!(gate.started(), ["c1"], "only call 1's body ever starts");
    assert_eq!(
        seen(&rec, "post:"),
        ["c1", "c2"],
        "a denial goes through post; a thrown pre does not"
    );
    assert_eq!(result_ids(&session), ["c1", "c2", "c3"]);
    let c2 = result_event(&session, "c2").1;
    let c3 = result_event(&session, "c3").1;
    assert!(result_is_error(&c2) && result_text(&c2).contains("blocked by policy"));
    assert!(result_is_error(&c3) && result_text(&c3).contains("pre exploded"));
    assert!(!result_is_error(&result_event(&session, "c1").1));
    assert_paired(&session);
}

/// A sink that fails the first write containing `needle`, then accepts everything else (the
/// session poisons itself after a failed write, so later appends fail anyway).
struct FailOnce {
    needle: &'static str,
    fired: bool,
}

impl dsh_session::LogSink for FailOnce {
    fn append_durably(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let text = String::from_utf8_lossy(bytes);
        if !self.fired && text.contains(self.needle) {
            self.fired = true;
            return Err(std::io::Error::other("scheduler exploded"));
        }
        Ok(())
    }
    fn truncate(&mut self, _len: u64) -> std::io::Result<()> {
        Ok(())
    }
}

// SCH-26: the stages cannot be swapped for fault injectors here; the scheduler's own failure
// is the session log refusing an append. c3's `tool/call` append fails while c2's body runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sch_26_scheduler_failure_stops_starting_drains_and_surfaces_the_first_error() {
    let gate = Gate::new();
    let registry = ToolRegistry::new();
    registry.register(gate.tool("g", true)).unwrap().keep();
    let hooks = Hooks::new();
    let rec = Recorder::new();
    record_pre(&hooks, &rec);
    let rt = runtime(&registry, &hooks);
    let header = dsh_session::Header::new("sch-26", "/tmp");
    let session = Session::with_sink(
        header,
        FailOnce {
            needle: r#""type":"tool/call","data":{"turn":1,"step":1,"callId":"c3""#,
            fired: false,
        },
    )
    .unwrap();
    let d = TurnDriver::new(rt.clone(), session.clone(), None).with_max_parallel(3);
    let h = spawn_turn(
        d,
        vec![calls_to("g", 3), text_reply("done")],
        Signal::never(),
    );

    assert!(gate.wait_started(2, 2000).await);
    settle().await;
    assert!(!h.is_finished(), "the turn waits for the started bodies");
    gate.release("c1");
    settle().await;
    assert!(
        !h.is_finished(),
        "the turn does not end while c2's started body runs"
    );
    gate.release("c2");
    let (_, outcome) = tokio::time::timeout(Duration::from_secs(5), h)
        .await
        .unwrap()
        .unwrap();
    let err = outcome.expect_err("the scheduler failure is reported");
    assert!(
        matches!(
            err,
            SchedulerError::Session(dsh_session::SessionError::Write(_))
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("scheduler exploded"), "{err}");
    let mut started = gate.started();
    started.sort();
    assert_eq!(started, ["c1", "c2"], "c3 is never dispatched");
    assert_eq!(
        seen(&rec, "pre:"),
        ["c1", "c2"],
        "c3 is never even prepared"
    );
    assert!(
        gate.events().contains(&"end:c2".to_owned()),
        "c2's body was drained"
    );
    // Nothing is fabricated: no result follows the failure.
    assert!(
        result_ids(&session).is_empty(),
        "{:?}",
        tool_trace(&session)
    );
}

// SCH-27 (Code Mode through the loop: a direct `write` under the `code` presentation) belongs to
// the Code Mode crate, which owns presentation modes; it is not ported here.

// ---------------------------------------------------------------------------------------------
// Issue 4, item 3: no starvation
// ---------------------------------------------------------------------------------------------

/// A pre-execute listener that takes `ms` for one call id, noting when it began.
struct SlowPre {
    call_id: &'static str,
    ms: u64,
    began: Arc<Mutex<Option<Instant>>>,
}

#[async_trait]
impl PreExecuteHook for SlowPre {
    async fn pre_execute(
        &self,
        exec: &ToolExecution,
        next: PreNext<'_>,
    ) -> Result<PreToolDecision, Failure> {
        if exec.call_id() == self.call_id {
            *self.began.lock() = Some(Instant::now());
            tokio::time::sleep(Duration::from_millis(self.ms)).await;
        }
        next.run(exec).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_no_starvation_running_body_is_not_delayed_by_a_slow_later_prepare() {
    const BODY_MS: u64 = 100;
    const PRE_MS: u64 = 700;
    let measured = Arc::new(Mutex::new(Vec::<(String, Duration, Instant)>::new()));
    let m = measured.clone();
    let timed = ToolDefinition::builder("timed", "sleeps and measures its own run time")
        .output(ToolOutput::string())
        .concurrency_safe(true)
        .execute(move |ctx| {
            let m = m.clone();
            async move {
                let t0 = Instant::now();
                tokio::time::sleep(Duration::from_millis(BODY_MS)).await;
                m.lock().push((
                    ctx.exec().call_id().to_owned(),
                    t0.elapsed(),
                    Instant::now(),
                ));
                Ok(Json::string("done"))
            }
        })
        .build()
        .unwrap();
    let registry = ToolRegistry::new();
    registry.register(timed).unwrap().keep();
    let hooks = Hooks::new();
    let began = Arc::new(Mutex::new(None));
    let slow = SlowPre {
        call_id: "c2",
        ms: PRE_MS,
        began: began.clone(),
    };
    hooks.on_pre_execute(Scope::Global, slow).keep();
    let rt = runtime(&registry, &hooks);
    let mut d = driver(&rt, DEFAULT_MAX_PARALLEL);
    let t0 = Instant::now();
    let report = d
        .run_turn(
            vec![calls_to("timed", 2), text_reply("done")],
            Signal::never(),
        )
        .await
        .unwrap();
    assert_eq!(report.end, TurnEnd::Completed);
    assert!(
        t0.elapsed() >= Duration::from_millis(PRE_MS),
        "the slow listener did run"
    );
    let measured = measured.lock().clone();
    let (_, c1, c1_end) = measured
        .iter()
        .find(|(id, _, _)| id == "c1")
        .cloned()
        .expect("c1 ran");
    let c2_pre = began.lock().expect("c2 was prepared");
    assert!(
        c2_pre < c1_end,
        "c2's prepare ran while c1's body was running"
    );
    // Generous bound: a body polled only by the driver would measure about PRE_MS.
    assert!(
        c1 < Duration::from_millis(BODY_MS + 300),
        "c1's body took {c1:?} while c2's pre-execute listener took {PRE_MS} ms"
    );
    // c1 finished long before c2's prepare did.
    assert_eq!(measured.first().map(|(id, _, _)| id.as_str()), Some("c1"));
    assert_paired(d.session());
}
