//! Rows 25-26 of BENCHMARKS.md: what stage timing (`RuntimeConfig::step_timing`, the
//! `dsh/step-timing` event `dsh view` draws) costs per call: the same steps through two
//! runtimes alike but for it, on and off, alternated in rounds (`fixtures/alternate.rs`) so
//! that whatever else the machine does falls on both sides alike. Prints two `DSH-BENCH {json}`
//! records (`cargo xtask bench` turns them into the rows' ratios):
//!
//! - `timing-1` (`on` vs `off`): 1,000 steps of one no-op call, sequential, sharing one fresh
//!   in-memory session (with timing on: the marks, the call's entry and one more event per
//!   step);
//! - `timing-10k` (`on` vs `off`): one step of 10,000 parallel-safe no-op calls, pool 10, in a
//!   fresh in-memory session (the marks and entries, one event of 10,000 entries).
//!
//! Each figure is per call. Measured one side after the other instead (criterion's way, 3-4 s
//! each), row 25 read from 1.05× to 1.46× between runs of the same code; alternated, two
//! runtimes with timing on read 0.99-1.01× against each other, and two with it off
//! 0.99-1.00×. Timing is wall time measured inside a task on the multi-thread runtime; no
//! assertion is made about it.
//!
//! Run: `cargo bench -p dsh --bench step_timing`.

// A benchmark whose setup fails must stop loudly.
#![allow(clippy::expect_used)]

#[path = "fixtures/alternate.rs"]
mod alternate;
#[path = "fixtures/pipeline.rs"]
#[allow(dead_code)] // The fixtures serve several benchmarks; this one uses part of them.
mod fixtures;

use std::sync::Arc;
use std::time::{Duration, Instant};

use alternate::{FEW_MS, Rounds, compare};
use dsh::core::Json;
use dsh::scheduler::{Runtime, RuntimeConfig};

use fixtures::{
    NOOP, blocks, in_task, pass_through_hooks, registry, step, time_one_call_steps, tokio_runtime,
};

/// One-call steps in one unit of row 25.
const STEPS: u32 = 1_000;
/// Calls in the large step (one unit of row 26).
const STEP_CALLS: u32 = 10_000;
/// The pool size.
const POOL: usize = 10;
/// Row 26: 20 rounds of 2 steps of each side, after 2 not counted.
const LARGE_ROUNDS: Rounds = Rounds {
    warm_up: 2,
    rounds: 20,
    per_round: 2,
};

fn runtime(parallel: bool, timing: bool) -> Arc<Runtime> {
    let value = Json::string("ok");
    Arc::new(
        Runtime::new(registry(1, &value, parallel), pass_through_hooks()).with_config(
            RuntimeConfig {
                step_timing: timing,
                ..RuntimeConfig::default()
            },
        ),
    )
}

/// Row 25: the time per call of 1,000 one-call steps.
fn one_call_steps(rt: &tokio::runtime::Runtime) {
    let calls = Arc::new(blocks(1024, NOOP, "{}"));
    let (on, off) = (runtime(false, true), runtime(false, false));
    let per_call = |runtime: &Arc<Runtime>| {
        time_one_call_steps(rt, runtime, &calls, POOL, STEPS.into()) / STEPS
    };
    compare(
        "step_timing",
        "timing-1",
        FEW_MS,
        ("on", || per_call(&on)),
        ("off", || per_call(&off)),
    );
}

/// Row 26: the time per call of one step of 10,000 calls.
fn large_steps(rt: &tokio::runtime::Runtime) {
    let calls = Arc::new(blocks(STEP_CALLS as usize, NOOP, "{}"));
    let per_call = |runtime: &Arc<Runtime>| -> Duration {
        let (runtime, calls) = (runtime.clone(), calls.clone());
        in_task(rt, move || async move {
            let cx = step(POOL);
            let start = Instant::now();
            let out = runtime.run_step(&cx, &calls).await.expect("step");
            let took = start.elapsed();
            assert_eq!(out.results.len(), calls.len());
            took / STEP_CALLS
        })
    };
    let (on, off) = (runtime(true, true), runtime(true, false));
    compare(
        "step_timing",
        "timing-10k",
        LARGE_ROUNDS,
        ("on", || per_call(&on)),
        ("off", || per_call(&off)),
    );
}

fn main() {
    let rt = tokio_runtime();
    one_call_steps(&rt);
    large_steps(&rt);
}
