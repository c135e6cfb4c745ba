//! Resident memory of an in-memory session log against the bytes of the same log as JSON Lines.
//!
//! A dedicated process (this bench binary) appends realistic events one at a time, generating
//! each turn just before appending it, and reads its resident set from `/proc/self/statm` at
//! 1k, 100k and 1M events. It prints one `DSH-BENCH {json}` line per checkpoint with the growth
//! of the resident set since the session was created and the log's bytes (header and newlines
//! included); `cargo xtask bench` reads those lines.

// A benchmark whose setup fails must stop loudly.
#![allow(clippy::expect_used)]

// This binary only appends turns; the whole-log helpers serve the other benchmarks.
#[path = "fixtures/events.rs"]
#[allow(dead_code)]
mod events;

use dsh::session::{Header, Session};

/// The checkpoints, in events.
const CHECKPOINTS: [usize; 3] = [1_000, 100_000, 1_000_000];

/// The page size, from the first mapping of `/proc/self/smaps` (4 KiB if unreadable).
fn page_size() -> u64 {
    std::fs::read_to_string("/proc/self/smaps")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("KernelPageSize:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map(|kb| kb * 1024)
        .unwrap_or(4096)
}

/// The resident set in bytes, from `/proc/self/statm` (second field, in pages).
fn resident(page: u64) -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("read /proc/self/statm");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|f| f.parse().ok())
        .expect("statm's resident field");
    pages * page
}

fn main() {
    // `cargo bench` passes `--bench`; a filter that names nothing here skips the run.
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    if !filters.is_empty()
        && !filters
            .iter()
            .any(|f| "session_memory".contains(f.as_str()))
    {
        return;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("tokio runtime");
    let page = page_size();
    let header = Header::new("bench", "/work");
    let mut log_bytes = header.json().to_json_string().len() as u64 + 1;
    let session = Session::in_memory_with_header(header);
    let before = resident(page);
    let last = CHECKPOINTS[CHECKPOINTS.len() - 1];
    let mut appended = 0usize;
    let mut turn = 1u32;
    rt.block_on(async {
        while appended < last {
            for e in events::turn(turn, appended as u64) {
                log_bytes += e.to_json_line().len() as u64 + 1;
                session.append(e).await.expect("append");
                appended += 1;
                if CHECKPOINTS.contains(&appended) {
                    let rss = resident(page).saturating_sub(before);
                    println!(
                        "DSH-BENCH {}",
                        serde_json::json!({
                            "bench": "session_memory",
                            "events": appended,
                            "rss_growth_bytes": rss,
                            "log_bytes": log_bytes,
                            "ratio": rss as f64 / log_bytes as f64,
                        })
                    );
                }
                if appended == last {
                    break;
                }
            }
            turn += 1;
        }
    });
    assert_eq!(session.next_seq(), appended as u64);
}
