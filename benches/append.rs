//! Rows 5-6 of BENCHMARKS.md: appending realistic events to an in-memory session that already
//! holds 1k, 100k or 1M events, two sizes at a time alternated in rounds
//! (`fixtures/alternate.rs`) so that whatever else the machine does falls on both sides alike.
//! Prints two `DSH-BENCH {json}` records (`cargo xtask bench` turns them into the rows'
//! ratios):
//!
//! - `append-100k` (`big` vs `small`): 1,000 appends onto 100k events against onto 1k (row 5,
//!   for information);
//! - `append-1m` (`big` vs `small`): 10,000 appends onto 1M events against onto 100k (row 6):
//!   append must not slow down as the log grows past the cache.
//!
//! A unit fills a fresh session to its size (not timed), writes twice the largest CPU cache
//! (not timed, so the log is out of every cache at each size), times the appends, and drops
//! the session (not timed); figures are per event. Measured one size after the other instead
//! (criterion's way, 1,000 appends), row 6 read 0.84-1.17× between runs of the same code.
//! Timing is wall time; no assertion is made about it.
//!
//! Run: `cargo bench -p dsh --bench append`.

// A benchmark whose setup fails must stop loudly.
#![allow(clippy::expect_used)]

#[path = "fixtures/alternate.rs"]
#[allow(dead_code)] // The fixtures serve several benchmarks; this one uses part of them.
mod alternate;
#[path = "fixtures/events.rs"]
#[allow(dead_code)] // The fixtures serve several benchmarks; this one uses part of them.
mod events;

use std::cell::RefCell;
use std::hint::black_box;
use std::time::{Duration, Instant};

use alternate::{Rounds, compare};
use dsh::session::{Event, Session};

/// Events appended, and timed, on top of a session filled to 1k or 100k (row 5).
const APPENDED: usize = 1_000;
/// Events appended, and timed, on top of a session filled to 100k or 1M (row 6): ten times
/// row 5's, so that one unit's appends take milliseconds, not the tenths of one that a single
/// interruption of this shared machine doubles.
const APPENDED_LARGE: usize = 10_000;

/// Row 5 (1k and 100k fills): 20 rounds of 2 units of each side, after 2 not counted.
const SMALL_ROUNDS: Rounds = Rounds {
    warm_up: 2,
    rounds: 20,
    per_round: 2,
};

/// Row 6 (100k and 1M fills; a 1M fill takes about a quarter of a second): 15 rounds of 1
/// unit of each side, after 1 not counted.
const LARGE_ROUNDS: Rounds = Rounds {
    warm_up: 1,
    rounds: 15,
    per_round: 1,
};

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

/// One unit: `fill` into a fresh session (not timed), the caches flushed (not timed), then the
/// time per event of appending `next` (not empty).
fn unit(
    rt: &tokio::runtime::Runtime,
    fill: &[Event],
    next: &[Event],
    flush: &RefCell<Flush>,
) -> Duration {
    let session = Session::in_memory("bench");
    let took = rt.block_on(async {
        // Cloned one at a time: a clone of the whole list, freed after the fill, would leave
        // memory the timed appends reuse at 100k (a heap block) and not at 1M (an unmapped
        // one), so the row would compare the allocator's luck with page faults, not the logs.
        for e in fill {
            session.append(e.clone()).await.expect("append");
        }
        flush.borrow_mut().run();
        // Cloned after the fill, so the appended events are as warm in the cache at 1M as at
        // 1k: what differs is only the log behind them.
        let next = next.to_vec();
        let start = Instant::now();
        for e in next {
            session.append(e).await.expect("append");
        }
        start.elapsed()
    });
    drop(session);
    took / u32::try_from(next.len()).unwrap_or(u32::MAX)
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let flush = RefCell::new(Flush::new());
    let next = events::events(APPENDED);
    // Built once; every fill appends clones (an event's fields are shared, so a clone is a
    // handful of reference counts).
    let (k1, k100) = (events::events(1_000), events::events(100_000));
    let pair = |figure: &str, r: Rounds, big: &[Event], small: &[Event], next: &[Event]| {
        compare(
            "append",
            figure,
            r,
            ("big", || unit(&rt, big, next, &flush)),
            ("small", || unit(&rt, small, next, &flush)),
        );
    };
    pair("append-100k", SMALL_ROUNDS, &k100, &k1, &next);
    drop((k1, next));
    let m1 = events::events(1_000_000);
    pair(
        "append-1m",
        LARGE_ROUNDS,
        &m1,
        &k100,
        &events::events(APPENDED_LARGE),
    );
}
