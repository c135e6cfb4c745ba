//! Row 14 of BENCHMARKS.md, beside its baseline measured in the same run (`cargo xtask bench`
//! turns them into the row's ratio):
//!
//! - `derive/log` vs `derive/parse`: reading a 1M-event log (`read_log`) and deriving its
//!   model-visible history (`derive_messages_from`) vs `serde_json` parsing every line of the
//!   same bytes into a `Value`; both keep what they built until the timer stops.
//!
//! Timing is wall time measured inside the benchmark (criterion's `iter_custom`); no assertion
//! is made about it.

// A benchmark whose setup fails must stop loudly.
#![allow(clippy::expect_used)]

#[path = "fixtures/events.rs"]
#[allow(dead_code)] // The fixtures serve several benchmarks; this one uses part of them.
mod events;

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode};
use dsh::session::{derive_messages_from, read_log};

/// Events in the derived log.
const DERIVE_EVENTS: usize = 1_000_000;

fn derive(c: &mut Criterion) {
    let mut g = c.benchmark_group("derive");
    g.warm_up_time(Duration::from_millis(100))
        .measurement_time(Duration::from_secs(10))
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat);
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("log.jsonl");
    std::fs::write(&path, events::log_text(DERIVE_EVENTS)).expect("write the log");
    let bytes = std::fs::read(&path).expect("read the log");
    g.bench_function("log", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let start = Instant::now();
                let log = read_log(&bytes).expect("a valid log");
                let messages = derive_messages_from(log.events.iter().map(|(s, e)| (*s, e)));
                total += start.elapsed();
                assert!(messages.len() > DERIVE_EVENTS / 3);
                drop((messages, log));
            }
            total
        })
    });
    g.bench_function("parse", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let start = Instant::now();
                let values = events::parse_lines(&bytes);
                total += start.elapsed();
                black_box(&values);
                drop(values);
            }
            total
        })
    });
    g.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    derive(&mut c);
    c.final_summary();
}
