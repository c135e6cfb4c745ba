//! `bash` call benchmarks, rows 15-18 of BENCHMARKS.md, each beside its baseline measured in
//! the same rounds (`cargo xtask bench` turns them into the ratios):
//!
//! - `full` and `contained` vs `bare`: one `bash` call of `true` through the whole pipeline
//!   (step scheduler, pass-through hooks, a guard, the sandbox policy, in-memory session) under
//!   `danger-full-access` and under `workspace-write`, both through the sandbox helper the `dsh`
//!   program uses, vs a bare `tokio::process::Command` spawn + wait of `bash -c true`; `direct`
//!   is full access without the helper (no row);
//! - the same four for a command that prints 1 MB (the bare spawn reads stdout to its end).
//!
//! The four ways of running a command (bare, full access, workspace-write, and full access
//! without the helper) are measured in alternating rounds (`fixtures/alternate.rs`), each unit
//! 10 commands, so that a change of the machine's load falls on every side alike: one side
//! after the other (criterion's way, 4 s each), the ratios moved by up to 0.3× between runs of
//! the same code. Prints one `DSH-BENCH {json}` record per command (`true`, `mb`), each side's
//! median time per command in nanoseconds (`bare_ns`, `full_ns`, `contained_ns`, `direct_ns`).
//! Timing is wall time; no assertion is made about it.
//!
//! Run: `cargo bench -p dsh --bench bash`.

// A benchmark whose setup fails must stop loudly.
#![allow(clippy::expect_used)]

#[path = "fixtures/alternate.rs"]
#[allow(dead_code)] // The fixtures serve several benchmarks; this one uses part of them.
mod alternate;
#[path = "fixtures/pipeline.rs"]
#[allow(dead_code)] // The fixtures serve several benchmarks; this one uses part of them.
mod fixtures;

use std::hint::black_box;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use alternate::{Rounds, alternate_all, record};
use dsh::bash::{BashConfig, BashTool, SandboxHelper, SandboxMode, SandboxSettings, Unavailable};
use dsh::core::ToolRegistry;
use dsh::fs::Workspace;
use dsh::scheduler::Runtime;
use tokio::io::AsyncReadExt;

use fixtures::{blocks, in_task, pass_through_hooks, step, tokio_runtime};

/// The command that prints 1 MB.
const MB_COMMAND: &str = "head -c 1000000 /dev/zero | tr '\\0' a";

/// The helper the `dsh` program uses: the `dsh-sandbox-exec` built beside it.
fn helper() -> SandboxHelper {
    let helper = SandboxHelper::for_dsh(std::path::Path::new(env!("CARGO_BIN_EXE_dsh")));
    assert_eq!(
        helper.program(),
        std::path::Path::new(env!("CARGO_BIN_EXE_dsh-sandbox-exec")),
        "dsh finds the helper built beside it"
    );
    helper
}

/// A pipeline with `bash` mounted over a workspace in `dir`, under `mode`, through `helper`.
fn pipeline(
    dir: &std::path::Path,
    mode: SandboxMode,
    helper: Option<SandboxHelper>,
) -> Arc<Runtime> {
    let ws = dir.join("ws");
    let out = dir.join("out");
    let tmp = dir.join("tmp");
    for d in [&ws, &out, &tmp] {
        std::fs::create_dir_all(d).expect("bench dirs");
    }
    let workspace = Workspace::new([&ws]).expect("workspace");
    let mut config = BashConfig::new(workspace).with_helper(helper);
    config.output_dir = out;
    config.temp_parent = tmp;
    let tool = BashTool::with_settings(
        config,
        SandboxSettings {
            mode,
            escalation: false,
            unavailable: Unavailable::Fail,
        },
    );
    let registry = ToolRegistry::new();
    let hooks = pass_through_hooks();
    dsh::bash::mount(&tool, &registry, &hooks)
        .expect("mount bash")
        .keep();
    Arc::new(Runtime::new(registry, hooks))
}

/// One `bash` call of `command` per iteration, through the pipeline.
fn calls(
    rt: &tokio::runtime::Runtime,
    runtime: &Arc<Runtime>,
    command: &str,
    iters: u64,
) -> Duration {
    let args = serde_json::json!({ "command": command }).to_string();
    let calls = Arc::new(blocks(1, "bash", &args));
    let runtime = runtime.clone();
    in_task(rt, move || async move {
        let mut total = Duration::ZERO;
        for _ in 0..iters {
            let cx = step(1);
            let start = Instant::now();
            let out = runtime.run_step(&cx, &calls).await.expect("step");
            total += start.elapsed();
            assert!(
                !out.results[0].is_error(),
                "the bash call failed: {:?}",
                out.results[0]
            );
            black_box(out);
        }
        total
    })
}

/// One bare `bash -c command` per iteration: spawn, read stdout to its end, wait.
fn bare(rt: &tokio::runtime::Runtime, command: &'static str, iters: u64) -> Duration {
    in_task(rt, move || async move {
        let mut buf = Vec::with_capacity(1 << 20);
        let start = Instant::now();
        for _ in 0..iters {
            let mut child = tokio::process::Command::new("bash")
                .args(["-c", command])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .spawn()
                .expect("spawn bash");
            let mut stdout = child.stdout.take().expect("stdout");
            buf.clear();
            stdout.read_to_end(&mut buf).await.expect("read stdout");
            let status = child.wait().await.expect("wait");
            assert!(status.success());
            black_box(buf.len());
        }
        start.elapsed()
    })
}

/// Commands in one unit; each side's figure is per command.
const PER_UNIT: u32 = 10;

/// 20 rounds of 2 units of each side, after 2 not counted.
const ROUNDS: Rounds = Rounds {
    warm_up: 2,
    rounds: 20,
    per_round: 2,
};

fn bash_calls(rt: &tokio::runtime::Runtime) {
    let dir = tempfile::tempdir().expect("temp dir");
    let full = pipeline(
        &dir.path().join("full"),
        SandboxMode::DangerFullAccess,
        Some(helper()),
    );
    let contained = pipeline(
        &dir.path().join("contained"),
        SandboxMode::WorkspaceWrite,
        Some(helper()),
    );
    // What a host that passes no helper gets: the shell spawned directly (no supervisor).
    let direct = pipeline(
        &dir.path().join("direct"),
        SandboxMode::DangerFullAccess,
        None,
    );
    let n = u64::from(PER_UNIT);
    for (name, command) in [("true", "true"), ("mb", MB_COMMAND)] {
        let sides = alternate_all(
            ROUNDS,
            &mut [
                &mut || bare(rt, command, n) / PER_UNIT,
                &mut || calls(rt, &full, command, n) / PER_UNIT,
                &mut || calls(rt, &contained, command, n) / PER_UNIT,
                &mut || calls(rt, &direct, command, n) / PER_UNIT,
            ],
        );
        record(
            "bash",
            name,
            ROUNDS,
            &[
                ("full", &sides[1]),
                ("bare", &sides[0]),
                ("contained", &sides[2]),
                ("direct", &sides[3]),
            ],
        );
    }
}

fn main() {
    let rt = tokio_runtime();
    bash_calls(&rt);
}
