//! TMO-34..38: the idle watchdog on tokio's paused clock, as the reference's stream utility
//! behaves, with its messages.

use std::sync::Arc;
use std::time::Duration;

use dsh_core::MAX_TIMEOUT_MS;
use dsh_core::{AbortController, AbortReason, CancelCause, timeout_of};
use dsh_model::idle_timeout_from_ms;
use dsh_model::{IDLE_TIMEOUT_CODE, IdleWatchdog, WatchdogError};
use tokio::sync::oneshot;

/// Lets spawned tasks run (and arm their timers) after the clock moved.
async fn settle() {
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
}

async fn advance(ms: u64) {
    tokio::time::advance(Duration::from_millis(ms)).await;
    settle().await;
}

fn watchdog(ms: u64) -> Arc<IdleWatchdog> {
    Arc::new(IdleWatchdog::new(None, Duration::from_millis(ms), IDLE_TIMEOUT_CODE).unwrap())
}

/// Waits on `rx` through the watchdog in a task.
fn wait(
    wd: &Arc<IdleWatchdog>,
    rx: oneshot::Receiver<u32>,
) -> tokio::task::JoinHandle<Result<Result<u32, oneshot::error::RecvError>, WatchdogError>> {
    let wd = Arc::clone(wd);
    tokio::spawn(async move { wd.next(rx).await })
}

#[tokio::test(start_paused = true)]
async fn tmo_34_armed_only_while_waiting_and_the_same_signal_is_rearmed() {
    let wd = watchdog(100);
    let stable = wd.signal().clone();
    let (tx1, rx1) = oneshot::channel();
    let first = wait(&wd, rx1);
    settle().await;
    advance(99).await;
    assert!(!stable.is_aborted());
    tx1.send(1).unwrap();
    assert_eq!(first.await.unwrap(), Ok(Ok(1)));

    // Consumer think time does not count.
    advance(10_000).await;
    assert!(!stable.is_aborted());
    assert!(dsh_core::Signal::same(wd.signal(), &stable));

    let (_tx2, rx2) = oneshot::channel();
    let second = wait(&wd, rx2);
    settle().await;
    advance(100).await;
    let reason = timeout_of(&stable, Some(IDLE_TIMEOUT_CODE)).expect("timed out");
    assert_eq!(reason.timeout_ms(), 100);
    assert_eq!(reason.message(), "LLM_STREAM_IDLE_TIMEOUT after 100ms");
    assert_eq!(second.await.unwrap(), Err(WatchdogError::TimedOut(reason)));
}

#[tokio::test(start_paused = true)]
async fn tmo_35_a_pulse_rearms_outstanding_demand_and_does_not_arm_otherwise() {
    let wd = watchdog(100);
    wd.pulse();
    advance(1_000).await;
    assert!(!wd.signal().is_aborted());

    let (_tx, rx) = oneshot::channel();
    let pending = wait(&wd, rx);
    settle().await;
    advance(99).await;
    wd.pulse();
    advance(99).await;
    assert!(!wd.signal().is_aborted());
    advance(1).await;
    let reason = timeout_of(wd.signal(), Some(IDLE_TIMEOUT_CODE)).expect("timed out");
    assert_eq!(reason.timeout_ms(), 100);
    assert_eq!(pending.await.unwrap(), Err(WatchdogError::TimedOut(reason)));

    wd.dispose();
    wd.pulse();
}

#[tokio::test(start_paused = true)]
async fn tmo_36_an_earlier_upstream_abort_keeps_its_reason_and_is_not_a_timeout() {
    let upstream = AbortController::new();
    let wd = Arc::new(
        IdleWatchdog::new(
            Some(&upstream.signal()),
            Duration::from_millis(100),
            IDLE_TIMEOUT_CODE,
        )
        .unwrap(),
    );
    upstream.cancel();
    assert!(wd.signal().is_aborted());
    assert!(timeout_of(wd.signal(), Some(IDLE_TIMEOUT_CODE)).is_none());
    let (_tx, rx) = oneshot::channel();
    let waited = wait(&wd, rx);
    advance(1_000).await;
    let user = AbortReason::Cancelled(CancelCause::User);
    assert_eq!(wd.signal().reason(), Some(user.clone()));
    assert_eq!(waited.await.unwrap(), Err(WatchdogError::Aborted(user)));
}

#[tokio::test(start_paused = true)]
async fn tmo_37_disposal_clears_the_outstanding_arm_and_later_waits_fail() {
    let wd = watchdog(100);
    let (tx, rx) = oneshot::channel();
    let pending = wait(&wd, rx);
    settle().await;
    wd.dispose();
    advance(1_000).await;
    assert!(!wd.signal().is_aborted());
    tx.send(7).unwrap();
    assert_eq!(pending.await.unwrap(), Ok(Ok(7)));
    let later = wd.next(async { 1 }).await;
    assert_eq!(later, Err(WatchdogError::Disposed));
    assert!(WatchdogError::Disposed.to_string().contains("disposed"));
    wd.dispose();
}

#[tokio::test(start_paused = true)]
async fn tmo_38_bad_bounds_and_a_second_concurrent_wait_are_refused() {
    let zero = IdleWatchdog::new(None, Duration::ZERO, "IDLE").unwrap_err();
    assert!(zero.to_string().contains("positive finite"), "{zero}");
    assert_eq!(idle_timeout_from_ms(f64::NAN), Err(WatchdogError::Bounds));
    assert_eq!(idle_timeout_from_ms(0.0), Err(WatchdogError::Bounds));
    assert_eq!(idle_timeout_from_ms(100.0), Ok(Duration::from_millis(100)));
    let too_big =
        IdleWatchdog::new(None, Duration::from_millis(MAX_TIMEOUT_MS + 1), "IDLE").unwrap_err();
    assert!(
        too_big
            .to_string()
            .contains(&format!("no greater than {MAX_TIMEOUT_MS}"))
    );
    assert!(IdleWatchdog::new(None, Duration::from_millis(MAX_TIMEOUT_MS), "IDLE").is_ok());

    let wd = watchdog(100);
    let (tx, rx) = oneshot::channel();
    let first = wait(&wd, rx);
    settle().await;
    let second = wd.next(async { 2 }).await;
    assert_eq!(second, Err(WatchdogError::AlreadyOutstanding));
    assert!(
        WatchdogError::AlreadyOutstanding
            .to_string()
            .contains("already outstanding")
    );
    tx.send(1).unwrap();
    assert_eq!(first.await.unwrap(), Ok(Ok(1)));
    // The flag is cleared once the wait ends, even when the waiting future is dropped.
    assert_eq!(wd.next(async { 3 }).await, Ok(3));
    let (_keep, rx) = oneshot::channel::<u32>();
    drop(tokio::time::timeout(Duration::from_millis(10), wd.next(rx)).await);
    assert_eq!(wd.next(async { 4 }).await, Ok(4));
}
