//! Row 13 of BENCHMARKS.md: Code Mode beside its baseline, the two alternated in rounds so that
//! whatever else the machine does falls on both sides alike. Prints one `DSH-BENCH {json}`
//! record (`cargo xtask bench` turns it into the row's ratio):
//!
//! - `program_ns`: one `run_code` call, through the full pipeline, whose program makes 1,000
//!   sequential sub-calls of a no-op tool (each through the same staged runtime, with its two
//!   `tool/code-dispatch*` records in the in-memory session);
//! - `direct_ns`: 1,000 direct calls of the same tool through the full pipeline, one step each
//!   (each with its `tool/call` and `tool/result` in the in-memory session).
//!
//! Each round runs both sides, the one that goes first alternating from round to round. A side
//! runs once untimed (what the other side left in the caches and the allocator, and the
//! interpreter that the last program's thread prepares in the background, fall there), then
//! [`PER_ROUND`] times timed. A figure is the median over [`ROUNDS`] rounds of that side's
//! time per 1,000 calls, after [`WARM_UP_ROUNDS`] rounds not counted. Measured one side after
//! the other instead (criterion's way, 4 s each), the ratio read anywhere from 2.8× to 3.7×
//! within an hour on this 2-core machine: a change in its load between the two halves fell on
//! one side only.
//!
//! Both use the pipeline of `pipeline/full`: pass-through pre-execute, execute and
//! post-execute listeners and one guard. Timing is wall time measured inside a task on the
//! multi-thread runtime; no assertion is made about it.
//!
//! Run: `cargo bench -p dsh --bench code_mode`.

// A benchmark whose setup fails must stop loudly.
#![allow(clippy::expect_used)]

#[path = "fixtures/code_mode.rs"]
mod code_mode_fixture;
#[path = "fixtures/pipeline.rs"]
#[allow(dead_code)] // The fixtures serve several benchmarks; this one uses part of them.
mod fixtures;

use std::sync::Arc;
use std::time::Duration;

use code_mode_fixture::{CodeModeBench, code_mode_bench};
use fixtures::tokio_runtime;

/// Sub-calls made by the program, and direct calls of the baseline.
const CALLS: usize = 1_000;
/// Programs, and batches of direct calls, each side runs in a round.
const PER_ROUND: usize = 10;
/// Rounds counted.
const ROUNDS: usize = 40;
/// Rounds run first and not counted (the interpreter pool, caches and allocator settle).
const WARM_UP_ROUNDS: usize = 4;

/// One side's times per 1,000 calls, one per round, in nanoseconds.
#[derive(Default)]
struct Side(Vec<f64>);

impl Side {
    fn push(&mut self, took: Duration) {
        let per_thousand = took.as_secs_f64() * 1e9 / PER_ROUND as f64 * (1_000.0 / CALLS as f64);
        self.0.push(per_thousand);
    }

    fn median(&self) -> f64 {
        median(self.0.clone())
    }

    /// Median absolute deviation, as a fraction of the median.
    fn spread(&self) -> f64 {
        let m = self.median();
        median(self.0.iter().map(|x| (x - m).abs()).collect()) / m
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs one program untimed, then `PER_ROUND` programs, and returns their total time
/// (contexts dropped untimed).
async fn programs(bench: &CodeModeBench) -> Duration {
    drop(bench.program_once().await);
    let mut total = Duration::ZERO;
    for _ in 0..PER_ROUND {
        let (took, cx) = bench.program_once().await;
        total += took;
        drop(cx);
    }
    total
}

/// Makes one batch of the direct calls untimed, then `PER_ROUND` batches, and returns their
/// total time.
async fn directs(bench: &CodeModeBench) -> Duration {
    drop(bench.direct_once().await);
    let mut total = Duration::ZERO;
    for _ in 0..PER_ROUND {
        let (took, cx) = bench.direct_once().await;
        total += took;
        drop(cx);
    }
    total
}

fn main() {
    let rt = tokio_runtime();
    let bench = Arc::new(code_mode_bench(CALLS));
    let task = bench.clone();
    let (program, direct) = rt
        .block_on(async move {
            tokio::spawn(async move {
                let (mut program, mut direct) = (Side::default(), Side::default());
                for round in 0..WARM_UP_ROUNDS + ROUNDS {
                    let (p, d) = if round % 2 == 0 {
                        let p = programs(&task).await;
                        (p, directs(&task).await)
                    } else {
                        let d = directs(&task).await;
                        (programs(&task).await, d)
                    };
                    if round >= WARM_UP_ROUNDS {
                        program.push(p);
                        direct.push(d);
                    }
                }
                (program, direct)
            })
            .await
        })
        .expect("benchmark task panicked");
    let rounds_ratio = median(
        program
            .0
            .iter()
            .zip(&direct.0)
            .map(|(p, d)| p / d)
            .collect(),
    );
    let (p, d) = (program.median(), direct.median());
    println!(
        "code_mode/program  {:.3} ms / 1,000 calls (±{:.0} %)",
        p / 1e6,
        program.spread() * 100.0
    );
    println!(
        "code_mode/direct   {:.3} ms / 1,000 calls (±{:.0} %)",
        d / 1e6,
        direct.spread() * 100.0
    );
    println!(
        "ratio {:.2}× (median of the rounds' own ratios {rounds_ratio:.2}×)",
        p / d
    );
    let record = serde_json::json!({
        "bench": "code_mode",
        "figure": "code-mode",
        "program_ns": p,
        "direct_ns": d,
        "program_spread": program.spread(),
        "direct_spread": direct.spread(),
        "ratio": p / d,
        "rounds_ratio": rounds_ratio,
        "rounds": ROUNDS,
        "per_round": PER_ROUND,
        "calls": CALLS,
        "rounds_program_ns": program.0,
        "rounds_direct_ns": direct.0,
    });
    println!("DSH-BENCH {record}");
    drop(bench);
}
