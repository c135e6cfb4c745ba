//! The stream idle watchdog (TMO-34..38): a timer armed only while the caller waits on the
//! stream, so time the consumer spends between items never counts as the provider being idle.
//!
//! Guarantees: one stable [`Signal`] for the watchdog's whole life, fired either by the upstream
//! (whose reason is kept: an earlier upstream abort is never a timeout, TMO-36) or by the idle
//! timer with `TimeoutReason(code, ms)`; the timer runs only while a [`IdleWatchdog::next`] is
//! outstanding (TMO-34), a [`IdleWatchdog::pulse`] pushes an outstanding arm back and does
//! nothing otherwise (TMO-35); disposal clears an outstanding arm and refuses later waits
//! (TMO-37); bounds outside `1..=MAX_TIMEOUT_MS` ms and a second concurrent wait are refused with
//! the reference's messages (TMO-38).

use std::future::Future;
use std::time::Duration;

use dsh_core::MAX_TIMEOUT_MS;
use dsh_core::{AbortController, AbortReason, Signal, TimeoutReason};
use parking_lot::Mutex;
use tokio::time::Instant;

/// The timeout code of a model stream that went idle.
pub const IDLE_TIMEOUT_CODE: &str = "LLM_STREAM_IDLE_TIMEOUT";

/// A watchdog that was misused, or a wait that ended without the item.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WatchdogError {
    /// The idle timeout is zero, not a number, or above [`MAX_TIMEOUT_MS`].
    #[error(
        "idleWatchdog timeoutMs must be a positive finite number no greater than {MAX_TIMEOUT_MS}"
    )]
    Bounds,
    /// [`IdleWatchdog::dispose`] was called before this wait.
    #[error("idleWatchdog is disposed")]
    Disposed,
    /// Another wait is still outstanding.
    #[error("idleWatchdog next is already outstanding")]
    AlreadyOutstanding,
    /// The idle timer fired while waiting.
    #[error("{0}")]
    TimedOut(TimeoutReason),
    /// The upstream fired while waiting (or had fired before).
    #[error("aborted: {0}")]
    Aborted(AbortReason),
}

/// An idle timeout given in milliseconds as a number (a config value), checked like the
/// reference checks it: positive, finite, at most [`MAX_TIMEOUT_MS`] (TMO-38).
pub fn idle_timeout_from_ms(ms: f64) -> Result<Duration, WatchdogError> {
    if !ms.is_finite() || ms <= 0.0 || ms > MAX_TIMEOUT_MS as f64 {
        return Err(WatchdogError::Bounds);
    }
    Ok(Duration::from_secs_f64(ms / 1000.0))
}

/// `timeout` in whole milliseconds (rounded up), if a watchdog takes it: more than 0 and at
/// most [`MAX_TIMEOUT_MS`] (TMO-38).
pub(crate) fn timeout_ms(timeout: Duration) -> Result<u64, WatchdogError> {
    let ms = timeout.as_nanos().div_ceil(1_000_000);
    if timeout.is_zero() || ms > u128::from(MAX_TIMEOUT_MS) {
        return Err(WatchdogError::Bounds);
    }
    u64::try_from(ms).map_err(|_| WatchdogError::Bounds)
}

#[derive(Default)]
struct State {
    outstanding: bool,
    disposed: bool,
    deadline: Option<Instant>,
}

/// A re-armable idle timeout around one outstanding wait at a time.
pub struct IdleWatchdog {
    signal: Signal,
    ctl: AbortController,
    timeout: Duration,
    reason: TimeoutReason,
    state: Mutex<State>,
}

impl std::fmt::Debug for IdleWatchdog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdleWatchdog")
            .field("timeout", &self.timeout)
            .field("signal", &self.signal)
            .finish_non_exhaustive()
    }
}

/// Clears the outstanding flag however the wait ends (its future may be dropped).
struct Outstanding<'a>(&'a Mutex<State>);

impl Drop for Outstanding<'_> {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        st.outstanding = false;
        st.deadline = None;
    }
}

impl IdleWatchdog {
    /// A watchdog firing with `TimeoutReason(code, ms)` after `timeout` without progress while
    /// waited on, fused with `upstream` if given.
    pub fn new(
        upstream: Option<&Signal>,
        timeout: Duration,
        code: &str,
    ) -> Result<IdleWatchdog, WatchdogError> {
        let ms = timeout_ms(timeout)?;
        let (signal, ctl) = match upstream {
            Some(up) => up.child(),
            None => {
                let c = AbortController::new();
                (c.signal(), c)
            }
        };
        Ok(IdleWatchdog {
            signal,
            ctl,
            timeout,
            reason: TimeoutReason::new(code, ms),
            state: Mutex::new(State::default()),
        })
    }

    /// The stable signal: fired by the upstream or by this watchdog's timeout.
    pub fn signal(&self) -> &Signal {
        &self.signal
    }

    /// The idle timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Progress seen out of band (bytes that did not complete an item): re-arms an outstanding
    /// wait for a full timeout from now; does nothing when no wait is outstanding (TMO-35).
    pub fn pulse(&self) {
        let mut st = self.state.lock();
        if st.outstanding && !st.disposed {
            st.deadline = Some(Instant::now() + self.timeout);
        }
    }

    /// Clears an outstanding arm; later waits fail with [`WatchdogError::Disposed`] (TMO-37).
    /// Calling it again does nothing.
    pub fn dispose(&self) {
        let mut st = self.state.lock();
        st.disposed = true;
        st.deadline = None;
    }

    fn classify(&self, reason: AbortReason) -> WatchdogError {
        match reason {
            AbortReason::Timeout(t) if t == self.reason => WatchdogError::TimedOut(t),
            other => WatchdogError::Aborted(other),
        }
    }

    /// Awaits `item` with the idle timer armed. The item wins a tie with the timer. A wait while
    /// another is outstanding, or after disposal, fails at once (TMO-37, TMO-38).
    pub async fn next<F: Future>(&self, item: F) -> Result<F::Output, WatchdogError> {
        {
            let mut st = self.state.lock();
            if st.disposed {
                return Err(WatchdogError::Disposed);
            }
            if st.outstanding {
                return Err(WatchdogError::AlreadyOutstanding);
            }
            st.outstanding = true;
            st.deadline = Some(Instant::now() + self.timeout);
        }
        let _outstanding = Outstanding(&self.state);
        if let Some(reason) = self.signal.reason() {
            return Err(self.classify(reason));
        }
        let mut item = std::pin::pin!(item);
        loop {
            let deadline = self.state.lock().deadline;
            let timer = async move {
                match deadline {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                out = &mut item => return Ok(out),
                reason = self.signal.aborted() => return Err(self.classify(reason)),
                () = timer => {
                    // A pulse may have pushed the deadline back, or disposal cleared it.
                    let due = self.state.lock().deadline.is_some_and(|at| at <= Instant::now());
                    if due {
                        self.ctl.abort(AbortReason::Timeout(self.reason.clone()));
                    }
                }
            }
        }
    }
}
