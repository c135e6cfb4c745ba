//! Spec D4's Decision: a host may opt into a hard backstop that stops awaiting a body that
//! ignores its signal, after a grace period; the result is recorded as the timeout or abort it
//! was. Without it, a started body is always awaited (CAN-15 covers that default).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use dsh_core::{AbortController, Json, ToolDefinition, ToolOutput, ToolRegistry};
use dsh_guard::{Hooks, TimeoutPolicy};
use dsh_scheduler::{Runtime, RuntimeConfig};
use dsh_test_support::input;
use serde_json::json;

/// A body that never looks at its signal and would run for an hour; `dropped` turns true when
/// its future is dropped (what kills a child spawned with kill-on-drop).
fn stubborn(budget: Option<f64>, dropped: Arc<AtomicBool>) -> ToolDefinition {
    struct OnDrop(Arc<AtomicBool>);
    impl Drop for OnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let mut b = ToolDefinition::builder("stubborn", "ignores its signal")
        .output(ToolOutput::string())
        .execute(move |_ctx| {
            let guard = OnDrop(dropped.clone());
            async move {
                let _guard = guard;
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok(Json::string("finished"))
            }
        });
    if let Some(ms) = budget {
        b = b.timeout_ms_from_config(ms);
    }
    b.build().expect("builds")
}

fn runtime(def: ToolDefinition, backstop: Option<Duration>) -> Runtime {
    let registry = ToolRegistry::new();
    registry.register(def).expect("registers").keep();
    let hooks = Hooks::new();
    TimeoutPolicy::new(registry.clone()).install(&hooks).keep();
    Runtime::new(registry, hooks).with_config(RuntimeConfig {
        hard_backstop: backstop,
        ..RuntimeConfig::default()
    })
}

#[tokio::test(start_paused = true)]
async fn d4_backstop_records_a_stubborn_body_as_the_timeout_it_was() {
    let dropped = Arc::new(AtomicBool::new(false));
    let rt = runtime(
        stubborn(Some(100.0), dropped.clone()),
        Some(Duration::from_millis(500)),
    );
    let result = rt.execute(input("c1", "stubborn", json!({}))).await;
    assert!(result.is_error());
    assert_eq!(
        result.error().and_then(|e| e.code()),
        Some("TOOL_TIMEOUT"),
        "{result:?}"
    );
    assert!(
        dropped.load(Ordering::SeqCst),
        "the body's future was dropped"
    );
}

#[tokio::test(start_paused = true)]
async fn d4_backstop_records_a_stubborn_body_as_the_abort_it_was() {
    let dropped = Arc::new(AtomicBool::new(false));
    let rt = runtime(
        stubborn(None, dropped.clone()),
        Some(Duration::from_millis(500)),
    );
    let caller = AbortController::new();
    let c = caller.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        c.cancel();
    });
    let result = rt
        .execute(input("c1", "stubborn", json!({})).with_signal(caller.signal()))
        .await;
    assert_eq!(
        result.error().and_then(|e| e.code()),
        Some("ABORTED"),
        "{result:?}"
    );
    assert!(dropped.load(Ordering::SeqCst));
}

#[tokio::test(start_paused = true)]
async fn d4_without_a_backstop_a_stubborn_body_is_still_awaited() {
    let dropped = Arc::new(AtomicBool::new(false));
    let rt = Arc::new(runtime(stubborn(Some(100.0), dropped.clone()), None));
    let task = tokio::spawn({
        let rt = rt.clone();
        async move { rt.execute(input("c1", "stubborn", json!({}))).await }
    });
    // Far past the budget and any grace: the call is still pending, its body still alive.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(!task.is_finished());
    assert!(!dropped.load(Ordering::SeqCst));
    task.abort();
}
