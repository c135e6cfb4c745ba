//! Durability per group, not per call (issue: a wide step paid one sync per call): the records of
//! calls that start together share a write, a `tool/result` is not synced on its own, and still
//! no body runs before its own `tool/call` is durable (spec S4) and a step returns only once
//! every result it reports is durable.

// Tests state their expectations with `unwrap`/`expect`: a panic is the failure report.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;

use dsh_core::{Json, Signal, ToolDefinition, ToolOutput};
use dsh_scheduler::{StepContext, ToolCallBlock};
use dsh_session::{Header, Session};
use parking_lot::Mutex;

use super::support::*;

impl Writes {
    fn has_call(&self, call_id: &str) -> bool {
        let needle =
            format!(r#""type":"tool/call","data":{{"turn":1,"step":1,"callId":"{call_id}""#);
        self.0.lock().iter().any(|w| w.contains(&needle))
    }
    fn has_result_of(&self, call_id: &str) -> bool {
        let needle = format!(r#""toolCallId":"{call_id}""#);
        self.0
            .lock()
            .iter()
            .any(|w| w.contains(r#""type":"tool/result""#) && w.contains(&needle))
    }
    fn with_calls(&self) -> usize {
        self.0
            .lock()
            .iter()
            .filter(|w| w.contains(r#""type":"tool/call""#))
            .count()
    }
}

/// A parallel-safe tool whose body notes whether its own `tool/call` was durable when it ran.
fn checks_its_record(writes: &Writes, unsafe_runs: &Arc<Mutex<Vec<String>>>) -> ToolDefinition {
    let (writes, unsafe_runs) = (writes.clone(), unsafe_runs.clone());
    ToolDefinition::builder("probe", "checks that its record is durable")
        .output(ToolOutput::string())
        .concurrency_safe(true)
        .execute(move |ctx| {
            let id = ctx.exec().call_id().to_owned();
            if !writes.has_call(&id) {
                unsafe_runs.lock().push(id);
            }
            async { Ok(Json::string("ok")) }
        })
        .build()
        .unwrap()
}

fn blocks(n: usize) -> Vec<ToolCallBlock> {
    (1..=n)
        .map(|i| ToolCallBlock {
            call_id: Arc::from(format!("c{i}")),
            name: Arc::from("probe"),
            arguments: Arc::from("{}"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s4_a_wide_step_groups_its_records_and_no_body_runs_before_its_own() {
    let writes = Writes::default();
    let unsafe_runs: Arc<Mutex<Vec<String>>> = Arc::default();
    let rt = Arc::new(runtime_of([checks_its_record(&writes, &unsafe_runs)]));
    let session = Session::with_sink(Header::new("group", "/tmp"), writes.clone()).unwrap();
    let cx = StepContext {
        session: session.clone(),
        turn: 1,
        step: 1,
        agent: None,
        signal: Signal::never(),
        max_parallel: 10,
    };
    let n = 60;
    let out = rt.run_step(&cx, &blocks(n)).await.unwrap();
    assert_eq!(out.results.len(), n);
    assert!(
        unsafe_runs.lock().is_empty(),
        "ran before their record: {:?}",
        unsafe_runs.lock()
    );
    // Every result the step reports is durable once it returns.
    for i in 1..=n {
        assert!(
            writes.has_result_of(&format!("c{i}")),
            "c{i}'s result is not durable"
        );
    }
    // Calls that start together are recorded together: far fewer writes than calls.
    let grouped = writes.with_calls();
    assert!(
        grouped <= n / 3,
        "{grouped} writes held records for {n} calls"
    );
    assert_paired(&session);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s4_exclusive_calls_are_recorded_one_by_one() {
    let writes = Writes::default();
    let unsafe_runs: Arc<Mutex<Vec<String>>> = Arc::default();
    let exclusive = ToolDefinition::builder("probe", "exclusive")
        .output(ToolOutput::string())
        .concurrency_safe(false)
        .execute({
            let (writes, unsafe_runs) = (writes.clone(), unsafe_runs.clone());
            move |ctx| {
                let id = ctx.exec().call_id().to_owned();
                if !writes.has_call(&id) {
                    unsafe_runs.lock().push(id);
                }
                async { Ok(Json::string("ok")) }
            }
        })
        .build()
        .unwrap();
    let rt = Arc::new(runtime_of([exclusive]));
    let session = Session::with_sink(Header::new("one-by-one", "/tmp"), writes.clone()).unwrap();
    let cx = StepContext {
        session: session.clone(),
        turn: 1,
        step: 1,
        agent: None,
        signal: Signal::never(),
        max_parallel: 10,
    };
    rt.run_step(&cx, &blocks(5)).await.unwrap();
    assert!(unsafe_runs.lock().is_empty());
    // A barrier is recorded only once everything before it is committed: its record follows
    // the previous result in the log.
    assert_eq!(
        tool_trace(&session),
        (1..=5)
            .flat_map(|i| [format!("call c{i}"), format!("result c{i}")])
            .collect::<Vec<_>>()
    );
}
