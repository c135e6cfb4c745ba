//! Row 13 of BENCHMARKS.md: Code Mode beside its baseline, the two alternated in rounds
//! (`fixtures/alternate.rs`) so that whatever else the machine does falls on both sides alike.
//! Prints one `DSH-BENCH {json}` record (`cargo xtask bench` turns it into the row's ratio):
//!
//! - `program`: one `run_code` call, through the full pipeline, whose program makes 1,000
//!   sequential sub-calls of a no-op tool (each through the same staged runtime, with its two
//!   `tool/code-dispatch*` records in the in-memory session);
//! - `direct`: 1,000 direct calls of the same tool through the full pipeline, one step each
//!   (each with its `tool/call` and `tool/result` in the in-memory session).
//!
//! Measured one side after the other instead (criterion's way, 4 s each), the ratio read
//! anywhere from 2.8× to 3.7× within an hour on this 2-core machine. Both use the pipeline of
//! `pipeline/full`: pass-through pre-execute, execute and post-execute listeners and one
//! guard. Timing is wall time measured inside a task on the multi-thread runtime; no assertion
//! is made about it.
//!
//! Run: `cargo bench -p dsh --bench code_mode`.

// A benchmark whose setup fails must stop loudly.
#![allow(clippy::expect_used)]

#[path = "fixtures/alternate.rs"]
mod alternate;
#[path = "fixtures/code_mode.rs"]
mod code_mode_fixture;
#[path = "fixtures/pipeline.rs"]
#[allow(dead_code)] // The fixtures serve several benchmarks; this one uses part of them.
mod fixtures;

use std::sync::Arc;

use alternate::{FEW_MS, compare};
use code_mode_fixture::code_mode_bench;
use fixtures::{in_task, tokio_runtime};

/// Sub-calls made by the program, and direct calls of the baseline (one unit of each side).
const CALLS: usize = 1_000;

fn main() {
    let rt = tokio_runtime();
    let bench = Arc::new(code_mode_bench(CALLS));
    // 40 rounds of 10 programs and 10 batches of direct calls.
    compare(
        "code_mode",
        "code-mode",
        FEW_MS,
        ("program", || {
            let bench = bench.clone();
            in_task(&rt, move || async move {
                let (took, cx) = bench.program_once().await;
                drop(cx);
                took
            })
        }),
        ("direct", || {
            let bench = bench.clone();
            in_task(&rt, move || async move {
                let (took, cx) = bench.direct_once().await;
                drop(cx);
                took
            })
        }),
    );
}
