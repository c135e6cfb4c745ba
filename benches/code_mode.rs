//! Code Mode beside its baseline, measured in the same run (`cargo xtask bench` turns them into
//! a ratio of BENCHMARKS.md):
//!
//! - `code_mode/program`: one `run_code` call, through the full pipeline, whose program makes
//!   1,000 sequential sub-calls of a no-op tool (each through the same staged runtime, with its
//!   two `tool/code-dispatch*` records in the in-memory session);
//! - `code_mode/direct`: 1,000 direct calls of the same tool through the full pipeline, one
//!   step each (each with its `tool/call` and `tool/result` in the in-memory session).
//!
//! Both use the pipeline of `pipeline/full`: pass-through pre-execute, execute and post-execute
//! listeners and one guard. Timing is wall time measured inside a task on the multi-thread
//! runtime; no assertion is made about it.

// A benchmark whose setup fails must stop loudly.
#![allow(clippy::expect_used)]

#[path = "fixtures/code_mode.rs"]
mod code_mode_fixture;
#[path = "fixtures/pipeline.rs"]
#[allow(dead_code)] // The fixtures serve several benchmarks; this one uses part of them.
mod fixtures;

use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode};

use code_mode_fixture::{CodeModeBench, code_mode_bench};
use fixtures::{in_task, step, tokio_runtime};

/// Sub-calls made by the program, and direct calls of the baseline.
const CALLS: usize = 1_000;

fn main() {
    let rt = tokio_runtime();
    let mut c = Criterion::default().configure_from_args();
    let mut g = c.benchmark_group("code_mode");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(4))
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat);

    let CodeModeBench {
        code,
        runtime,
        sessions,
        run_code,
        direct,
    } = code_mode_bench(CALLS);

    g.bench_function("program", |b| {
        b.iter_custom(|iters| {
            let (runtime, run_code, sessions) =
                (runtime.clone(), run_code.clone(), sessions.clone());
            in_task(&rt, move || async move {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let cx = step(10);
                    sessions.insert(None, cx.session.clone());
                    let start = Instant::now();
                    let out = runtime.run_step(&cx, &run_code).await.expect("step");
                    total += start.elapsed();
                    let result = &out.results[0];
                    assert!(
                        !result.is_error(),
                        "run_code failed: {:?}",
                        result.first_text()
                    );
                }
                total
            })
        })
    });
    g.bench_function("direct", |b| {
        b.iter_custom(|iters| {
            let (runtime, direct) = (runtime.clone(), direct.clone());
            in_task(&rt, move || async move {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let cx = step(10);
                    let start = Instant::now();
                    for block in direct.iter() {
                        let out = runtime
                            .run_step(&cx, std::slice::from_ref(block))
                            .await
                            .expect("step");
                        assert!(!out.results[0].is_error());
                    }
                    total += start.elapsed();
                }
                total
            })
        })
    });
    g.finish();
    drop(code);
    c.final_summary();
}
