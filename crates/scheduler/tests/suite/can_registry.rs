//! CAN-01..17 through `Runtime::execute`: cancellation of one call at every stage (spec P4, D2,
//! C1, C2), plus a property test that only successful outcomes are replaced by a cancellation.

// Tests state their expectations with `expect`: a panic is the failure report.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use dsh_core::{
    AbortController, AgentId, Arguments, Dispatch, ExecuteNext, ExecuteWrapper, Failure, Json,
    PostExecuteHook, PostNext, PostToolDecision, PreExecuteHook, PreNext, PreToolDecision, Signal,
    ToolDefinition, ToolExecution, ToolExecutionInput, ToolOutput, ToolRegistry, ToolResult,
    text_content,
};
use dsh_guard::{Hooks, Scope};
use dsh_scheduler::{Approver, Runtime};
use dsh_test_support::{Latch, PostFn, PreFn, Recorder, ctx, input, shape};
use parking_lot::Mutex;
use proptest::prelude::*;
use serde_json::{Value, json};

fn text(s: &str) -> Value {
    json!({"type": "text", "text": s})
}

fn runtime(tools: impl IntoIterator<Item = ToolDefinition>) -> Runtime {
    let registry = ToolRegistry::new();
    for t in tools {
        registry.register(t).expect("registers").keep();
    }
    Runtime::new(registry, Hooks::new())
}

/// A string tool whose body counts its runs, defers the given contexts and succeeds.
fn counted(name: &str, runs: &Arc<AtomicUsize>, defer: &[&str]) -> ToolDefinition {
    let runs = runs.clone();
    let defer: Vec<String> = defer.iter().map(|s| (*s).to_owned()).collect();
    ToolDefinition::builder(name, "counted")
        .output(ToolOutput::string())
        .execute(move |c| {
            runs.fetch_add(1, Ordering::SeqCst);
            for p in &defer {
                c.defer_context(ctx(p, p));
            }
            async { Ok(Json::string("ran")) }
        })
        .build()
        .expect("builds")
}

fn sources(r: &ToolResult) -> Vec<String> {
    r.additional_contexts()
        .iter()
        .map(|c| c.plugin().unwrap_or("?").to_owned())
        .collect()
}

fn info(r: &ToolResult) -> Value {
    shape(r)["error"]["info"].clone()
}

fn before_dispatch() -> Value {
    json!({"name": "AbortError", "code": "ABORTED_BEFORE_DISPATCH"})
}

fn after_dispatch() -> Value {
    json!({"name": "AbortError", "code": "ABORTED"})
}

/// Runs `call` while `meanwhile` waits for `latch`, aborts `caller`, then releases the latch.
async fn abort_at(
    rt: &Runtime,
    call: ToolExecutionInput,
    latch: &Latch,
    caller: &AbortController,
) -> Arc<ToolResult> {
    let (r, ()) = tokio::join!(rt.execute(call), async {
        latch.reached().await;
        caller.cancel();
        latch.release();
    });
    r
}

/// Waits at a latch, then answers `allowed-once`.
struct PendingApprover(Latch, Recorder);

#[async_trait]
impl Approver for PendingApprover {
    async fn approve(&self, exec: &ToolExecution, reason: Option<&str>) -> Result<(), Failure> {
        self.1
            .push(format!("{}:{}", exec.name(), reason.unwrap_or("-")));
        self.0.hold().await;
        Ok(())
    }
}

#[tokio::test]
async fn can_01_a_grant_that_arrives_after_the_abort_does_not_dispatch() {
    let runs = Arc::new(AtomicUsize::new(0));
    let latch = Latch::new();
    let asked = Recorder::new();
    let rt = runtime([counted("echo", &runs, &[])])
        .with_approver(Arc::new(PendingApprover(latch.clone(), asked.clone())));
    let _pre = rt.hooks().on_pre_execute(
        Scope::Global,
        PreFn(|_e: &ToolExecution| Ok(Some(PreToolDecision::ask("hook wants a human")))),
    );
    let caller = AbortController::new();
    let call = input("c1", "echo", json!({}))
        .with_agent(AgentId::new("a"))
        .with_signal(caller.signal());
    let r = abort_at(&rt, call, &latch, &caller).await;
    assert_eq!(asked.entries(), ["echo:hook wants a human"]);
    assert!(r.is_error());
    assert_eq!(info(&r), before_dispatch());
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

/// A pre-execute listener that waits at a latch, then decides (`None` delegates).
struct WaitingPre(Latch, Option<Result<PreToolDecision, Failure>>);

#[async_trait]
impl PreExecuteHook for WaitingPre {
    async fn pre_execute(
        &self,
        exec: &ToolExecution,
        next: PreNext<'_>,
    ) -> Result<PreToolDecision, Failure> {
        self.0.hold().await;
        match &self.1 {
            Some(outcome) => outcome.clone(),
            None => next.run(exec).await,
        }
    }
}

async fn abort_during_pre(
    then: Option<Result<PreToolDecision, Failure>>,
) -> (Arc<ToolResult>, usize) {
    let runs = Arc::new(AtomicUsize::new(0));
    let rt = runtime([counted("echo", &runs, &[])]);
    let latch = Latch::new();
    let _pre = rt
        .hooks()
        .on_pre_execute(Scope::Global, WaitingPre(latch.clone(), then));
    let caller = AbortController::new();
    let call = input("c1", "echo", json!({})).with_signal(caller.signal());
    let r = abort_at(&rt, call, &latch, &caller).await;
    (r, runs.load(Ordering::SeqCst))
}

#[tokio::test]
async fn can_02_an_allow_reached_after_the_abort_is_aborted_before_dispatch() {
    let (r, runs) = abort_during_pre(None).await;
    assert_eq!(
        shape(&r)["content"],
        json!([text("Error: tool call aborted before dispatch")])
    );
    assert_eq!(info(&r), before_dispatch());
    assert_eq!(runs, 0);
}

#[tokio::test]
async fn can_03_a_denial_reached_after_the_abort_wins() {
    let (r, runs) =
        abort_during_pre(Some(Ok(PreToolDecision::deny("policy denied the call")))).await;
    assert_eq!(
        shape(&r),
        json!({
            "content": [text("Error: policy denied the call")],
            "isError": true,
            "error": {"message": "policy denied the call"},
        })
    );
    assert_eq!(runs, 0);
}

#[tokio::test]
async fn can_04_a_listener_failure_after_the_abort_wins() {
    let (r, runs) = abort_during_pre(Some(Err(Failure::new("gate interrupted")))).await;
    assert_eq!(
        shape(&r),
        json!({
            "content": [text("Error: gate interrupted")],
            "isError": true,
            "error": {"message": "gate interrupted"},
        })
    );
    assert_eq!(runs, 0);
}

/// What a cancellation-test wrapper does.
#[derive(Clone)]
enum WrapperPlan {
    /// Installs a fresh signal, waits, then delegates.
    FreshSignalThenNext,
    /// Installs an already-aborted signal and delegates at once.
    AbortedSignal,
    /// Waits, then returns a success of its own carrying a `wrapper` context.
    WaitThenShortCircuit,
    /// Delegates, waits, then returns what `next` resolved to.
    NextThenWait,
    /// Waits, then fails with a harness error.
    WaitThenFail,
}

struct PlannedWrapper(Latch, WrapperPlan);

#[async_trait]
impl ExecuteWrapper for PlannedWrapper {
    async fn around(&self, call: Dispatch, next: ExecuteNext<'_>) -> Result<ToolResult, Failure> {
        match self.1 {
            WrapperPlan::FreshSignalThenNext => {
                let own = AbortController::new();
                self.0.hold().await;
                next.run(call.with_signal(own.signal())).await
            }
            WrapperPlan::AbortedSignal => {
                let own = AbortController::new();
                own.cancel();
                next.run(call.with_signal(own.signal())).await
            }
            WrapperPlan::WaitThenShortCircuit => {
                self.0.hold().await;
                Ok(ToolResult::success(Json::string("from wrapper"))
                    .with_contexts(Arc::from(vec![ctx("wrapper", "wrapper")])))
            }
            WrapperPlan::NextThenWait => {
                let r = next.run(call).await;
                self.0.hold().await;
                r
            }
            WrapperPlan::WaitThenFail => {
                self.0.hold().await;
                Err(Failure::harness("WRAPPER_FAILURE", "wrapper failed"))
            }
        }
    }
}

/// Runs `echo` (deferring `defer`) under a planned wrapper, aborting the caller at its latch.
async fn abort_in_wrapper(plan: WrapperPlan, defer: &[&str]) -> (Arc<ToolResult>, usize) {
    let runs = Arc::new(AtomicUsize::new(0));
    let rt = runtime([counted("echo", &runs, defer)]);
    let latch = Latch::new();
    let _w = rt
        .hooks()
        .on_execute(Scope::Global, PlannedWrapper(latch.clone(), plan));
    let caller = AbortController::new();
    let call = input("c1", "echo", json!({})).with_signal(caller.signal());
    let r = abort_at(&rt, call, &latch, &caller).await;
    (r, runs.load(Ordering::SeqCst))
}

#[tokio::test]
async fn can_05_the_caller_signal_is_fused_back_in_before_the_body() {
    let (r, runs) = abort_in_wrapper(WrapperPlan::FreshSignalThenNext, &[]).await;
    assert_eq!(info(&r), before_dispatch());
    assert_eq!(runs, 0);
}

#[tokio::test]
async fn can_06_an_already_aborted_wrapper_signal_prevents_dispatch() {
    let runs = Arc::new(AtomicUsize::new(0));
    let rt = runtime([counted("echo", &runs, &[])]);
    let _w = rt.hooks().on_execute(
        Scope::Global,
        PlannedWrapper(Latch::new(), WrapperPlan::AbortedSignal),
    );
    let caller = AbortController::new();
    let r = rt
        .execute(input("c1", "echo", json!({})).with_signal(caller.signal()))
        .await;
    assert_eq!(
        shape(&r)["error"],
        json!({"message": "tool call aborted before dispatch", "info": before_dispatch()})
    );
    assert!(!caller.signal().is_aborted());
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn can_07_a_short_circuit_success_after_the_abort_is_aborted_before_dispatch() {
    let (r, runs) = abort_in_wrapper(WrapperPlan::WaitThenShortCircuit, &[]).await;
    assert_eq!(
        shape(&r)["content"],
        json!([text("Error: tool call aborted before dispatch")])
    );
    assert_eq!(info(&r), before_dispatch());
    assert_eq!(sources(&r), ["wrapper"]);
    assert_eq!(runs, 0);
}

#[tokio::test]
async fn can_08_started_body_aborted_after_success() {
    let (r, runs) = abort_in_wrapper(WrapperPlan::NextThenWait, &["child"]).await;
    assert_eq!(runs, 1);
    assert_eq!(
        shape(&r)["content"],
        json!([text("Error: tool call aborted")])
    );
    assert_eq!(info(&r), after_dispatch());
    assert_eq!(sources(&r), ["child"]);
}

/// Delegates, waits at a latch, then accepts adding a `post` context.
struct PostWaitsThenAccepts(Latch);

#[async_trait]
impl PostExecuteHook for PostWaitsThenAccepts {
    async fn post_execute(
        &self,
        exec: &ToolExecution,
        result: &ToolResult,
        next: PostNext<'_>,
    ) -> Result<PostToolDecision, Failure> {
        let d = next.run(exec, result).await?;
        self.0.hold().await;
        Ok(d.push_context(ctx("post", "post")))
    }
}

#[tokio::test]
async fn can_09_an_abort_during_post_execute_keeps_every_context() {
    let runs = Arc::new(AtomicUsize::new(0));
    let rt = runtime([counted("echo", &runs, &["child"])]);
    let latch = Latch::new();
    let _p = rt
        .hooks()
        .on_post_execute(Scope::Global, PostWaitsThenAccepts(latch.clone()));
    let caller = AbortController::new();
    let call = input("c1", "echo", json!({})).with_signal(caller.signal());
    let r = abort_at(&rt, call, &latch, &caller).await;
    assert_eq!(info(&r), after_dispatch());
    assert_eq!(sources(&r), ["child", "post"]);
}

#[tokio::test]
async fn can_10_a_wrapper_failure_wins_over_cancellation() {
    let (r, runs) = abort_in_wrapper(WrapperPlan::WaitThenFail, &[]).await;
    assert_eq!(shape(&r)["content"], json!([text("Error: wrapper failed")]));
    assert_eq!(
        info(&r),
        json!({"name": "HarnessError", "code": "WRAPPER_FAILURE"})
    );
    assert_eq!(runs, 0);
}

/// A body that announces its start, waits for its signal, then does `finish`.
fn waits_for_abort(
    started: &Latch,
    seen: &Arc<Mutex<Option<Signal>>>,
    finish: Result<Json, Failure>,
) -> ToolDefinition {
    let (started, seen) = (started.clone(), seen.clone());
    ToolDefinition::builder("patient", "waits for its signal")
        .output(ToolOutput::string())
        .execute(move |c| {
            let (started, seen, finish) = (started.clone(), seen.clone(), finish.clone());
            async move {
                *seen.lock() = Some(c.signal().clone());
                started.reach();
                c.signal().aborted().await;
                finish
            }
        })
        .build()
        .expect("builds")
}

#[tokio::test]
async fn can_11_a_failure_owned_by_the_tool_wins_over_aborted() {
    let started = Latch::new();
    let rt = runtime([waits_for_abort(
        &started,
        &Arc::default(),
        Err(Failure::harness("TOOL_FAILURE", "tool failed")),
    )]);
    let caller = AbortController::new();
    let call = input("c1", "patient", json!({})).with_signal(caller.signal());
    let r = abort_at(&rt, call, &started, &caller).await;
    assert_eq!(shape(&r)["content"], json!([text("Error: tool failed")]));
    assert_eq!(
        info(&r),
        json!({"name": "HarnessError", "code": "TOOL_FAILURE"})
    );
}

/// Delegates, waits at a latch, then fails with a harness error.
struct PostWaitsThenFails(Latch);

#[async_trait]
impl PostExecuteHook for PostWaitsThenFails {
    async fn post_execute(
        &self,
        exec: &ToolExecution,
        result: &ToolResult,
        next: PostNext<'_>,
    ) -> Result<PostToolDecision, Failure> {
        next.run(exec, result).await?;
        self.0.hold().await;
        Err(Failure::harness("POST_FAILURE", "post-policy failed"))
    }
}

#[tokio::test]
async fn can_12_a_post_execute_failure_wins_over_cancellation() {
    let runs = Arc::new(AtomicUsize::new(0));
    let rt = runtime([counted("echo", &runs, &[])]);
    let latch = Latch::new();
    let _p = rt
        .hooks()
        .on_post_execute(Scope::Global, PostWaitsThenFails(latch.clone()));
    let caller = AbortController::new();
    let call = input("c1", "echo", json!({})).with_signal(caller.signal());
    let r = abort_at(&rt, call, &latch, &caller).await;
    assert_eq!(
        shape(&r)["content"],
        json!([text("Error: post-policy failed")])
    );
    assert_eq!(info(&r)["code"], json!("POST_FAILURE"));
}

/// Installs its own controller's signal for the body.
struct OwnSignal(AbortController);

#[async_trait]
impl ExecuteWrapper for OwnSignal {
    async fn around(&self, call: Dispatch, next: ExecuteNext<'_>) -> Result<ToolResult, Failure> {
        next.run(call.with_signal(self.0.signal())).await
    }
}

#[tokio::test]
async fn can_13_fusion_is_one_way() {
    let started = Latch::new();
    let seen = Arc::new(Mutex::new(None));
    let rt = runtime([waits_for_abort(&started, &seen, Ok(Json::string("late")))]);
    let own = AbortController::new();
    let _w = rt.hooks().on_execute(Scope::Global, OwnSignal(own.clone()));
    let caller = AbortController::new();
    let call = input("c1", "patient", json!({})).with_signal(caller.signal());
    let r = abort_at(&rt, call, &started, &caller).await;
    let body = seen.lock().clone().expect("body ran");
    assert!(!Signal::same(&body, &caller.signal()));
    assert!(!Signal::same(&body, &own.signal()));
    assert!(body.is_aborted());
    assert!(
        !own.signal().is_aborted(),
        "the caller's abort never reaches the wrapper's signal"
    );
    assert_eq!(info(&r), after_dispatch());
}

/// Swaps the signal for the rest of the chain (a Rust wrapper cannot touch the execution's).
struct Swap;

#[async_trait]
impl ExecuteWrapper for Swap {
    async fn around(&self, call: Dispatch, next: ExecuteNext<'_>) -> Result<ToolResult, Failure> {
        next.run(call.with_signal(AbortController::new().signal()))
            .await
    }
}

#[tokio::test]
async fn can_14_post_execute_sees_the_callers_own_signal() {
    let rt = runtime([]);
    let _w = rt.hooks().on_execute(Scope::Global, Swap);
    let caller = AbortController::new();
    let c = caller.signal();
    let saw = Recorder::new();
    let s = saw.clone();
    let _p = rt.hooks().on_post_execute(
        Scope::Global,
        PostFn(
            move |e: &ToolExecution, r: &ToolResult, d: PostToolDecision| {
                s.push(format!(
                    "same={} code={}",
                    Signal::same(e.signal(), &c),
                    r.error().and_then(Failure::code).unwrap_or("-")
                ));
                Ok(d)
            },
        ),
    );
    let r = rt
        .execute(input("c1", "missing", json!({})).with_signal(caller.signal()))
        .await;
    assert!(r.is_error());
    assert_eq!(saw.entries(), ["same=true code=UNKNOWN_TOOL"]);
}

#[tokio::test(start_paused = true)]
async fn can_15_a_started_body_is_never_abandoned() {
    let latch = Latch::new();
    let l = latch.clone();
    let tool = ToolDefinition::builder("slow", "d")
        .output(ToolOutput::string())
        .execute(move |c| {
            let l = l.clone();
            c.defer_context(ctx("deferred", "deferred"));
            async move {
                l.hold().await;
                Ok(Json::string("finished"))
            }
        })
        .build()
        .expect("builds");
    let rt = runtime([tool]);
    let caller = AbortController::new();
    let call = input("c1", "slow", json!({})).with_signal(caller.signal());
    let task = tokio::spawn({
        let rt = rt.clone();
        async move { rt.execute(call).await }
    });
    latch.reached().await;
    caller.cancel();
    dsh_test_support::quiescent().await;
    assert!(
        !task.is_finished(),
        "the call is still pending after the abort"
    );
    latch.release();
    let r = task.await.expect("joins");
    assert_eq!(info(&r), after_dispatch());
    assert_eq!(sources(&r), ["deferred"]);
}

/// Counts its runs at one stage.
struct CountPre(Arc<AtomicUsize>);

#[async_trait]
impl PreExecuteHook for CountPre {
    async fn pre_execute(
        &self,
        exec: &ToolExecution,
        next: PreNext<'_>,
    ) -> Result<PreToolDecision, Failure> {
        self.0.fetch_add(1, Ordering::SeqCst);
        next.run(exec).await
    }
}

struct CountWrapper(Arc<AtomicUsize>);

#[async_trait]
impl ExecuteWrapper for CountWrapper {
    async fn around(&self, call: Dispatch, next: ExecuteNext<'_>) -> Result<ToolResult, Failure> {
        self.0.fetch_add(1, Ordering::SeqCst);
        next.run(call).await
    }
}

#[tokio::test]
async fn can_16_a_pre_aborted_call_runs_no_stage_but_the_observer() {
    let body = Arc::new(AtomicUsize::new(0));
    let rt = runtime([counted("echo", &body, &[])]);
    let (pre, wrapper) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let post = Recorder::new();
    let p = post.clone();
    let _a = rt
        .hooks()
        .on_pre_execute(Scope::Global, CountPre(pre.clone()));
    let _b = rt
        .hooks()
        .on_execute(Scope::Global, CountWrapper(wrapper.clone()));
    let _c = rt.hooks().on_post_execute(
        Scope::Global,
        PostFn(
            move |_e: &ToolExecution, _r: &ToolResult, d: PostToolDecision| {
                p.push("post");
                Ok(d)
            },
        ),
    );
    type Seen = (usize, bool, Value, String);
    let observed: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let caller = AbortController::new();
    caller.cancel();
    let (o, c) = (observed.clone(), caller.signal());
    let _d = rt
        .hooks()
        .on_result(Scope::Global, move |e: &ToolExecution, r: &ToolResult| {
            o.lock().push((
                r as *const ToolResult as usize,
                Signal::same(e.signal(), &c),
                e.arguments().value(),
                format!("{}/{}/{}", e.call_id(), e.root_call_id(), e.name()),
            ));
        });
    let args = json!({"text": "hi", "nested": {"deep": [1, 2]}});
    let r = rt
        .execute(input("c1", "echo", args.clone()).with_signal(caller.signal()))
        .await;
    assert_eq!(
        shape(&r),
        json!({
            "content": [text("Error: tool call aborted before dispatch")],
            "isError": true,
            "error": {"message": "tool call aborted before dispatch", "info": before_dispatch()},
        })
    );
    assert_eq!(pre.load(Ordering::SeqCst), 0);
    assert_eq!(wrapper.load(Ordering::SeqCst), 0);
    assert_eq!(body.load(Ordering::SeqCst), 0);
    assert!(post.entries().is_empty());
    let seen = observed.lock();
    assert_eq!(seen.len(), 1, "tools/result fires exactly once");
    let (ptr, same_signal, seen_args, ids) = &seen[0];
    assert_eq!(
        *ptr,
        Arc::as_ptr(&r) as usize,
        "the observer gets the returned result"
    );
    assert!(same_signal, "the observer sees the caller's signal");
    assert_eq!(
        seen_args, &args,
        "the execution holds its own copy of the arguments"
    );
    assert_eq!(ids, "c1/c1/echo");
}

#[tokio::test]
async fn can_17_raw_arguments_of_an_unknown_tool_with_a_pre_aborted_signal() {
    // Mostly TS-only. In dsh, arguments that are not JSON reach the registry as the raw text
    // (spec S1) instead of failing to convert, so there is no argument error to take
    // precedence: the pre-abort decides, and `tools/result` still fires exactly once.
    let rt = runtime([]);
    let fired = Arc::new(AtomicUsize::new(0));
    let f = fired.clone();
    let _o = rt
        .hooks()
        .on_result(Scope::Global, move |e: &ToolExecution, _r: &ToolResult| {
            assert!(matches!(e.arguments(), Arguments::Raw(raw) if &**raw == "{not json"));
            f.fetch_add(1, Ordering::SeqCst);
        });
    let caller = AbortController::new();
    caller.cancel();
    let call = ToolExecutionInput::new("c1", "nope", Arguments::from_raw("{not json"))
        .with_signal(caller.signal());
    let r = rt.execute(call).await;
    assert_eq!(info(&r), before_dispatch());
    assert_eq!(fired.load(Ordering::SeqCst), 1);
}

/// How the call ends when nothing is cancelled, for the C2 property.
#[derive(Clone, Copy, Debug)]
enum Outcome {
    Success,
    BodyFails,
    WrapperFails,
    PostFails,
    PostBlocks,
    Denied,
}

/// When the caller aborts, for the C2 property.
#[derive(Clone, Copy, Debug)]
enum AbortAt {
    Never,
    BeforeTheCall,
    InTheFirstStageThatRuns,
}

/// Runs one case: the first stage that runs (pre-execute for a denial, the body otherwise)
/// aborts the caller when asked to, then the call ends as `outcome` says.
async fn c2_case(outcome: Outcome, at: AbortAt) -> Option<String> {
    let caller = AbortController::new();
    let in_stage = matches!(at, AbortAt::InTheFirstStageThatRuns);
    let c = caller.clone();
    let tool = ToolDefinition::builder("t", "d")
        .output(ToolOutput::string())
        .execute(move |_ctx| {
            if in_stage {
                c.cancel();
            }
            async move {
                match outcome {
                    Outcome::BodyFails => Err(Failure::harness("BODY", "body failed")),
                    _ => Ok(Json::string("ok")),
                }
            }
        })
        .build()
        .expect("builds");
    let rt = runtime([tool]);
    let c = caller.clone();
    let _pre = rt.hooks().on_pre_execute(
        Scope::Global,
        PreFn(move |_e: &ToolExecution| {
            if !matches!(outcome, Outcome::Denied) {
                return Ok(None);
            }
            if in_stage {
                c.cancel();
            }
            Ok(Some(PreToolDecision::deny("denied")))
        }),
    );
    let _w = matches!(outcome, Outcome::WrapperFails)
        .then(|| rt.hooks().on_execute(Scope::Global, FailAfterNext));
    let _p = rt.hooks().on_post_execute(
        Scope::Global,
        PostFn(
            move |_e: &ToolExecution, _r: &ToolResult, d: PostToolDecision| match outcome {
                Outcome::PostFails => Err(Failure::harness("POST", "post failed")),
                Outcome::PostBlocks => Ok(PostToolDecision::block(text_content("blocked"))),
                _ => Ok(d),
            },
        ),
    );
    if matches!(at, AbortAt::BeforeTheCall) {
        caller.cancel();
    }
    let r = rt
        .execute(input("c1", "t", json!({})).with_signal(caller.signal()))
        .await;
    r.error()
        .map(|f| f.code().unwrap_or(f.message()).to_owned())
}

struct FailAfterNext;

#[async_trait]
impl ExecuteWrapper for FailAfterNext {
    async fn around(&self, call: Dispatch, next: ExecuteNext<'_>) -> Result<ToolResult, Failure> {
        next.run(call).await?;
        Err(Failure::harness("WRAPPER", "wrapper failed"))
    }
}

fn outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        Just(Outcome::Success),
        Just(Outcome::BodyFails),
        Just(Outcome::WrapperFails),
        Just(Outcome::PostFails),
        Just(Outcome::PostBlocks),
        Just(Outcome::Denied),
    ]
}

fn abort_at_strategy() -> impl Strategy<Value = AbortAt> {
    prop_oneof![
        Just(AbortAt::Never),
        Just(AbortAt::BeforeTheCall),
        Just(AbortAt::InTheFirstStageThatRuns),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// C1/C2: a pre-aborted call is `ABORTED_BEFORE_DISPATCH` whatever would have happened; an
    /// abort during the call replaces only a success (with `ABORTED`, the body having run);
    /// denials, body, wrapper and post-execute failures and blocks are kept.
    #[test]
    fn can_c2_only_successful_outcomes_are_replaced(o in outcome(), at in abort_at_strategy()) {
        let got = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(c2_case(o, at));
        let kept = match o {
            Outcome::Success => None,
            Outcome::BodyFails => Some("BODY".to_owned()),
            Outcome::WrapperFails => Some("WRAPPER".to_owned()),
            Outcome::PostFails => Some("POST".to_owned()),
            Outcome::PostBlocks => Some("blocked".to_owned()),
            Outcome::Denied => Some("denied".to_owned()),
        };
        let want = match (at, o) {
            (AbortAt::Never, _) => kept,
            (AbortAt::BeforeTheCall, _) => Some("ABORTED_BEFORE_DISPATCH".to_owned()),
            (AbortAt::InTheFirstStageThatRuns, Outcome::Success) => Some("ABORTED".to_owned()),
            (AbortAt::InTheFirstStageThatRuns, _) => kept,
        };
        prop_assert_eq!(got, want, "{:?} / {:?}", o, at);
    }
}
