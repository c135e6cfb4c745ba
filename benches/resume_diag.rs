//! Diagnostic only, no row of BENCHMARKS.md (`cargo xtask bench` neither builds nor runs it):
//! the work of `agent/resume-<n>` and `agent/parse-<n>` (benches/agent_loop.rs, row 21) without
//! criterion, so that callgrind counts the instructions of a resume whatever else the machine
//! is doing.
//!
//! `resume_diag <resume|parse> [events] [iterations]` writes the log of `events` events
//! (default 100,000), then runs the chosen side `iterations` times (default 1) through a
//! function that is never inlined, so `callgrind_annotate --inclusive=yes` shows its cost.
//! Subtracting a run with 0 iterations leaves the setup out.

// A diagnostic whose setup fails must stop loudly.
#![allow(clippy::expect_used)]

// Only `log_text` of the shared fixture is used here.
#[allow(dead_code)]
#[path = "fixtures/events.rs"]
mod events;

use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use dsh::session::{OpenOptions, Session};
use dsh_agent::provider_messages;
use dsh_model::{Message, Request};

/// Opens the log for writing (its repair scan included), derives the history and builds the
/// next request, as `agent/resume-100k` times it; the session is returned so that closing it
/// stays outside.
#[inline(never)]
async fn resume(path: &Path) -> (Request, Session) {
    let (session, _) = Session::open_jsonl(path, OpenOptions::new())
        .await
        .expect("open the log");
    let mut messages = vec![Message::system("You are a bench.")];
    messages.extend(provider_messages(session.events().pairs()));
    (Request::new("deepseek-chat", messages), session)
}

fn main() {
    // `cargo bench` passes `--bench`; only the positional arguments count.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let side = args.first().map_or("resume", String::as_str).to_owned();
    let n: usize = args.get(1).map_or(100_000, |a| a.parse().expect("events"));
    let iters: usize = args.get(2).map_or(1, |a| a.parse().expect("iterations"));
    let bytes = events::log_text(n);
    let dir = tempfile::tempdir().expect("temp dir");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let mut took = std::time::Duration::ZERO;
    for i in 0..iters {
        match side.as_str() {
            "parse" => {
                let start = Instant::now();
                let values = events::parse_lines(&bytes);
                took += start.elapsed();
                drop(black_box(values));
            }
            _ => {
                let path = dir.path().join(format!("resume-{i}.jsonl"));
                std::fs::write(&path, &bytes).expect("write the log");
                rt.block_on(async {
                    let start = Instant::now();
                    let (request, session) = resume(&path).await;
                    took += start.elapsed();
                    assert!(request.messages.len() > n / 3);
                    black_box(&request);
                    session.close().await.expect("close");
                });
            }
        }
    }
    let per = took / iters.max(1) as u32;
    println!("{side}: {n} events, {per:?} per iteration");
}
