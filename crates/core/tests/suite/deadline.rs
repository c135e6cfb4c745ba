//! TMO-13..33: the deadline utilities (`deadline`, `timeout_of`, `reason_timeout`,
//! `clamp_timeout`, `TimeoutReason`) on tokio's paused clock.
//!
//! TMO-34..38 describe the idle watchdog, a stream utility the tool pipeline does not use; it
//! lives in `dsh-model` (`watchdog.rs`), where its tests are.

use std::time::Duration;

use dsh_core::{
    AbortController, AbortReason, CancelCause, Signal, TimeoutReason, clamp_timeout, deadline,
    timeout_of,
};
use dsh_core::{MAX_TIMEOUT_MS, reason_timeout};

/// Lets spawned timer tasks run after the clock moved.
async fn settle() {
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
}

async fn advance(ms: u64) {
    tokio::time::advance(Duration::from_millis(ms)).await;
    settle().await;
}

#[test]
fn tmo_13_a_timeout_reason_names_its_code_and_budget() {
    let r = TimeoutReason::new("BASH_TIMEOUT", 100);
    assert_eq!(r.name(), "TimeoutReason");
    assert_eq!(r.code(), "BASH_TIMEOUT");
    assert_eq!(r.timeout_ms(), 100);
    assert_eq!(r.message(), "BASH_TIMEOUT after 100ms");
    assert_eq!(r.to_string(), "BASH_TIMEOUT after 100ms");
    // It is an error value.
    let as_error: &dyn std::error::Error = &r;
    assert_eq!(as_error.to_string(), "BASH_TIMEOUT after 100ms");
}

#[test]
fn tmo_14_no_hint_gives_the_default() {
    assert_eq!(clamp_timeout(None, 120_000, 600_000, None), Ok(120_000));
}

#[test]
fn tmo_15_a_hint_above_the_max_is_capped() {
    assert_eq!(
        clamp_timeout(Some(999_999.0), 120_000, 600_000, None),
        Ok(600_000)
    );
}

#[test]
fn tmo_16_a_hint_within_bounds_is_kept() {
    assert_eq!(
        clamp_timeout(Some(5_000.0), 120_000, 600_000, None),
        Ok(5_000)
    );
}

#[test]
fn tmo_17_the_default_is_capped_too() {
    assert_eq!(clamp_timeout(None, 900_000, 600_000, None), Ok(600_000));
}

#[test]
fn tmo_18_non_finite_hints_name_their_label() {
    let e = clamp_timeout(Some(f64::NAN), 1, 2, Some("bash.timeoutMs")).expect_err("NaN");
    assert_eq!(
        e.to_string(),
        "bash.timeoutMs must be a positive finite number"
    );
    let e = clamp_timeout(Some(f64::INFINITY), 1, 2, None).expect_err("infinite");
    assert_eq!(e.to_string(), "timeoutMs must be a positive finite number");
}

#[test]
fn tmo_19_zero_and_negative_hints_are_refused() {
    for h in [0.0, -1.0] {
        let e = clamp_timeout(Some(h), 1, 2, None).expect_err("not positive");
        assert!(
            e.to_string().contains("must be a positive finite number"),
            "{e}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn tmo_20_a_deadline_fires_at_its_budget_with_its_code() {
    let d = deadline(None, 100, "BASH_TIMEOUT").expect("armed");
    advance(99).await;
    assert!(!d.signal().is_aborted());
    advance(1).await;
    assert!(d.signal().is_aborted());
    let r = timeout_of(d.signal(), None).expect("a timeout");
    assert_eq!((r.code(), r.timeout_ms()), ("BASH_TIMEOUT", 100));
    assert_eq!(
        d.signal().reason(),
        Some(AbortReason::Timeout(TimeoutReason::new(
            "BASH_TIMEOUT",
            100
        )))
    );
}

#[tokio::test(start_paused = true)]
async fn tmo_20_waiting_on_the_signal_wakes_when_the_deadline_fires() {
    let d = deadline(None, 100, "BASH_TIMEOUT").expect("armed");
    let start = tokio::time::Instant::now();
    let reason = d.signal().aborted().await;
    assert_eq!(start.elapsed(), Duration::from_millis(100));
    assert!(matches!(reason, AbortReason::Timeout(_)));
}

#[tokio::test(start_paused = true)]
async fn tmo_21_dropping_a_deadline_disarms_it() {
    let d = deadline(None, 100, "BASH_TIMEOUT").expect("armed");
    let signal = d.signal().clone();
    drop(d);
    advance(1_000).await;
    assert!(!signal.is_aborted());
    assert_eq!(timeout_of(&signal, None), None);
}

#[tokio::test]
async fn tmo_22_a_budget_above_the_timer_maximum_is_refused() {
    assert_eq!(MAX_TIMEOUT_MS, 2_147_483_647);
    for ms in [2_147_483_648_i64, i64::MAX] {
        let e = deadline(None, ms, "X").err().expect("too large");
        assert!(e.to_string().contains("no greater than 2147483647"), "{e}");
    }
    assert!(deadline(None, 2_147_483_647, "X").is_ok());
}

#[tokio::test(start_paused = true)]
async fn tmo_23_an_upstream_abort_before_the_deadline_is_not_a_timeout() {
    let up = AbortController::new();
    let d = deadline(Some(&up.signal()), 60_000, "TOOL_TIMEOUT").expect("armed");
    advance(10).await;
    up.cancel();
    assert!(d.signal().is_aborted());
    assert_eq!(timeout_of(d.signal(), None), None);
    assert_eq!(
        d.signal().reason(),
        Some(AbortReason::Cancelled(CancelCause::User))
    );
}

#[tokio::test(start_paused = true)]
async fn tmo_24_the_first_cause_wins_when_the_timer_passes_later() {
    let up = AbortController::new();
    let d = deadline(Some(&up.signal()), 100, "TOOL_TIMEOUT").expect("armed");
    up.abort(AbortReason::Cancelled(CancelCause::Parent));
    advance(500).await;
    assert_eq!(timeout_of(d.signal(), None), None);
    assert_eq!(
        d.signal().reason(),
        Some(AbortReason::Cancelled(CancelCause::Parent))
    );
}

#[tokio::test(start_paused = true)]
async fn tmo_25_a_timeout_stays_a_timeout_when_the_upstream_aborts_later() {
    let up = AbortController::new();
    let d = deadline(Some(&up.signal()), 100, "WEB_FETCH_TIMEOUT").expect("armed");
    advance(100).await;
    up.cancel();
    let r = timeout_of(d.signal(), None).expect("still a timeout");
    assert_eq!(r.code(), "WEB_FETCH_TIMEOUT");
    // The upstream is unaffected by the derived signal.
    assert_eq!(
        up.signal().reason(),
        Some(AbortReason::Cancelled(CancelCause::User))
    );
}

#[tokio::test(start_paused = true)]
async fn tmo_26_an_already_aborted_upstream_aborts_at_once_not_as_a_timeout() {
    let up = Signal::aborted_with(AbortReason::Cancelled(CancelCause::User));
    let d = deadline(Some(&up), 100, "TOOL_TIMEOUT").expect("derived");
    assert!(d.signal().is_aborted());
    assert_eq!(timeout_of(d.signal(), None), None);
    advance(200).await;
    assert_eq!(timeout_of(d.signal(), None), None);
}

#[tokio::test(start_paused = true)]
async fn tmo_27_a_zero_budget_follows_only_the_upstream() {
    let up = AbortController::new();
    let d = deadline(Some(&up.signal()), 0, "TOOL_TIMEOUT").expect("derived");
    advance(3_600_000).await;
    assert!(!d.signal().is_aborted());
    up.cancel();
    assert!(d.signal().is_aborted());
    assert_eq!(timeout_of(d.signal(), None), None);
}

#[tokio::test(start_paused = true)]
async fn tmo_28_a_zero_budget_without_upstream_never_aborts() {
    let d = deadline(None, 0, "TOOL_TIMEOUT").expect("derived");
    let s = d.signal().clone();
    advance(3_600_000).await;
    assert!(!s.is_aborted());
    drop(d);
    assert!(!s.is_aborted());
}

#[tokio::test(start_paused = true)]
async fn tmo_29_a_negative_budget_is_treated_like_zero() {
    let d = deadline(None, -5, "TOOL_TIMEOUT").expect("derived");
    advance(10_000).await;
    assert!(!d.signal().is_aborted());
    drop(d);
}

#[test]
fn tmo_28_deadlines_without_a_timer_need_no_runtime() {
    let d = deadline(None, 0, "TOOL_TIMEOUT").expect("no timer, no runtime needed");
    assert!(!d.signal().is_aborted());
    let e = deadline(None, 10, "TOOL_TIMEOUT")
        .err()
        .expect("needs a runtime");
    assert_eq!(e.to_string(), "deadline needs a running tokio runtime");
}

#[test]
fn tmo_30_classifying_a_timeout_reason_returns_it() {
    let r = TimeoutReason::new("BASH_TIMEOUT", 100);
    let reason = AbortReason::Timeout(r.clone());
    assert_eq!(reason_timeout(Some(&reason), None), Some(r.clone()));
    assert_eq!(timeout_of(&Signal::aborted_with(reason), None), Some(r));
}

#[test]
fn tmo_31_other_reasons_are_not_timeouts() {
    let generic = AbortReason::Cancelled(CancelCause::User);
    let string = AbortReason::Cancelled(CancelCause::Other("boom".into()));
    assert_eq!(reason_timeout(Some(&generic), None), None);
    assert_eq!(reason_timeout(Some(&string), None), None);
    assert_eq!(reason_timeout(None, None), None);
    assert_eq!(timeout_of(&Signal::never(), None), None);
}

#[test]
fn tmo_32_classification_can_be_scoped_to_a_code() {
    let reason = AbortReason::Timeout(TimeoutReason::new("BASH_TIMEOUT", 100));
    assert!(reason_timeout(Some(&reason), Some("BASH_TIMEOUT")).is_some());
    assert_eq!(reason_timeout(Some(&reason), Some("TOOL_TIMEOUT")), None);
}

#[tokio::test(start_paused = true)]
async fn tmo_33_an_outer_timeout_is_upstream_cancellation_for_an_inner_code() {
    let outer = deadline(None, 50, "OUTER_TIMEOUT").expect("armed");
    advance(50).await;
    assert!(outer.signal().is_aborted());
    let inner = deadline(Some(outer.signal()), 100, "BASH_TIMEOUT").expect("derived");
    assert!(inner.signal().is_aborted());
    assert_eq!(timeout_of(inner.signal(), Some("BASH_TIMEOUT")), None);
    assert_eq!(
        timeout_of(inner.signal(), None).map(|r| r.code().to_owned()),
        Some("OUTER_TIMEOUT".to_owned())
    );

    // The same when the outer deadline fires while the inner one is armed.
    let outer = deadline(None, 50, "OUTER_TIMEOUT").expect("armed");
    let inner = deadline(Some(outer.signal()), 100, "BASH_TIMEOUT").expect("armed");
    advance(60).await;
    assert_eq!(timeout_of(inner.signal(), Some("BASH_TIMEOUT")), None);
    assert_eq!(
        timeout_of(inner.signal(), None).map(|r| r.code().to_owned()),
        Some("OUTER_TIMEOUT".to_owned())
    );
    advance(100).await;
    assert_eq!(timeout_of(inner.signal(), Some("BASH_TIMEOUT")), None);
}
