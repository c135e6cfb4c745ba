//! The metrics wrapper: per-tool counters by outcome, a fixed log-scale latency histogram, and a
//! `tracing` span per dispatch.

use std::sync::Arc;
use std::time::Duration;

use dsh_core::{Dispatch, ExecuteNext, ExecuteWrapper, Failure, Signal, ToolExecution, ToolResult};
use dsh_guard::{
    Hooks, LATENCY_BOUNDS_MS, LatencyHistogram, Metrics, OUTCOME_ERROR, OUTCOME_OK,
    OUTCOME_WRAPPER_ERROR,
};
use serde_json::json;

use super::support::{Capture, FakeTerminal, exec_with, ok_result};

/// A body whose behaviour is chosen by the `mode` argument, after sleeping `ms`.
fn scripted() -> FakeTerminal {
    FakeTerminal::new(|d| {
        let e = d.exec().clone();
        Box::pin(async move {
            let args = e.arguments().value();
            let ms = args["ms"].as_u64().unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            match args["mode"].as_str() {
                Some("timeout") => ToolResult::failure(Failure::tool_timeout(ms)),
                Some("plain") => ToolResult::failure(Failure::new("boom")),
                _ => ok_result(&e, "ok"),
            }
        })
    })
}

fn call(name: &str, mode: &str, ms: u64) -> Arc<ToolExecution> {
    exec_with(
        "c1",
        name,
        json!({"mode": mode, "ms": ms}),
        None,
        Signal::never(),
    )
}

async fn run(w: &[Arc<dyn ExecuteWrapper>], e: Arc<ToolExecution>) -> Result<ToolResult, Failure> {
    ExecuteNext::new(w, &scripted()).run(Dispatch::new(e)).await
}

#[tokio::test(start_paused = true)]
async fn each_dispatch_is_counted_once_by_tool_and_outcome_with_its_latency() {
    let metrics = Metrics::new();
    let w: Vec<Arc<dyn ExecuteWrapper>> = vec![Arc::new(metrics.clone())];
    run(&w, call("a", "ok", 150)).await.unwrap();
    run(&w, call("a", "ok", 3)).await.unwrap();
    run(&w, call("a", "timeout", 40)).await.unwrap();
    run(&w, call("b", "plain", 0)).await.unwrap();
    let snap = metrics.snapshot();
    let a = snap.tool("a").unwrap();
    assert_eq!((a.calls, a.ok, a.errors, a.wrapper_failures), (3, 2, 1, 0));
    assert_eq!(a.by_outcome.get(OUTCOME_OK), Some(&2));
    assert_eq!(a.by_outcome.get("TOOL_TIMEOUT"), Some(&1));
    // 150 ms -> the 256 ms bucket, 3 ms -> 4 ms, 40 ms -> 64 ms.
    let idx = |ms: u64| LATENCY_BOUNDS_MS.iter().position(|b| *b == ms).unwrap();
    assert_eq!(a.latency.counts[idx(256)], 1);
    assert_eq!(a.latency.counts[idx(4)], 1);
    assert_eq!(a.latency.counts[idx(64)], 1);
    assert_eq!(a.latency.count(), 3);
    assert_eq!(a.latency.sum_micros, 193_000);
    assert_eq!(a.latency.max_micros, 150_000);
    assert_eq!(a.latency.quantile_upper_bound_ms(1.0), Some(256));
    assert_eq!(a.latency.quantile_upper_bound_ms(0.0), Some(4));
    let b = snap.tool("b").unwrap();
    assert_eq!(b.by_outcome.get(OUTCOME_ERROR), Some(&1));
    assert_eq!(b.latency.counts[0], 1, "0 ms is in the first bucket");
    assert!(snap.tool("c").is_none());
}

#[tokio::test(start_paused = true)]
async fn a_wrapper_failure_is_its_own_outcome() {
    struct Broken;
    #[async_trait::async_trait]
    impl ExecuteWrapper for Broken {
        async fn around(&self, _: Dispatch, _: ExecuteNext<'_>) -> Result<ToolResult, Failure> {
            Err(Failure::new("wrapper broke"))
        }
    }
    let metrics = Metrics::new();
    let w: Vec<Arc<dyn ExecuteWrapper>> = vec![Arc::new(metrics.clone()), Arc::new(Broken)];
    assert!(run(&w, call("a", "ok", 0)).await.is_err());
    let snap = metrics.snapshot();
    let a = snap.tool("a").unwrap();
    assert_eq!((a.calls, a.wrapper_failures), (1, 1));
    assert_eq!(a.by_outcome.get(OUTCOME_WRAPPER_ERROR), Some(&1));
}

#[tokio::test(start_paused = true)]
async fn each_dispatch_is_a_tracing_span_with_tool_outcome_and_duration() {
    let cap = Capture::default();
    let _g = tracing::subscriber::set_default(cap.clone());
    let metrics = Metrics::new();
    let hooks = Hooks::new();
    metrics.install(&hooks).keep();
    let w = hooks.snapshot(&[]).wrappers.clone();
    run(&w, call("a", "ok", 20)).await.unwrap();
    run(&w, call("b", "timeout", 5)).await.unwrap();
    let spans = cap.spans_named("tool.dispatch");
    assert_eq!(spans.len(), 2);
    assert_eq!(spans[0].fields["tool"], "a");
    assert_eq!(spans[0].fields["call_id"], "c1");
    assert_eq!(spans[0].fields["outcome"], "ok");
    assert_eq!(spans[0].fields["duration_us"], "20000");
    assert_eq!(spans[1].fields["tool"], "b");
    assert_eq!(spans[1].fields["outcome"], "TOOL_TIMEOUT");
}

#[test]
fn the_histogram_buckets_are_fixed_powers_of_two() {
    assert_eq!(LATENCY_BOUNDS_MS[0], 1);
    assert!(LATENCY_BOUNDS_MS.windows(2).all(|w| w[1] == w[0] * 2));
    let h = LatencyHistogram::default();
    assert_eq!(h.counts.len(), LATENCY_BOUNDS_MS.len() + 1);
    assert_eq!(LatencyHistogram::bucket_of(Duration::from_millis(1)), 0);
    assert_eq!(LatencyHistogram::bucket_of(Duration::from_micros(1001)), 1);
    assert_eq!(
        LatencyHistogram::bucket_of(Duration::from_secs(3600)),
        LATENCY_BOUNDS_MS.len()
    );
    assert_eq!(h.quantile_upper_bound_ms(0.5), None);
}

#[test]
fn a_snapshot_is_a_copy() {
    let m = Metrics::new();
    m.record("t", OUTCOME_OK, Duration::from_millis(1));
    let before = m.snapshot();
    m.record("t", OUTCOME_OK, Duration::from_millis(1));
    assert_eq!(before.tool("t").unwrap().calls, 1);
    assert_eq!(m.snapshot().tool("t").unwrap().calls, 2);
    let v = serde_json::to_value(m.snapshot()).unwrap();
    assert_eq!(v["tools"]["t"]["calls"], 2);
    assert_eq!(v["tools"]["t"]["byOutcome"]["ok"], 2);
}
