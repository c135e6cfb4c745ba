//! Row 3 of BENCHMARKS.md: a call through the full pipeline with 1,000 tools registered beside
//! the same with 1 tool, the two alternated in rounds (`fixtures/alternate.rs`) so that
//! whatever else the machine does falls on both sides alike. Prints one `DSH-BENCH {json}`
//! record (`cargo xtask bench` turns it into the row's ratio):
//!
//! - `many`: the time per call of 1,000 one-call steps of a no-op tool on a runtime whose
//!   registry holds 1,000 tools;
//! - `one`: the same on a runtime whose registry holds that tool alone.
//!
//! Both use the pipeline of `pipeline/full` (pass-through pre-execute, execute and
//! post-execute listeners and one guard); a unit's steps share one fresh in-memory session.
//! Measured one side after the other instead (criterion's way, 3 s each), the same two
//! runtimes read from 0.85× to 1.34× in throughput between runs; alternated, two runtimes of
//! one tool each read 0.98-1.00× against each other. Timing is wall time measured inside a task on the
//! multi-thread runtime; no assertion is made about it.
//!
//! Run: `cargo bench -p dsh --bench registry`.

// A benchmark whose setup fails must stop loudly.
#![allow(clippy::expect_used)]

#[path = "fixtures/alternate.rs"]
mod alternate;
#[path = "fixtures/pipeline.rs"]
#[allow(dead_code)] // The fixtures serve several benchmarks; this one uses part of them.
mod fixtures;

use std::sync::Arc;

use alternate::{FEW_MS, compare};
use dsh::core::Json;
use fixtures::{NOOP, blocks, registry, runtime, time_one_call_steps, tokio_runtime};

/// One-call steps in one unit of either side.
const STEPS: u32 = 1_000;
/// The pool size of each step (one call runs alone whatever it is).
const POOL: usize = 10;

fn main() {
    let rt = tokio_runtime();
    let value = Json::string("ok");
    let calls = Arc::new(blocks(1024, NOOP, "{}"));
    let many = runtime(registry(1000, &value, false));
    let one = runtime(registry(1, &value, false));
    let per_call = |runtime: &Arc<dsh::scheduler::Runtime>| {
        time_one_call_steps(&rt, runtime, &calls, POOL, STEPS.into()) / STEPS
    };
    compare(
        "registry",
        "registry",
        FEW_MS,
        ("many", || per_call(&many)),
        ("one", || per_call(&one)),
    );
}
