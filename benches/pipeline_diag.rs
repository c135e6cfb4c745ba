//! Diagnostic only, no row of BENCHMARKS.md (`cargo xtask bench` neither builds nor runs it):
//! the work of `pipeline/full` and `pipeline/spawn` (benches/pipeline.rs) without criterion, so
//! that callgrind counts the instructions of one call, whatever else the machine is doing.
//!
//! `pipeline_diag <full|timed|spawn> [calls]` runs `calls` sequential calls (default 20,000) the
//! way the benchmark does, inside one task on the same runtime (`timed`: the same steps with
//! stage timing on, as the `on` side of row 25 in benches/step_timing.rs runs them).
//! Instructions per call are the difference of two counts over the difference of their call
//! numbers, e.g. `valgrind --tool=callgrind pipeline_diag full 0` and `... full 20000`.

// A diagnostic whose setup fails must stop loudly.
#![allow(clippy::expect_used)]

#[allow(dead_code)]
#[path = "fixtures/pipeline.rs"]
mod fixtures;

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use dsh::core::Json;

use dsh::scheduler::{Runtime, RuntimeConfig};
use fixtures::{
    NOOP, blocks, in_task, noop_body, pass_through_hooks, registry, runtime, step, tokio_runtime,
};

/// The pool size of the benchmark's step context.
const POOL: usize = 10;

fn main() {
    let mut args = std::env::args().skip(1);
    let side = args.next().unwrap_or_else(|| "full".to_owned());
    let calls: usize = args
        .next()
        .map(|n| n.parse().expect("calls must be a whole number"))
        .unwrap_or(20_000);
    let rt = tokio_runtime();
    let value = Json::string("ok");
    let elapsed = match side.as_str() {
        "full" | "timed" => {
            let runtime = if side == "timed" {
                Arc::new(
                    Runtime::new(registry(1, &value, false), pass_through_hooks()).with_config(
                        RuntimeConfig {
                            step_timing: true,
                            ..RuntimeConfig::default()
                        },
                    ),
                )
            } else {
                runtime(registry(1, &value, false))
            };
            let blocks = Arc::new(blocks(1024, NOOP, "{}"));
            in_task(&rt, move || async move {
                let cx = step(POOL);
                let start = Instant::now();
                for i in 0..calls {
                    let block = &blocks[i % blocks.len()];
                    let out = runtime
                        .run_step(&cx, std::slice::from_ref(block))
                        .await
                        .expect("step");
                    black_box(out);
                }
                let elapsed = start.elapsed();
                // The benchmark drops the session outside its timing; here it is not dropped at
                // all, so that callgrind's count holds the calls alone.
                std::mem::forget(cx);
                elapsed
            })
        }
        "spawn" => in_task(&rt, move || async move {
            let start = Instant::now();
            for _ in 0..calls {
                let out = tokio::spawn(noop_body(value.clone())).await.expect("join");
                black_box(out.ok());
            }
            start.elapsed()
        }),
        other => panic!("unknown side {other:?}: full, timed or spawn"),
    };
    println!("{side}: {calls} calls in {elapsed:?}");
}
