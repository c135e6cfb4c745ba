//! `dsh run` as a user runs it, beside its baseline measured in the same run (`cargo xtask
//! bench` turns them into the ratios of BENCHMARKS.md):
//!
//! - `cli/wide-step-disk` vs `cli/wide-step-tmpfs`: one step of 1,000 calls of the demo `echo`
//!   tool (parallel-safe, settles at once) through the `dsh` binary, the log on disk (under
//!   `target/`) vs in `/dev/shm`: what durability costs a wide step;
//! - `cli/steps-disk` vs `cli/steps-tmpfs`: 100 steps of one `echo` call each, one after the
//!   other, the same two places: what durability costs the steps of a model's turn (each
//!   step's `tool/call` durable before its body, its `tool/result` before the next step; the
//!   framing written with them).
//!
//! Timing is wall time of the whole process, measured inside the benchmark (criterion's
//! `iter_custom`); no assertion is made about it.

// A benchmark whose setup fails must stop loudly.
#![allow(clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode};

/// Calls in the wide step.
const CALLS: usize = 1_000;

/// Steps of the sequential script.
const STEPS: usize = 100;

/// One assistant message (a script line) calling `echo` with the ids `ids`.
fn message(ids: impl Iterator<Item = usize>) -> String {
    let calls: Vec<serde_json::Value> = ids
        .map(|i| {
            serde_json::json!({
                "id": format!("c{i}"),
                "type": "function",
                "function": {"name": "echo", "arguments": "{\"text\":\"x\"}"},
            })
        })
        .collect();
    let line = serde_json::json!({"role": "assistant", "content": null, "tool_calls": calls});
    format!("{line}\n")
}

/// A script of one step of `CALLS` `echo` calls, in the Chat Completions shape.
fn wide_script(dir: &Path) -> PathBuf {
    let path = dir.join("wide.jsonl");
    std::fs::write(&path, message(0..CALLS)).expect("write the script");
    path
}

/// A script of `STEPS` steps of one `echo` call each.
fn steps_script(dir: &Path) -> PathBuf {
    let path = dir.join("steps.jsonl");
    let text: String = (0..STEPS).map(|i| message(i..i + 1)).collect();
    std::fs::write(&path, text).expect("write the script");
    path
}

/// One `dsh run` of the script with its log in `logs`; returns its wall time.
fn run_once(script: &Path, ws: &Path, logs: &Path) -> Duration {
    let log = logs.join("bench-log.jsonl");
    let _ = std::fs::remove_file(&log);
    let start = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_dsh"))
        .arg("run")
        .arg(script)
        .args(["--demo-tools", "--workspace"])
        .arg(ws)
        .arg("--session")
        .arg(&log)
        .output()
        .expect("start dsh");
    let took = start.elapsed();
    assert!(
        out.status.success(),
        "dsh run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    took
}

fn runs(c: &mut Criterion) {
    // On disk: the build's target directory (wherever `CARGO_TARGET_DIR` puts it).
    let root = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    std::fs::create_dir_all(&root).expect("the target directory");
    let disk = tempfile::tempdir_in(&root).expect("a temp dir on disk under the target directory");
    let tmpfs = Path::new("/dev/shm");
    assert!(tmpfs.is_dir(), "no tmpfs at /dev/shm to compare with");
    let tmpfs = tempfile::tempdir_in(tmpfs).expect("a temp dir in /dev/shm");
    let ws = disk.path().join("ws");
    std::fs::create_dir_all(&ws).expect("workspace");
    let wide = wide_script(disk.path());
    let steps = steps_script(disk.path());
    let mut g = c.benchmark_group("cli");
    g.warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(3))
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat);
    for (id, script, logs) in [
        ("wide-step-disk", &wide, disk.path()),
        ("wide-step-tmpfs", &wide, tmpfs.path()),
        ("steps-disk", &steps, disk.path()),
        ("steps-tmpfs", &steps, tmpfs.path()),
    ] {
        g.bench_function(id, |b| {
            b.iter_custom(|iters| (0..iters).map(|_| run_once(script, &ws, logs)).sum())
        });
    }
    g.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    runs(&mut c);
    c.final_summary();
}
