//! `dsh mcp serve` asking a client on MCP protocol `2026-07-28`, which forbids a server's
//! requests: the ask is a round of the call (`InputRequiredResult` with the approval form and a
//! `requestState`), answered by the client's retry. Driven by the official Rust SDK's client
//! (`rmcp`), which runs the rounds itself in `call_tool` and hands them over in
//! `call_tool_once`.

use std::path::Path;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResponse, ProtocolVersion};
use serde_json::{Value, json};

use super::mcp_concurrent::{Gateway, Probe, args, runtime, stdio_gateway, text};
use super::support::*;

/// A workspace whose policy asks before every `echo`, and the gateway's arguments for it.
fn asking_workspace() -> (tempfile::TempDir, Vec<String>) {
    let ws = tempfile::tempdir().unwrap();
    let policy = ws.path().join("policy.toml");
    std::fs::write(&policy, "[permissions]\nask = [\"echo\"]\n").unwrap();
    let args = [
        "--workspace",
        s(ws.path()),
        "--session",
        s(&ws.path().join("gateway.jsonl")),
        "--policy",
        s(&policy),
        "--demo-tools",
    ]
    .map(str::to_owned)
    .to_vec();
    (ws, args)
}

fn probe(answer: bool) -> Probe {
    Probe {
        answer: Some(answer),
        protocol: Some(ProtocolVersion::V_2026_07_28),
        ..Probe::default()
    }
}

async fn start(args: &[String], ws: &Path, probe: Probe) -> Gateway {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    stdio_gateway(&args, &ws.join("events"), probe).await
}

fn echo(text: &str) -> CallToolRequestParams {
    CallToolRequestParams::new("echo").with_arguments(args(json!({"text": text})))
}

/// The log's calls and their results: exactly one result per call, checked clean.
fn logged(ws: &Path) -> Vec<Value> {
    let log = ws.join("gateway.jsonl");
    let ev = events(&log);
    assert_paired(&ev);
    assert_checks_clean(&log);
    ev
}

#[test]
fn mcp_a_2026_07_28_client_is_asked_in_a_round_and_only_its_allow_runs_the_call_once() {
    for allow in [true, false] {
        let (ws, gateway_args) = asking_workspace();
        let (result, asked) = runtime().block_on(async {
            let gateway = start(&gateway_args, ws.path(), probe(allow)).await;
            let result = tokio::time::timeout(
                Duration::from_secs(30),
                gateway.client.call_tool(echo("in a round")),
            )
            .await
            .expect("the call ended")
            .expect("a result");
            let asked = gateway.client.service().asked.lock().clone();
            gateway.close().await;
            (result, asked)
        });
        // Asked once, through the round (the client answers no server request of this protocol).
        assert_eq!(asked.len(), 1, "{asked:?}");
        assert!(
            asked[0].contains("echo"),
            "the question names the tool: {asked:?}"
        );
        let ev = logged(ws.path());
        let calls = call_ids(&ev);
        assert_eq!(calls.len(), 1, "one call however many rounds: {calls:?}");
        let logged = result_of(&ev, &calls[0]);
        if allow {
            assert_ne!(result.is_error, Some(true), "{result:?}");
            assert_eq!(text(&result), "in a round");
            assert!(!logged.is_error, "{logged:?}");
        } else {
            assert_eq!(result.is_error, Some(true), "{result:?}");
            assert!(logged.is_error, "{logged:?}");
        }
    }
}

#[test]
fn mcp_a_request_state_is_good_for_one_retry_of_the_same_tool_and_nothing_else() {
    let (ws, gateway_args) = asking_workspace();
    runtime().block_on(async {
        let gateway = start(&gateway_args, ws.path(), probe(true)).await;
        let client = &gateway.client;
        let first = client.call_tool_once(echo("once")).await.expect("a round");
        let CallToolResponse::InputRequired(round) = first else {
            panic!("expected the approval form, got {first:?}");
        };
        let state = round.request_state.clone().expect("a request state");
        let form = round
            .input_requests
            .as_ref()
            .and_then(|r| r.get("approval"))
            .expect("the approval form");
        assert!(
            serde_json::to_string(form).unwrap().contains("allow"),
            "{form:?}"
        );
        let allow = json!({"action": "accept", "content": {"allow": true}});
        let retry = |tool: &str, state: &str| {
            let mut params = if tool == "echo" {
                echo("once")
            } else {
                CallToolRequestParams::new(tool.to_owned())
                    .with_arguments(args(json!({"seconds": 0})))
            };
            params.request_state = Some(state.to_owned());
            params.input_responses = Some([("approval".to_owned(), allow.clone())].into());
            params
        };
        // Another tool, or a state the gateway never gave: refused, and the call still waits.
        for (tool, state) in [("sleep", state.as_str()), ("echo", "not-a-state")] {
            let refused = client.call_tool_once(retry(tool, state)).await;
            assert!(refused.is_err(), "{tool} {state}: {refused:?}");
        }
        // The right retry runs it ...
        let done = client
            .call_tool_once(retry("echo", &state))
            .await
            .expect("the result");
        let CallToolResponse::Complete(result) = done else {
            panic!("expected the result, got {done:?}");
        };
        assert_eq!(text(&result), "once");
        // ... and the state is spent.
        let again = client.call_tool_once(retry("echo", &state)).await;
        assert!(again.is_err(), "{again:?}");
        gateway.close().await;
    });
    let ev = logged(ws.path());
    assert_eq!(
        call_ids(&ev).len(),
        1,
        "the refused retries started no call"
    );
}

#[test]
fn mcp_a_2026_07_28_client_that_never_retries_has_the_call_denied_with_one_result() {
    let (ws, mut gateway_args) = asking_workspace();
    gateway_args.extend(["--ask-ttl-secs".to_owned(), "1".to_owned()]);
    let log = ws.path().join("gateway.jsonl");
    runtime().block_on(async {
        let gateway = start(&gateway_args, ws.path(), probe(true)).await;
        let first = gateway
            .client
            .call_tool_once(echo("forgotten"))
            .await
            .expect("a round");
        assert!(
            matches!(first, CallToolResponse::InputRequired(_)),
            "{first:?}"
        );
        // The client walks away from the round; the call gets its result once the state expires.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while results(&events(&log)).is_empty() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the parked call never ended"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        gateway.close().await;
    });
    let ev = logged(ws.path());
    let calls = call_ids(&ev);
    assert_eq!(calls.len(), 1);
    assert!(result_of(&ev, &calls[0]).is_error, "denied");
}
