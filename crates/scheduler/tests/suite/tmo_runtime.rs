//! TMO-01..12 through `Runtime::execute` with dsh-guard's `TimeoutPolicy` installed as a
//! `tools/execute` wrapper (spec D4), on tokio's paused clock where time matters; plus a
//! property test that the first abort cause decides between `ABORTED` and `TOOL_TIMEOUT`.

// Tests state their expectations with `expect`: a panic is the failure report.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use dsh_core::codes;
use dsh_core::{
    AbortController, AbortReason, CancelCause, Failure, Json, PostToolDecision, Signal,
    ToolDefinition, ToolExecution, ToolOutput, ToolRegistry, ToolResult,
};
use dsh_guard::{GuardConfig, Hooks, Scope, TimeoutPolicy};
use dsh_scheduler::Runtime;
use dsh_test_support::{PostFn, Recorder, input, shape};
use parking_lot::Mutex;
use proptest::prelude::*;
use serde_json::{Value, json};
use tokio::time::Instant;

fn text(s: &str) -> Value {
    json!({"type": "text", "text": s})
}

/// A runtime over `tools` with the timeout policy installed; the handle removes the policy.
fn with_policy(
    tools: impl IntoIterator<Item = ToolDefinition>,
) -> (Runtime, dsh_guard::HookHandle) {
    let registry = ToolRegistry::new();
    for t in tools {
        registry.register(t).expect("registers").keep();
    }
    let hooks = Hooks::new();
    let handle = TimeoutPolicy::new(registry.clone()).install(&hooks);
    (Runtime::new(registry, hooks), handle)
}

/// How a test tool's body behaves.
#[derive(Clone)]
enum Body {
    /// Returns `[text ok]` at once.
    Fast,
    /// Waits for its signal, then `cleanup` more, then returns `[text ok]`.
    Cooperative { cleanup: Duration },
    /// Waits for its signal, then fails with a harness error of its own.
    FailsOnAbort,
}

/// A content-block tool with an optional budget that records the signal its body saw.
fn tool(budget: Option<f64>, body: Body, seen: &Arc<Mutex<Option<Signal>>>) -> ToolDefinition {
    let seen = seen.clone();
    let mut b = ToolDefinition::builder("fetch", "a budgeted tool")
        .output(ToolOutput::content_blocks())
        .execute(move |c| {
            *seen.lock() = Some(c.signal().clone());
            let body = body.clone();
            async move {
                match body {
                    Body::Fast => {}
                    Body::Cooperative { cleanup } => {
                        c.signal().aborted().await;
                        tokio::time::sleep(cleanup).await;
                    }
                    Body::FailsOnAbort => {
                        c.signal().aborted().await;
                        return Err(Failure::harness("WEB_ABORTED", "web fetch aborted"));
                    }
                }
                Ok(Json::from_shallow(json!([{"type": "text", "text": "ok"}])))
            }
        });
    if let Some(ms) = budget {
        b = b.timeout_ms_from_config(ms);
    }
    b.build().expect("builds")
}

fn timed_out(ms: u64) -> Value {
    let message = format!("tool call timed out after {ms}ms");
    json!({
        "content": [text(&format!("Error: {message}"))],
        "isError": true,
        "error": {"message": message, "info": {"name": "ToolTimeoutError", "code": "TOOL_TIMEOUT"}},
    })
}

#[tokio::test]
async fn tmo_01_without_a_budget_the_body_sees_the_callers_own_signal() {
    let seen = Arc::new(Mutex::new(None));
    let (rt, _policy) = with_policy([tool(None, Body::Fast, &seen)]);
    let caller = AbortController::new();
    let r = rt
        .execute(input("c1", "fetch", json!({})).with_signal(caller.signal()))
        .await;
    assert!(!r.is_error());
    let body = seen.lock().clone().expect("body ran");
    assert!(Signal::same(&body, &caller.signal()));
}

#[tokio::test]
async fn tmo_02_a_fast_tool_under_a_budget_succeeds_exactly() {
    let (rt, _policy) = with_policy([tool(Some(10_000.0), Body::Fast, &Arc::default())]);
    let r = rt.execute(input("c1", "fetch", json!({}))).await;
    assert_eq!(
        shape(&r),
        json!({"content": [text("ok")], "isError": false, "value": [text("ok")]})
    );
}

#[tokio::test]
async fn tmo_03_under_a_budget_the_body_sees_the_derived_deadline_signal() {
    let seen = Arc::new(Mutex::new(None));
    let (rt, _policy) = with_policy([tool(Some(10_000.0), Body::Fast, &seen)]);
    let caller = AbortController::new();
    let r = rt
        .execute(input("c1", "fetch", json!({})).with_signal(caller.signal()))
        .await;
    assert!(!r.is_error());
    let body = seen.lock().clone().expect("body ran");
    assert!(!Signal::same(&body, &caller.signal()));
    assert!(!body.is_aborted());
    // Derived from the caller's: the caller's abort reaches it.
    caller.cancel();
    assert!(body.is_aborted());
}

#[tokio::test]
async fn tmo_04_post_execute_sees_the_callers_original_signal() {
    let (rt, _policy) = with_policy([tool(Some(10_000.0), Body::Fast, &Arc::default())]);
    let caller = AbortController::new();
    let c = caller.signal();
    let saw = Recorder::new();
    let s = saw.clone();
    let _p = rt.hooks().on_post_execute(
        Scope::Global,
        PostFn(
            move |e: &ToolExecution, _r: &ToolResult, d: PostToolDecision| {
                s.push(format!("same={}", Signal::same(e.signal(), &c)));
                Ok(d)
            },
        ),
    );
    let r = rt
        .execute(input("c1", "fetch", json!({})).with_signal(caller.signal()))
        .await;
    assert!(!r.is_error());
    assert_eq!(saw.entries(), ["same=true"]);
}

#[tokio::test(start_paused = true)]
async fn tmo_05_the_deadline_replaces_a_successful_return() {
    let cooperative = Body::Cooperative {
        cleanup: Duration::ZERO,
    };
    let (rt, _policy) = with_policy([tool(Some(100.0), cooperative, &Arc::default())]);
    let start = Instant::now();
    let r = rt.execute(input("c1", "fetch", json!({}))).await;
    let elapsed = start.elapsed();
    assert_eq!(shape(&r), timed_out(100));
    assert!(
        elapsed >= Duration::from_millis(100) && elapsed < Duration::from_millis(150),
        "{elapsed:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn tmo_06_classification_follows_the_signal_not_the_result() {
    let (rt, _policy) = with_policy([tool(Some(100.0), Body::FailsOnAbort, &Arc::default())]);
    let r = rt.execute(input("c1", "fetch", json!({}))).await;
    assert_eq!(shape(&r), timed_out(100));
}

#[tokio::test(start_paused = true)]
async fn tmo_07_a_caller_abort_before_the_budget_is_the_registrys_cancellation() {
    let cooperative = Body::Cooperative {
        cleanup: Duration::ZERO,
    };
    let (rt, _policy) = with_policy([tool(Some(100.0), cooperative, &Arc::default())]);
    let caller = AbortController::new();
    let call = input("c1", "fetch", json!({})).with_signal(caller.signal());
    let (r, ()) = tokio::join!(rt.execute(call), async {
        tokio::time::sleep(Duration::from_millis(40)).await;
        caller.abort(AbortReason::Cancelled(CancelCause::Other(Arc::from(
            "user cancelled",
        ))));
    });
    assert_eq!(
        shape(&r),
        json!({
            "content": [text("Error: tool call aborted")],
            "isError": true,
            "error": {"message": "tool call aborted", "info": {"name": "AbortError", "code": "ABORTED"}},
        })
    );
}

#[tokio::test(start_paused = true)]
async fn tmo_08_a_timeout_is_not_replaced_by_a_later_caller_abort() {
    let slow_cleanup = Body::Cooperative {
        cleanup: Duration::from_millis(50),
    };
    let (rt, _policy) = with_policy([tool(Some(100.0), slow_cleanup, &Arc::default())]);
    let caller = AbortController::new();
    let call = input("c1", "fetch", json!({})).with_signal(caller.signal());
    let (r, ()) = tokio::join!(rt.execute(call), async {
        tokio::time::sleep(Duration::from_millis(120)).await;
        caller.cancel();
    });
    assert!(caller.signal().is_aborted());
    assert_eq!(shape(&r), timed_out(100));
}

// TMO-09: a call that runs out of time carries the policy's code in its result and in the
// durable `tool/result`, although its body returned a success once aborted.
#[tokio::test(start_paused = true)]
async fn tmo_09_a_timed_out_call_carries_the_timeout_code_in_its_result_and_log() {
    let cooperative = Body::Cooperative {
        cleanup: Duration::ZERO,
    };
    let (rt, _policy) = with_policy([tool(Some(100.0), cooperative, &Arc::default())]);
    let mut d = dsh_scheduler::TurnDriver::new(
        Arc::new(rt),
        dsh_session::Session::in_memory("tmo-09"),
        None,
    );
    let report = d
        .run_turn(
            vec![
                super::support::assistant(&[("c1", "fetch", "{}")]),
                super::support::text_reply("done"),
            ],
            Signal::never(),
        )
        .await
        .unwrap();
    assert_eq!(report.end, dsh_scheduler::TurnEnd::Completed);
    let (_, e) = super::support::result_event(d.session(), "c1");
    assert!(super::support::result_is_error(&e));
    assert_eq!(
        super::support::result_code(&e).as_deref(),
        Some(TimeoutPolicy::CODE)
    );
    assert_eq!(TimeoutPolicy::CODE, codes::TOOL_TIMEOUT);
    assert!(
        super::support::result_text(&e).contains("timed out after 100ms"),
        "{}",
        super::support::result_text(&e)
    );
}

#[tokio::test]
async fn tmo_10_unloading_the_policy_removes_the_wrapper() {
    let seen = Arc::new(Mutex::new(None));
    let (rt, policy) = with_policy([tool(Some(10_000.0), Body::Fast, &seen)]);
    let caller = AbortController::new();
    let call = || input("c1", "fetch", json!({})).with_signal(caller.signal());
    assert!(!rt.execute(call()).await.is_error());
    let loaded = seen.lock().take().expect("body ran");
    assert!(!Signal::same(&loaded, &caller.signal()));
    policy.dispose();
    assert!(!rt.execute(call()).await.is_error());
    let unloaded = seen.lock().take().expect("body ran");
    assert!(Signal::same(&unloaded, &caller.signal()));
}

#[test]
fn tmo_11_the_policy_describes_itself() {
    // The module-loader shape is TS-only; the Rust analogue is the plugin descriptor.
    assert_eq!(TimeoutPolicy::DESCRIPTOR.name, "timeout-policy");
    assert_eq!(TimeoutPolicy::NAME, "timeout-policy");
    assert!(TimeoutPolicy::DESCRIPTOR.requires.contains(&"tools"));
}

#[tokio::test]
async fn tmo_12_the_policy_loaded_through_the_configuration_path() {
    let registry = ToolRegistry::new();
    let seen = Arc::new(Mutex::new(None));
    registry
        .register(tool(Some(5_000.0), Body::Fast, &seen))
        .expect("registers")
        .keep();
    let hooks = Hooks::new();
    let config = GuardConfig::from_toml("[timeout]\nenabled = true\n").expect("parses");
    let _installed = config.install(&hooks, &registry).expect("installs");
    let rt = Runtime::new(registry, hooks);
    let caller = AbortController::new();
    let r = rt
        .execute(input("c1", "fetch", json!({})).with_signal(caller.signal()))
        .await;
    assert_eq!(
        shape(&r),
        json!({"content": [text("ok")], "isError": false, "value": [text("ok")]})
    );
    let body = seen.lock().clone().expect("body ran");
    assert!(
        !Signal::same(&body, &caller.signal()),
        "the loaded policy armed a deadline"
    );
}

/// One case on a paused clock: budget, when the caller aborts (if ever), and the cleanup the
/// cooperative body does after its signal fires. Returns the result and when it settled.
fn first_cause_case(budget: u64, abort_at: Option<u64>, cleanup: u64) -> (Value, Duration) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let body = Body::Cooperative {
            cleanup: Duration::from_millis(cleanup),
        };
        let (runtime, _policy) = with_policy([tool(Some(budget as f64), body, &Arc::default())]);
        let caller = AbortController::new();
        let call = input("c1", "fetch", json!({})).with_signal(caller.signal());
        let start = Instant::now();
        let (r, ()) = tokio::join!(runtime.execute(call), async {
            if let Some(at) = abort_at {
                tokio::time::sleep(Duration::from_millis(at)).await;
                caller.cancel();
            }
        });
        (shape(&r), start.elapsed())
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// D4: whichever fires first decides. A caller abort before the budget is `ABORTED`; a
    /// budget that elapses first is `TOOL_TIMEOUT`, even if the caller aborts during cleanup;
    /// and the started body is always awaited to its end.
    #[test]
    fn tmo_first_abort_cause_wins(
        budget in 10u64..400,
        abort in prop::option::of(1u64..800),
        cleanup in 0u64..200,
    ) {
        let abort = abort.filter(|a| *a != budget);
        let (got, elapsed) = first_cause_case(budget, abort, cleanup);
        let first = abort.map_or(budget, |a| a.min(budget));
        prop_assert!(elapsed >= Duration::from_millis(first + cleanup), "{:?}", elapsed);
        let want_code = match abort {
            Some(a) if a < budget => "ABORTED",
            _ => "TOOL_TIMEOUT",
        };
        prop_assert_eq!(&got["error"]["info"]["code"], want_code, "{}", got);
        if want_code == "TOOL_TIMEOUT" {
            prop_assert_eq!(got, timed_out(budget));
        }
    }
}
