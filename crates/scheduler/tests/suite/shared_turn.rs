//! `SharedTurn`, the adapter for calls that arrive one at a time and overlap (`dsh mcp serve`):
//! a call that has to wait for admission (behind an exclusive call, or an exclusive call
//! behind calls in progress) is on disk before it waits, so a process killed while it waits
//! leaves it for repair to answer as never started; one cancelled while it waits is answered
//! as aborted before dispatch and never runs.

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
async fn shared_turn_a_call_waiting_for_admission_is_on_disk_before_it_waits_and_repair_answers_it_as_never_started()
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
