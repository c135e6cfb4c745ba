//! GRD-01..04 through `Runtime::execute`: the pre-execute gate. (GRD-05..09, scoping and the
//! live guard table, are pinned in dsh-guard.)

// Tests state their expectations with `expect`: a panic is the failure report.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use dsh_core::{
    Dispatch, ExecuteNext, ExecuteWrapper, Failure, PostToolDecision, PreToolDecision,
    ToolExecution, ToolRegistry, ToolResult,
};
use dsh_guard::{Hooks, Scope};
use dsh_scheduler::Runtime;
use dsh_test_support::{PostFn, PreFn, Recorder, input, shape};
use serde_json::{Value, json};

fn text(s: &str) -> Value {
    json!({"type": "text", "text": s})
}

/// A runtime with one string tool `echo` whose body counts its runs.
fn counted_echo() -> (Runtime, Arc<AtomicUsize>) {
    let runs = Arc::new(AtomicUsize::new(0));
    let tool = dsh_test_support::counting_tool("echo", &runs);
    let registry = ToolRegistry::new();
    registry.register(tool).expect("registers").keep();
    (Runtime::new(registry, Hooks::new()), runs)
}

fn pre_decides(rt: &Runtime, outcome: Result<PreToolDecision, Failure>) -> dsh_guard::HookHandle {
    rt.hooks().on_pre_execute(
        Scope::Global,
        PreFn(move |_e: &ToolExecution| outcome.clone().map(Some)),
    )
}

#[tokio::test]
async fn grd_01_a_denial_still_goes_through_post_execute() {
    let (rt, runs) = counted_echo();
    let _pre = pre_decides(&rt, Ok(PreToolDecision::deny("denied by policy")));
    let post_saw = Recorder::new();
    let p = post_saw.clone();
    let _post = rt.hooks().on_post_execute(
        Scope::Global,
        PostFn(
            move |_e: &ToolExecution, r: &ToolResult, d: PostToolDecision| {
                p.push(shape(r).to_string());
                Ok(d)
            },
        ),
    );
    let r = rt.execute(input("c1", "echo", json!({}))).await;
    let expected = json!({
        "content": [text("Error: denied by policy")],
        "isError": true,
        "error": {"message": "denied by policy"},
    });
    assert_eq!(shape(&r), expected);
    assert_eq!(
        post_saw.entries(),
        [expected.to_string()],
        "post-execute saw the denial"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

/// A wrapper that records that it was entered.
struct Entered(Recorder);

#[async_trait]
impl ExecuteWrapper for Entered {
    async fn around(&self, call: Dispatch, next: ExecuteNext<'_>) -> Result<ToolResult, Failure> {
        self.0.push("wrapper");
        next.run(call).await
    }
}

#[tokio::test]
async fn grd_02_a_denied_call_never_enters_the_wrappers() {
    let (rt, runs) = counted_echo();
    let pre = pre_decides(&rt, Ok(PreToolDecision::deny("nope")));
    let rec = Recorder::new();
    let _w = rt.hooks().on_execute(Scope::Global, Entered(rec.clone()));
    let r = rt.execute(input("c1", "echo", json!({}))).await;
    assert_eq!(shape(&r)["content"], json!([text("Error: nope")]));
    assert!(rec.entries().is_empty());
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    // The same wrapper is entered once nothing denies.
    pre.dispose();
    let ok = rt.execute(input("c2", "echo", json!({}))).await;
    assert!(!ok.is_error());
    assert_eq!(rec.entries(), ["wrapper"]);
}

#[tokio::test]
async fn grd_03_a_failing_pre_execute_listener_is_exactly_an_error_result() {
    let (rt, runs) = counted_echo();
    let _pre = pre_decides(&rt, Err(Failure::new("permission hook broke")));
    let post = Recorder::new();
    let p = post.clone();
    let _post = rt.hooks().on_post_execute(
        Scope::Global,
        PostFn(
            move |_e: &ToolExecution, _r: &ToolResult, d: PostToolDecision| {
                p.push("post");
                Ok(d)
            },
        ),
    );
    let r = rt.execute(input("c1", "echo", json!({}))).await;
    assert_eq!(
        shape(&r),
        json!({
            "content": [text("Error: permission hook broke")],
            "error": {"message": "permission hook broke"},
            "isError": true,
        })
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert!(
        post.entries().is_empty(),
        "a failing listener skips post-execute (P5)"
    );
}

#[tokio::test]
async fn grd_04_a_harness_error_from_pre_execute_keeps_its_code() {
    let (rt, _runs) = counted_echo();
    let _pre = pre_decides(&rt, Err(Failure::harness("DENIED", "denied")));
    let r = rt.execute(input("c1", "echo", json!({}))).await;
    assert_eq!(
        shape(&r)["error"],
        json!({"message": "denied", "info": {"name": "HarnessError", "code": "DENIED"}})
    );
    assert_eq!(shape(&r)["content"], json!([text("Error: denied")]));
}
