//! DSP-15..29 through `Runtime::execute`: the `tools/execute` around-chain (stage order, what
//! `next` resolves to, short circuits and revalidation), the fused body signal, and how a
//! wrapper's or a tool's own error becomes the result.

// Tests state their expectations with `expect`: a panic is the failure report.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::support::*;
use async_trait::async_trait;
use dsh_core::{
    AbortController, Dispatch, ExecuteNext, ExecuteWrapper, Failure, Json, PostExecuteHook,
    PostNext, PostToolDecision, Signal, ToolDefinition, ToolExecution, ToolOutput, ToolResult,
    text_content,
};
use dsh_guard::Scope;
use dsh_test_support::{PostFn, PreFn, Recorder, content_tool, ctx, echo_tool, input, shape};
use parking_lot::Mutex;
use serde_json::{Value, json};

/// A wrapper that only delegates, recording before and after.
struct PassThrough(Recorder);

#[async_trait]
impl ExecuteWrapper for PassThrough {
    async fn around(&self, call: Dispatch, next: ExecuteNext<'_>) -> Result<ToolResult, Failure> {
        self.0.push("execute:before");
        let r = next.run(call).await;
        self.0.push("execute:after");
        r
    }
}

#[tokio::test]
async fn dsp_15_stage_order_is_pre_wrapper_body_wrapper_post() {
    let rec = Recorder::new();
    let r2 = rec.clone();
    let tool = ToolDefinition::builder("content", "d")
        .output(ToolOutput::content_blocks())
        .execute(move |ctx| {
            r2.push("dispatch");
            let text = ctx
                .arguments()
                .json()
                .and_then(|j| j.value()["text"].as_str().map(str::to_owned));
            async move { Ok(Json::from_shallow(json!([{"type": "text", "text": text}]))) }
        })
        .build()
        .expect("builds");
    let rt = runtime_of([tool]);
    let (a, b) = (rec.clone(), rec.clone());
    let _pre = rt.hooks().on_pre_execute(
        Scope::Global,
        PreFn(move |_e: &ToolExecution| {
            a.push("pre");
            Ok(None)
        }),
    );
    let _w = rt
        .hooks()
        .on_execute(Scope::Global, PassThrough(rec.clone()));
    let _post = rt.hooks().on_post_execute(
        Scope::Global,
        PostFn(
            move |_e: &ToolExecution, _r: &ToolResult, d: PostToolDecision| {
                b.push("post");
                Ok(d)
            },
        ),
    );
    let r = rt
        .execute(input("c1", "content", json!({"text": "hi"})))
        .await;
    assert_eq!(
        rec.entries(),
        ["pre", "execute:before", "dispatch", "execute:after", "post"]
    );
    assert_eq!(
        shape(&r),
        json!({"content": [text("hi")], "isError": false, "value": [text("hi")]})
    );
    // The shared fixture behaves the same way.
    let fixture = runtime_of([content_tool()])
        .execute(input("c2", "content", json!({"text": "hi"})))
        .await;
    assert_eq!(shape(&fixture), shape(&r));
}

/// Records what `next` resolved to.
struct RecordNext(Arc<Mutex<Option<Result<Value, Failure>>>>);

#[async_trait]
impl ExecuteWrapper for RecordNext {
    async fn around(&self, call: Dispatch, next: ExecuteNext<'_>) -> Result<ToolResult, Failure> {
        let r = next.run(call).await;
        *self.0.lock() = Some(r.as_ref().map(shape).map_err(Clone::clone));
        r
    }
}

#[tokio::test]
async fn dsp_16_a_body_failure_resolves_next_with_the_normalized_failure() {
    let rt = runtime_of([failing("boom", Failure::harness("BOOM", "kaboom"))]);
    let seen = Arc::new(Mutex::new(None));
    let _w = rt
        .hooks()
        .on_execute(Scope::Global, RecordNext(seen.clone()));
    let r = rt.execute(input("c1", "boom", json!({}))).await;
    let next_result = seen.lock().take().expect("wrapper ran");
    let v = next_result.expect("next resolves, it does not fail");
    assert_eq!(v["isError"], json!(true));
    assert_eq!(
        v["error"],
        json!({"message": "kaboom", "info": {"name": "HarnessError", "code": "BOOM"}})
    );
    assert_eq!(shape(&r)["content"], json!([text("Error: kaboom")]));
}

/// Keeps the value `next` resolved to, to compare allocations later.
struct KeepValue(Arc<Mutex<Option<Json>>>);

#[async_trait]
impl ExecuteWrapper for KeepValue {
    async fn around(&self, call: Dispatch, next: ExecuteNext<'_>) -> Result<ToolResult, Failure> {
        let r = next.run(call).await?;
        *self.0.lock() = r.value().cloned();
        Ok(r)
    }
}

#[tokio::test]
async fn dsp_17_no_stage_can_overwrite_the_value() {
    // TS-only mechanism (frozen objects). Rust analogue: wrappers and listeners only get shared
    // access, so the value the body produced reaches the end as the very same allocation.
    let rt = runtime_of([counted("orig", "original", &Arc::default())]);
    let from_wrapper = Arc::new(Mutex::new(None));
    let from_post = Arc::new(Mutex::new(None));
    let _w = rt
        .hooks()
        .on_execute(Scope::Global, KeepValue(from_wrapper.clone()));
    let fp = from_post.clone();
    let _p = rt.hooks().on_post_execute(
        Scope::Global,
        PostFn(
            move |_e: &ToolExecution, r: &ToolResult, d: PostToolDecision| {
                *fp.lock() = r.value().cloned();
                Ok(d)
            },
        ),
    );
    let r = rt.execute(input("c1", "orig", json!({}))).await;
    let last = r.value().expect("value");
    assert_eq!(last.as_str(), Some("original"));
    let w = from_wrapper.lock().clone().expect("wrapper saw a value");
    let p = from_post.lock().clone().expect("post saw a value");
    assert!(Json::ptr_eq(&w, last) && Json::ptr_eq(&p, last));
}

#[tokio::test]
async fn dsp_18_post_execute_sees_a_body_failure_through_a_pass_through_wrapper() {
    let rt = runtime_of([failing("boom", Failure::new("exploded"))]);
    let rec = Recorder::new();
    let _w = rt
        .hooks()
        .on_execute(Scope::Global, PassThrough(rec.clone()));
    let p = rec.clone();
    let _p = rt.hooks().on_post_execute(
        Scope::Global,
        PostFn(
            move |_e: &ToolExecution, r: &ToolResult, d: PostToolDecision| {
                p.push(format!("post:isError={}", r.is_error()));
                Ok(d)
            },
        ),
    );
    let r = rt.execute(input("c1", "boom", json!({}))).await;
    assert_eq!(
        rec.entries(),
        ["execute:before", "execute:after", "post:isError=true"]
    );
    assert_eq!(shape(&r)["content"], json!([text("Error: exploded")]));
}

/// Checks that the dispatch view carries the caller's signal, then installs its own.
struct ReplaceSignal {
    caller: Signal,
    own: AbortController,
    saw_caller: Arc<Mutex<Option<bool>>>,
}

#[async_trait]
impl ExecuteWrapper for ReplaceSignal {
    async fn around(&self, call: Dispatch, next: ExecuteNext<'_>) -> Result<ToolResult, Failure> {
        *self.saw_caller.lock() = Some(Signal::same(call.signal(), &self.caller));
        next.run(call.with_signal(self.own.signal())).await
    }
}

fn signal_probe(slot: &Arc<Mutex<Option<Signal>>>) -> ToolDefinition {
    let slot = slot.clone();
    ToolDefinition::builder("probe", "records its signal")
        .output(ToolOutput::string())
        .execute(move |ctx| {
            *slot.lock() = Some(ctx.signal().clone());
            async { Ok(Json::string("ok")) }
        })
        .build()
        .expect("builds")
}

#[tokio::test]
async fn dsp_19_body_sees_fused_signal() {
    let body_signal = Arc::new(Mutex::new(None));
    let rt = runtime_of([signal_probe(&body_signal)]);
    for caller_fires in [false, true] {
        let caller = AbortController::new();
        let own = AbortController::new();
        let saw_caller = Arc::new(Mutex::new(None));
        let w = rt.hooks().on_execute(
            Scope::Global,
            ReplaceSignal {
                caller: caller.signal(),
                own: own.clone(),
                saw_caller: saw_caller.clone(),
            },
        );
        let r = rt
            .execute(input("c1", "probe", json!({})).with_signal(caller.signal()))
            .await;
        w.dispose();
        assert!(!r.is_error());
        assert_eq!(
            *saw_caller.lock(),
            Some(true),
            "the wrapper first sees the caller's signal"
        );
        let body = body_signal.lock().take().expect("body ran");
        assert!(!Signal::same(&body, &caller.signal()));
        assert!(!Signal::same(&body, &own.signal()));
        assert!(!body.is_aborted());
        // A fusion of both: either source fires it; it never fires its sources.
        if caller_fires {
            caller.cancel();
            assert!(!own.signal().is_aborted());
        } else {
            own.cancel();
            assert!(!caller.signal().is_aborted());
        }
        assert!(body.is_aborted());
    }
}

#[tokio::test]
async fn dsp_20_a_short_circuit_success_is_rendered_from_its_value() {
    let runs = Arc::new(AtomicUsize::new(0));
    let rt = runtime_of([counted("echo", "body", &runs)]);
    let authored = ToolResult::success(Json::string("short-circuited"))
        .with_content(text_content("ignored authored content"));
    let _w = rt
        .hooks()
        .on_execute(Scope::Global, ShortCircuit(Ok(authored)));
    let r = rt.execute(input("c1", "echo", json!({}))).await;
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert_eq!(
        shape(&r),
        json!({"content": [text("short-circuited")], "isError": false, "value": "short-circuited"})
    );
}

/// Caches the first result it sees and returns it for every later call.
struct Cache(Mutex<Option<ToolResult>>);

#[async_trait]
impl ExecuteWrapper for Cache {
    async fn around(&self, call: Dispatch, next: ExecuteNext<'_>) -> Result<ToolResult, Failure> {
        let cached = self.0.lock().clone();
        if let Some(r) = cached {
            return Ok(r);
        }
        let r = next.run(call).await?;
        *self.0.lock() = Some(r.clone());
        Ok(r)
    }
}

#[tokio::test]
async fn dsp_21_a_result_minted_for_another_execution_is_revalidated() {
    let obj_runs = Arc::new(AtomicUsize::new(0));
    let runs = obj_runs.clone();
    let closed = ToolDefinition::builder("closed", "closed object output")
        .output(ToolOutput::new(
            Json::from_shallow(json!({
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
                "additionalProperties": false
            })),
            |v| Ok(text_content(v.value()["text"].as_str().unwrap_or_default())),
        ))
        .execute(move |_ctx| {
            runs.fetch_add(1, Ordering::SeqCst);
            async { Ok(Json::from_shallow(json!({"text": "fresh"}))) }
        })
        .build()
        .expect("builds");
    let rt = runtime_of([counted("str", "cached", &Arc::default()), closed]);
    let _w = rt
        .hooks()
        .on_execute(Scope::Global, Cache(Mutex::new(None)));
    let first = rt.execute(input("c1", "str", json!({}))).await;
    assert_eq!(first.value().and_then(Json::as_str), Some("cached"));
    let second = rt.execute(input("c2", "closed", json!({}))).await;
    assert_eq!(obj_runs.load(Ordering::SeqCst), 0);
    assert_eq!(
        second.error().and_then(Failure::code),
        Some("INVALID_TOOL_OUTPUT"),
        "{}",
        shape(&second)
    );
    assert!(shape(&second).get("value").is_none());
}

#[tokio::test]
async fn dsp_22_a_short_circuit_success_keeps_its_context() {
    let rt = runtime_of([echo_tool()]);
    let context = ctx("wrapper", "from the wrapper");
    let authored =
        ToolResult::success(Json::string("x")).with_contexts(Arc::from(vec![context.clone()]));
    let _w = rt
        .hooks()
        .on_execute(Scope::Global, ShortCircuit(Ok(authored)));
    let r = rt.execute(input("c1", "echo", json!({}))).await;
    assert_eq!(&**r.additional_contexts(), std::slice::from_ref(&context));
    assert_eq!(
        shape(&r)["additionalContexts"],
        json!([{
            "content": [text("from the wrapper")],
            "source": {"kind": "plugin", "plugin": "wrapper"},
            "role": "user",
            "id": &*context.id,
        }])
    );
}

#[tokio::test]
async fn dsp_23_a_wrapper_error_is_exactly_an_error_result() {
    let rt = runtime_of([echo_tool()]);
    let _w = rt.hooks().on_execute(
        Scope::Global,
        ShortCircuit(Err(Failure::new("wrapper broke"))),
    );
    let r = rt.execute(input("c1", "echo", json!({}))).await;
    assert_eq!(
        shape(&r),
        json!({"content": [text("Error: wrapper broke")], "error": {"message": "wrapper broke"}, "isError": true})
    );
}

/// An error type of a tool's own, exposing its message through `Display`.
#[derive(Debug)]
struct Denied;

impl std::fmt::Display for Denied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("denied by object")
    }
}

impl std::error::Error for Denied {}

#[tokio::test]
async fn dsp_24_an_error_type_fails_with_its_display_text() {
    // TS-only as written (throwing a non-Error object); Rust analogue: an error type's Display.
    let tool = ToolDefinition::builder("obj", "d")
        .output(ToolOutput::string())
        .execute(|_ctx| async {
            let e: Box<dyn std::error::Error + Send + Sync> = Box::new(Denied);
            Err(Failure::new(e.to_string()))
        })
        .build()
        .expect("builds");
    let r = runtime_of([tool])
        .execute(input("c1", "obj", json!({})))
        .await;
    assert_eq!(
        shape(&r)["content"],
        json!([text("Error: denied by object")])
    );
}

#[tokio::test]
async fn dsp_25_a_bare_message_and_a_string_panic() {
    let plain = failing("plain", Failure::new("kaboom"));
    let panicky = ToolDefinition::builder("panicky", "d")
        .output(ToolOutput::string())
        .execute(|_ctx| async { panic!("kaboom") })
        .build()
        .expect("builds");
    let rt = runtime_of([plain, panicky]);
    let r = rt.execute(input("c1", "plain", json!({}))).await;
    assert_eq!(
        shape(&r),
        json!({"content": [text("Error: kaboom")], "isError": true, "error": {"message": "kaboom"}})
    );
    // A string panic keeps its text; dsh-core names the panicking tool in front of it.
    let p = rt.execute(input("c2", "panicky", json!({}))).await;
    assert_eq!(
        shape(&p)["content"],
        json!([text("Error: tool \"panicky\" panicked: kaboom")])
    );
}

// DSP-26 skipped: TS-only (`[object Object]` is how JavaScript prints a thrown plain object);
// Rust failures always carry a message, and unprintable panics are DSP-13.

#[tokio::test]
async fn dsp_27_a_harness_error_keeps_its_code() {
    let rt = runtime_of([failing("disk", Failure::harness("ENOSPC", "disk full"))]);
    let r = rt.execute(input("c1", "disk", json!({}))).await;
    assert_eq!(
        shape(&r),
        json!({
            "content": [text("Error: disk full")],
            "isError": true,
            "error": {"message": "disk full", "info": {"name": "HarnessError", "code": "ENOSPC"}},
        })
    );
}

#[tokio::test]
async fn dsp_28_a_plain_error_has_no_info() {
    let rt = runtime_of([failing("plain", Failure::new("just a message"))]);
    let r = rt.execute(input("c1", "plain", json!({}))).await;
    assert_eq!(shape(&r)["error"], json!({"message": "just a message"}));
    assert_eq!(shape(&r)["content"], json!([text("Error: just a message")]));
}

/// Records whether the execution's signal is the caller's, per stage.
struct SignalAtPost(Signal, Recorder);

#[async_trait]
impl PostExecuteHook for SignalAtPost {
    async fn post_execute(
        &self,
        exec: &ToolExecution,
        result: &ToolResult,
        next: PostNext<'_>,
    ) -> Result<PostToolDecision, Failure> {
        self.1
            .push(format!("post:{}", Signal::same(exec.signal(), &self.0)));
        next.run(exec, result).await
    }
}

#[tokio::test]
async fn dsp_29_only_the_dispatch_view_replaces_the_signal() {
    // The compile-time half is TS-only; the Rust analogue: the signal is a required field of
    // the execution, every stage borrows the execution immutably, and only the wrapper's
    // `Dispatch` view can install another signal for the body.
    let caller = AbortController::new();
    let rec = Recorder::new();
    let (c1, c2, c3, r1, r3) = (
        caller.signal(),
        caller.signal(),
        caller.signal(),
        rec.clone(),
        rec.clone(),
    );
    let r2 = rec.clone();
    let tool = ToolDefinition::builder("probe", "d")
        .output(ToolOutput::string())
        .execute(move |ctx| {
            r2.push(format!(
                "body:exec={},ctx={}",
                Signal::same(ctx.exec().signal(), &c2),
                Signal::same(ctx.signal(), &c2)
            ));
            async { Ok(Json::string("ok")) }
        })
        .build()
        .expect("builds");
    let rt = runtime_of([tool]);
    let _pre = rt.hooks().on_pre_execute(
        Scope::Global,
        PreFn(move |e: &ToolExecution| {
            r1.push(format!("pre:{}", Signal::same(e.signal(), &c1)));
            Ok(None)
        }),
    );
    let _w = rt.hooks().on_execute(
        Scope::Global,
        ReplaceSignal {
            caller: caller.signal(),
            own: AbortController::new(),
            saw_caller: Arc::default(),
        },
    );
    let _p = rt
        .hooks()
        .on_post_execute(Scope::Global, SignalAtPost(caller.signal(), rec.clone()));
    let _o = rt
        .hooks()
        .on_result(Scope::Global, move |e: &ToolExecution, _r: &ToolResult| {
            r3.push(format!("result:{}", Signal::same(e.signal(), &c3)));
        });
    let r = rt
        .execute(input("c1", "probe", json!({})).with_signal(caller.signal()))
        .await;
    assert!(!r.is_error());
    assert_eq!(
        rec.entries(),
        [
            "pre:true",
            "body:exec=true,ctx=false",
            "post:true",
            "result:true"
        ]
    );
}
