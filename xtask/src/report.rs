//! The rows of BENCHMARKS.md: which figure is compared with which baseline, the target of the
//! ratio, and the markdown. Hand-written notes below [`NOTES_MARKER`] survive every rewrite.

use std::fmt::Write as _;

use serde_json::Value;

use crate::machine::Machine;
use crate::results::Results;

/// The line after which BENCHMARKS.md is written by hand and kept as it is.
pub const NOTES_MARKER: &str =
    "<!-- Everything below this line is written by hand; cargo xtask bench keeps it. -->";

/// Where a figure comes from.
#[derive(Debug, Clone, Copy)]
pub enum Source {
    /// A criterion benchmark: its median iteration time divided by `per`, shown per `unit`.
    Criterion {
        id: &'static str,
        per: f64,
        unit: &'static str,
    },
    /// A number field of the first `DSH-BENCH` record of `bench` whose `key` is `at`, in bytes.
    Bytes {
        bench: &'static str,
        key: &'static str,
        at: u64,
        field: &'static str,
    },
    /// A number field of the first `DSH-BENCH` record of `bench` whose `figure` is `figure`:
    /// nanoseconds per `unit`, or bytes when `unit` is empty.
    Field {
        bench: &'static str,
        figure: &'static str,
        field: &'static str,
        unit: &'static str,
    },
}

/// A number field of the first `DSH-BENCH` record of `bench` whose `figure` is `figure`:
/// nanoseconds per `unit`, or bytes when `unit` is empty.
const fn field(
    bench: &'static str,
    figure: &'static str,
    field: &'static str,
    unit: &'static str,
) -> Source {
    Source::Field {
        bench,
        figure,
        field,
        unit,
    }
}

/// What a row's ratio must satisfy.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    /// figure / baseline (time or bytes) at most this.
    AtMost(f64),
    /// Throughput: baseline time / figure time at least this.
    ThroughputAtLeast(f64),
    /// Shown for information as throughput, its target on the next row (row 5: at 100k, the
    /// target is at 1M).
    Info,
    /// Shown for information as figure / baseline (time or memory), no target.
    InfoTimes,
    /// Shown for information as throughput, no target (and none planned).
    Throughput,
}

/// One row of the table.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    /// What is measured.
    pub name: &'static str,
    /// The measured figure.
    pub figure: Source,
    /// What the baseline is.
    pub baseline_name: &'static str,
    /// The baseline, measured in the same run.
    pub baseline: Source,
    /// The target of the ratio.
    pub target: Target,
    /// The bench target that measures it.
    pub bench: &'static str,
    /// The command that reproduces it.
    pub command: &'static str,
}

const fn timed(id: &'static str, per: f64, unit: &'static str) -> Source {
    Source::Criterion { id, per, unit }
}

/// Every row, in the order of the issue.
pub const ROWS: &[Row] = &[
    Row {
        name: "full pipeline, no-op tool, pass-through pre-execute, execute and post-execute listeners + one guard, in-memory session, sequential",
        figure: timed("pipeline/full", 1.0, "call"),
        baseline_name: "bare `tokio::spawn` + await of the same no-op body, from inside a task on the same multi-thread runtime",
        baseline: timed("pipeline/spawn", 1.0, "call"),
        // Issue 19 item 5 tightened it from 5×.
        target: Target::AtMost(3.0),
        bench: "pipeline",
        command: "cargo bench -p dsh --bench pipeline -- pipeline/",
    },
    Row {
        name: "step scheduler, 10,000 parallel-safe no-op calls, pool 10, in-memory session",
        figure: timed("scheduler/step", 10_000.0, "call"),
        baseline_name: "the same calls and log events through the staged runtime (`Runtime::execute`) without the scheduler",
        baseline: timed("scheduler/staged", 10_000.0, "call"),
        target: Target::AtMost(1.5),
        bench: "pipeline",
        command: "cargo bench -p dsh --bench pipeline -- scheduler/",
    },
    Row {
        name: "registry with 1,000 tools (full pipeline, per call; 40 rounds of 10 × 1,000 one-call steps alternated with the baseline, medians)",
        figure: field("registry", "registry", "many_ns", "call"),
        baseline_name: "the same with 1 tool, same rounds",
        baseline: field("registry", "registry", "one_ns", "call"),
        target: Target::ThroughputAtLeast(0.9),
        bench: "registry",
        command: "cargo bench -p dsh --bench registry",
    },
    Row {
        name: "1 MB argument and 1 MB string result, one call through the full pipeline",
        figure: timed("payload/call", 1.0, "call"),
        baseline_name: "one `serde_json` serialization of the 1 MB argument",
        baseline: timed("payload/serialize", 1.0, "serialization"),
        target: Target::AtMost(3.0),
        bench: "pipeline",
        command: "cargo bench -p dsh --bench pipeline -- payload/",
    },
    Row {
        name: "session append at 100k events (1,000 appends onto an in-memory log holding 100k, the caches flushed after the fill; 20 rounds of 2 fills alternated with the baseline, medians)",
        figure: field("append", "append-100k", "big_ns", "event"),
        baseline_name: "the same onto a log holding 1k, same rounds",
        baseline: field("append", "append-100k", "small_ns", "event"),
        target: Target::Info,
        bench: "append",
        command: "cargo bench -p dsh --bench append",
    },
    Row {
        name: "session append at 1M events (10,000 appends onto an in-memory log holding 1M, the caches flushed after the fill: twice the largest CPU cache written; 15 rounds of 1 fill alternated with the baseline, medians)",
        figure: field("append", "append-1m", "big_ns", "event"),
        // Against 100k, not 1k: a 1k log fits the CPU caches, so the 1k ratio measured the
        // cache, not the append; past the cache the append must stay flat. A 100k log (about
        // 45 MB) still fits a large cache (260 MiB on one of our machines), so the bench
        // flushes the caches after each fill: both logs are past the cache on any machine.
        baseline_name: "the same onto a log holding 100k, same rounds",
        baseline: field("append", "append-1m", "small_ns", "event"),
        target: Target::ThroughputAtLeast(0.9),
        bench: "append",
        command: "cargo bench -p dsh --bench append",
    },
    Row {
        name: "session resident memory after 1M appended events (growth of the process's RSS, /proc/self/statm)",
        figure: Source::Bytes {
            bench: "session_memory",
            key: "events",
            at: 1_000_000,
            field: "rss_growth_bytes",
        },
        baseline_name: "bytes of the same log as JSON Lines",
        baseline: Source::Bytes {
            bench: "session_memory",
            key: "events",
            at: 1_000_000,
            field: "log_bytes",
        },
        target: Target::AtMost(2.0),
        bench: "session_memory",
        command: "cargo bench -p dsh --bench session_memory",
    },
    Row {
        name: "durable JSONL, group commit, 10 concurrent appenders (per 10 events; 30 rounds of 3 × 1,000 events alternated with the baseline, medians)",
        figure: field("durable", "durable", "group_ns", "10 events"),
        baseline_name: "raw `write` + `fdatasync` loop, batches of 10 of the same lines, same rounds",
        baseline: field("durable", "durable", "raw_ns", "batch"),
        target: Target::ThroughputAtLeast(0.8),
        bench: "durable",
        command: "cargo bench -p dsh --bench durable",
    },
    Row {
        name: "a 100 ms body beside a 1 s pre-execute of the next call (step start to body end)",
        figure: timed("overlap/beside", 1.0, "step"),
        baseline_name: "the body alone",
        baseline: timed("overlap/alone", 1.0, "step"),
        target: Target::AtMost(1.1),
        bench: "pipeline",
        command: "cargo bench -p dsh --bench pipeline -- overlap/",
    },
    Row {
        name: "a 100 ms body's result made final (observers, log) beside a 1 s pre-execute of the next call",
        figure: timed("overlap/final-beside", 1.0, "step"),
        baseline_name: "the body alone, to its result made final",
        baseline: timed("overlap/final-alone", 1.0, "step"),
        target: Target::AtMost(1.1),
        bench: "pipeline",
        command: "cargo bench -p dsh --bench pipeline -- overlap/",
    },
    Row {
        name: "a 100 ms body beside a pre-execute that blocks its thread for 1 s (step start to body end)",
        figure: timed("overlap/blocking-beside", 1.0, "step"),
        baseline_name: "the body alone",
        baseline: timed("overlap/alone", 1.0, "step"),
        target: Target::AtMost(1.1),
        bench: "pipeline",
        command: "cargo bench -p dsh --bench pipeline -- overlap/",
    },
    Row {
        name: "`dsh run`: one step of 1,000 no-op calls, the log on disk",
        figure: timed("cli/wide-step-disk", 1.0, "run"),
        baseline_name: "the same run with the log on tmpfs (`/dev/shm`)",
        baseline: timed("cli/wide-step-tmpfs", 1.0, "run"),
        target: Target::AtMost(2.0),
        bench: "cli_run",
        command: "cargo bench -p dsh --bench cli_run",
    },
    Row {
        name: "Code Mode: 1,000 sub-calls of a no-op tool from one program (40 rounds of 10 programs alternated with the baseline, medians)",
        figure: field("code_mode", "code-mode", "program_ns", "1,000 calls"),
        baseline_name: "1,000 direct pipeline calls, one step each, same rounds",
        baseline: field("code_mode", "code-mode", "direct_ns", "1,000 calls"),
        target: Target::AtMost(3.0),
        bench: "code_mode",
        command: "cargo bench -p dsh --bench code_mode",
    },
    Row {
        name: "`derive_messages` of a 1M-event log file (`read_log` + `derive_messages_from`, bytes in memory)",
        figure: timed("derive/log", 1.0, "log"),
        baseline_name: "`serde_json` parse of every line of the same file into a `Value`",
        baseline: timed("derive/parse", 1.0, "log"),
        target: Target::AtMost(1.5),
        bench: "session",
        command: "cargo bench -p dsh --bench session -- derive/",
    },
    Row {
        name: "`bash` call of `true` through the full pipeline, `danger-full-access` (started by the session's sandbox supervisor, which watches every command in every mode; 20 rounds of 2 × 10 calls, alternated with the baseline and the other modes, medians)",
        figure: field("bash", "true", "full_ns", "call"),
        baseline_name: "bare `tokio::process::Command` spawn + wait of `bash -c true`, same rounds",
        baseline: field("bash", "true", "bare_ns", "spawn"),
        target: Target::AtMost(1.5),
        bench: "bash",
        command: "cargo bench -p dsh --bench bash",
    },
    Row {
        name: "`bash` call of `true` through the full pipeline, `workspace-write` (supervisor under Landlock; each command's child installs the seccomp filter, then `exec`s the shell; same rounds)",
        figure: field("bash", "true", "contained_ns", "call"),
        baseline_name: "bare `tokio::process::Command` spawn + wait of `bash -c true`, same rounds",
        baseline: field("bash", "true", "bare_ns", "spawn"),
        target: Target::AtMost(2.0),
        bench: "bash",
        command: "cargo bench -p dsh --bench bash",
    },
    Row {
        name: "`bash` call printing 1 MB through the full pipeline, `danger-full-access` (supervisor; tail shown, all of it saved to a file; rounds as row 15)",
        figure: field("bash", "mb", "full_ns", "call"),
        baseline_name: "bare spawn of the same `bash -c`, reading stdout to its end, + wait, same rounds",
        baseline: field("bash", "mb", "bare_ns", "spawn"),
        target: Target::AtMost(1.5),
        bench: "bash",
        command: "cargo bench -p dsh --bench bash",
    },
    Row {
        name: "`bash` call printing 1 MB through the full pipeline, `workspace-write` (supervisor under Landlock, the filter installed in each command's child; tail shown, all of it saved to a file; rounds as row 15)",
        figure: field("bash", "mb", "contained_ns", "call"),
        baseline_name: "bare spawn of the same `bash -c`, reading stdout to its end, + wait, same rounds",
        baseline: field("bash", "mb", "bare_ns", "spawn"),
        target: Target::AtMost(2.0),
        bench: "bash",
        command: "cargo bench -p dsh --bench bash",
    },
    Row {
        name: "agent loop: one turn streaming 10,000 text chunks from the mock provider on 127.0.0.1 (HTTP, SSE, the OpenAI-compatible adapter, assembly, chunk events in an in-memory session, the message)",
        figure: timed("agent/stream-10k", 1.0, "turn"),
        baseline_name: "`serde_json` parse of the same 10,000 chunk payloads into `Value`s",
        baseline: timed("agent/parse-10k", 1.0, "10k chunks"),
        target: Target::AtMost(1.5),
        bench: "agent_loop",
        command: "cargo bench -p dsh --bench agent_loop -- agent/",
    },
    Row {
        name: "agent loop: from the last chunk of an assistant message calling a no-op tool to that tool's body starting",
        figure: timed("agent/to-first-body", 1.0, "message"),
        baseline_name: "one direct call of the same tool through the same pipeline (`Runtime::execute`)",
        baseline: timed("agent/direct-call", 1.0, "call"),
        target: Target::AtMost(2.0),
        bench: "agent_loop",
        command: "cargo bench -p dsh --bench agent_loop -- agent/",
    },
    Row {
        name: "agent loop: resuming a 100,000-event log file (open for writing with its repair scan, derive the history, build the next request: the provider-neutral `Request`, serialized only as it is sent)",
        figure: timed("agent/resume-100k", 1.0, "resume"),
        baseline_name: "`serde_json` parse of every line of the same file into a `Value`",
        baseline: timed("agent/parse-100k", 1.0, "log"),
        target: Target::AtMost(1.5),
        bench: "agent_loop",
        command: "cargo bench -p dsh --bench agent_loop -- agent/",
    },
    Row {
        name: "MCP gateway: an `rmcp` client calls the `add` tool of the Python SDK's test server through `dsh mcp serve` (stdio both ways; the whole pipeline and a durable JSON Lines log on disk in between)",
        figure: timed("mcp/gateway", 1.0, "call"),
        baseline_name: "the same client calling the same server directly over stdio",
        baseline: timed("mcp/direct", 1.0, "call"),
        target: Target::AtMost(1.3),
        bench: "mcp_gateway",
        command: "cargo bench -p dsh --bench mcp_gateway -- mcp/",
    },
    Row {
        name: "MCP gateway as above, its log on `/dev/shm` (what the gateway costs without waiting for the disk)",
        figure: timed("mcp/gateway-shm", 1.0, "call"),
        baseline_name: "the same client calling the same server directly over stdio",
        baseline: timed("mcp/direct", 1.0, "call"),
        target: Target::InfoTimes,
        bench: "mcp_gateway",
        command: "cargo bench -p dsh --bench mcp_gateway -- mcp/",
    },
    Row {
        name: "MCP gateway over HTTP: peak resident memory of `dsh mcp serve --http` while one client makes 1,000 concurrent `echo` calls (all answered, each paired in the log on disk; the bench asserts it)",
        figure: Source::Bytes {
            bench: "mcp_http",
            key: "calls",
            at: 1_000,
            field: "peak_rss_bytes",
        },
        baseline_name: "its resident memory once started, before the calls",
        baseline: Source::Bytes {
            bench: "mcp_http",
            key: "calls",
            at: 1_000,
            field: "idle_rss_bytes",
        },
        target: Target::InfoTimes,
        bench: "mcp_gateway",
        command: "cargo bench -p dsh --bench mcp_gateway -- mcp/",
    },
    Row {
        name: "stage timing on (`RuntimeConfig::step_timing`: each call's stage marks, one `dsh/step-timing` event per step, as `dsh run` writes for `dsh view`): steps of one no-op call through the full pipeline, sequential, in-memory session (40 rounds of 10 × 1,000 steps alternated with the baseline, medians)",
        figure: field("step_timing", "timing-1", "on_ns", "call"),
        baseline_name: "the same steps with stage timing off (the default), same rounds",
        baseline: field("step_timing", "timing-1", "off_ns", "call"),
        target: Target::AtMost(1.25),
        bench: "step_timing",
        command: "cargo bench -p dsh --bench step_timing",
    },
    Row {
        name: "stage timing on, one step of 10,000 parallel-safe no-op calls, pool 10, in-memory session (one event of 10,000 entries; 20 rounds of 2 steps alternated with the baseline, medians)",
        figure: field("step_timing", "timing-10k", "on_ns", "call"),
        baseline_name: "the same step with stage timing off, same rounds",
        baseline: field("step_timing", "timing-10k", "off_ns", "call"),
        target: Target::AtMost(1.25),
        bench: "step_timing",
        command: "cargo bench -p dsh --bench step_timing",
    },
    Row {
        name: "PostgreSQL store, group commit: 10 concurrent appenders on one session (7 rounds of 1,000 events alternated with the baseline, medians; throwaway cluster, `fsync=on`, loopback)",
        figure: field("store", "group-commit", "store_ns", "event"),
        baseline_name: "a raw loop of batched `INSERT ... unnest` of the same rows in the same batch sizes (one statement per transaction the store made), same rounds",
        baseline: field("store", "group-commit", "raw_ns", "event"),
        target: Target::ThroughputAtLeast(0.8),
        bench: "store",
        command: "cargo bench -p dsh --bench store",
    },
    Row {
        name: "PostgreSQL store, append cost at 1M events: 1,000 appends (10 appenders) onto a session holding 1M events (loaded by import, then `VACUUM` and `CHECKPOINT`; the two sessions alternated over 7 rounds, medians)",
        figure: field("store", "flat", "big_ns", "event"),
        baseline_name: "the same onto a session holding 1k events",
        baseline: field("store", "flat", "small_ns", "event"),
        target: Target::ThroughputAtLeast(0.9),
        bench: "store",
        command: "cargo bench -p dsh --bench store",
    },
    Row {
        name: "PostgreSQL store, 1,000 sessions open in one process (one store handle: 1 writer + 4 pooled connections), 10 appends each, all at once",
        figure: field("store", "sessions", "store_ns", "event"),
        baseline_name: "a raw loop of batched `INSERT ... unnest` of the same rows in the same transactions",
        baseline: field("store", "sessions", "raw_ns", "event"),
        target: Target::Throughput,
        bench: "store",
        command: "cargo bench -p dsh --bench store",
    },
    Row {
        name: "PostgreSQL store, peak resident memory of the process with those 1,000 sessions open and appending",
        figure: field("store", "sessions", "peak_rss_bytes", ""),
        baseline_name: "its resident memory before opening them",
        baseline: field("store", "sessions", "idle_rss_bytes", ""),
        target: Target::InfoTimes,
        bench: "store",
        command: "cargo bench -p dsh --bench store",
    },
    Row {
        name: "PostgreSQL store, four processes of 250 sessions each, 10 appends per session, all at once (distinct sessions, one database)",
        figure: field("store", "processes", "store_ns", "event"),
        baseline_name: "the same 1,000 sessions and appends in one process (the row above)",
        baseline: field("store", "processes", "one_ns", "event"),
        target: Target::Throughput,
        bench: "store",
        command: "cargo bench -p dsh --bench store",
    },
    Row {
        name: "MCP, a bare relay: the client of row 22 calls `add` through a process that copies bytes between its stdio and the server's, and does nothing else (the hop any gateway in a process of its own pays)",
        figure: timed("mcp/relay", 1.0, "call"),
        baseline_name: "the same client calling the same server directly over stdio",
        baseline: timed("mcp/direct", 1.0, "call"),
        target: Target::InfoTimes,
        bench: "mcp_gateway",
        command: "cargo bench -p dsh --bench mcp_gateway -- mcp/",
    },
    Row {
        name: "MCP, the least a gateway keeping dsh's promises can cost: the bare relay, which also appends each chunk it forwards (either way) to a file on disk and waits for `fdatasync` first (a call recorded before it runs, its result recorded before the client sees it), parsing nothing",
        figure: timed("mcp/relay-durable", 1.0, "call"),
        baseline_name: "the same client calling the same server directly over stdio",
        baseline: timed("mcp/direct", 1.0, "call"),
        target: Target::InfoTimes,
        bench: "mcp_gateway",
        command: "cargo bench -p dsh --bench mcp_gateway -- mcp/",
    },
    Row {
        name: "MCP gateway (row 22) against that least cost: what `dsh mcp serve` adds to the hop and the two disk waits (JSON-RPC read and written twice, the pipeline, the log's events)",
        figure: timed("mcp/gateway", 1.0, "call"),
        baseline_name: "the durable bare relay of the row above",
        baseline: timed("mcp/relay-durable", 1.0, "call"),
        target: Target::InfoTimes,
        bench: "mcp_gateway",
        command: "cargo bench -p dsh --bench mcp_gateway -- mcp/",
    },
    Row {
        name: "`dsh run`: 100 steps of one no-op call each, one after the other, the log on disk (three syncs a step: its `step/start` before the request, the call's `tool/call` before its body, its `tool/result` before the next step; the rest written with them)",
        figure: timed("cli/steps-disk", 1.0, "run"),
        baseline_name: "the same run with the log on tmpfs (`/dev/shm`)",
        baseline: timed("cli/steps-tmpfs", 1.0, "run"),
        target: Target::InfoTimes,
        bench: "cli_run",
        command: "cargo bench -p dsh --bench cli_run",
    },
    Row {
        name: "PostgreSQL store, the database's share of row 27: the store's own append statement (`APPEND_STATEMENT`: the fenced update of the session's row, the insert, the notification), run by a raw client loop with the same rows in the same batches, same rounds (medians)",
        figure: field("store", "group-commit", "statement_ns", "event"),
        baseline_name: "the raw loop of batched `INSERT ... unnest` of row 27",
        baseline: field("store", "group-commit", "raw_ns", "event"),
        target: Target::Throughput,
        bench: "store",
        command: "cargo bench -p dsh --bench store",
    },
    Row {
        name: "PostgreSQL store, the process's share of row 27: the 10 appenders through the store (row 27's figure)",
        figure: field("store", "group-commit", "store_ns", "event"),
        baseline_name: "the store's own statement in a raw client loop (the row above): what is left is the hand-offs between the appenders, the session's writer and the store's connection",
        baseline: field("store", "group-commit", "statement_ns", "event"),
        target: Target::Throughput,
        bench: "store",
        command: "cargo bench -p dsh --bench store",
    },
    Row {
        name: "the textbook group commit of row 8's appenders, in a few lines: the same 10 tasks hand their lines (serialized beforehand) to a writer thread under a mutex and await a `oneshot`; the writer sleeps until all 10 are queued (it knows how many to wait for), writes, `fdatasync`s and answers each (per 10 events; the same rounds as row 8, alternated with it)",
        figure: field("durable", "durable", "plain_ns", "10 events"),
        baseline_name: "row 8's raw `write` + `fdatasync` loop, same rounds",
        baseline: field("durable", "durable", "raw_ns", "batch"),
        target: Target::Throughput,
        bench: "durable",
        command: "cargo bench -p dsh --bench durable",
    },
    Row {
        name: "row 8's durable session against that textbook group commit: what the session adds (its log, each line built, seqs, the rules that form groups without knowing how many appenders there are)",
        figure: field("durable", "durable", "group_ns", "10 events"),
        baseline_name: "the textbook group commit of the row above, same rounds",
        baseline: field("durable", "durable", "plain_ns", "10 events"),
        target: Target::Throughput,
        bench: "durable",
        command: "cargo bench -p dsh --bench durable",
    },
];

/// Parses a selection of rows, `12-15` or `1,4,12-15` (numbers as in the table, from 1).
pub fn parse_rows(spec: &str) -> Result<Vec<usize>, String> {
    let mut rows = Vec::new();
    for part in spec.split(',').map(str::trim) {
        let num = |t: &str| {
            t.trim()
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=ROWS.len()).contains(n))
                .ok_or_else(|| format!("`{t}` is not a row number (1-{})", ROWS.len()))
        };
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(part)?, num(part)?),
        };
        if a > b {
            return Err(format!("`{part}` is an empty range"));
        }
        rows.extend(a..=b);
    }
    rows.sort_unstable();
    rows.dedup();
    Ok(rows)
}

/// How a bench target's run went.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct TargetRun {
    /// The bench target.
    pub name: String,
    /// `None`: ran and exited 0; `Some(reason)`: absent, failed to build or failed to run.
    pub failure: Option<String>,
    /// Wall time of its run, in seconds.
    pub seconds: f64,
    /// The share of the processors' time the host took for others during its run (`steal` in
    /// /proc/stat), when it could be read: how quiet the machine was.
    #[serde(default)]
    pub steal: Option<f64>,
}

/// Everything a report is written from.
pub struct Run<'a> {
    /// The machine.
    pub machine: &'a Machine,
    /// The bench targets.
    pub targets: &'a [TargetRun],
    /// The figures.
    pub results: &'a Results,
    /// Wall time of the whole `cargo xtask bench`, build included, in seconds.
    pub total_seconds: f64,
}

fn format_time(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

fn format_bytes(b: f64) -> String {
    if b >= 1e6 {
        format!("{:.1} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.1} kB", b / 1e3)
    } else {
        format!("{b:.0} B")
    }
}

/// A figure's value (time in ns or bytes) and its text.
fn read(source: Source, results: &Results) -> Option<(f64, String)> {
    match source {
        Source::Criterion { id, per, unit } => {
            let e = results.get(id)?;
            let v = e.median_ns / per;
            Some((
                v,
                format!("{} / {unit} (±{:.0} %)", format_time(v), e.spread * 100.0),
            ))
        }
        Source::Bytes {
            bench,
            key,
            at,
            field,
        } => {
            let r = results.record(bench, key, &Value::from(at))?;
            let v = r.get(field)?.as_f64()?;
            Some((v, format_bytes(v)))
        }
        Source::Field {
            bench,
            figure,
            field,
            unit,
        } => {
            let r = results.record(bench, "figure", &Value::from(figure))?;
            let v = r.get(field)?.as_f64()?;
            // Alternated rounds (`benches/fixtures/alternate.rs`) give each side its spread.
            let spread = r
                .get(format!("{}_spread", field.trim_end_matches("_ns")))
                .and_then(Value::as_f64)
                .map_or_else(String::new, |f| format!(" (±{:.0} %)", f * 100.0));
            if unit.is_empty() {
                Some((v, format_bytes(v)))
            } else {
                Some((v, format!("{} / {unit}{spread}", format_time(v))))
            }
        }
    }
}

/// The ratio of a row, its text, and whether it meets the target.
pub fn ratio(row: &Row, figure: f64, baseline: f64) -> (f64, String, Option<bool>) {
    match row.target {
        Target::AtMost(max) => {
            let r = figure / baseline;
            (r, format!("{r:.2}×"), Some(r <= max))
        }
        Target::ThroughputAtLeast(min) => {
            let r = baseline / figure;
            (r, format!("{r:.2}× throughput"), Some(r >= min))
        }
        Target::Info => {
            let r = baseline / figure;
            (r, format!("{r:.2}× throughput"), None)
        }
        Target::InfoTimes => {
            let r = figure / baseline;
            (r, format!("{r:.2}×"), None)
        }
        Target::Throughput => {
            let r = baseline / figure;
            (r, format!("{r:.2}× throughput"), None)
        }
    }
}

fn target_text(t: Target) -> String {
    match t {
        Target::AtMost(max) => format!("≤ {max}×"),
        Target::ThroughputAtLeast(min) => format!("≥ {min}× throughput"),
        Target::Info => "— (target at 1M)".to_owned(),
        Target::InfoTimes | Target::Throughput => "—".to_owned(),
    }
}

/// The verdict column of a row.
fn verdict(row: &Row, run: &Run<'_>) -> (String, String, String, String) {
    let target = run.targets.iter().find(|t| t.name == row.bench);
    let fig = read(row.figure, run.results);
    let base = read(row.baseline, run.results);
    match (fig, base) {
        (Some((f, ftext)), Some((b, btext))) if b > 0.0 && f > 0.0 => {
            let (_, rtext, ok) = ratio(row, f, b);
            let v = match ok {
                Some(true) => "pass",
                Some(false) => "**MISS**",
                None => "info",
            };
            (ftext, btext, rtext, v.to_owned())
        }
        _ => {
            let why = match target.and_then(|t| t.failure.clone()) {
                Some(reason) => reason,
                None if target.is_none() => "not run".to_owned(),
                None => "no figure recorded".to_owned(),
            };
            ("—".into(), "—".into(), "—".into(), why)
        }
    }
}

/// The generated part of BENCHMARKS.md, up to and including [`NOTES_MARKER`].
pub fn render(run: &Run<'_>) -> String {
    let mut s = String::new();
    let m = run.machine;
    let _ = writeln!(
        s,
        "# Benchmarks\n\n\
         Written by `cargo xtask bench` (do not edit above the marker line). Every figure is \
         compared with a baseline measured in the same run, on the same machine, so the ratio \
         is what matters: wall time on 2 shared cores is noisy, ratios much less so. Times are \
         medians (± median absolute deviation): criterion's, or, where a row says so, over \
         rounds that alternate the figure and its baseline; no test asserts any of them.\n\n\
         Machine: {} processors (`nproc`), {} (/proc/cpuinfo). Commit {}, {}. The whole run, \
         build included, took {:.1} minutes.{}\n",
        m.nproc,
        m.cpu,
        m.commit,
        m.date,
        run.total_seconds / 60.0,
        steal_sentence(run.targets)
    );
    let _ = writeln!(
        s,
        "| # | benchmark | figure | baseline | ratio | target | result |\n| --- | --- | --- | --- | --- | --- | --- |"
    );
    for n in 1..=ROWS.len() {
        let _ = writeln!(s, "{}", table_line(n, run));
    }
    let _ = writeln!(s, "\n## Reproduce\n");
    let _ = writeln!(
        s,
        "Everything: `cargo xtask bench` (installs what the benches drive when the machine \
         lacks it, the components `cargo xtask test` installs; builds the bench targets in \
         release mode, runs them one after the other, rewrites this file). One row:\n"
    );
    for n in 1..=ROWS.len() {
        let _ = writeln!(s, "{}", reproduce_line(n));
    }
    let _ = writeln!(
        s,
        "\n## Run\n\n| bench target | wall time | processor time taken by the host (`steal`) | status |\n| --- | --- | --- | --- |"
    );
    for t in run.targets {
        let status = t.failure.clone().unwrap_or_else(|| "ok".to_owned());
        let steal = t
            .steal
            .map_or_else(|| "—".to_owned(), |f| format!("{:.1} %", f * 100.0));
        let _ = writeln!(
            s,
            "| `{}` | {:.0} s | {steal} | {status} |",
            t.name, t.seconds
        );
    }
    let _ = writeln!(s, "\n{NOTES_MARKER}");
    s
}

/// The machine line's last sentence: how much of the processors' time the host took while the
/// benches ran (each target's share weighted by its wall time), or nothing when unknown.
fn steal_sentence(targets: &[TargetRun]) -> String {
    let (stolen, seconds) = targets
        .iter()
        .filter_map(|t| t.steal.map(|f| (f * t.seconds, t.seconds)))
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
    if seconds <= 0.0 {
        return String::new();
    }
    format!(
        " While the benches ran, the host took {:.1} % of the processors' time for other \
         guests (`steal`, /proc/stat; per target under Run): the closer to 0, the quieter the run.",
        stolen / seconds * 100.0
    )
}

/// The table line of row `n` (from 1).
fn table_line(n: usize, run: &Run<'_>) -> String {
    let row = &ROWS[n - 1];
    let (f, b, r, v) = verdict(row, run);
    format!(
        "| {n} | {} | {f} | {}: {b} | {r} | {} | {v} |",
        row.name,
        row.baseline_name,
        target_text(row.target),
    )
}

/// The line of row `n` (from 1) in the list of commands that reproduce one row.
fn reproduce_line(n: usize) -> String {
    format!("{n}. `{}`", ROWS[n - 1].command)
}

/// `existing` (a BENCHMARKS.md) with the table and reproduce lines of `rows` replaced by what
/// `run` measured, or added after the last line of their list when missing. Everything else
/// (the other rows, the machine line of the last full run, the notes) is kept as it is.
pub fn update_rows(existing: &str, rows: &[usize], run: &Run<'_>) -> String {
    let mut lines: Vec<String> = existing.lines().map(str::to_owned).collect();
    for &n in rows {
        put(&mut lines, &format!("| {n} | "), "| ", table_line(n, run));
        put(&mut lines, &format!("{n}. `"), "", reproduce_line(n));
    }
    let mut out = lines.join("\n");
    if existing.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// Replaces the line starting with `key`, or inserts `line` after the last numbered line whose
/// list it belongs to (lines starting with `list` then a number), in number order.
/// Only the generated part (above [`NOTES_MARKER`]) is looked at.
fn put(lines: &mut Vec<String>, key: &str, list: &str, line: String) {
    let end = lines
        .iter()
        .position(|l| l == NOTES_MARKER)
        .unwrap_or(lines.len());
    if let Some(at) = lines[..end].iter().position(|l| l.starts_with(key)) {
        lines[at] = line;
        return;
    }
    let number = |l: &str| -> Option<usize> {
        let rest = l.strip_prefix(list)?;
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let after = &rest[digits.len()..];
        let shaped = if list.is_empty() {
            after.starts_with(". `")
        } else {
            after.starts_with(" | ")
        };
        if shaped { digits.parse().ok() } else { None }
    };
    let ours = key
        .strip_prefix(list)
        .and_then(|k| k.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|d| d.parse::<usize>().ok())
        .unwrap_or(usize::MAX);
    let at = lines[..end]
        .iter()
        .rposition(|l| number(l).is_some_and(|m| m < ours))
        .map(|i| i + 1);
    lines.insert(at.unwrap_or(end), line);
}

/// The hand-written notes of an existing BENCHMARKS.md (everything after the marker line).
pub fn notes_of(existing: &str) -> Option<&str> {
    existing
        .split_once(NOTES_MARKER)
        .map(|(_, notes)| notes.trim_start_matches('\n'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::Estimate;

    fn results(pairs: &[(&str, f64)]) -> Results {
        let mut r = Results::default();
        for (id, ns) in pairs {
            r.criterion.insert(
                (*id).to_owned(),
                Estimate {
                    median_ns: *ns,
                    spread: 0.0,
                },
            );
        }
        r
    }

    fn machine() -> Machine {
        Machine {
            nproc: "2".into(),
            cpu: "Test CPU".into(),
            commit: "abc".into(),
            date: "today".into(),
        }
    }

    /// A target that ran and exited 0.
    fn target(name: &str, seconds: f64, steal: Option<f64>) -> TargetRun {
        TargetRun {
            name: name.into(),
            failure: None,
            seconds,
            steal,
        }
    }

    /// Hands `f` a run of `targets` with `res`, on the test machine.
    fn with_run<R>(res: &Results, targets: &[TargetRun], f: impl FnOnce(&Run<'_>) -> R) -> R {
        let m = machine();
        f(&Run {
            machine: &m,
            targets,
            results: res,
            total_seconds: 60.0,
        })
    }

    /// The row whose name starts with `prefix`.
    fn row_named(prefix: &str) -> &'static Row {
        ROWS.iter().find(|r| r.name.starts_with(prefix)).unwrap()
    }

    #[test]
    fn time_ratio_divides_figure_by_baseline() {
        let row = &ROWS[0];
        let Target::AtMost(limit) = row.target else {
            panic!("row 1 has an at-most target");
        };
        let (r, _, ok) = ratio(row, 6.0, 2.0);
        assert_eq!(r, 3.0);
        assert_eq!(ratio(row, limit * 1.5, 1.0).2, Some(false));
        assert_eq!(ratio(row, limit * 0.5, 1.0).2, Some(true));
        assert_eq!(ok, Some(3.0 <= limit));
    }

    #[test]
    fn throughput_ratio_divides_baseline_by_figure() {
        let row = ROWS
            .iter()
            .find(|r| r.name.starts_with("registry"))
            .unwrap();
        let (r, _, ok) = ratio(row, 2.0, 1.0);
        assert_eq!(r, 0.5);
        assert_eq!(ok, Some(false));
    }

    #[test]
    fn per_unit_figures_divide_by_the_iteration_size() {
        // Row 2: one iteration is a step of 10,000 calls.
        let res = results(&[
            ("scheduler/step", 40_000_000.0),
            ("scheduler/staged", 20_000_000.0),
        ]);
        let targets = [target("pipeline", 1.0, Some(0.02))];
        let (f, b, r, v) = with_run(&res, &targets, |run| {
            verdict(row_named("step scheduler"), run)
        });
        assert_eq!(f, "4.00 µs / call (±0 %)");
        assert_eq!(b, "2.00 µs / call (±0 %)");
        assert_eq!(r, "2.00×");
        assert_eq!(v, "**MISS**");
    }

    #[test]
    fn an_alternated_record_gives_both_sides_with_their_spread_and_the_run_its_steal() {
        let res = Results {
            criterion: Default::default(),
            records: vec![serde_json::json!({
                "bench": "code_mode", "figure": "code-mode",
                "program_ns": 5_000_000.0, "program_spread": 0.04,
                "direct_ns": 2_000_000.0, "direct_spread": 0.1,
            })],
        };
        let targets = [
            target("code_mode", 30.0, Some(0.01)),
            target("bash", 10.0, Some(0.05)),
        ];
        let (f, b, r, v) = with_run(&res, &targets, |run| verdict(row_named("Code Mode"), run));
        assert_eq!(f, "5.00 ms / 1,000 calls (±4 %)");
        assert_eq!(b, "2.00 ms / 1,000 calls (±10 %)");
        assert_eq!(r, "2.50×");
        assert_eq!(v, "pass");
        let report = with_run(&res, &targets, render);
        // (30 s at 1 % + 10 s at 5 %) / 40 s.
        assert!(
            report.contains("the host took 2.0 % of the processors' time"),
            "{report}"
        );
        assert!(
            report.contains("| `bash` | 10 s | 5.0 % | ok |"),
            "{report}"
        );
    }

    #[test]
    fn rows_parse_as_numbers_and_ranges() {
        assert_eq!(parse_rows("12-14,1").unwrap(), vec![1, 12, 13, 14]);
        assert_eq!(parse_rows("3").unwrap(), vec![3]);
        assert!(parse_rows("0").is_err());
        assert!(parse_rows("5-4").is_err());
        assert!(parse_rows(&format!("{}", ROWS.len() + 1)).is_err());
    }

    #[test]
    fn updating_rows_keeps_every_other_line() {
        let mut res = Results::default();
        res.records.push(serde_json::json!({
            "bench": "bash", "figure": "true", "full_ns": 2e6, "bare_ns": 1e6,
            "full_spread": 0.0, "bare_spread": 0.0,
        }));
        let targets = [target("bash", 1.0, Some(0.02))];
        let n = 1 + ROWS
            .iter()
            .position(|r| r.name.starts_with("`bash` call of `true`"))
            .unwrap();
        let existing = format!(
            "# B\n\n| # | h |\n| --- | --- |\n| 1 | one |\n| {} | before |\n\n## Reproduce\n\n1. `a`\n\nnotes\n",
            n - 1
        );
        let once = with_run(&res, &targets, |run| update_rows(&existing, &[n], run));
        let lines: Vec<&str> = once.lines().collect();
        assert_eq!(lines[5], format!("| {} | before |", n - 1));
        assert!(lines[6].starts_with(&format!("| {n} | `bash` call of `true`")));
        assert!(
            lines[6].contains("| 2.00× | ≤ 1.5× | **MISS** |"),
            "{}",
            lines[6]
        );
        assert_eq!(lines[10], "1. `a`");
        assert_eq!(lines[11], format!("{n}. `cargo bench -p dsh --bench bash`"));
        assert!(once.ends_with("\nnotes\n"));
        // A second update replaces the lines it added.
        let twice = with_run(&res, &targets, |run| update_rows(&once, &[n], run));
        assert_eq!(twice, once);
    }

    #[test]
    fn a_missing_target_says_why_and_notes_survive() {
        let res = Results::default();
        let targets = [TargetRun {
            name: "code_mode".into(),
            failure: Some("blocked: Code Mode not landed".into()),
            seconds: 0.0,
            steal: None,
        }];
        let m = machine();
        let run = Run {
            machine: &m,
            targets: &targets,
            results: &res,
            total_seconds: 1.0,
        };
        let text = render(&run);
        let code_row = text
            .lines()
            .find(|l| l.contains("Code Mode: 1,000"))
            .unwrap();
        assert!(code_row.ends_with("| blocked: Code Mode not landed |"));
        let full = format!("{text}\n## Notes\nkept\n");
        assert_eq!(notes_of(&full), Some("## Notes\nkept\n"));
        // Rewriting is a fixed point: no blank line is added each time.
        let again = format!("{text}\n{}", notes_of(&full).unwrap());
        assert_eq!(again, full);
    }
}
