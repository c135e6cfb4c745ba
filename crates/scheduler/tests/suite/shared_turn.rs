//! `SharedTurn`, the adapter for calls that arrive one at a time and overlap (`dsh mcp serve`):
//! a call that has to wait for admission (behind an exclusive call, or an exclusive call
//! behind calls in progress) is on disk before it waits, so a process killed while it waits
//! leaves it for repair to answer as never started; one cancelled while it waits is answered
//! as aborted before dispatch and never runs; and, over many schedules of arrivals, body ends
//! and cancels, an exclusive body never runs beside another and every call is paired.

// Tests state their expectations with `unwrap`/`expect`: a panic is the failure report.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use dsh_core::{AbortController, Signal, ToolRegistry, codes};
use dsh_guard::Hooks;
use dsh_scheduler::{SharedCall, SharedTurn};
use dsh_session::{OpenOptions, Session, check_bytes, repair_bytes};
use dsh_test_support::Gate;
use proptest::collection;
use proptest::prelude::*;
use serde_json::Value;

use super::support::runtime;

/// A shared turn over a log file in `dir`, with a gated exclusive tool `lock` and a gated
/// parallel-safe tool `read`.
async fn gated_turn(dir: &Path) -> (Arc<SharedTurn>, Gate, std::path::PathBuf) {
    let gate = Gate::new();
    let registry = ToolRegistry::new();
    registry.register(gate.tool("lock", false)).unwrap().keep();
    registry.register(gate.tool("read", true)).unwrap().keep();
    let path = dir.join("shared.jsonl");
    let (session, _) = Session::open_jsonl(&path, OpenOptions::new())
        .await
        .unwrap();
    let turn = SharedTurn::new(runtime(&registry, &Hooks::new()), session, None);
    (Arc::new(turn), gate, path)
}

/// Starts `id`, a call of `tool`, under `signal`.
fn start(
    turn: &Arc<SharedTurn>,
    id: &'static str,
    tool: &'static str,
    signal: Signal,
) -> tokio::task::JoinHandle<SharedCall> {
    let turn = turn.clone();
    tokio::spawn(async move { turn.call(id, tool, "{}", signal).await.unwrap() })
}

/// The log's lines as JSON values.
fn lines(bytes: &[u8]) -> Vec<Value> {
    std::str::from_utf8(bytes)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Waits (at most 10 s) until the file holds an `assistant/message` calling `id`; returns the
/// file's bytes at that moment.
async fn on_disk(path: &Path, id: &str) -> Vec<u8> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let bytes = std::fs::read(path).unwrap();
        let held = lines(&bytes).iter().any(|e| {
            e["type"] == "assistant/message" && e["data"]["message"]["content"][0]["id"] == id
        });
        if held {
            return bytes;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the log never held the call {id} while it waited"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i4_l3_shared_turn_a_call_waiting_for_admission_is_on_disk_before_it_waits_and_repair_answers_it_as_never_started()
 {
    // (running call, its tool; waiting call, its tool): a parallel-safe call behind an
    // exclusive one, and an exclusive call behind a parallel-safe one.
    for (first, first_tool, waiting, waiting_tool) in
        [("a", "lock", "b", "read"), ("a", "read", "b", "lock")]
    {
        let dir = tempfile::tempdir().unwrap();
        let (turn, gate, path) = gated_turn(dir.path()).await;
        let running = start(&turn, first, first_tool, Signal::never());
        assert!(gate.wait_started(1, 10_000).await, "{first} never started");
        let waits = start(&turn, waiting, waiting_tool, Signal::never());
        // The bytes a process killed now would leave behind.
        let crashed = on_disk(&path, waiting).await;
        assert_eq!(gate.started(), [first], "{waiting} waits for admission");

        let (repaired, report) = repair_bytes(&crashed).unwrap();
        let answered: Vec<(String, bool)> = report
            .interrupted_calls
            .iter()
            .map(|c| (c.call_id.clone(), c.may_have_started))
            .collect();
        assert_eq!(
            answered,
            [(first.to_owned(), true), (waiting.to_owned(), false)],
            "the running call may have run, the waiting one did not"
        );
        assert_eq!(check_bytes(&repaired), [], "the repaired log checks clean");

        // Without the crash both run, one after the other, each paired.
        gate.release_all();
        for call in [running.await.unwrap(), waits.await.unwrap()] {
            assert!(!call.outcome.results[0].is_error(), "{call:?}");
        }
        turn.session().close().await.unwrap();
        let log = std::fs::read(&path).unwrap();
        assert_eq!(check_bytes(&log), [], "the log checks clean");
        assert_eq!(gate.started(), [first, waiting]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_turn_a_call_cancelled_while_it_waits_for_admission_is_answered_aborted_before_dispatch()
 {
    let dir = tempfile::tempdir().unwrap();
    let (turn, gate, path) = gated_turn(dir.path()).await;
    let running = start(&turn, "a", "lock", Signal::never());
    assert!(gate.wait_started(1, 10_000).await, "a never started");
    let ctl = AbortController::new();
    let waits = start(&turn, "b", "read", ctl.signal());
    on_disk(&path, "b").await;
    ctl.cancel();
    let cancelled = waits.await.unwrap();
    let code = cancelled.outcome.results[0]
        .error()
        .and_then(|f| f.code().map(str::to_owned));
    assert_eq!(
        code.as_deref(),
        Some(codes::ABORTED_BEFORE_DISPATCH),
        "{cancelled:?}"
    );
    gate.release_all();
    running.await.unwrap();
    turn.session().close().await.unwrap();
    assert_eq!(gate.started(), ["a"], "the cancelled call never ran");
    assert_eq!(check_bytes(&std::fs::read(&path).unwrap()), []);
}

/// One call of a generated schedule: its mode, and whether its client cancels it.
#[derive(Clone, Debug)]
struct Arrival {
    exclusive: bool,
    cancel: bool,
}

/// Runs `arrivals` through one shared turn over an in-memory log, acting on them in the order
/// `actions` picks (release the body if it runs, cancel it if its client does), then releases
/// everything; returns the calls' outcomes, the gate's record and the log.
async fn run_schedule(
    arrivals: &[Arrival],
    actions: &[usize],
) -> (Vec<SharedCall>, Vec<String>, dsh_session::Events) {
    let gate = Gate::new();
    let registry = ToolRegistry::new();
    registry.register(gate.tool("lock", false)).unwrap().keep();
    registry.register(gate.tool("read", true)).unwrap().keep();
    let session = Session::in_memory("shared");
    let turn = Arc::new(SharedTurn::new(
        runtime(&registry, &Hooks::new()),
        session.clone(),
        None,
    ));
    let mut controllers = Vec::new();
    let mut tasks = Vec::new();
    for (i, a) in arrivals.iter().enumerate() {
        let ctl = AbortController::new();
        let id: &'static str = Box::leak(format!("c{i}").into_boxed_str());
        let tool = if a.exclusive { "lock" } else { "read" };
        tasks.push(start(&turn, id, tool, ctl.signal()));
        controllers.push(ctl);
        tokio::task::yield_now().await;
    }
    for &pick in actions {
        let i = pick % arrivals.len();
        let id = format!("c{i}");
        if arrivals[i].cancel {
            controllers[i].cancel();
        }
        if gate.started().contains(&id) {
            gate.release(&id);
        }
        for _ in 0..(pick % 4) {
            tokio::task::yield_now().await;
        }
    }
    gate.release_all();
    let mut calls = Vec::new();
    for t in tasks {
        calls.push(t.await.unwrap());
    }
    (calls, gate.events(), session.events())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// For any mix of exclusive and parallel-safe calls arriving together, any order of their
    /// bodies ending and any cancels: no exclusive body overlaps another body, each call has
    /// exactly one `tool/call` and one `tool/result`, a call cancelled before it started never
    /// ran and is answered `ABORTED_BEFORE_DISPATCH`, and the log checks clean.
    #[test]
    fn s2_i1_shared_turn_any_schedule_keeps_exclusive_calls_alone_and_pairs_every_call(
        arrivals in collection::vec(
            (any::<bool>(), prop::bool::weighted(0.25))
                .prop_map(|(exclusive, cancel)| Arrival { exclusive, cancel }),
            1..7,
        ),
        actions in collection::vec(0usize..64, 0..24),
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let (calls, gate_events, log) = rt.block_on(run_schedule(&arrivals, &actions));

        // Exclusive bodies run alone.
        let mut live: Vec<usize> = Vec::new();
        for e in &gate_events {
            if let Some(id) = e.strip_prefix("start:") {
                let i: usize = id[1..].parse().unwrap();
                let alone_broken = (arrivals[i].exclusive && !live.is_empty())
                    || live.iter().any(|j| arrivals[*j].exclusive);
                prop_assert!(!alone_broken, "{id} started beside {live:?}: {gate_events:?}");
                live.push(i);
            } else if let Some(id) = e.strip_prefix("end:") {
                let i: usize = id[1..].parse().unwrap();
                live.retain(|j| *j != i);
            }
        }
        // One call and one result each; a call that never started was aborted before dispatch.
        for (i, call) in calls.iter().enumerate() {
            let id = format!("c{i}");
            let calls_of = log.iter().filter(|(_, e)| {
                e.as_tool_call().is_some_and(|c| c.call_id == id)
            }).count();
            prop_assert_eq!(calls_of, 1, "tool/call of {}", id);
            prop_assert_eq!(call.outcome.results.len(), 1);
            let started = gate_events.contains(&format!("start:{id}"));
            if !started {
                let code = call.outcome.results[0].error().and_then(|f| f.code().map(str::to_owned));
                prop_assert_eq!(
                    code.as_deref(),
                    Some(codes::ABORTED_BEFORE_DISPATCH),
                    "{} never ran", id
                );
                prop_assert!(arrivals[i].cancel, "{} did not run though not cancelled", id);
            }
        }
        prop_assert_eq!(dsh_session::check_events(&log), []);
    }
}
