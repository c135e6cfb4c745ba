//! How `dsh mcp serve` stops (stdio, driven by the official Rust SDK's client): SIGINT, SIGTERM
//! and SIGHUP cancel the calls in progress, a call waiting for an exclusive one included, and
//! the log is closed once each has its result: exit 130 and a log that checks clean without a
//! repair. Killed outright (SIGKILL) while a call waits for an exclusive one, it leaves that
//! call in the log for repair to answer as never started. The upstream is the Python SDK's test
//! server (tests/mcp/server.py).

use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

use super::mcp_concurrent::{args, gateway_in, gateway_policy, runtime, wait_for_lines};
use super::support::*;

/// Starts the gateway in front of the test server, calls `hold` (read-only) and, once it runs,
/// an exclusive `slow`, which waits for `hold` to end before it may start; then sends `signal`
/// and returns the gateway's exit code and the log.
fn stopped_by(signal: &str) -> (Option<i32>, std::path::PathBuf, tempfile::TempDir) {
    let ws = tempfile::tempdir().unwrap();
    let policy = gateway_policy(ws.path(), "");
    let log = ws.path().join("gateway.jsonl");
    let events = ws.path().join("events.txt");
    let code = runtime().block_on(async {
        let gateway = gateway_in(ws.path(), &log, &policy, &events).await;
        let (client, pid) = (gateway.client.clone(), gateway.pid);
        let call = |name: &'static str, a: Value| {
            let peer = client.peer().clone();
            tokio::spawn(async move {
                peer.call_tool(CallToolRequestParams::new(name).with_arguments(args(a)))
                    .await
            })
        };
        let held = call("mcp__py__hold", json!({"seconds": 60, "tag": "a"}));
        wait_for_lines(&events, &["started a"]).await;
        let waiting = call("mcp__py__slow", json!({"seconds": 60}));
        // Requests are read in order: once this answer is back, `slow` has been received.
        client.peer().list_all_tools().await.expect("tools/list");
        let sent = std::process::Command::new("kill")
            .args([&format!("-{signal}"), &pid.to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let code = gateway.exit_code().await;
        // Both calls were answered before the gateway ended.
        for answered in [held, waiting] {
            let result = answered.await.expect("the call's task");
            assert!(result.is_ok(), "{result:?}");
        }
        code
    });
    (code, log, ws)
}

#[test]
fn mcp_gateway_stopped_by_a_signal_cancels_its_calls_and_closes_a_log_that_checks_clean() {
    super::mcp_concurrent::require_python_mcp();
    for signal in ["INT", "TERM", "HUP"] {
        let (code, log, _ws) = stopped_by(signal);
        assert_eq!(code, Some(130), "SIG{signal}: exit 130");
        let check = dsh_run(&["check", s(&log)]);
        assert_eq!(check.code, 0, "SIG{signal}: {}", check.both());
        let ev = events(&log);
        let calls = of_type(&ev, "tool/call");
        let results = of_type(&ev, "tool/result");
        assert_eq!(calls.len(), 2, "SIG{signal}: both calls recorded");
        assert_eq!(results.len(), 2, "SIG{signal}: each with its result");
        // Each call's result, found by its id (the results may be logged in either order).
        let result_of = |tool: &str| -> String {
            let id = calls
                .iter()
                .find(|c| c["data"]["name"] == tool)
                .map(|c| c["data"]["callId"].clone())
                .unwrap_or_else(|| panic!("SIG{signal}: no call of {tool}"));
            results
                .iter()
                .find(|r| r.to_string().contains(&format!("\"callId\":{id}")))
                .map(|r| r["data"].to_string())
                .unwrap_or_else(|| panic!("SIG{signal}: no result for {tool}"))
        };
        let (held, waiting) = (result_of("mcp__py__hold"), result_of("mcp__py__slow"));
        assert!(
            held.contains("\"ABORTED\""),
            "SIG{signal}: the running call is aborted: {held}"
        );
        assert!(
            waiting.contains("ABORTED_BEFORE_DISPATCH"),
            "SIG{signal}: the waiting call never started: {waiting}"
        );
        assert_eq!(
            of_type(&ev, "turn/end").len(),
            of_type(&ev, "turn/start").len()
        );
    }
}

#[test]
fn i4_mcp_gateway_killed_while_a_call_waits_for_an_exclusive_slot_leaves_it_in_the_log_answered_as_never_started()
 {
    super::mcp_concurrent::require_python_mcp();
    let ws = tempfile::tempdir().unwrap();
    let policy = gateway_policy(ws.path(), "");
    let log = ws.path().join("gateway.jsonl");
    let printed = ws.path().join("events.txt");
    runtime().block_on(async {
        let gateway = gateway_in(ws.path(), &log, &policy, &printed).await;
        let (client, pid) = (gateway.client.clone(), gateway.pid);
        for (name, a) in [
            ("mcp__py__hold", json!({"seconds": 60, "tag": "a"})),
            ("mcp__py__slow", json!({"seconds": 60})),
        ] {
            let peer = client.peer().clone();
            tokio::spawn(async move {
                let _ = peer
                    .call_tool(CallToolRequestParams::new(name).with_arguments(args(a)))
                    .await;
            });
            if name == "mcp__py__hold" {
                wait_for_lines(&printed, &["started a"]).await;
            }
        }
        // `slow` is exclusive: it waits for `hold`, recorded in the log while it waits.
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
        while !std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .any(|l| l.contains("\"assistant/message\"") && l.contains("mcp__py__slow"))
        {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the waiting call never reached the log"
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let killed = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        drop(client);
        drop(gateway);
    });
    let repair = dsh_run(&["repair", s(&log)]);
    assert_eq!(repair.code, 0, "{}", repair.both());
    let check = dsh_run(&["check", s(&log)]);
    assert_eq!(check.code, 0, "{}", check.both());
    let ev = events(&log);
    let slow = of_type(&ev, "tool/call")
        .into_iter()
        .find(|c| c["data"]["name"] == "mcp__py__slow")
        .map(|c| c["data"]["callId"].clone())
        .expect("the waiting call is in the log");
    let result = of_type(&ev, "tool/result")
        .into_iter()
        .map(|r| r.to_string())
        .find(|r| r.contains(&format!("\"callId\":{slow}")))
        .expect("the waiting call has its result");
    assert!(
        result.contains("did not run"),
        "answered as never started: {result}"
    );
}
