//! When to try a refused request again: exponential backoff with jitter, and the server's
//! `Retry-After` (seconds or an HTTP date, or OpenAI's `retry-after-ms`) honoured as given.
//!
//! Guarantees: only a status answer that may pass (429, a 5xx but those no retry can change:
//! [`retryable_status`]) or a connection closed before the response started is ever retried,
//! never a stream that opened; the
//! number of attempts never exceeds [`RetryPolicy::max_attempts`]; a computed backoff lies in
//! `[delay/2, delay]` for `delay = min(max_delay, base_delay * 2^(retry-1))`.

use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;

/// How often and how long to wait before trying a refused request again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1 means never retry).
    pub max_attempts: u32,
    /// The wait before the first retry, before jitter.
    pub base_delay: Duration,
    /// The longest computed wait (a `Retry-After` may ask for more and is honoured).
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    /// Four attempts, 500 ms doubling up to 30 s.
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// A policy that never retries.
    pub fn never() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        }
    }

    /// The backoff before retry number `retry` (1 for the first retry), with `jitter` in
    /// `[0, 1]` choosing a point in `[delay/2, delay]`.
    pub fn backoff(&self, retry: u32, jitter: f64) -> Duration {
        let exp = retry.saturating_sub(1).min(31);
        let full = self
            .base_delay
            .saturating_mul(1u32 << exp)
            .min(self.max_delay);
        full.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0))
    }

    /// The wait before retry number `retry`: the server's `Retry-After` if it sent one,
    /// otherwise a jittered backoff.
    pub fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        retry_after.unwrap_or_else(|| self.backoff(retry, fastrand::f64()))
    }
}

/// Whether an answer with `status` may succeed when the same request is sent again: 429 and
/// the 5xx statuses of a passing condition (500, 502, 503, 504, ...), not the 5xx statuses that
/// say the server cannot serve this request at all (501 Not Implemented, 505 HTTP Version Not
/// Supported, 506 Variant Also Negotiates, 508 Loop Detected, 510 Not Extended, 511 Network
/// Authentication Required), nor any other status.
pub(crate) fn retryable_status(status: u16) -> bool {
    status == 429
        || ((500..600).contains(&status) && !matches!(status, 501 | 505 | 506 | 508 | 510 | 511))
}

/// The wait a response asks for: `retry-after-ms` (milliseconds), else `Retry-After` as
/// seconds or as an HTTP date (relative to `now`; a date in the past means no wait).
pub fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = text("retry-after-ms").and_then(|t| t.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let value = text("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}
