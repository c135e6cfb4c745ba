//! An upstream server's progress reaches the gateway's client whole, the last notification
//! included, whether the upstream speaks stdio or streamable HTTP. A server sends its last
//! progress right before its result; rmcp hands notifications to a task of their own, so unless
//! dsh takes them in the order they are read the call can end first and the notification be
//! dropped as belonging to no call (over HTTP about one call in two did).

use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use serde_json::json;

use super::mcp_client::http_server;
use super::mcp_concurrent::{args, gateway_in, gateway_policy, runtime, text};

#[test]
fn mcp_gateway_passes_on_every_upstream_progress_the_last_one_included_over_stdio_and_http() {
    super::mcp_concurrent::require_python_mcp();
    let (_server, port) = http_server();
    let calls = 12;
    for server in ["py", "web"] {
        let ws = tempfile::tempdir().unwrap();
        let policy = gateway_policy(
            ws.path(),
            &format!("[mcp.servers.web]\nurl = \"http://127.0.0.1:{port}/mcp\"\n"),
        );
        let log = ws.path().join("gateway.jsonl");
        let events = ws.path().join("events.txt");
        let tool = format!("mcp__{server}__progressing");
        runtime().block_on(async {
            let gateway = gateway_in(ws.path(), &log, &policy, &events).await;
            let client = gateway.client.clone();
            for _ in 0..calls {
                let done = client
                    .peer()
                    .call_tool(
                        CallToolRequestParams::new(tool.clone())
                            .with_arguments(args(json!({"seconds": 0.02, "steps": 2}))),
                    )
                    .await
                    .expect("a result");
                assert_eq!(text(&done), "done after 2 steps");
            }
            // This client hears notifications in tasks of their own too: wait for them.
            let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
            while client.service().progress.lock().len() < 2 * calls
                && tokio::time::Instant::now() < deadline
            {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let last = client
                .service()
                .progress
                .lock()
                .iter()
                .filter(|p| p.progress == 2.0 && p.message.as_deref() == Some("step 2"))
                .count();
            assert_eq!(last, calls, "{server}: every call's last progress arrived");
            gateway.close().await;
        });
    }
}
