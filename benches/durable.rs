//! Rows 8, 38 and 39 of BENCHMARKS.md: a durable JSON Lines session's group commit beside a raw
//! loop of the same writes and syncs and beside the textbook group commit, the three
//! alternated in rounds (`fixtures/alternate.rs`) so that the disk's drift falls on every side
//! alike. Prints one `DSH-BENCH {json}` record (`cargo xtask bench` turns it into the rows'
//! ratios):
//!
//! - `group`: 10 concurrent appenders on a freshly opened durable session (group commit, one
//!   `fdatasync` per group), 100 appends each;
//! - `raw`: a plain loop of `write` + `fdatasync` over the same 1,000 lines in batches of 10,
//!   onto a freshly created file;
//! - `plain`: the textbook group commit of the same appenders, written here in a few lines and
//!   nothing else: 10 tasks on the same runtime hand their line (serialized beforehand) to a
//!   writer thread under a mutex and await a `oneshot`; the writer sleeps on a condition
//!   variable until all 10 lines are queued (it knows how many to wait for, which no real
//!   writer does), writes and `fdatasync`s them, and answers each. It keeps no log, builds no
//!   line, forms groups by no rule: what any group commit of appenders that each wait for their
//!   append costs here, the hand-offs between the runtime's threads and the writer's.
//!
//! A unit is those 1,000 events on every side; each side's figure is per 10 events (one batch).
//! Opening the session, creating the file and building the events are not timed. Measured one
//! side after the other instead (criterion's way, 4 s each), the ratio read anywhere from 0.16×
//! to 2.32× within a day: the shared disk's sync time moved by 4× between the two sides.
//! Timing is wall time; no assertion is made about it.
//!
//! Run: `cargo bench -p dsh --bench durable`.

// A benchmark whose setup fails must stop loudly.
#![allow(clippy::expect_used)]

#[path = "fixtures/alternate.rs"]
#[allow(dead_code)] // The fixtures serve several benchmarks; this one uses part of them.
mod alternate;
#[path = "fixtures/events.rs"]
#[allow(dead_code)] // The fixtures serve several benchmarks; this one uses part of them.
mod events;

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use alternate::{Rounds, alternate_all, record};
use dsh::session::{Event, OpenOptions, Session};

/// Concurrent appenders, and the batch size of the raw loop.
const APPENDERS: usize = 10;
/// Batches of 10 events in one unit (the time reported is per batch).
const BATCHES: usize = 100;

/// 30 rounds of 3 units of each side (about 100 syncs a unit), after 2 not counted.
const ROUNDS: Rounds = Rounds {
    warm_up: 2,
    rounds: 30,
    per_round: 3,
};

/// The unit's events dealt round-robin to the appenders, each made into what it appends.
fn lanes<T>(make: impl Fn(Event) -> T) -> Vec<Vec<T>> {
    let mut lanes: Vec<Vec<T>> = (0..APPENDERS)
        .map(|_| Vec::with_capacity(BATCHES))
        .collect();
    for (i, e) in events::events(BATCHES * APPENDERS).into_iter().enumerate() {
        lanes[i % APPENDERS].push(make(e));
    }
    lanes
}

/// One unit of the group side: 10 appenders, `BATCHES` appends each, on a fresh session.
fn group(rt: &tokio::runtime::Runtime) -> Duration {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("log.jsonl");
    let lanes = lanes(|e| e);
    rt.block_on(async {
        let (session, _) = Session::open_jsonl(&path, OpenOptions::new())
            .await
            .expect("open the log");
        let start = Instant::now();
        let tasks: Vec<_> = lanes
            .into_iter()
            .map(|lane| {
                let session = session.clone();
                tokio::spawn(async move {
                    for e in lane {
                        session.append(e).await.expect("durable append");
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.expect("appender");
        }
        let took = start.elapsed();
        session.close().await.expect("close");
        took / BATCHES as u32
    })
}

/// One unit of the raw side: the same lines, `write` + `fdatasync` per batch of 10.
fn raw() -> Duration {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("log.jsonl");
    let batches: Vec<Vec<u8>> = events::events(BATCHES * APPENDERS)
        .chunks(APPENDERS)
        .map(|chunk| {
            let mut bytes = Vec::new();
            for e in chunk {
                bytes.extend_from_slice(e.to_json_line().as_bytes());
                bytes.push(b'\n');
            }
            bytes
        })
        .collect();
    let mut file = std::fs::File::create(&path).expect("create");
    file.write_all(b"{\"type\":\"session\",\"version\":0,\"id\":\"bench\"}\n")
        .expect("header");
    file.sync_all().expect("sync");
    let start = Instant::now();
    for bytes in &batches {
        file.write_all(bytes).expect("write");
        file.sync_data().expect("fdatasync");
    }
    start.elapsed() / BATCHES as u32
}

/// The lines waiting for the plain writer, each with its answer.
type Waiting = Mutex<Vec<(Vec<u8>, tokio::sync::oneshot::Sender<()>)>>;

/// One unit of the plain side: the same appenders and lines through the textbook group commit.
fn plain(rt: &tokio::runtime::Runtime) -> Duration {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("log.jsonl");
    let lanes = lanes(|e| {
        let mut line = e.to_json_line().into_bytes();
        line.push(b'\n');
        line
    });
    let mut file = std::fs::File::create(&path).expect("create");
    file.write_all(b"{\"type\":\"session\",\"version\":0,\"id\":\"bench\"}\n")
        .expect("header");
    file.sync_all().expect("sync");
    let queue: Arc<(Waiting, Condvar)> = Arc::default();
    let writer = {
        let queue = queue.clone();
        std::thread::spawn(move || {
            let (waiting, ready) = &*queue;
            for _ in 0..BATCHES {
                let group = {
                    let mut w = waiting.lock().unwrap_or_else(PoisonError::into_inner);
                    while w.len() < APPENDERS {
                        w = ready.wait(w).unwrap_or_else(PoisonError::into_inner);
                    }
                    std::mem::take(&mut *w)
                };
                let mut bytes = Vec::new();
                for (line, _) in &group {
                    bytes.extend_from_slice(line);
                }
                file.write_all(&bytes).expect("write");
                file.sync_data().expect("fdatasync");
                for (_, answer) in group {
                    let _ = answer.send(());
                }
            }
        })
    };
    let took = rt.block_on(async {
        let start = Instant::now();
        let tasks: Vec<_> = lanes
            .into_iter()
            .map(|lane| {
                let queue = queue.clone();
                tokio::spawn(async move {
                    for line in lane {
                        let (answer, answered) = tokio::sync::oneshot::channel();
                        {
                            let (waiting, ready) = &*queue;
                            let mut w = waiting.lock().unwrap_or_else(PoisonError::into_inner);
                            w.push((line, answer));
                            if w.len() == APPENDERS {
                                ready.notify_one();
                            }
                        }
                        answered.await.expect("written");
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.expect("appender");
        }
        start.elapsed()
    });
    writer.join().expect("plain writer");
    took / BATCHES as u32
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let sides = alternate_all(
        ROUNDS,
        &mut [&mut || group(&rt), &mut raw, &mut || plain(&rt)],
    );
    record(
        "durable",
        "durable",
        ROUNDS,
        &[
            ("group", &sides[0]),
            ("raw", &sides[1]),
            ("plain", &sides[2]),
        ],
    );
}
