//! Diagnostic only, no row of BENCHMARKS.md (`cargo xtask bench` neither builds nor runs it):
//! the two sides of `code_mode/` (benches/code_mode.rs) without criterion, so that callgrind
//! counts the instructions of a sub-call and of a direct call, whatever else the machine does.
//!
//! `code_mode_diag program <runs> [calls]` runs `runs` programs of `calls` (1,000) sub-calls
//! each, one step each; `code_mode_diag direct <runs> [calls]` makes `runs` × `calls` direct
//! calls. A run's fixed costs show with a small `calls` (`program 300 1`). Instructions per call are
//! the difference of two counts over the difference of their call numbers, e.g.
//! `valgrind --tool=callgrind code_mode_diag program 0` and `... program 5`.

// A diagnostic whose setup fails must stop loudly.
#![allow(clippy::expect_used)]

#[path = "fixtures/code_mode.rs"]
mod code_mode_fixture;
#[path = "fixtures/pipeline.rs"]
#[allow(dead_code)] // The fixtures serve several benchmarks; this one uses part of them.
mod fixtures;

use std::time::{Duration, Instant};

use code_mode_fixture::{CodeModeBench, code_mode_bench};
use fixtures::{in_task, step, tokio_runtime};

/// Sub-calls made by each program, and direct calls per run of the baseline, unless a third
/// argument gives another number (a run's fixed costs show as the difference).
const CALLS: usize = 1_000;

fn main() {
    let mut args = std::env::args().skip(1);
    let side = args.next().unwrap_or_else(|| "program".to_owned());
    let runs: usize = args
        .next()
        .map(|n| n.parse().expect("runs must be a whole number"))
        .unwrap_or(5);
    let calls: usize = args
        .next()
        .map(|n| n.parse().expect("calls must be a whole number"))
        .unwrap_or(CALLS);
    let rt = tokio_runtime();
    let CodeModeBench {
        code,
        runtime,
        sessions,
        run_code,
        direct,
    } = code_mode_bench(calls);
    let elapsed = match side.as_str() {
        "program" => in_task(&rt, move || async move {
            let mut total = Duration::ZERO;
            for _ in 0..runs {
                let cx = step(10);
                sessions.insert(None, cx.session.clone());
                let start = Instant::now();
                let out = runtime.run_step(&cx, &run_code).await.expect("step");
                total += start.elapsed();
                assert!(
                    !out.results[0].is_error(),
                    "{:?}",
                    out.results[0].first_text()
                );
                std::mem::forget(cx);
            }
            total
        }),
        "direct" => in_task(&rt, move || async move {
            let mut total = Duration::ZERO;
            for _ in 0..runs {
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
                std::mem::forget(cx);
            }
            total
        }),
        other => panic!("unknown side {other:?}: program or direct"),
    };
    println!("{side}: {runs} runs of {calls} calls in {elapsed:?}");
    drop(code);
}
