//! The metrics wrapper: records each dispatch (tool, outcome, duration) through a `tracing` span
//! and keeps per-tool counters and a latency histogram a host reads with [`Metrics::snapshot`].
//!
//! Guarantees: every dispatch that returns is counted exactly once, in one outcome; recording
//! is O(1) (one short lock, never held across `.await`); the histogram's buckets are fixed.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use dsh_core::{Dispatch, ExecuteNext, ExecuteWrapper, Failure, ToolResult};
use parking_lot::Mutex;
use serde::Serialize;
use tracing::Instrument;

use crate::hookset::{HookHandle, Hooks};
use crate::scope::Scope;

/// Upper bounds (inclusive, milliseconds) of the latency buckets: powers of two from 1 ms to
/// 131 072 ms (about 2 minutes); one more bucket counts everything slower.
pub const LATENCY_BOUNDS_MS: [u64; 18] = [
    1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072,
];

/// The outcome label of a successful dispatch.
pub const OUTCOME_OK: &str = "ok";
/// The outcome label of a failure without a typed code.
pub const OUTCOME_ERROR: &str = "error";
/// The outcome label of a wrapper failure (an `Err` from further in).
pub const OUTCOME_WRAPPER_ERROR: &str = "wrapper-error";

/// A latency histogram over [`LATENCY_BOUNDS_MS`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LatencyHistogram {
    /// The buckets' upper bounds in milliseconds; `counts` has one more entry (overflow).
    pub bounds_ms: &'static [u64],
    /// How many dispatches fell in each bucket.
    pub counts: Vec<u64>,
    /// The sum of all durations, in microseconds.
    pub sum_micros: u64,
    /// The longest duration, in microseconds.
    pub max_micros: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            bounds_ms: &LATENCY_BOUNDS_MS,
            counts: vec![0; LATENCY_BOUNDS_MS.len() + 1],
            sum_micros: 0,
            max_micros: 0,
        }
    }
}

impl LatencyHistogram {
    /// The bucket index of a duration.
    pub fn bucket_of(d: Duration) -> usize {
        let micros = d.as_micros();
        LATENCY_BOUNDS_MS
            .iter()
            .position(|b| micros <= u128::from(*b) * 1000)
            .unwrap_or(LATENCY_BOUNDS_MS.len())
    }

    fn record(&mut self, d: Duration) {
        let micros = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        if let Some(c) = self.counts.get_mut(LatencyHistogram::bucket_of(d)) {
            *c += 1;
        }
        self.sum_micros = self.sum_micros.saturating_add(micros);
        self.max_micros = self.max_micros.max(micros);
    }

    /// How many durations were recorded.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// An upper bound (ms) for the `q` quantile (0..=1): the bound of the bucket holding it;
    /// `None` when empty or when it falls in the overflow bucket.
    pub fn quantile_upper_bound_ms(&self, q: f64) -> Option<u64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return LATENCY_BOUNDS_MS.get(i).copied();
            }
        }
        None
    }
}

/// The counters of one tool.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolMetrics {
    /// Dispatches recorded.
    pub calls: u64,
    /// Successful results.
    pub ok: u64,
    /// Failed results (tool errors, timeouts, aborts).
    pub errors: u64,
    /// Wrapper failures (`Err` from further in).
    pub wrapper_failures: u64,
    /// Counts by outcome label: `ok`, the failure's code (`TOOL_TIMEOUT`, ...), `error` for an
    /// untyped failure, `wrapper-error`.
    pub by_outcome: BTreeMap<String, u64>,
    /// Dispatch durations.
    pub latency: LatencyHistogram,
}

/// Every tool's counters at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MetricsSnapshot {
    /// By tool name.
    pub tools: BTreeMap<String, ToolMetrics>,
}

impl MetricsSnapshot {
    /// One tool's counters, if it was dispatched.
    pub fn tool(&self, name: &str) -> Option<&ToolMetrics> {
        self.tools.get(name)
    }
}

/// The metrics wrapper and its store. Cloning shares the store, so a host keeps one clone to
/// read while another is installed.
#[derive(Clone, Default)]
pub struct Metrics {
    tools: Arc<Mutex<HashMap<Arc<str>, ToolMetrics>>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// The outcome label of a dispatch's return.
pub fn outcome_label(result: &Result<ToolResult, Failure>) -> &str {
    match result {
        Ok(r) => match r.error() {
            None => OUTCOME_OK,
            Some(f) => f.code().unwrap_or(OUTCOME_ERROR),
        },
        Err(_) => OUTCOME_WRAPPER_ERROR,
    }
}

impl Metrics {
    /// The plugin name.
    pub const NAME: &'static str = "metrics";

    /// An empty store.
    pub fn new() -> Metrics {
        Metrics::default()
    }

    /// Every tool's counters now.
    pub fn snapshot(&self) -> MetricsSnapshot {
        let tools = self.tools.lock();
        MetricsSnapshot {
            tools: tools
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        }
    }

    /// Records one dispatch of `tool`.
    pub fn record(&self, tool: &str, outcome: &str, duration: Duration) {
        let mut tools = self.tools.lock();
        let m = match tools.get_mut(tool) {
            Some(m) => m,
            None => tools.entry(Arc::from(tool)).or_default(),
        };
        m.calls += 1;
        match outcome {
            OUTCOME_OK => m.ok += 1,
            OUTCOME_WRAPPER_ERROR => m.wrapper_failures += 1,
            _ => m.errors += 1,
        }
        match m.by_outcome.get_mut(outcome) {
            Some(c) => *c += 1,
            None => {
                m.by_outcome.insert(outcome.to_owned(), 1);
            }
        }
        m.latency.record(duration);
    }

    /// Registers this store as a global `tools/execute` wrapper in front of the existing ones
    /// (outermost, so it times everything inside, retries included).
    pub fn install(&self, hooks: &Hooks) -> HookHandle {
        hooks.prepend_execute(Scope::Global, self.clone())
    }
}

#[async_trait]
impl ExecuteWrapper for Metrics {
    async fn around(&self, call: Dispatch, next: ExecuteNext<'_>) -> Result<ToolResult, Failure> {
        let exec = call.exec().clone();
        let span = tracing::info_span!(
            "tool.dispatch",
            tool = exec.name(),
            call_id = exec.call_id(),
            outcome = tracing::field::Empty,
            duration_us = tracing::field::Empty,
        );
        let started = tokio::time::Instant::now();
        let result = next.run(call).instrument(span.clone()).await;
        let elapsed = started.elapsed();
        let outcome = outcome_label(&result);
        span.record("outcome", outcome);
        span.record(
            "duration_us",
            u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
        );
        self.record(exec.name(), outcome, elapsed);
        result
    }
}
