//! Pipeline benchmarks, each beside its baseline measured in the same run (`cargo xtask bench`
//! turns them into the ratios of BENCHMARKS.md):
//!
//! - `pipeline/full` vs `pipeline/spawn`: one call through the whole pipeline (step scheduler,
//!   pass-through hooks, a guard, in-memory session), sequential, vs a bare `tokio::spawn` +
//!   await of the same no-op body, both issued from inside a task on the same runtime;
//! - `scheduler/step` vs `scheduler/staged`: 10,000 parallel-safe no-op calls in one step (pool
//!   10) vs the same calls and log events through the staged runtime without the scheduler;
//! - `payload/call` vs `payload/serialize`: one call with a 1 MB argument and a 1 MB string
//!   result vs one `serde_json` serialization of the payload;
//! - `overlap/beside` vs `overlap/alone`: when a 100 ms body ends, counted from the step's start,
//!   beside a 1 s pre-execute of the next call vs alone; `overlap/final-beside` vs
//!   `overlap/final-alone`: the same to when its result is final (its `tools/result` observer
//!   ran); `overlap/blocking-beside`: the body's end beside a pre-execute that blocks its thread
//!   for 1 s (vs `overlap/alone`).
//!
//! Timing is wall time measured inside the benchmark (criterion's `iter_custom`); no assertion
//! is made about it.

// A benchmark whose setup fails must stop loudly.
#![allow(clippy::expect_used)]

#[path = "fixtures/pipeline.rs"]
#[allow(dead_code)] // The fixtures serve several benchmarks; this one uses part of them.
mod fixtures;

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use criterion::{Criterion, SamplingMode};
use dsh::core::{Failure, Json, PreExecuteHook, PreNext, PreToolDecision, ToolExecution};
use dsh::guard::Scope;
use parking_lot::Mutex;

use fixtures::{NOOP, blocks, in_task, noop_body, registry, runtime, step, tokio_runtime};

/// Calls in the step-scheduler benchmark.
const STEP_CALLS: usize = 10_000;
/// The pool size of the step-scheduler benchmark.
const POOL: usize = 10;
/// Bytes of the large argument and of the large result.
const PAYLOAD_BYTES: usize = 1 << 20;

fn full_pipeline(c: &mut Criterion, rt: &tokio::runtime::Runtime) {
    let mut g = c.benchmark_group("pipeline");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30);
    let value = Json::string("ok");
    let runtime = runtime(registry(1, &value, false));
    let calls = Arc::new(blocks(1024, NOOP, "{}"));
    g.bench_function("full", |b| {
        b.iter_custom(|iters| {
            let (runtime, calls) = (runtime.clone(), calls.clone());
            in_task(rt, move || async move {
                let cx = step(POOL);
                let start = Instant::now();
                for i in 0..iters as usize {
                    let block = &calls[i % calls.len()];
                    let out = runtime
                        .run_step(&cx, std::slice::from_ref(block))
                        .await
                        .expect("step");
                    black_box(out);
                }
                start.elapsed()
            })
        })
    });
    g.bench_function("spawn", |b| {
        b.iter_custom(|iters| {
            let value = value.clone();
            in_task(rt, move || async move {
                let start = Instant::now();
                for _ in 0..iters {
                    let out = tokio::spawn(noop_body(value.clone())).await.expect("join");
                    black_box(out.ok());
                }
                start.elapsed()
            })
        })
    });
    g.finish();
}

fn step_scheduler(c: &mut Criterion, rt: &tokio::runtime::Runtime) {
    let mut g = c.benchmark_group("scheduler");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(4))
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat);
    let value = Json::string("ok");
    let runtime = runtime(registry(1, &value, true));
    let calls = Arc::new(blocks(STEP_CALLS, NOOP, "{}"));
    g.bench_function("step", |b| {
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
    g.bench_function("staged", |b| {
        b.iter_custom(|iters| {
            let (runtime, calls) = (runtime.clone(), calls.clone());
            in_task(rt, move || async move {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let cx = step(POOL);
                    let start = Instant::now();
                    fixtures::staged_without_scheduler(&runtime, &cx, &calls).await;
                    total += start.elapsed();
                }
                total
            })
        })
    });
    g.finish();
}

/// About `bytes` of prose-like text: words, spaces, punctuation and newlines.
fn text(bytes: usize) -> String {
    let words: Vec<&str> =
        "let value = tools.read({path: \"src/lib.rs\"}); // the quick brown fox jumps over the lazy dog. fn main() { }"
            .split(' ')
            .collect();
    let mut s = String::with_capacity(bytes + 32);
    let mut i = 0usize;
    while s.len() < bytes {
        s.push_str(words[i % words.len()]);
        i += 1;
        s.push(if i.is_multiple_of(12) { '\n' } else { ' ' });
    }
    s.truncate(bytes);
    s
}

fn payload(c: &mut Criterion, rt: &tokio::runtime::Runtime) {
    let mut g = c.benchmark_group("payload");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20);
    let result = Json::string(text(PAYLOAD_BYTES));
    let runtime = runtime(registry(1, &result, false));
    let argument = serde_json::json!({ "text": text(PAYLOAD_BYTES) });
    let raw = serde_json::to_string(&argument).expect("serialize the argument");
    let calls = Arc::new(blocks(1, NOOP, &raw));
    g.bench_function("call", |b| {
        b.iter_custom(|iters| {
            let (runtime, calls) = (runtime.clone(), calls.clone());
            in_task(rt, move || async move {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    // A fresh log per call, so the process does not grow by 2 MB per call;
                    // dropping it is not timed.
                    let cx = step(POOL);
                    let start = Instant::now();
                    let out = runtime.run_step(&cx, &calls).await.expect("step");
                    total += start.elapsed();
                    assert!(!out.results[0].is_error());
                    drop(out);
                }
                total
            })
        })
    });
    g.bench_function("serialize", |b| {
        b.iter(|| serde_json::to_string(black_box(&argument)).expect("serialize"))
    });
    g.finish();
}

/// A pre-execute listener that takes `delay` for calls of `tool` and passes everything through;
/// `blocking` makes it block its thread (`std::thread::sleep`, a listener's mistake) rather
/// than wait as a task.
struct SlowPrepare {
    tool: &'static str,
    delay: Duration,
    blocking: bool,
}

#[async_trait]
impl PreExecuteHook for SlowPrepare {
    async fn pre_execute(
        &self,
        exec: &ToolExecution,
        next: PreNext<'_>,
    ) -> Result<PreToolDecision, Failure> {
        if exec.name() == self.tool {
            if self.blocking {
                std::thread::sleep(self.delay);
            } else {
                tokio::time::sleep(self.delay).await;
            }
        }
        next.run(exec).await
    }
}

/// When the slow body ended, and when its result became final (its `tools/result` observer).
#[derive(Default)]
struct Marks {
    ended: Option<Instant>,
    final_at: Option<Instant>,
}

/// A runtime with the 100 ms body tool and the next call's tool behind a 1 s pre-execute.
fn overlap_runtime(
    body: &'static str,
    next: &'static str,
    blocking: bool,
    marks: &Arc<Mutex<Marks>>,
) -> Arc<dsh::scheduler::Runtime> {
    let reg = registry(1, &Json::string("ok"), true);
    let slot = marks.clone();
    reg.register(
        dsh::core::ToolDefinition::builder(body, "sleeps 100 ms")
            .output(dsh::core::ToolOutput::string())
            .concurrency_safe(true)
            .execute(move |_ctx| {
                let slot = slot.clone();
                async move {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    slot.lock().ended = Some(Instant::now());
                    Ok(Json::string("done"))
                }
            })
            .build()
            .expect("slow tool"),
    )
    .expect("register slow tool")
    .keep();
    reg.register(fixtures::noop_tool(next, Json::string("ok"), true))
        .expect("register next tool")
        .keep();
    let runtime = runtime(reg);
    runtime
        .hooks()
        .on_pre_execute(
            Scope::Global,
            SlowPrepare {
                tool: next,
                delay: Duration::from_secs(1),
                blocking,
            },
        )
        .keep();
    let slot = marks.clone();
    runtime
        .hooks()
        .on_result(
            Scope::Global,
            move |e: &ToolExecution, _: &dsh::core::ToolResult| {
                if e.name() == body {
                    slot.lock().final_at = Some(Instant::now());
                }
            },
        )
        .keep();
    runtime
}

fn overlap(c: &mut Criterion, rt: &tokio::runtime::Runtime) {
    const BODY: &str = "slow_body";
    const NEXT: &str = "slow_prepare";
    let mut g = c.benchmark_group("overlap");
    g.warm_up_time(Duration::from_millis(100))
        .measurement_time(Duration::from_secs(1))
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat);
    let marks: Arc<Mutex<Marks>> = Arc::default();
    let waiting = overlap_runtime(BODY, NEXT, false, &marks);
    let blocking = overlap_runtime(BODY, NEXT, true, &marks);
    let alone = Arc::new(blocks(1, BODY, "{}"));
    let mut beside = blocks(1, BODY, "{}");
    beside.extend(blocks(1, NEXT, "{}").into_iter().map(|mut b| {
        b.call_id = Arc::from("call_next");
        b
    }));
    let beside = Arc::new(beside);
    // (id, runtime, calls, whether the time runs to the result being final, not the body's end)
    let cases = [
        ("beside", &waiting, &beside, false),
        ("alone", &waiting, &alone, false),
        ("final-beside", &waiting, &beside, true),
        ("final-alone", &waiting, &alone, true),
        ("blocking-beside", &blocking, &beside, false),
    ];
    for (id, runtime, calls, to_final) in cases {
        g.bench_function(id, |b| {
            b.iter_custom(|iters| {
                let (runtime, calls, marks) = (runtime.clone(), calls.clone(), marks.clone());
                in_task(rt, move || async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let cx = step(POOL);
                        *marks.lock() = Marks::default();
                        let start = Instant::now();
                        runtime.run_step(&cx, &calls).await.expect("step");
                        let m = std::mem::take(&mut *marks.lock());
                        let end = if to_final { m.final_at } else { m.ended };
                        total += end.expect("the body ran and was observed") - start;
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
    full_pipeline(&mut c, &rt);
    step_scheduler(&mut c, &rt);
    payload(&mut c, &rt);
    overlap(&mut c, &rt);
    c.final_summary();
}
