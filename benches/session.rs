//! Session log benchmarks, each beside its baseline measured in the same run (`cargo xtask
//! bench` turns them into the ratios of BENCHMARKS.md):
//!
//! - `append/1000`, `append/100000`, `append/1000000`: appending 1,000 realistic events to an
//!   in-memory session that already holds that many (filling it, and dropping it, is not
//!   timed; the events are built before the timer starts, and twice the largest CPU cache is
//!   written between the fill and the timer, so the log is out of the caches at every size);
//!   the 100k figure is the baseline of the 1M one: append must not slow down as the log
//!   grows past the cache;
//! - `derive/log` vs `derive/parse`: reading a 1M-event log (`read_log`) and deriving its
//!   model-visible history (`derive_messages_from`) vs `serde_json` parsing every line of the
//!   same bytes into a `Value`; both keep what they built until the timer stops.
//!
//! Timing is wall time measured inside the benchmark (criterion's `iter_custom`); no assertion
//! is made about it.

// A benchmark whose setup fails must stop loudly.
#![allow(clippy::expect_used)]

#[path = "fixtures/events.rs"]
mod events;

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode};
use dsh::session::{Session, derive_messages_from, read_log};

/// Events appended, and timed, on top of a filled session.
const APPENDED: usize = 1_000;
/// Events in the derived log.
const DERIVE_EVENTS: usize = 1_000_000;

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// The size of this machine's largest CPU cache (sysfs; 64 MiB when it cannot be read).
fn last_level_cache_bytes() -> usize {
    let mut largest = 0;
    for index in 0..8 {
        let path = format!("/sys/devices/system/cpu/cpu0/cache/index{index}/size");
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        let text = text.trim();
        let (digits, unit) = match text.strip_suffix('K') {
            Some(d) => (d, 1 << 10),
            None => match text.strip_suffix('M') {
                Some(d) => (d, 1 << 20),
                None => (text, 1),
            },
        };
        if let Ok(n) = digits.parse::<usize>() {
            largest = largest.max(n * unit);
        }
    }
    if largest == 0 { 64 << 20 } else { largest }
}

/// Memory written between a fill and the timed appends, twice the largest cache, so that the
/// log behind the appends is out of every cache at each size: what the append costs past the
/// cache, on any machine (a 100k-event log, about 45 MB, fits a 260 MiB cache and not a
/// 32 MiB one).
struct Flush(Vec<u8>);

impl Flush {
    fn new() -> Flush {
        Flush(vec![0; 2 * last_level_cache_bytes()])
    }

    /// Writes one byte of every cache line of the buffer.
    fn run(&mut self) {
        for line in self.0.chunks_mut(64) {
            line[0] = line[0].wrapping_add(1);
        }
        black_box(&self.0);
    }
}

fn append(c: &mut Criterion) {
    let mut g = c.benchmark_group("append");
    let mut flush = Flush::new();
    // One iteration fills a fresh session to the size under test (not timed), flushes the
    // caches (not timed), then times the next APPENDED appends; tiny warm-up and measurement times make criterion take one
    // iteration per sample, so a sample at 1M costs one fill.
    g.warm_up_time(Duration::from_millis(1))
        .measurement_time(Duration::from_millis(1))
        .sample_size(20)
        .sampling_mode(SamplingMode::Flat);
    let rt = current_thread();
    let next = events::events(APPENDED);
    for n in [1_000usize, 100_000, 1_000_000] {
        // Built once; every fill appends clones (an event's fields are shared, so a clone is a
        // handful of reference counts).
        let fill = events::events(n);
        g.bench_function(n.to_string(), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let session = Session::in_memory("bench");
                    let took = rt.block_on(async {
                        // Cloned one at a time: a clone of the whole list, freed after the
                        // fill, would leave memory the timed appends reuse at 100k (a heap
                        // block) and not at 1M (an unmapped one), so the row would compare
                        // the allocator's luck with page faults, not the logs.
                        for e in &fill {
                            session.append(e.clone()).await.expect("append");
                        }
                        flush.run();
                        // Cloned after the fill, so the appended events are as warm in the
                        // cache at 1M as at 1k: what differs is only the log behind them.
                        let next = next.clone();
                        let start = Instant::now();
                        for e in next {
                            session.append(e).await.expect("append");
                        }
                        start.elapsed()
                    });
                    total += took;
                    drop(session);
                }
                total
            })
        });
    }
    g.finish();
}

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
    append(&mut c);
    derive(&mut c);
    c.final_summary();
}
