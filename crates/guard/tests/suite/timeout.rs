//! TMO-01..12: the timeout policy wrapper, driven through `ExecuteNext` with a fake terminal and
//! paused time.

use std::sync::Arc;
use std::time::Duration;

use dsh_core::{
    AbortController, AbortReason, CancelCause, Dispatch, ExecuteNext, ExecuteWrapper, Failure,
    Signal, ToolExecution, ToolResult, codes, timeout_of,
};
use dsh_guard::{GuardConfig, Hooks, PluginDescriptor, Scope, TimeoutPolicy};
use serde_json::json;

use super::support::{FakeTerminal, exec_with, ok_result, registry, tool};

fn chain(policy: TimeoutPolicy) -> Vec<Arc<dyn ExecuteWrapper>> {
    vec![Arc::new(policy)]
}

async fn run(
    wrappers: &[Arc<dyn ExecuteWrapper>],
    terminal: &FakeTerminal,
    exec: &Arc<ToolExecution>,
) -> ToolResult {
    ExecuteNext::new(wrappers, terminal)
        .run(Dispatch::new(exec.clone()))
        .await
        .expect("no wrapper failure")
}

/// A body that returns `ok` at once.
fn fast() -> FakeTerminal {
    FakeTerminal::new(|d| {
        let e = d.exec().clone();
        Box::pin(async move { ok_result(&e, "ok") })
    })
}

/// A cooperative body that resolves `ok` only when its signal aborts.
fn cooperative() -> FakeTerminal {
    FakeTerminal::new(|d| {
        let e = d.exec().clone();
        let s = d.signal().clone();
        Box::pin(async move {
            s.aborted().await;
            ok_result(&e, "ok")
        })
    })
}

fn budgeted(ms: f64) -> TimeoutPolicy {
    TimeoutPolicy::new(registry(vec![
        tool("slow", Some(ms), None),
        tool("plain", None, None),
    ]))
}

fn call(name: &str, signal: Signal) -> Arc<ToolExecution> {
    exec_with("c1", name, json!({}), None, signal)
}

#[tokio::test(start_paused = true)]
async fn tmo_01_no_budget_delegates_with_the_callers_own_signal() {
    let ctl = AbortController::new();
    let e = call("plain", ctl.signal());
    let t = fast();
    let r = run(&chain(budgeted(100.0)), &t, &e).await;
    assert!(!r.is_error());
    assert!(Signal::same(&t.last_signal(), e.signal()));
}

#[tokio::test(start_paused = true)]
async fn tmo_02_a_fast_budgeted_tool_returns_exactly_its_result() {
    let e = call("slow", AbortController::new().signal());
    let r = run(&chain(budgeted(10_000.0)), &fast(), &e).await;
    assert_eq!(
        serde_json::to_value(&r).unwrap(),
        json!({"content": [{"type": "text", "text": "ok"}], "isError": false, "value": [{"type": "text", "text": "ok"}]})
    );
}

#[tokio::test(start_paused = true)]
async fn tmo_03_the_body_sees_the_derived_deadline_signal() {
    let ctl = AbortController::new();
    let e = call("slow", ctl.signal());
    let t = fast();
    run(&chain(budgeted(10_000.0)), &t, &e).await;
    let body = t.last_signal();
    assert!(!Signal::same(&body, e.signal()));
    // It is derived from the caller's: the caller's abort reaches it.
    ctl.cancel();
    assert_eq!(
        body.reason(),
        Some(AbortReason::Cancelled(CancelCause::User))
    );
}

#[tokio::test(start_paused = true)]
async fn tmo_04_after_dispatch_the_execution_still_carries_the_callers_signal() {
    let ctl = AbortController::new();
    let e = call("slow", ctl.signal());
    let caller = ctl.signal();
    run(&chain(budgeted(10_000.0)), &fast(), &e).await;
    // What post-execute reads (`exec.signal()`) is the caller's, never the wrapper's.
    assert!(Signal::same(e.signal(), &caller));
    assert!(!e.signal().is_aborted());
}

fn timed_out_100() -> serde_json::Value {
    json!({
        "content": [{"type": "text", "text": "Error: tool call timed out after 100ms"}],
        "isError": true,
        "error": {"message": "tool call timed out after 100ms", "info": {"name": "ToolTimeoutError", "code": "TOOL_TIMEOUT"}}
    })
}

#[tokio::test(start_paused = true)]
async fn tmo_05_the_deadline_replaces_a_cooperative_success() {
    let e = call("slow", AbortController::new().signal());
    let started = tokio::time::Instant::now();
    let r = run(&chain(budgeted(100.0)), &cooperative(), &e).await;
    assert_eq!(started.elapsed(), Duration::from_millis(100));
    assert_eq!(serde_json::to_value(&r).unwrap(), timed_out_100());
}

#[tokio::test(start_paused = true)]
async fn tmo_06_classification_follows_the_signal_not_the_result() {
    let t = FakeTerminal::new(|d| {
        let s = d.signal().clone();
        Box::pin(async move {
            s.aborted().await;
            ToolResult::failure(Failure::harness("WEB_ABORTED", "web fetch aborted"))
        })
    });
    let e = call("slow", AbortController::new().signal());
    let r = run(&chain(budgeted(100.0)), &t, &e).await;
    assert_eq!(serde_json::to_value(&r).unwrap(), timed_out_100());
}

#[tokio::test(start_paused = true)]
async fn tmo_07_a_caller_abort_first_is_not_a_timeout() {
    let ctl = AbortController::new();
    let e = call("slow", ctl.signal());
    let t = cooperative();
    let wrappers = chain(budgeted(100.0));
    let abort = async {
        tokio::time::sleep(Duration::from_millis(40)).await;
        ctl.abort(AbortReason::Cancelled(CancelCause::Other(
            "user cancelled".into(),
        )));
    };
    let (r, ()) = tokio::join!(run(&wrappers, &t, &e), abort);
    // The wrapper hands back the body's own result; the runtime, seeing the caller's signal
    // aborted after the body started, turns this success into ABORTED (`tool call aborted`).
    assert!(!r.is_error(), "not a timeout: {r:?}");
    assert!(e.signal().is_aborted());
    assert_eq!(
        timeout_of(&t.last_signal(), Some(codes::TOOL_TIMEOUT)),
        None
    );
    assert_eq!(
        serde_json::to_value(ToolResult::failure(Failure::aborted())).unwrap()["error"],
        json!({"message": "tool call aborted", "info": {"name": "AbortError", "code": "ABORTED"}})
    );
}

#[tokio::test(start_paused = true)]
async fn tmo_07b_a_failure_after_a_caller_abort_is_kept_as_is() {
    let ctl = AbortController::new();
    ctl.cancel();
    let t = FakeTerminal::new(|_| {
        Box::pin(async {
            ToolResult::failure(Failure::harness("WEB_ABORTED", "web fetch aborted"))
        })
    });
    let e = call("slow", ctl.signal());
    let r = run(&chain(budgeted(100.0)), &t, &e).await;
    assert_eq!(r.error().and_then(Failure::code), Some("WEB_ABORTED"));
}

#[tokio::test(start_paused = true)]
async fn tmo_08_the_first_cause_wins_over_a_later_caller_abort() {
    let ctl = AbortController::new();
    let caller = ctl.clone();
    let t = FakeTerminal::new(move |d| {
        let e = d.exec().clone();
        let s = d.signal().clone();
        let caller = caller.clone();
        Box::pin(async move {
            s.aborted().await; // the deadline at 100 ms
            tokio::time::sleep(Duration::from_millis(20)).await; // slow cleanup...
            caller.cancel(); // ...during which the caller aborts
            tokio::time::sleep(Duration::from_millis(20)).await;
            ok_result(&e, "ok")
        })
    });
    let e = call("slow", ctl.signal());
    let r = run(&chain(budgeted(100.0)), &t, &e).await;
    assert!(e.signal().is_aborted());
    assert_eq!(
        r.error().map(Failure::message),
        Some("tool call timed out after 100ms")
    );
    assert_eq!(r.error().and_then(Failure::code), Some("TOOL_TIMEOUT"));
}

// TMO-09: the code is what a deadline puts on the body's signal and on the result, and only a
// deadline puts it there.
#[tokio::test(start_paused = true)]
async fn tmo_09_the_deadline_and_only_the_deadline_carries_the_timeout_code() {
    let t = cooperative();
    let e = call("slow", AbortController::new().signal());
    let r = run(&chain(budgeted(100.0)), &t, &e).await;
    assert_eq!(r.error().and_then(Failure::code), Some(TimeoutPolicy::CODE));
    assert_eq!(TimeoutPolicy::CODE, codes::TOOL_TIMEOUT);
    assert!(timeout_of(&t.last_signal(), Some(TimeoutPolicy::CODE)).is_some());
    // A call without a budget, cancelled by its caller, carries it nowhere.
    let ctl = AbortController::new();
    ctl.cancel();
    let e = call("plain", ctl.signal());
    let r = run(&chain(budgeted(100.0)), &t, &e).await;
    assert_eq!(r.error().and_then(Failure::code), None);
    assert_eq!(
        timeout_of(&t.last_signal(), Some(TimeoutPolicy::CODE)),
        None
    );
}

#[tokio::test(start_paused = true)]
async fn tmo_10_unloading_the_policy_restores_the_callers_signal() {
    let hooks = Hooks::new();
    let handle = budgeted(10_000.0).install(&hooks);
    let ctl = AbortController::new();
    let e = call("slow", ctl.signal());
    let t = fast();
    let snap = hooks.snapshot(&[]);
    run(&snap.wrappers, &t, &e).await;
    assert!(!Signal::same(&t.last_signal(), e.signal()));
    handle.dispose();
    let snap = hooks.snapshot(&[]);
    run(&snap.wrappers, &t, &e).await;
    assert!(Signal::same(&t.last_signal(), e.signal()));
}

#[test]
fn tmo_11_the_plugin_descriptor() {
    assert_eq!(
        TimeoutPolicy::DESCRIPTOR,
        PluginDescriptor {
            name: "timeout-policy",
            requires: &["tools"],
        }
    );
    assert_eq!(TimeoutPolicy::NAME, "timeout-policy");
}

#[tokio::test(start_paused = true)]
async fn tmo_12_loaded_through_the_generic_loader_a_budgeted_tool_succeeds() {
    let reg = registry(vec![tool("five", Some(5_000.0), None)]);
    let config = GuardConfig::from_toml("").unwrap();
    let hooks = Hooks::new();
    let installed = config.install(&hooks, &reg).unwrap();
    assert_eq!(installed.handles.len(), 1);
    let e = call("five", AbortController::new().signal());
    let t = FakeTerminal::new(|d| {
        let e = d.exec().clone();
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            ok_result(&e, "done")
        })
    });
    let r = run(&hooks.snapshot(&[]).wrappers, &t, &e).await;
    assert_eq!(r.first_text(), Some("done"));
    assert!(
        !Signal::same(&t.last_signal(), e.signal()),
        "the budget was armed"
    );
}

#[tokio::test(start_paused = true)]
async fn a_configured_override_outranks_the_declared_budget() {
    let policy = budgeted(10_000.0).with_override("slow", 100).unwrap();
    assert_eq!(policy.budget_for("slow", None), Some(100));
    let e = call("slow", AbortController::new().signal());
    let r = run(&chain(policy.clone()), &cooperative(), &e).await;
    assert_eq!(serde_json::to_value(&r).unwrap(), timed_out_100());
    // An override also gives a budget to a tool that declares none.
    let p2 = policy.with_override("plain", 50).unwrap();
    assert_eq!(p2.budget_for("plain", None), Some(50));
    assert!(budgeted(1.0).with_override("x", 0).is_err());
}

#[tokio::test(start_paused = true)]
async fn an_outer_deadline_firing_first_reads_as_upstream_cancellation() {
    // TMO-33 applied to the policy: an outer wrapper's own deadline is not this policy's.
    struct Outer;
    #[async_trait::async_trait]
    impl ExecuteWrapper for Outer {
        async fn around(
            &self,
            call: Dispatch,
            next: ExecuteNext<'_>,
        ) -> Result<ToolResult, Failure> {
            let d = dsh_core::deadline(Some(call.signal()), 50, "OUTER_TIMEOUT").unwrap();
            next.run(call.with_signal(d.signal().clone())).await
        }
    }
    let wrappers: Vec<Arc<dyn ExecuteWrapper>> = vec![Arc::new(Outer), Arc::new(budgeted(100.0))];
    let e = call("slow", AbortController::new().signal());
    let r = run(&wrappers, &cooperative(), &e).await;
    assert!(
        !r.is_error(),
        "the outer deadline is not TOOL_TIMEOUT: {r:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_scoped_definition_supplies_the_budget_for_its_agent() {
    let reg = registry(vec![tool("t", None, None)]);
    reg.register_scoped(&super::support::agent("A"), tool("t", Some(100.0), None))
        .unwrap()
        .keep();
    let policy = TimeoutPolicy::new(reg);
    assert_eq!(policy.budget_for("t", None), None);
    assert_eq!(
        policy.budget_for("t", Some(&super::support::agent("A"))),
        Some(100)
    );
    let hooks = Hooks::new();
    hooks.on_execute(Scope::Global, policy).keep();
    let e = exec_with("c1", "t", json!({}), Some("A"), Signal::never());
    let r = run(&hooks.snapshot(&[]).wrappers, &cooperative(), &e).await;
    assert_eq!(r.error().and_then(Failure::code), Some("TOOL_TIMEOUT"));
}
