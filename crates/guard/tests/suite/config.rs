//! The generic loader path: one TOML text, validated on load, installed in a fixed order.

use std::sync::Arc;
use std::time::Duration;

use dsh_core::{Dispatch, ExecuteNext, Failure, PreNext, PreToolDecision, Signal, ToolResult};
use dsh_guard::{ApprovalPolicy, GuardConfig, GuardError, Hooks};
use serde_json::json;

use super::support::{FakeTerminal, exec_with, registry, tool};

const FULL: &str = r#"
[permissions]
deny = ["bash(rm *)"]

[timeout]
tools = { bash = 100 }

[retry]
attempts = 3
base_delay_ms = 10
max_delay_ms = 20

[metrics]

[approval]
policy = "never"
"#;

#[tokio::test(start_paused = true)]
async fn a_full_configuration_installs_metrics_outermost_then_retry_then_timeout() {
    let config = GuardConfig::from_toml(FULL).unwrap();
    assert_eq!(config.approval().policy, ApprovalPolicy::Never);
    assert_eq!(config.retry().unwrap().max_attempts(), 3);
    let reg = registry(vec![tool("bash", None, Some("command"))]);
    let hooks = Hooks::new();
    let installed = config.install(&hooks, &reg).unwrap();
    assert_eq!(installed.handles.len(), 4);
    let metrics = installed.metrics.clone().unwrap();

    // Permission rules are a pre-execute listener.
    let snap = hooks.snapshot(&[]);
    let e = exec_with(
        "c1",
        "bash",
        json!({"command": "rm -rf /"}),
        None,
        Signal::never(),
    );
    assert!(matches!(
        PreNext::new(&snap.pre).run(&e).await.unwrap(),
        PreToolDecision::Deny { .. }
    ));

    // A cooperative body that ends only when aborted: the 100 ms override fires, a timeout is
    // not retryable so there is one attempt, and metrics records TOOL_TIMEOUT.
    let t = FakeTerminal::new(|d| {
        let s = d.signal().clone();
        Box::pin(async move {
            s.aborted().await;
            ToolResult::failure(Failure::new("stopped"))
        })
    });
    let e = exec_with(
        "c2",
        "bash",
        json!({"command": "sleep 9"}),
        None,
        Signal::never(),
    );
    let r = ExecuteNext::new(&snap.wrappers, &t)
        .run(Dispatch::new(e))
        .await
        .unwrap();
    assert_eq!(r.error().and_then(Failure::code), Some("TOOL_TIMEOUT"));
    assert_eq!(t.calls(), 1);
    let m = metrics.snapshot();
    assert_eq!(
        m.tool("bash").unwrap().by_outcome.get("TOOL_TIMEOUT"),
        Some(&1)
    );
    assert_eq!(
        m.tool("bash").unwrap().latency.max_micros,
        Duration::from_millis(100).as_micros() as u64
    );

    // Dropping what was installed removes all of it.
    drop(installed);
    let snap = hooks.snapshot(&[]);
    assert!(snap.pre.is_empty() && snap.wrappers.is_empty());
}

#[tokio::test(start_paused = true)]
async fn retry_sits_outside_timeout_so_each_attempt_gets_its_own_budget() {
    let config = GuardConfig::from_toml(
        "[timeout]\ntools = { t = 50 }\n[retry]\nattempts = 3\nbase_delay_ms = 5\nmax_delay_ms = 5\n",
    )
    .unwrap();
    let hooks = Hooks::new();
    let _installed = config
        .install(&hooks, &registry(vec![tool("t", None, None)]))
        .unwrap();
    // Fails retryably at once twice, then needs 40 ms: within a fresh 50 ms budget.
    let n = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let t = FakeTerminal::new(move |d| {
        let e = d.exec().clone();
        let i = n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Box::pin(async move {
            if i < 2 {
                return ToolResult::failure(Failure::new("flaky").retryable());
            }
            tokio::time::sleep(Duration::from_millis(40)).await;
            super::support::ok_result(&e, "ok")
        })
    });
    let e = exec_with("c", "t", json!({}), None, Signal::never());
    let r = ExecuteNext::new(&hooks.snapshot(&[]).wrappers, &t)
        .run(Dispatch::new(e))
        .await
        .unwrap();
    assert_eq!(r.first_text(), Some("ok"));
    assert_eq!(t.calls(), 3);
}

#[test]
fn an_empty_configuration_is_the_timeout_policy_alone() {
    let config = GuardConfig::from_toml("").unwrap();
    assert!(config.permissions().is_none());
    assert!(config.retry().is_none());
    assert_eq!(config.approval().policy, ApprovalPolicy::Ask);
    let hooks = Hooks::new();
    let i = config.install(&hooks, &registry(vec![])).unwrap();
    assert_eq!(i.handles.len(), 1);
    assert!(i.metrics.is_none());
    let off = GuardConfig::from_toml("[timeout]\nenabled = false\n").unwrap();
    assert!(
        off.install(&hooks, &registry(vec![]))
            .unwrap()
            .handles
            .is_empty()
    );
}

fn line_error(text: &str) -> (Option<usize>, String) {
    match GuardConfig::from_toml(text).unwrap_err() {
        GuardError::Config { line, message } => (line, message),
        GuardError::PermissionRule { origin, rule, .. } => (None, format!("{origin} {rule}")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn bad_values_are_errors_naming_the_key_and_line() {
    let (line, msg) = line_error("[timeout]\n\n[timeout.tools]\nbash = 0\n");
    assert_eq!(line, Some(4));
    assert!(msg.contains("timeout.tools.bash"), "{msg}");
    let (line, msg) = line_error("[timeout]\ntools = { bash = -5 }\n");
    assert_eq!(line, Some(2));
    assert!(msg.contains("timeout.tools.bash"), "{msg}");
    let (line, msg) = line_error("[approval]\npolicy = \"always\"\n");
    assert_eq!(line, Some(2));
    assert!(
        msg.contains("approval policy must be one of \"ask\" or \"never\""),
        "{msg}"
    );
    let (line, msg) = line_error("[retry]\nattempts = 3\nbackoff = 1\n");
    assert_eq!(line, Some(3));
    assert!(msg.contains("backoff"), "{msg}");
    let (_, msg) = line_error("[permissions]\nask = [\"bash(\"]\n");
    assert!(
        msg.contains("permissions.ask (line 2)") && msg.contains("bash("),
        "{msg}"
    );
    let (line, _) = line_error("[retry\nattempts = 3\n");
    assert_eq!(line, Some(1));
    let err = GuardConfig::from_toml("[retry]\nattempts = 0\n").unwrap_err();
    assert!(err.to_string().contains("retry.attempts"), "{err}");
}
