//! Deadline utilities (conformance TMO-13..33): `deadline(signal, ms, code)` derives a signal that
//! fires with a [`TimeoutReason`] after `ms` unless the upstream fires first; [`timeout_of`]
//! classifies a fired signal; [`clamp_timeout`] bounds a requested budget.
//!
//! Guarantees: the first cause wins (an upstream abort is never reclassified as a timeout, and a
//! timeout is never reclassified as an upstream abort); dropping a [`Deadline`] disarms its timer.

use std::fmt;
use std::sync::Arc;

use crate::signal::{AbortController, AbortReason, Signal};

/// The largest budget accepted, in milliseconds (the reference's timer maximum).
pub const MAX_TIMEOUT_MS: u64 = 2_147_483_647;

/// A deadline's abort reason: `<code> after <ms>ms`, with name `TimeoutReason`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimeoutReason {
    code: Arc<str>,
    timeout_ms: u64,
}

impl TimeoutReason {
    /// A reason for `code` after `timeout_ms`.
    pub fn new(code: &str, timeout_ms: u64) -> TimeoutReason {
        TimeoutReason {
            code: Arc::from(code),
            timeout_ms,
        }
    }
    /// Always `TimeoutReason`.
    pub fn name(&self) -> &'static str {
        "TimeoutReason"
    }
    /// The code, e.g. `TOOL_TIMEOUT`.
    pub fn code(&self) -> &str {
        &self.code
    }
    /// The budget that elapsed.
    pub fn timeout_ms(&self) -> u64 {
        self.timeout_ms
    }
    /// `<code> after <ms>ms`.
    pub fn message(&self) -> String {
        format!("{} after {}ms", self.code, self.timeout_ms)
    }
}

impl fmt::Display for TimeoutReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

impl std::error::Error for TimeoutReason {}

/// A bad budget.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DeadlineError {
    /// Zero, negative, NaN or infinite where a positive budget is required.
    #[error("{label} must be a positive finite number")]
    NotPositive {
        /// The name of the setting.
        label: String,
    },
    /// Above [`MAX_TIMEOUT_MS`].
    #[error("{label} must be no greater than {MAX_TIMEOUT_MS}")]
    TooLarge {
        /// The name of the setting.
        label: String,
    },
    /// No tokio runtime to run the timer on.
    #[error("deadline needs a running tokio runtime")]
    NoRuntime,
}

/// A derived signal with an armed timer; dropping it disarms the timer.
pub struct Deadline {
    signal: Signal,
    timer: Option<tokio::task::JoinHandle<()>>,
}

impl Deadline {
    /// The derived signal.
    pub fn signal(&self) -> &Signal {
        &self.signal
    }
}

impl Drop for Deadline {
    fn drop(&mut self) {
        if let Some(t) = self.timer.take() {
            t.abort();
        }
    }
}

/// Derives a signal that fires with `TimeoutReason(code, ms)` after `ms` milliseconds, or with
/// the upstream's reason if the upstream fires first. A budget of 0 or less arms no timer.
pub fn deadline(upstream: Option<&Signal>, ms: i64, code: &str) -> Result<Deadline, DeadlineError> {
    let (signal, ctl) = match upstream {
        Some(up) => up.child(),
        None => {
            let c = AbortController::new();
            (c.signal(), c)
        }
    };
    if ms <= 0 {
        return Ok(Deadline {
            signal,
            timer: None,
        });
    }
    let ms = ms as u64;
    if ms > MAX_TIMEOUT_MS {
        return Err(DeadlineError::TooLarge {
            label: "timeoutMs".into(),
        });
    }
    if signal.is_aborted() {
        return Ok(Deadline {
            signal,
            timer: None,
        });
    }
    let handle = tokio::runtime::Handle::try_current().map_err(|_| DeadlineError::NoRuntime)?;
    let reason = TimeoutReason::new(code, ms);
    // The instant is fixed now, not when the timer task is first polled, so a busy runtime
    // cannot stretch the budget.
    let at = tokio::time::Instant::now() + std::time::Duration::from_millis(ms);
    let timer = handle.spawn(async move {
        tokio::time::sleep_until(at).await;
        ctl.abort(AbortReason::Timeout(reason));
    });
    Ok(Deadline {
        signal,
        timer: Some(timer),
    })
}

/// The timeout reason a fired signal carries, optionally only if its code is `code`.
pub fn timeout_of(signal: &Signal, code: Option<&str>) -> Option<TimeoutReason> {
    reason_timeout(signal.reason().as_ref(), code)
}

/// The timeout reason inside an abort reason, optionally only for `code` (TMO-30..33).
pub fn reason_timeout(reason: Option<&AbortReason>, code: Option<&str>) -> Option<TimeoutReason> {
    match reason {
        Some(AbortReason::Timeout(t)) if code.is_none_or(|c| c == t.code()) => Some(t.clone()),
        _ => None,
    }
}

/// Bounds a requested budget: no hint gives `default`; both are capped at `max`; a hint that is
/// not a positive finite number is an error naming `label` (default `timeoutMs`).
pub fn clamp_timeout(
    hint: Option<f64>,
    default: u64,
    max: u64,
    label: Option<&str>,
) -> Result<u64, DeadlineError> {
    let label = label.unwrap_or("timeoutMs").to_owned();
    match hint {
        None => Ok(default.min(max)),
        Some(h) if !h.is_finite() || h <= 0.0 => Err(DeadlineError::NotPositive { label }),
        Some(h) => Ok((h.ceil() as u64).min(max)),
    }
}
