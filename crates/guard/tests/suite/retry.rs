//! The retry wrapper: bounded attempts, exponential backoff, retryable failures only, never
//! after cancellation.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use dsh_core::{
    AbortController, Dispatch, ExecuteNext, ExecuteWrapper, Failure, Signal, ToolExecution,
    ToolResult,
};
use dsh_guard::RetryPolicy;
use serde_json::json;
use tokio::time::Instant;

use super::support::{FakeTerminal, exec_with, ok_result};

fn policy(attempts: u32) -> RetryPolicy {
    RetryPolicy::new(
        attempts,
        Duration::from_millis(100),
        Duration::from_millis(250),
    )
    .unwrap()
}

/// A body that fails (retryably unless `plain`) for its first `failures` dispatches, then
/// succeeds.
fn flaky(failures: u32, retryable: bool) -> FakeTerminal {
    let n = Arc::new(AtomicU32::new(0));
    FakeTerminal::new(move |d| {
        let e = d.exec().clone();
        let i = n.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            if i < failures {
                let f = Failure::harness("FLAKY", format!("attempt {} failed", i + 1));
                ToolResult::failure(if retryable { f.retryable() } else { f })
            } else {
                ok_result(&e, "ok")
            }
        })
    })
}

async fn run(
    p: RetryPolicy,
    t: &FakeTerminal,
    e: &Arc<ToolExecution>,
) -> Result<ToolResult, Failure> {
    let w: Vec<Arc<dyn ExecuteWrapper>> = vec![Arc::new(p)];
    ExecuteNext::new(&w, t).run(Dispatch::new(e.clone())).await
}

fn call(signal: Signal) -> Arc<ToolExecution> {
    exec_with("c1", "t", json!({}), None, signal)
}

#[tokio::test(start_paused = true)]
async fn a_retryable_failure_is_retried_with_exponential_backoff_until_success() {
    let t = flaky(2, true);
    let start = Instant::now();
    let r = run(policy(5), &t, &call(Signal::never())).await.unwrap();
    assert_eq!(r.first_text(), Some("ok"));
    assert_eq!(t.calls(), 3);
    assert_eq!(start.elapsed(), Duration::from_millis(100 + 200));
}

#[tokio::test(start_paused = true)]
async fn attempts_are_bounded_and_the_last_failure_is_returned() {
    let t = flaky(10, true);
    let start = Instant::now();
    let r = run(policy(4), &t, &call(Signal::never())).await.unwrap();
    assert_eq!(t.calls(), 4);
    assert_eq!(r.error().map(Failure::message), Some("attempt 4 failed"));
    // 100, 200, then capped at 250.
    assert_eq!(start.elapsed(), Duration::from_millis(100 + 200 + 250));
}

#[tokio::test(start_paused = true)]
async fn a_failure_not_marked_retryable_is_returned_at_once() {
    let t = flaky(1, false);
    let r = run(policy(5), &t, &call(Signal::never())).await.unwrap();
    assert_eq!(t.calls(), 1);
    assert_eq!(r.error().and_then(Failure::code), Some("FLAKY"));
}

#[tokio::test(start_paused = true)]
async fn never_retried_once_the_caller_has_cancelled() {
    let ctl = AbortController::new();
    ctl.cancel();
    let t = flaky(3, true);
    let r = run(policy(5), &t, &call(ctl.signal())).await.unwrap();
    assert_eq!(t.calls(), 1);
    assert!(r.is_error());
}

#[tokio::test(start_paused = true)]
async fn a_cancellation_during_backoff_cuts_the_sleep_and_stops() {
    let ctl = AbortController::new();
    let t = flaky(3, true);
    let e = call(ctl.signal());
    let start = Instant::now();
    let cancel = async {
        tokio::time::sleep(Duration::from_millis(30)).await;
        ctl.cancel();
    };
    let (r, ()) = tokio::join!(run(policy(5), &t, &e), cancel);
    assert_eq!(t.calls(), 1);
    assert_eq!(start.elapsed(), Duration::from_millis(30));
    assert_eq!(
        r.unwrap().error().map(Failure::message),
        Some("attempt 1 failed")
    );
}

#[tokio::test(start_paused = true)]
async fn a_wrapper_failure_further_in_is_passed_on_unretried() {
    struct Broken(AtomicU32);
    #[async_trait::async_trait]
    impl ExecuteWrapper for Broken {
        async fn around(&self, _: Dispatch, _: ExecuteNext<'_>) -> Result<ToolResult, Failure> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Err(Failure::new("sandbox unavailable").retryable())
        }
    }
    let broken = Arc::new(Broken(AtomicU32::new(0)));
    let w: Vec<Arc<dyn ExecuteWrapper>> = vec![Arc::new(policy(5)), broken.clone()];
    let t = flaky(0, true);
    let r = ExecuteNext::new(&w, &t)
        .run(Dispatch::new(call(Signal::never())))
        .await;
    assert_eq!(r.unwrap_err().message(), "sandbox unavailable");
    assert_eq!(broken.0.load(Ordering::SeqCst), 1);
    assert_eq!(t.calls(), 0);
}

#[test]
fn backoff_doubles_and_is_capped_and_bad_settings_are_refused() {
    let p = RetryPolicy::new(10, Duration::from_millis(10), Duration::from_millis(1000)).unwrap();
    let waits: Vec<u128> = (1..=9).map(|a| p.backoff(a).as_millis()).collect();
    assert_eq!(waits, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
    assert_eq!(p.backoff(200), Duration::from_millis(1000));
    assert!(RetryPolicy::new(0, Duration::ZERO, Duration::ZERO).is_err());
    assert!(RetryPolicy::new(2, Duration::from_secs(2), Duration::from_secs(1)).is_err());
    assert_eq!(RetryPolicy::default().max_attempts(), 3);
}
