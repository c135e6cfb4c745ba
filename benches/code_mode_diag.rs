//! Diagnostic only, no row of BENCHMARKS.md (`cargo xtask bench` neither builds nor runs it):
//! one side of row 13 (benches/code_mode.rs) at a time, without the alternation, so that
//! callgrind counts the instructions of a sub-call or of a direct call, whatever else the
//! machine does.
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

use std::sync::Arc;
use std::time::Duration;

use code_mode_fixture::code_mode_bench;
use fixtures::{in_task, tokio_runtime};

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
    let bench = Arc::new(code_mode_bench(calls));
    let task = bench.clone();
    let program = match side.as_str() {
        "program" => true,
        "direct" => false,
        other => panic!("unknown side {other:?}: program or direct"),
    };
    let elapsed = in_task(&rt, move || async move {
        let mut total = Duration::ZERO;
        for _ in 0..runs {
            let (took, cx) = if program {
                task.program_once().await
            } else {
                task.direct_once().await
            };
            total += took;
            // The session's teardown is no part of a call.
            std::mem::forget(cx);
        }
        total
    });
    println!("{side}: {runs} runs of {calls} calls in {elapsed:?}");
    drop(bench);
}
