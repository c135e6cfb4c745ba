//! `dsh mcp serve` with calls that overlap, driven by the official Rust SDK's client (`rmcp`):
//! concurrent calls run side by side (proved by a tool that waits for the others to arrive,
//! never by timing), each gets its own result, a cancel reaches only its call and the upstream
//! server hears it, asks go to the client that made the call, and an upstream server's progress
//! and list changes reach the gateway's client. The upstream is the Python SDK's test server
//! (tests/mcp/server.py); these tests fail, naming the install, when the SDK is missing.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ClientRequest,
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability,
    FormElicitationCapability, ProgressNotificationParam, ProtocolVersion, Request,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, NotificationContext, PeerRequestOptions, RequestContext,
    RoleClient, RunningService,
};
use serde_json::{Value, json};

use super::mcp_serve::HttpServer;
use super::support::*;

fn server_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/server.py")
}

pub(super) fn require_python_mcp() {
    let probe = std::process::Command::new("python3")
        .args(["-c", "import mcp.server.mcpserver"])
        .output()
        .expect("python3 runs");
    assert!(
        probe.status.success(),
        "the Python `mcp` SDK is missing: `pip install mcp==2.3.0` (`cargo xtask test` installs \
         it): {}",
        String::from_utf8_lossy(&probe.stderr)
    );
}

/// A policy with the test server as `py`, and `extra` after it.
pub(super) fn gateway_policy(dir: &Path, extra: &str) -> PathBuf {
    let policy = dir.join("gateway.toml");
    std::fs::write(
        &policy,
        format!(
            "[mcp.servers.py]\ncommand = \"python3\"\nargs = [{:?}]\n{extra}",
            server_script().display().to_string()
        ),
    )
    .unwrap();
    policy
}

pub(super) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// What a test client heard, and how it answers questions.
#[derive(Default)]
pub(super) struct Probe {
    pub(super) progress: parking_lot::Mutex<Vec<ProgressNotificationParam>>,
    pub(super) list_changed: tokio::sync::Notify,
    /// Declares elicitation and answers every question with this (`None`: no elicitation).
    pub(super) answer: Option<bool>,
    /// Each question waits here before it is answered.
    pub(super) questions_meet: Option<Arc<tokio::sync::Barrier>>,
    pub(super) asked: parking_lot::Mutex<Vec<String>>,
    /// The protocol it speaks (default: 2025-11-25, the newest reached with `initialize`).
    pub(super) protocol: Option<ProtocolVersion>,
}

impl rmcp::ClientHandler for Probe {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        if self.answer.is_some() {
            let mut elicitation = ElicitationCapability::new();
            elicitation.form = Some(FormElicitationCapability::new());
            capabilities.elicitation = Some(elicitation);
        }
        // By default the newest protocol a client can reach with `initialize` (2026-07-28
        // forbids the server's requests and moves list changes to a subscription).
        ClientConfig::new(capabilities, rmcp::model::Implementation::new("probe", "0"))
            .with_protocol_version(
                self.protocol
                    .clone()
                    .unwrap_or(ProtocolVersion::V_2025_11_25),
            )
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().push(params);
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.list_changed.notify_one();
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        if let ElicitRequestParams::FormElicitationParams { message, .. } = &request {
            self.asked.lock().push(message.clone());
        }
        if let Some(barrier) = &self.questions_meet {
            barrier.wait().await;
        }
        let allow = self.answer.unwrap_or(false);
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(json!({"allow": allow})))
    }
}

pub(super) type Client = Arc<RunningService<RoleClient, Probe>>;

/// `dsh mcp serve ARGS` over stdio with `probe` as its client; `events` is the test server's
/// events file.
pub(super) async fn stdio_gateway(args: &[&str], events: &Path, probe: Probe) -> Gateway {
    let mut cmd: tokio::process::Command = dsh().into();
    cmd.args(["mcp", "serve"])
        .args(args)
        .env("DSH_TEST_EVENTS", events)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let mut child = cmd.spawn().expect("dsh starts");
    let pid = child.id().expect("a pid");
    let (stdout, stdin) = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let exited = tokio::spawn(async move { child.wait().await.ok().and_then(|st| st.code()) });
    // A client on 2026-07-28 starts with `server/discover` (that protocol has no `initialize`).
    let client = match probe.protocol.clone() {
        Some(v) if v >= ProtocolVersion::V_2026_07_28 => {
            let discover = ClientLifecycleMode::Discover {
                preferred_versions: vec![v],
            };
            probe.serve_with_lifecycle((stdout, stdin), discover).await
        }
        _ => probe.serve((stdout, stdin)).await,
    };
    Gateway {
        client: Arc::new(client.expect("the MCP handshake")),
        pid,
        exited,
    }
}

/// `dsh mcp serve` over stdio with `Probe::default()` as its client, in workspace `ws`, its log
/// at `log` and its policy at `policy`; `events` is the test server's events file.
pub(super) async fn gateway_in(ws: &Path, log: &Path, policy: &Path, events: &Path) -> Gateway {
    stdio_gateway(
        &[
            "--workspace",
            s(ws),
            "--session",
            s(log),
            "--policy",
            s(policy),
        ],
        events,
        Probe::default(),
    )
    .await
}

/// A running `dsh mcp serve` and its client.
pub(super) struct Gateway {
    pub(super) client: Client,
    pub(super) pid: u32,
    /// dsh's exit code once it ended (`None`: killed by a signal, or its status unread).
    exited: tokio::task::JoinHandle<Option<i32>>,
}

impl Gateway {
    /// Closes the connection, as a client that is done does, and waits for dsh to end (it
    /// closes its log then).
    pub(super) async fn close(self) {
        self.client.cancellation_token().cancel();
        tokio::time::timeout(Duration::from_secs(20), self.exited)
            .await
            .expect("dsh ended once its client left")
            .unwrap();
    }

    /// Waits (at most 30 s) for dsh to end on its own, and returns its exit code.
    pub(super) async fn exit_code(self) -> Option<i32> {
        tokio::time::timeout(Duration::from_secs(30), self.exited)
            .await
            .expect("dsh ended")
            .unwrap()
    }
}

pub(super) fn args(v: Value) -> serde_json::Map<String, Value> {
    v.as_object().cloned().unwrap()
}

pub(super) fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("")
}

/// Waits (at most 20 s) until the events file holds every one of `lines`.
pub(super) async fn wait_for_lines(events: &Path, lines: &[&str]) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(events).unwrap_or_default();
        if lines.iter().all(|l| text.lines().any(|x| x == *l)) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the events file never held {lines:?}: {text}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The log's `tool/call` ids by the `tag` argument.
fn calls_by_tag(events: &[Value]) -> std::collections::HashMap<String, String> {
    of_type(events, "tool/call")
        .into_iter()
        .filter_map(|e| {
            let args: Value = serde_json::from_str(e["data"]["arguments"].as_str()?).ok()?;
            Some((
                args["tag"].as_str()?.to_owned(),
                e["data"]["callId"].as_str()?.to_owned(),
            ))
        })
        .collect()
}

#[test]
fn mcp_gateway_runs_concurrent_client_calls_side_by_side_each_with_its_own_result() {
    require_python_mcp();
    let ws = tempfile::tempdir().unwrap();
    let policy = gateway_policy(ws.path(), "");
    let log = ws.path().join("gateway.jsonl");
    let events = ws.path().join("events.txt");
    const N: usize = 4;
    runtime().block_on(async {
        let gateway = gateway_in(ws.path(), &log, &policy, &events).await;
        let client = gateway.client.clone();
        // Each call waits until all N are in progress at once: had the gateway taken them one
        // at a time, the first would come back "alone" after 15 s.
        let calls =
            (0..N).map(|i| {
                let client = client.clone();
                async move {
                    client
                        .peer()
                        .call_tool(CallToolRequestParams::new("mcp__py__meet").with_arguments(
                            args(json!({"group": "g", "count": N, "tag": format!("call{i}")})),
                        ))
                        .await
                        .expect("a result")
                }
            });
        let results = futures::future::join_all(calls).await;
        for (i, result) in results.iter().enumerate() {
            assert_ne!(result.is_error, Some(true), "{result:?}");
            assert_eq!(
                text(result),
                format!("call{i} met {N}"),
                "each its own result"
            );
        }
        drop(client);
        gateway.close().await;
    });
    let check = dsh_run(&["check", s(&log)]);
    assert_eq!(check.code, 0, "{}", check.both());
    let ev = events_when_closed(&log, N);
    // Every call recorded and answered once, each in a step of its own; overlapping, they
    // share one turn.
    let by_tag = calls_by_tag(&ev);
    assert_eq!(by_tag.len(), N, "{by_tag:?}");
    for (tag, id) in &by_tag {
        let result = result_of(&ev, id);
        assert_eq!(result.text, format!("{tag} met {N}"), "{result:?}");
    }
    let steps: std::collections::HashSet<(u64, u64)> = of_type(&ev, "tool/call")
        .into_iter()
        .map(|e| {
            (
                e["data"]["turn"].as_u64().unwrap(),
                e["data"]["step"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(steps.len(), N, "one step per call: {steps:?}");
    assert_eq!(of_type(&ev, "turn/start").len(), 1, "one shared turn");
    assert_eq!(of_type(&ev, "turn/end").len(), 1);
}

/// The log's events once it holds `n` results (the gateway writes its last events as the
/// client's connection closes).
fn events_when_closed(log: &Path, n: usize) -> Vec<Value> {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let ev = events(log);
        if of_type(&ev, "tool/result").len() >= n && !of_type(&ev, "turn/end").is_empty() {
            return ev;
        }
        assert!(std::time::Instant::now() < deadline, "{ev:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn mcp_gateway_cancel_of_one_concurrent_call_cancels_only_it_and_the_upstream_hears_notifications_cancelled()
 {
    require_python_mcp();
    let ws = tempfile::tempdir().unwrap();
    let policy = gateway_policy(ws.path(), "");
    let log = ws.path().join("gateway.jsonl");
    let events = ws.path().join("events.txt");
    runtime().block_on(async {
        let gateway = gateway_in(ws.path(), &log, &policy, &events).await;
        let client = gateway.client.clone();
        // A holds for a minute; B waits until the upstream saw A cancelled.
        let a = client
            .peer()
            .send_cancellable_request(
                ClientRequest::CallToolRequest(Request::new(
                    CallToolRequestParams::new("mcp__py__hold")
                        .with_arguments(args(json!({"seconds": 60, "tag": "a"}))),
                )),
                PeerRequestOptions::no_options(),
            )
            .await
            .expect("A sent");
        let peer = client.peer().clone();
        let b = tokio::spawn(async move {
            peer.call_tool(
                CallToolRequestParams::new("mcp__py__gate")
                    .with_arguments(args(json!({"line": "cancelled a", "tag": "b"}))),
            )
            .await
        });
        // Both are running upstream at once; then the client cancels A.
        wait_for_lines(&events, &["started a", "started b"]).await;
        a.cancel(Some("the user changed their mind".into()))
            .await
            .expect("cancel sent");
        let b = tokio::time::timeout(Duration::from_secs(20), b)
            .await
            .expect("B answered")
            .unwrap()
            .expect("B's result");
        assert_ne!(b.is_error, Some(true), "{b:?}");
        assert_eq!(
            text(&b),
            "b saw cancelled a",
            "B ran on, and saw A cancelled upstream"
        );
        // The upstream server is the same process (it was not restarted: a cancel, not a
        // closed connection, ended A's handler) and still serves.
        let after = client
            .peer()
            .call_tool(
                CallToolRequestParams::new("mcp__py__add")
                    .with_arguments(args(json!({"a": 1, "b": 2}))),
            )
            .await
            .expect("a result");
        assert_eq!(text(&after), "1 + 2 = 3");
        drop(client);
        gateway.close().await;
    });
    let text = std::fs::read_to_string(&events).unwrap();
    assert_eq!(
        text.lines()
            .filter(|l| l.contains("cancelled") && !l.starts_with("started"))
            .collect::<Vec<_>>(),
        ["notifications/cancelled for a", "cancelled a"],
        "the upstream heard notifications/cancelled for A alone: {text}"
    );
    let ev = events_when_closed(&log, 3);
    let by_tag = calls_by_tag(&ev);
    let a = result_of(&ev, &by_tag["a"]);
    assert!(a.is_error, "{a:?}");
    assert_eq!(a.code.as_deref(), Some("ABORTED"), "{a:?}");
    let b = result_of(&ev, &by_tag["b"]);
    assert!(!b.is_error, "{b:?}");
    let check = dsh_run(&["check", s(&log)]);
    assert_eq!(check.code, 0, "{}", check.both());
}

#[test]
fn mcp_gateway_asks_each_client_about_its_own_call_while_both_questions_are_open() {
    require_python_mcp();
    let ws = tempfile::tempdir().unwrap();
    let policy = gateway_policy(ws.path(), "[permissions]\nask = [\"mcp__py__add\"]\n");
    let log = ws.path().join("gateway.jsonl");
    let server = HttpServer::start(
        &[
            "--workspace",
            s(ws.path()),
            "--session",
            s(&log),
            "--policy",
            s(&policy),
        ],
        "",
    );
    let url = server.url.clone();
    let (yes, no) = runtime().block_on(async move {
        // Neither question is answered until both are open: the two calls wait for approval at
        // the same time, each with its own client.
        let both = Arc::new(tokio::sync::Barrier::new(2));
        let connect = |answer: bool| {
            let url = url.clone();
            let both = both.clone();
            async move {
                let probe = Probe {
                    answer: Some(answer),
                    questions_meet: Some(both),
                    ..Probe::default()
                };
                let transport =
                    rmcp::transport::StreamableHttpClientTransport::from_uri(url.as_str());
                Arc::new(probe.serve(transport).await.expect("the MCP handshake"))
            }
        };
        let (allowing, refusing) = tokio::join!(connect(true), connect(false));
        let call = |client: Arc<RunningService<RoleClient, Probe>>, a: i64| async move {
            let result = client
                .peer()
                .call_tool(
                    CallToolRequestParams::new("mcp__py__add")
                        .with_arguments(args(json!({"a": a, "b": 1}))),
                )
                .await
                .expect("a result");
            let asked = client.service().asked.lock().clone();
            (result, asked)
        };
        let (yes, no) = tokio::time::timeout(
            Duration::from_secs(30),
            futures::future::join(call(allowing, 100), call(refusing, 200)),
        )
        .await
        .expect("both questions were open at once and answered");
        (yes, no)
    });
    let (result, asked) = yes;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_eq!(text(&result), "100 + 1 = 101");
    assert_eq!(asked.len(), 1, "{asked:?}");
    let (result, asked_no) = no;
    assert_eq!(result.is_error, Some(true), "{result:?}");
    assert_eq!(asked_no.len(), 1, "{asked_no:?}");
    let (code, stderr) = server.interrupt();
    assert_eq!(code, 0, "{stderr}");
    let ev = events(&log);
    let ids: Vec<(String, String)> = of_type(&ev, "tool/call")
        .into_iter()
        .map(|e| {
            (
                e["data"]["callId"].as_str().unwrap().to_owned(),
                e["data"]["arguments"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let id_of = |a: &str| {
        ids.iter()
            .find(|(_, args)| args.contains(a))
            .map(|(id, _)| id.clone())
            .unwrap()
    };
    // Each client was asked about its own call (the question names the call).
    assert!(asked[0].contains(&id_of("100")), "{asked:?} {ids:?}");
    assert!(asked_no[0].contains(&id_of("200")), "{asked_no:?} {ids:?}");
    assert!(!result_of(&ev, &id_of("100")).is_error);
    assert!(result_of(&ev, &id_of("200")).is_error);
    let check = dsh_run(&["check", s(&log)]);
    assert_eq!(check.code, 0, "{}", check.both());
}

#[test]
fn mcp_gateway_passes_upstream_progress_and_list_changed_on_to_its_client() {
    require_python_mcp();
    let ws = tempfile::tempdir().unwrap();
    let policy = gateway_policy(ws.path(), "");
    let log = ws.path().join("gateway.jsonl");
    let events = ws.path().join("events.txt");
    runtime().block_on(async {
        let gateway = gateway_in(ws.path(), &log, &policy, &events).await;
        let client = gateway.client.clone();
        let done = client
            .peer()
            .call_tool(
                CallToolRequestParams::new("mcp__py__progressing")
                    .with_arguments(args(json!({"seconds": 0.3, "steps": 3}))),
            )
            .await
            .expect("a result");
        assert_eq!(text(&done), "done after 3 steps");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while client.service().progress.lock().len() < 3 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let progress = client.service().progress.lock().clone();
        let seen: Vec<(f64, Option<f64>, Option<String>)> = progress
            .iter()
            .map(|p| (p.progress, p.total, p.message.clone()))
            .collect();
        assert_eq!(
            seen,
            [
                (1.0, Some(3.0), Some("step 1".to_owned())),
                (2.0, Some(3.0), Some("step 2".to_owned())),
                (3.0, Some(3.0), Some("step 3".to_owned())),
            ],
            "the upstream's progress, with this client's own token"
        );
        let before = client.peer().list_all_tools().await.unwrap();
        assert!(!before.iter().any(|t| t.name == "mcp__py__extra"));
        let grown = client
            .peer()
            .call_tool(CallToolRequestParams::new("mcp__py__grow"))
            .await
            .expect("a result");
        assert_eq!(text(&grown), "grown");
        tokio::time::timeout(
            Duration::from_secs(20),
            client.service().list_changed.notified(),
        )
        .await
        .expect("the gateway said its tool list changed");
        let after = client.peer().list_all_tools().await.unwrap();
        assert!(
            after.iter().any(|t| t.name == "mcp__py__extra"),
            "{after:?}"
        );
        assert!(
            !after.iter().any(|t| t.name == "mcp__py__shout"),
            "{after:?}"
        );
        drop(client);
        gateway.close().await;
    });
}

/// A `/proc/PID/status` field in bytes (`VmRSS`, `VmHWM`).
fn status_bytes(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .unwrap()
}

#[test]
fn mcp_gateway_passes_a_huge_upstream_result_on_cut_without_holding_many_copies_of_it() {
    require_python_mcp();
    let ws = tempfile::tempdir().unwrap();
    let policy = gateway_policy(ws.path(), "");
    let log = ws.path().join("gateway.jsonl");
    let events = ws.path().join("events.txt");
    // The SDK sends a text result twice (as content and as structured content): 14 MB.
    const MB: u64 = 7;
    let (before, after, shown) = runtime().block_on(async {
        let gateway = gateway_in(ws.path(), &log, &policy, &events).await;
        let (client, pid) = (gateway.client.clone(), gateway.pid);
        let small = client
            .peer()
            .call_tool(
                CallToolRequestParams::new("mcp__py__add")
                    .with_arguments(args(json!({"a": 1, "b": 2}))),
            )
            .await
            .unwrap();
        assert_eq!(text(&small), "1 + 2 = 3");
        let before = status_bytes(pid, "VmHWM");
        let huge = client
            .peer()
            .call_tool(
                CallToolRequestParams::new("mcp__py__huge")
                    .with_arguments(args(json!({"megabytes": MB}))),
            )
            .await
            .unwrap();
        let after = status_bytes(pid, "VmHWM");
        drop(client);
        gateway.close().await;
        (before, after, text(&huge))
    });
    assert!(
        shown.len() < 31_000,
        "{} bytes reached the client",
        shown.len()
    );
    assert!(
        shown.contains("all of it is in "),
        "{}",
        &shown[shown.len() - 200..]
    );
    let grown = after.saturating_sub(before);
    eprintln!(
        "peak resident memory grew by {} MB for a {MB} MB result",
        grown / 1_000_000
    );
    // The message (twice the text) is held while it is checked and read, parsed into the
    // SDK's result, and its text moved on, not copied again: a bounded multiple of the message,
    // and a message is at most 16 MiB (a longer one is refused), so this is the most any result
    // costs. Measured: 77-91 MB for this 14 MB message.
    let message = 2 * MB * 1_000_000;
    assert!(
        grown < 8 * message,
        "peak resident memory grew by {grown} bytes for a {message}-byte message"
    );
}

#[test]
fn mcp_gateway_killed_mid_concurrent_calls_leaves_a_log_that_repair_closes_and_check_passes() {
    require_python_mcp();
    let ws = tempfile::tempdir().unwrap();
    let policy = gateway_policy(ws.path(), "");
    let log = ws.path().join("gateway.jsonl");
    let events = ws.path().join("events.txt");
    runtime().block_on(async {
        let gateway = gateway_in(ws.path(), &log, &policy, &events).await;
        let (client, pid) = (gateway.client.clone(), gateway.pid);
        for tag in ["a", "b"] {
            let peer = client.peer().clone();
            tokio::spawn(async move {
                let _ = peer
                    .call_tool(
                        CallToolRequestParams::new("mcp__py__hold")
                            .with_arguments(args(json!({"seconds": 60, "tag": tag}))),
                    )
                    .await;
            });
        }
        wait_for_lines(&events, &["started a", "started b"]).await;
        let killed = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        drop(client);
        drop(gateway);
    });
    // Two steps of one turn were open, each with a call in progress.
    let check = dsh_run(&["check", s(&log)]);
    assert_ne!(check.code, 0, "{}", check.both());
    let repair = dsh_run(&["repair", s(&log)]);
    assert_eq!(repair.code, 0, "{}", repair.both());
    let check = dsh_run(&["check", s(&log)]);
    assert_eq!(check.code, 0, "{}", check.both());
    let ev = super::support::events(&log);
    assert_eq!(of_type(&ev, "step/start").len(), 2);
    assert_eq!(of_type(&ev, "step/end").len(), 2, "both steps closed");
    assert_eq!(of_type(&ev, "turn/end").len(), 1);
    let transcript = dsh_run(&["transcript", s(&log)]);
    assert_eq!(transcript.code, 0, "{}", transcript.both());
}
