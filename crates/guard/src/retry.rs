//! The retry wrapper: calls `next` again, with exponential backoff, for failures the tool marks
//! retryable ([`dsh_core::Failure::is_retryable`]).
//!
//! Guarantees: at most `max_attempts` attempts; never a retry once the caller's (or the
//! installed) signal has fired, and the backoff sleep ends as soon as it fires; a wrapper
//! failure (`Err`) is passed on and never retried; the result returned is the last attempt's.

use std::time::Duration;

use async_trait::async_trait;
use dsh_core::{Dispatch, ExecuteNext, ExecuteWrapper, Failure, ToolResult};
use serde::Deserialize;

use crate::error::GuardError;
use crate::hookset::{HookHandle, Hooks};
use crate::scope::Scope;

/// Bounded retry with exponential backoff.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    max_attempts: u32,
    base_delay: Duration,
    max_delay: Duration,
}

/// The `[retry]` table of a configuration file.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RetryTable {
    pub(crate) attempts: u32,
    #[serde(default = "default_base_ms")]
    pub(crate) base_delay_ms: u64,
    #[serde(default = "default_max_ms")]
    pub(crate) max_delay_ms: u64,
}

fn default_base_ms() -> u64 {
    100
}
fn default_max_ms() -> u64 {
    10_000
}

impl Default for RetryPolicy {
    /// 3 attempts, 100 ms first backoff, capped at 10 s.
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(default_base_ms()),
            max_delay: Duration::from_millis(default_max_ms()),
        }
    }
}

impl RetryPolicy {
    /// The plugin name.
    pub const NAME: &'static str = "retry-policy";

    /// A policy of at most `max_attempts` attempts (1 means no retry), waiting `base_delay`
    /// before the second attempt and doubling each time, never more than `max_delay`.
    pub fn new(
        max_attempts: u32,
        base_delay: Duration,
        max_delay: Duration,
    ) -> Result<RetryPolicy, GuardError> {
        if max_attempts == 0 {
            return Err(GuardError::config(
                None,
                "retry.attempts must be at least 1",
            ));
        }
        if max_delay < base_delay {
            return Err(GuardError::config(
                None,
                "retry.max_delay_ms must not be smaller than retry.base_delay_ms",
            ));
        }
        Ok(RetryPolicy {
            max_attempts,
            base_delay,
            max_delay,
        })
    }

    pub(crate) fn from_table(t: RetryTable) -> Result<RetryPolicy, GuardError> {
        RetryPolicy::new(
            t.attempts,
            Duration::from_millis(t.base_delay_ms),
            Duration::from_millis(t.max_delay_ms),
        )
    }

    /// The most attempts a call gets.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The wait after failed attempt `attempt` (1-based): `base * 2^(attempt-1)`, capped.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let factor = 1u32
            .checked_shl(attempt.saturating_sub(1))
            .unwrap_or(u32::MAX);
        self.base_delay
            .checked_mul(factor)
            .unwrap_or(self.max_delay)
            .min(self.max_delay)
    }

    /// Registers the policy as a global `tools/execute` wrapper, inside the existing ones.
    pub fn install(self, hooks: &Hooks) -> HookHandle {
        hooks.on_execute(Scope::Global, self)
    }
}

fn cancelled(call: &Dispatch) -> bool {
    call.exec().signal().is_aborted() || call.signal().is_aborted()
}

#[async_trait]
impl ExecuteWrapper for RetryPolicy {
    async fn around(&self, call: Dispatch, next: ExecuteNext<'_>) -> Result<ToolResult, Failure> {
        let mut attempt = 1;
        loop {
            let result = next.run(call.clone()).await?;
            let retryable = result.error().is_some_and(Failure::is_retryable);
            if !retryable || attempt >= self.max_attempts || cancelled(&call) {
                return Ok(result);
            }
            let wait = self.backoff(attempt);
            tracing::debug!(
                tool = call.exec().name(),
                call_id = call.exec().call_id(),
                attempt,
                wait_ms = wait.as_millis() as u64,
                "retrying a retryable tool failure"
            );
            let caller = call.exec().signal().clone();
            let installed = call.signal().clone();
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = caller.aborted() => return Ok(result),
                _ = installed.aborted() => return Ok(result),
            }
            attempt += 1;
        }
    }
}
