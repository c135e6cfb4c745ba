//! Diagnostic only, no row of BENCHMARKS.md (`cargo xtask bench` neither builds nor runs it):
//! the work of `derive/log` and `derive/parse` (benches/session.rs) on a log small enough to
//! profile under callgrind, without criterion and without the other benchmarks' fixtures.
//!
//! `session_diag <log|parse> [events] [iterations]` builds the log of `events` events (default
//! 20,000), then runs the chosen side `iterations` times (default 5) through a function that is
//! never inlined, so `callgrind_annotate --inclusive=yes` shows its cost per call.

// A diagnostic whose setup fails must stop loudly.
#![allow(clippy::expect_used)]

// Only `log_text` of the shared fixture is used here.
#[allow(dead_code)]
#[path = "fixtures/events.rs"]
mod events;

use std::hint::black_box;
use std::time::Instant;

use dsh::core::Json;
use dsh::session::{Log, derive_messages_from, read_log};

/// `read_log` + `derive_messages_from`, as `derive/log` times them.
#[inline(never)]
fn derive_log(bytes: &[u8]) -> (Vec<Json>, Log) {
    let log = read_log(bytes).expect("a valid log");
    let messages = derive_messages_from(log.events.iter().map(|(s, e)| (*s, e)));
    (messages, log)
}

fn main() {
    // `cargo bench` passes `--bench`; only the positional arguments count.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let side = args.first().map_or("log", String::as_str).to_owned();
    let n: usize = args.get(1).map_or(20_000, |a| a.parse().expect("events"));
    let iters: usize = args.get(2).map_or(5, |a| a.parse().expect("iterations"));
    let bytes = events::log_text(n);
    let start = Instant::now();
    for _ in 0..iters {
        match side.as_str() {
            "parse" => drop(black_box(events::parse_lines(&bytes))),
            _ => {
                let (messages, log) = derive_log(&bytes);
                assert!(messages.len() > n / 3);
                drop(black_box((messages, log)));
            }
        }
    }
    let per = start.elapsed() / iters.max(1) as u32;
    println!("{side}: {n} events, {per:?} per iteration");
}
