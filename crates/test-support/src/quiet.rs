//! Proving that something has *not* happened without a wall clock.
//!
//! A test that asserts "B has not started" after waiting some real milliseconds proves nothing
//! on a slow machine and wastes time on a fast one. On a current-thread runtime whose clock is
//! paused (`#[tokio::test(start_paused = true)]`), a timer fires only when the runtime has no
//! task left to poll; so once [`quiescent`] returns, every task (running bodies, the driver,
//! spawned helpers) has run until it blocked, and whatever would have started has started.
//!
//! This holds for work done on the runtime's own thread. Work another OS thread does (a
//! session's writer thread, the Code Mode engine thread) is invisible to it: a test waits for
//! that with [`yield_until`], which reads no clock.

use std::time::Duration;

/// Returns once no task of the current runtime can make progress. Panics unless the runtime is
/// current-thread with its clock paused, where that is what the returned sleep means.
pub async fn quiescent() {
    assert!(
        is_paused_current_thread(),
        "quiescent() proves nothing without a paused clock on a current-thread runtime"
    );
    tokio::time::sleep(Duration::from_millis(40)).await;
}

/// Yields until `cond` holds, without reading any clock: for waiting on another OS thread
/// while the clock is paused. Panics after a million polls.
pub async fn yield_until(mut cond: impl FnMut() -> bool) {
    for _ in 0..1_000_000 {
        if cond() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("the condition never held");
}

/// Whether the test runs on a current-thread runtime whose clock is paused: a paused clock does
/// not move while the runtime is busy, so it reads the same instant across a real pause.
fn is_paused_current_thread() -> bool {
    let flavor = tokio::runtime::Handle::current().runtime_flavor();
    flavor == tokio::runtime::RuntimeFlavor::CurrentThread && {
        let a = tokio::time::Instant::now();
        std::thread::sleep(Duration::from_millis(1));
        tokio::time::Instant::now() == a
    }
}
