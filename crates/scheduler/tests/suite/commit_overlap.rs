//! A finished call's result becomes final (finalize, the `tools/result` observers, its durable
//! `tool/result`) while a later call of the same step still waits in pre-execute: a crash in
//! that wait cannot turn a call that finished into `INTERRUPTED`. Prepare stays one call at a
//! time, finalize one call at a time, each in model order (spec S4; SCH-23).

// Tests state their expectations with `unwrap`/`expect`: a panic is the failure report.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use dsh_core::{
    Failure, PreExecuteHook, PreNext, PreToolDecision, Signal, ToolExecution, ToolRegistry,
    ToolResult,
};
use dsh_guard::{Hooks, Scope};
use dsh_scheduler::TurnEnd;
use dsh_test_support::{Gate, yield_until};
use parking_lot::Mutex;
use tokio::sync::Notify;

use super::support::*;

/// Holds one call's pre-execute until released; says when that call has entered it.
struct HoldPre {
    call: &'static str,
    entered: Arc<AtomicBool>,
    release: Arc<Notify>,
}

#[async_trait]
impl PreExecuteHook for HoldPre {
    async fn pre_execute(
        &self,
        exec: &ToolExecution,
        next: PreNext<'_>,
    ) -> Result<PreToolDecision, Failure> {
        if exec.call_id() == self.call {
            self.entered.store(true, Ordering::SeqCst);
            self.release.notified().await;
        }
        next.run(exec).await
    }
}

/// Holds `call`'s pre-execute until the returned `Notify` is notified; the flag says when it has
/// entered.
fn hold_pre(hooks: &Hooks, call: &'static str) -> (Arc<AtomicBool>, Arc<Notify>) {
    let (entered, release) = (Arc::new(AtomicBool::new(false)), Arc::new(Notify::new()));
    hooks
        .on_pre_execute(
            Scope::Global,
            HoldPre {
                call,
                entered: entered.clone(),
                release: release.clone(),
            },
        )
        .keep();
    (entered, release)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s4_a_finished_result_is_final_while_the_next_call_waits_in_pre_execute() {
    let gate = Gate::new();
    let registry = ToolRegistry::new();
    registry.register(gate.tool("g", true)).unwrap().keep();
    let hooks = Hooks::new();
    let (entered, release) = hold_pre(&hooks, "c2");
    let observed: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = observed.clone();
    hooks
        .on_result(Scope::Global, move |e: &ToolExecution, _: &ToolResult| {
            seen.lock().push(e.call_id().to_owned());
        })
        .keep();
    let rt = runtime(&registry, &hooks);
    let d = driver(&rt, 2);
    let session = d.session().clone();
    let h = spawn_turn(
        d,
        vec![calls_to("g", 2), text_reply("done")],
        Signal::never(),
    );

    // c1's body runs; c2 waits in pre-execute (an approval prompt is exactly this).
    assert!(gate.wait_started(1, 2000).await);
    yield_until(|| entered.load(Ordering::SeqCst)).await;
    gate.release("c1");
    // c1 is committed (observers, durable tool/result) while c2's pre-execute still waits.
    yield_until(|| result_ids(&session) == ["c1"]).await;
    assert_eq!(*observed.lock(), ["c1"]);
    assert_eq!(gate.started(), ["c1"], "c2 has not been dispatched");
    assert!(!h.is_finished());

    release.notify_one();
    assert!(gate.wait_started(2, 2000).await);
    gate.release("c2");
    let (_, report) = h.await.unwrap();
    assert_eq!(report.unwrap().end, TurnEnd::Completed);
    assert_eq!(result_ids(&session), ["c1", "c2"]);
    assert_eq!(*observed.lock(), ["c1", "c2"]);
    assert_paired(&session);
}

/// Prepare stays one call at a time while a parked prepare waits: the call after it is not
/// even recorded until it is done, and everything commits in model order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s4_no_call_starts_while_a_prepare_waits_in_the_pool() {
    let gate = Gate::new();
    let registry = ToolRegistry::new();
    registry.register(gate.tool("g", true)).unwrap().keep();
    let hooks = Hooks::new();
    let (entered, release) = hold_pre(&hooks, "c2");
    let rt = runtime(&registry, &hooks);
    let d = driver(&rt, 3);
    let session = d.session().clone();
    let h = spawn_turn(
        d,
        vec![calls_to("g", 3), text_reply("done")],
        Signal::never(),
    );

    yield_until(|| entered.load(Ordering::SeqCst)).await;
    gate.release("c1");
    yield_until(|| result_ids(&session) == ["c1"]).await;
    assert_eq!(
        call_ids(&session),
        ["c1", "c2"],
        "c3 waits for c2's prepare"
    );
    release.notify_one();
    assert!(gate.wait_started(3, 2000).await);
    gate.release_all();
    let (_, report) = h.await.unwrap();
    assert_eq!(report.unwrap().end, TurnEnd::Completed);
    assert_eq!(result_ids(&session), ["c1", "c2", "c3"]);
    assert_paired(&session);
}

/// A pre-execute listener that blocks its thread (not its task) until told.
struct BlockingPre {
    call: &'static str,
    entered: Arc<AtomicBool>,
    release: Mutex<std::sync::mpsc::Receiver<()>>,
}

#[async_trait]
impl PreExecuteHook for BlockingPre {
    async fn pre_execute(
        &self,
        exec: &ToolExecution,
        next: PreNext<'_>,
    ) -> Result<PreToolDecision, Failure> {
        if exec.call_id() == self.call {
            self.entered.store(true, Ordering::SeqCst);
            // The listener's mistake under test: a blocking wait on the runtime's thread.
            let _ = self.release.lock().recv();
        }
        next.run(exec).await
    }
}

/// A listener that blocks the step driver's thread does not hold a body that already runs: the
/// body is released and ends while the listener still blocks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s4_a_listener_blocking_its_thread_does_not_hold_a_running_body() {
    let gate = Gate::new();
    let registry = ToolRegistry::new();
    registry.register(gate.tool("g", true)).unwrap().keep();
    let hooks = Hooks::new();
    let entered = Arc::new(AtomicBool::new(false));
    let (unblock, blocked) = std::sync::mpsc::channel();
    hooks
        .on_pre_execute(
            Scope::Global,
            BlockingPre {
                call: "c2",
                entered: entered.clone(),
                release: Mutex::new(blocked),
            },
        )
        .keep();
    let rt = runtime(&registry, &hooks);
    let d = driver(&rt, 2);
    let session = d.session().clone();
    let h = spawn_turn(
        d,
        vec![calls_to("g", 2), text_reply("done")],
        Signal::never(),
    );

    yield_until(|| entered.load(Ordering::SeqCst)).await;
    gate.release("c1");
    // Waiting for something that must happen, bounded so that a stuck body fails the test.
    let ended = wait_until(10_000, || gate.events().contains(&"end:c1".to_owned())).await;
    assert!(
        ended,
        "c1's body is held by the blocked thread: {:?}",
        gate.events()
    );
    unblock.send(()).unwrap();
    assert!(gate.wait_started(2, 5000).await);
    gate.release("c2");
    let (_, report) = h.await.unwrap();
    assert_eq!(report.unwrap().end, TurnEnd::Completed);
    assert_eq!(result_ids(&session), ["c1", "c2"]);
    assert_paired(&session);
}
