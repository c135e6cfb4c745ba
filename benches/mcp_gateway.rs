//! `dsh mcp serve` in front of an MCP server beside the same client calling that server
//! directly, measured in the same run (`cargo xtask bench` turns them into a ratio of
//! BENCHMARKS.md):
//!
//! - `mcp/direct`: an `rmcp` client calls the `add` tool of the Python SDK's test server
//!   (tests/mcp/server.py, over stdio);
//! - `mcp/gateway`: the same client calls `mcp__py__add` on `dsh mcp serve` (stdio), which runs
//!   it through the whole pipeline (its session log a JSON Lines file in the temporary
//!   directory, on disk: each event made durable) and calls the same server over stdio;
//! - `mcp/gateway-shm`: the same with the log on `/dev/shm` (memory: what the gateway costs
//!   without waiting for the disk);
//! - `mcp/relay`: the same client calls `add` through a bare relay, a process that copies bytes
//!   between its stdio and the server's and does nothing else (this benchmark's own executable,
//!   run again with [`RELAY`]): what any gateway in a process of its own pays for the hop alone,
//!   before it parses a message;
//! - `mcp/relay-durable`: the same relay, which also appends each chunk it forwards, either way,
//!   to a file on disk and waits for `fdatasync` before forwarding it: the hop plus the two disk
//!   waits of a call recorded before it runs and answered only once its result is recorded (what
//!   the gateway promises: a crash never loses a call, nor a result the client saw), the least a
//!   gateway keeping those promises can cost, before it parses a message;
//! - then, once, 1,000 concurrent `echo` calls from one client through `dsh mcp serve --http`
//!   (log on disk): the server's peak resident memory (`VmHWM`) against its resident memory
//!   once started, and how many calls the log pairs with a result, printed as a `DSH-BENCH`
//!   record.
//!
//! The Python `mcp` SDK must be installed (`cargo xtask test` installs it); without it the
//! benchmark stops, naming it. Timing is wall time measured inside a task on the multi-thread
//! runtime; no assertion is made about it.

// A benchmark whose setup fails must stop loudly.
#![allow(clippy::expect_used)]

#[path = "fixtures/pipeline.rs"]
#[allow(dead_code)] // The fixtures serve several benchmarks; this one uses part of them.
mod fixtures;

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};

use fixtures::{in_task, tokio_runtime};

type Client = Arc<RunningService<RoleClient, ()>>;

/// A client of `command args` over stdio (the process dies with the runtime).
fn connect(rt: &tokio::runtime::Runtime, command: &str, args: &[String]) -> Client {
    let command = command.to_owned();
    let args = args.to_vec();
    rt.block_on(async move {
        let mut child = tokio::process::Command::new(&command)
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("the server starts");
        let stdout = child.stdout.take().expect("stdout");
        let stdin = child.stdin.take().expect("stdin");
        // The process is owned by a task that lives as long as the runtime.
        tokio::spawn(async move {
            let _ = child.wait().await;
        });
        Arc::new(().serve((stdout, stdin)).await.expect("the MCP handshake"))
    })
}

/// `iters` calls of `tool`, one after the other, timed inside a task.
fn calls(
    rt: &tokio::runtime::Runtime,
    client: &Client,
    tool: &'static str,
    iters: u64,
) -> Duration {
    let client = client.clone();
    in_task(rt, move || async move {
        let args = serde_json::json!({"a": 2, "b": 3});
        let args = args.as_object().cloned().expect("an object");
        let start = Instant::now();
        for _ in 0..iters {
            let result = client
                .peer()
                .call_tool(CallToolRequestParams::new(tool).with_arguments(args.clone()))
                .await
                .expect("a result");
            assert_ne!(result.is_error, Some(true), "{result:?}");
        }
        start.elapsed()
    })
}

/// `dsh mcp serve` in front of the test server, its policy and log in `dir`.
fn start_gateway(rt: &tokio::runtime::Runtime, server: &str, dir: &Path) -> Client {
    let policy = dir.join("policy.toml");
    std::fs::write(
        &policy,
        format!("[mcp.servers.py]\ncommand = \"python3\"\nargs = [{server:?}]\n"),
    )
    .expect("the policy");
    connect(
        rt,
        env!("CARGO_BIN_EXE_dsh"),
        &[
            "mcp".into(),
            "serve".into(),
            "--workspace".into(),
            dir.display().to_string(),
            "--session".into(),
            dir.join("gateway.jsonl").display().to_string(),
            "--policy".into(),
            policy.display().to_string(),
        ],
    )
}

/// The first argument that makes this executable a bare relay (see [`relay`]) instead of the
/// benchmark: `--relay-to COMMAND ARGS...`.
const RELAY: &str = "--relay-to";
/// The same with a durable log: `--relay-durable-to LOG COMMAND ARGS...`.
const RELAY_DURABLE: &str = "--relay-durable-to";

/// Copies bytes from our stdin to `command args`'s stdin and from its stdout to our stdout, each
/// direction on a thread of its own with blocking reads and writes as they come (no parsing, no
/// buffering across a read), until either side closes. With `log`, each chunk is first appended
/// to that file and made durable (`fdatasync`), either way.
fn relay(log: Option<&str>, command: &str, args: &[String]) -> ! {
    use std::io::{Read, Write};
    let mut child = std::process::Command::new(command)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the server starts");
    let mut to_child = child.stdin.take().expect("stdin");
    let mut from_child = child.stdout.take().expect("stdout");
    let open = |path: &str| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("the relay's log")
    };
    let (mut log, mut answers) = (log.map(open), log.map(open));
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut buf = vec![0u8; 1 << 16];
        while let Ok(n) = stdin.read(&mut buf) {
            if n == 0 {
                break;
            }
            if let Some(log) = log.as_mut() {
                log.write_all(&buf[..n]).expect("the relay's log");
                log.sync_data().expect("the relay's log");
            }
            if to_child.write_all(&buf[..n]).is_err() {
                break;
            }
        }
    });
    let mut stdout = std::io::stdout().lock();
    let mut buf = vec![0u8; 1 << 16];
    while let Ok(n) = from_child.read(&mut buf) {
        if n == 0 {
            break;
        }
        if let Some(log) = answers.as_mut() {
            log.write_all(&buf[..n]).expect("the relay's log");
            log.sync_data().expect("the relay's log");
        }
        if stdout.write_all(&buf[..n]).is_err() || stdout.flush().is_err() {
            break;
        }
    }
    let _ = child.kill();
    std::process::exit(0)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some(RELAY) => relay(None, &args[1], &args[2..]),
        Some(RELAY_DURABLE) => relay(Some(&args[1]), &args[2], &args[3..]),
        _ => {}
    }
    let probe = std::process::Command::new("python3")
        .args(["-c", "import mcp.server.mcpserver"])
        .status()
        .expect("python3 runs");
    assert!(
        probe.success(),
        "the Python `mcp` SDK is missing: `pip install mcp==2.3.0` (`cargo xtask test` installs it)"
    );
    let server = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/mcp/server.py")
        .display()
        .to_string();
    let rt = tokio_runtime();
    let direct = connect(&rt, "python3", std::slice::from_ref(&server));
    let me = std::env::current_exe().expect("this executable");
    let relayed = connect(
        &rt,
        &me.display().to_string(),
        &[RELAY.to_owned(), "python3".to_owned(), server.clone()],
    );
    let on_disk = tempfile::tempdir().expect("a temporary directory");
    let relayed_durable = connect(
        &rt,
        &me.display().to_string(),
        &[
            RELAY_DURABLE.to_owned(),
            on_disk.path().join("relay.log").display().to_string(),
            "python3".to_owned(),
            server.clone(),
        ],
    );
    let in_memory = tempfile::tempdir_in("/dev/shm").expect("a directory in /dev/shm");
    let gateway = start_gateway(&rt, &server, on_disk.path());
    let gateway_shm = start_gateway(&rt, &server, in_memory.path());

    let mut c = Criterion::default().configure_from_args();
    let mut g = c.benchmark_group("mcp");
    g.sampling_mode(SamplingMode::Flat)
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    g.bench_function("direct", |b| {
        b.iter_custom(|iters| calls(&rt, &direct, "add", iters));
    });
    g.bench_function("relay", |b| {
        b.iter_custom(|iters| calls(&rt, &relayed, "add", iters));
    });
    g.bench_function("relay-durable", |b| {
        b.iter_custom(|iters| calls(&rt, &relayed_durable, "add", iters));
    });
    g.bench_function("gateway", |b| {
        b.iter_custom(|iters| calls(&rt, &gateway, "mcp__py__add", iters));
    });
    g.bench_function("gateway-shm", |b| {
        b.iter_custom(|iters| calls(&rt, &gateway_shm, "mcp__py__add", iters));
    });
    g.finish();
    c.final_summary();
    drop((direct, relayed, relayed_durable, gateway, gateway_shm));
    concurrent_over_http(&rt, on_disk.path());
}

/// How many calls [`concurrent_over_http`] makes at once.
const CONCURRENT: usize = 1_000;

/// A `/proc/PID/status` field in bytes (`VmRSS`, `VmHWM`).
fn status_bytes(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .expect("the field")
}

/// 1,000 calls at once through the HTTP gateway; prints the `DSH-BENCH` record.
fn concurrent_over_http(rt: &tokio::runtime::Runtime, dir: &Path) {
    use rmcp::transport::StreamableHttpClientTransport;
    use std::io::BufRead;
    let log = dir.join("http.jsonl");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_dsh"))
        .args(["mcp", "serve", "--http", "127.0.0.1:0", "--demo-tools"])
        .arg("--workspace")
        .arg(dir)
        .arg("--session")
        .arg(&log)
        .env_remove("DSH_MCP_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dsh starts");
    let mut lines = std::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    let url = loop {
        let line = lines.next().expect("dsh listens").expect("a line");
        if let Some(url) = line.strip_prefix("dsh mcp serve: listening on ") {
            break url.to_owned();
        }
    };
    let drain = std::thread::spawn(move || lines.map_while(Result::ok).count());
    let pid = child.id();
    let idle = status_bytes(pid, "VmRSS");
    let took = in_task(rt, move || async move {
        let client = Arc::new(
            ().serve(StreamableHttpClientTransport::from_uri(url))
                .await
                .expect("the MCP handshake"),
        );
        let start = Instant::now();
        let calls = (0..CONCURRENT).map(|i| {
            let client = client.clone();
            async move {
                let args = serde_json::json!({"text": format!("call {i}")});
                client
                    .peer()
                    .call_tool(
                        CallToolRequestParams::new("echo")
                            .with_arguments(args.as_object().cloned().expect("an object")),
                    )
                    .await
                    .expect("a result")
            }
        });
        let results = futures::future::join_all(calls).await;
        let took = start.elapsed();
        assert!(results.iter().all(|r| r.is_error != Some(true)));
        took
    });
    let peak = status_bytes(pid, "VmHWM");
    let stopped = std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(stopped.success());
    child.wait().expect("dsh ends");
    drain.join().expect("stderr drained");
    let text = std::fs::read_to_string(&log).expect("the log");
    let count = |kind: &str| {
        text.lines()
            .filter(|l| l.contains(&format!("\"type\":\"{kind}\"")))
            .count()
    };
    let (called, answered) = (count("tool/call"), count("tool/result"));
    assert_eq!(
        (called, answered),
        (CONCURRENT, CONCURRENT),
        "every call paired"
    );
    println!(
        "DSH-BENCH {}",
        serde_json::json!({
            "bench": "mcp_http",
            "calls": CONCURRENT,
            "seconds": took.as_secs_f64(),
            "peak_rss_bytes": peak,
            "idle_rss_bytes": idle,
            "paired": answered,
        })
    );
}
