//! Where bodies run (spec S3, the step scheduler's placement guarantee): a call that runs alone is
//! dispatched inline by the driver; in a parallel batch a body's first poll happens in the driver
//! and only a body that has to wait becomes a task, so bodies that wait still overlap, and a
//! panic in a first poll is that call's failure.

// Tests state their expectations with `unwrap`/`expect`: a panic is the failure report.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use dsh_core::{Json, Signal, ToolDefinition, ToolOutput, ToolRegistry};
use dsh_guard::Hooks;
use dsh_scheduler::{StepContext, ToolCallBlock};
use dsh_session::Session;
use parking_lot::Mutex;
use tokio::sync::Barrier;
use tokio::task::Id;

use super::support::runtime;

/// The task a body observed: where its first poll ran, and where it resumed after waiting.
#[derive(Default)]
struct Seen {
    first: Mutex<Vec<Option<Id>>>,
    resumed: Mutex<Vec<Option<Id>>>,
}

/// A tool that records its task ids; with a barrier it waits until `n` bodies are running.
fn probe(
    name: &str,
    parallel: bool,
    seen: Arc<Seen>,
    barrier: Option<Arc<Barrier>>,
) -> ToolDefinition {
    ToolDefinition::builder(name, "records where it runs")
        .output(ToolOutput::string())
        .concurrency_safe(parallel)
        .execute(move |_ctx| {
            let (seen, barrier) = (seen.clone(), barrier.clone());
            async move {
                seen.first.lock().push(tokio::task::try_id());
                if let Some(b) = barrier {
                    b.wait().await;
                    seen.resumed.lock().push(tokio::task::try_id());
                }
                Ok(Json::string("ok"))
            }
        })
        .build()
        .unwrap()
}

fn cx(name: &str) -> StepContext {
    StepContext {
        session: Session::in_memory(name),
        turn: 1,
        step: 1,
        agent: None,
        signal: Signal::never(),
        max_parallel: 10,
    }
}

fn blocks(name: &str, n: usize) -> Vec<ToolCallBlock> {
    (0..n)
        .map(|i| ToolCallBlock::new(&format!("c{i}"), name, "{}"))
        .collect()
}

/// Runs a step on a spawned task (so the driver has a task id) and returns the driver's id.
async fn run(registry: &ToolRegistry, cx: StepContext, blocks: Vec<ToolCallBlock>) -> Option<Id> {
    let rt = runtime(registry, &Hooks::new());
    let run = tokio::spawn(async move {
        let out = rt.run_step(&cx, &blocks).await.unwrap();
        assert!(
            out.results.iter().all(|r| !r.is_error()),
            "{:?}",
            out.results
        );
        tokio::task::try_id()
    });
    // A hang guard only: a serialized pool would never release the barrier.
    tokio::time::timeout(Duration::from_secs(20), run)
        .await
        .expect("the step finished")
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_a_call_that_runs_alone_is_dispatched_by_the_driver_itself() {
    for parallel in [false, true] {
        let seen = Arc::new(Seen::default());
        let registry = ToolRegistry::new();
        registry
            .register(probe("p", parallel, seen.clone(), None))
            .unwrap()
            .keep();
        let driver = run(&registry, cx("alone"), blocks("p", 1)).await;
        assert!(driver.is_some());
        assert_eq!(
            *seen.first.lock(),
            vec![driver],
            "parallel-safe: {parallel}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_bodies_that_wait_become_tasks_and_overlap() {
    let seen = Arc::new(Seen::default());
    let barrier = Arc::new(Barrier::new(3));
    let registry = ToolRegistry::new();
    registry
        .register(probe("p", true, seen.clone(), Some(barrier)))
        .unwrap()
        .keep();
    // Three parallel calls that can only finish once all three are running at the same time.
    let driver = run(&registry, cx("overlap"), blocks("p", 3)).await;
    // Every first poll ran in the driver; the two bodies that had to wait resumed in their own
    // tasks (the last one may be released by the barrier during its first poll).
    assert_eq!(*seen.first.lock(), vec![driver; 3]);
    let resumed = seen.resumed.lock().clone();
    assert_eq!(resumed.len(), 3);
    let tasks: Vec<_> = resumed.iter().filter(|id| **id != driver).collect();
    assert!(tasks.len() >= 2, "{resumed:?} vs driver {driver:?}");
    assert!(tasks.iter().all(|id| id.is_some()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_parallel_bodies_that_settle_at_once_need_no_task() {
    let seen = Arc::new(Seen::default());
    let registry = ToolRegistry::new();
    registry
        .register(probe("p", true, seen.clone(), None))
        .unwrap()
        .keep();
    let driver = run(&registry, cx("at-once"), blocks("p", 5)).await;
    assert_eq!(*seen.first.lock(), vec![driver; 5]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_a_panic_in_a_first_poll_is_that_calls_failure_and_the_batch_goes_on() {
    let registry = ToolRegistry::new();
    let boom = ToolDefinition::builder("boom", "panics on its first poll")
        .output(ToolOutput::string())
        .concurrency_safe(true)
        .execute(|_ctx| async move {
            if true {
                panic!("first poll");
            }
            Ok(Json::string("never"))
        })
        .build()
        .unwrap();
    registry.register(boom).unwrap().keep();
    registry
        .register(probe("p", true, Arc::default(), None))
        .unwrap()
        .keep();
    let rt = runtime(&registry, &Hooks::new());
    let blocks = vec![
        ToolCallBlock::new("c0", "boom", "{}"),
        ToolCallBlock::new("c1", "p", "{}"),
    ];
    let out = rt.run_step(&cx("panic"), &blocks).await.unwrap();
    assert_eq!(out.results.len(), 2);
    assert!(out.results[0].is_error());
    assert!(
        out.results[0]
            .error()
            .unwrap()
            .message()
            .contains("first poll"),
        "{:?}",
        out.results[0]
    );
    assert!(!out.results[1].is_error());
}
