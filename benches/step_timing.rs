//! What stage timing (`RuntimeConfig::step_timing`, the `dsh/step-timing` event `dsh view`
//! draws) costs per call: the same steps through the same runtime with it on and off, both
//! measured in this run (`cargo xtask bench` turns them into the ratios of BENCHMARKS.md):
//!
//! - `timing/on-1` vs `timing/off-1`: one step of one no-op call, sequential (the marks, the
//!   call's entry and one more event per step, in an in-memory session);
//! - `timing/on-10k` vs `timing/off-10k`: one step of 10,000 parallel-safe no-op calls, pool 10
//!   (the marks and entries, one event of 10,000 entries).
//!
//! Timing is wall time measured inside the benchmark (criterion's `iter_custom`); no assertion
//! is made about it.

// A benchmark whose setup fails must stop loudly.
#![allow(clippy::expect_used)]

#[path = "fixtures/pipeline.rs"]
#[allow(dead_code)] // The fixtures serve several benchmarks; this one uses part of them.
mod fixtures;

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode};
use dsh::core::Json;
use dsh::scheduler::{Runtime, RuntimeConfig};

use fixtures::{
    NOOP, blocks, in_task, pass_through_hooks, registry, step, time_one_call_steps, tokio_runtime,
};

/// Calls in the large step.
const STEP_CALLS: usize = 10_000;
/// The pool size.
const POOL: usize = 10;

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

fn one_call_steps(c: &mut Criterion, rt: &tokio::runtime::Runtime) {
    let mut g = c.benchmark_group("timing");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30);
    let calls = Arc::new(blocks(1024, NOOP, "{}"));
    for (id, timing) in [("off-1", false), ("on-1", true)] {
        let runtime = runtime(false, timing);
        g.bench_function(id, |b| {
            b.iter_custom(|iters| time_one_call_steps(rt, &runtime, &calls, POOL, iters))
        });
    }
    g.finish();
}

fn large_steps(c: &mut Criterion, rt: &tokio::runtime::Runtime) {
    let mut g = c.benchmark_group("timing");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(4))
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat);
    let calls = Arc::new(blocks(STEP_CALLS, NOOP, "{}"));
    for (id, timing) in [("off-10k", false), ("on-10k", true)] {
        let runtime = runtime(true, timing);
        g.bench_function(id, |b| {
            b.iter_custom(|iters| {
                let (runtime, calls) = (runtime.clone(), calls.clone());
                in_task(rt, move || async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let cx = step(POOL);
                        let start = Instant::now();
                        let out = runtime.run_step(&cx, &calls).await.expect("step");
                        total += start.elapsed();
                        assert_eq!(out.results.len(), STEP_CALLS);
                    }
                    total
                })
            })
        });
    }
    g.finish();
}

fn main() {
    let rt = tokio_runtime();
    let mut c = Criterion::default().configure_from_args();
    one_call_steps(&mut c, &rt);
    large_steps(&mut c, &rt);
    c.final_summary();
}
