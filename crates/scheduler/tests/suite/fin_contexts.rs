//! FIN-18..23 through `Runtime::execute`: the order of additional contexts (deferred, then the
//! wrappers', then post-execute's; a block keeps only its own), the gate around dispatch, and the
//! `tools/result` observers; plus a property test of the context order rule (F2).

// Tests state their expectations with `expect`: a panic is the failure report.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;

use super::support::*;
use async_trait::async_trait;
use dsh_core::{
    AgentId, ContextMessage, Dispatch, ExecuteNext, ExecuteWrapper, Failure, Json, PostExecuteHook,
    PostNext, PostToolDecision, PreExecuteHook, PreNext, PreToolDecision, ToolDefinition,
    ToolExecution, ToolOutput, ToolResult, text_content,
};
use dsh_guard::Scope;
use dsh_test_support::{PostFn, Recorder, ctx, echo_tool, input, shape};
use parking_lot::Mutex;
use proptest::prelude::*;
use serde_json::json;

/// The `source.plugin` of each context of a result, in order.
fn sources(r: &ToolResult) -> Vec<String> {
    r.additional_contexts()
        .iter()
        .map(|c| c.plugin().unwrap_or("?").to_owned())
        .collect()
}

/// A tool that defers the given contexts, then succeeds or fails.
fn deferring(name: &str, plugins: &[&str], fail: bool) -> ToolDefinition {
    let plugins: Vec<String> = plugins.iter().map(|p| (*p).to_owned()).collect();
    ToolDefinition::builder(name, "defers contexts")
        .output(ToolOutput::string())
        .execute(move |c| {
            for p in &plugins {
                c.defer_context(ctx(p, p));
            }
            async move {
                if fail {
                    Err(Failure::new("body failed"))
                } else {
                    Ok(Json::string("ok"))
                }
            }
        })
        .build()
        .expect("builds")
}

/// A wrapper that appends contexts to the result `next` resolved to.
struct AppendContexts(Vec<String>);

#[async_trait]
impl ExecuteWrapper for AppendContexts {
    async fn around(&self, call: Dispatch, next: ExecuteNext<'_>) -> Result<ToolResult, Failure> {
        let r = next.run(call).await?;
        let more: Vec<ContextMessage> = self.0.iter().map(|p| ctx(p, p)).collect();
        Ok(r.append_contexts(&more))
    }
}

#[tokio::test]
async fn fin_18_context_order_is_deferred_then_wrapper_then_post() {
    let rt = runtime_of([deferring("d", &["nested-1", "nested-2"], false)]);
    let _w = rt
        .hooks()
        .on_execute(Scope::Global, AppendContexts(vec!["wrapper".into()]));
    let _p = rt.hooks().on_post_execute(
        Scope::Global,
        PostFn(|_e: &ToolExecution, _r: &ToolResult, d: PostToolDecision| {
            Ok(d.prepend_context(ctx("post", "post")))
        }),
    );
    let r = rt.execute(input("c1", "d", json!({}))).await;
    assert_eq!(sources(&r), ["nested-1", "nested-2", "wrapper", "post"]);
}

#[tokio::test]
async fn fin_19_a_failure_keeps_deferred_contexts_and_a_block_keeps_only_its_own() {
    let rt = runtime_of([deferring("d", &["nested"], true)]);
    let failed = rt.execute(input("c1", "d", json!({}))).await;
    assert!(failed.is_error());
    assert_eq!(sources(&failed), ["nested"]);
    let _h = post_decides(
        &rt,
        PostToolDecision::Block {
            feedback: text_content("blocked"),
            contexts: vec![ctx("blocker", "blocker")],
        },
    );
    let blocked = rt.execute(input("c2", "d", json!({}))).await;
    assert_eq!(sources(&blocked), ["blocker"]);
}

/// Records around its delegation to the rest of the pre-execute waterfall.
struct PreAround(Recorder);

#[async_trait]
impl PreExecuteHook for PreAround {
    async fn pre_execute(
        &self,
        exec: &ToolExecution,
        next: PreNext<'_>,
    ) -> Result<PreToolDecision, Failure> {
        self.0.push("pre:before");
        let d = next.run(exec).await;
        self.0.push("pre:after");
        d
    }
}

/// Records around its delegation to the rest of the post-execute waterfall.
struct PostAround(Recorder);

#[async_trait]
impl PostExecuteHook for PostAround {
    async fn post_execute(
        &self,
        exec: &ToolExecution,
        result: &ToolResult,
        next: PostNext<'_>,
    ) -> Result<PostToolDecision, Failure> {
        self.0.push("post:before");
        let d = next.run(exec, result).await;
        self.0.push("post:after");
        d
    }
}

#[tokio::test]
async fn fin_20_the_gate_finishes_before_dispatch_and_post_after_it() {
    let rec = Recorder::new();
    let r2 = rec.clone();
    let tool = ToolDefinition::builder("t", "d")
        .output(ToolOutput::string())
        .execute(move |_ctx| {
            r2.push("dispatch");
            async { Ok(Json::string("ok")) }
        })
        .build()
        .expect("builds");
    let rt = runtime_of([tool]);
    let _pre = rt
        .hooks()
        .on_pre_execute(Scope::Global, PreAround(rec.clone()));
    let _post = rt
        .hooks()
        .on_post_execute(Scope::Global, PostAround(rec.clone()));
    let r = rt.execute(input("c1", "t", json!({}))).await;
    assert!(!r.is_error());
    assert_eq!(
        rec.entries(),
        [
            "pre:before",
            "pre:after",
            "dispatch",
            "post:before",
            "post:after"
        ]
    );
}

#[tokio::test]
async fn fin_21_a_failing_post_execute_listener_is_exactly_an_error_result() {
    let rt = runtime_of([echo_tool()]);
    let _h = rt.hooks().on_post_execute(
        Scope::Global,
        PostFn(
            |_e: &ToolExecution, _r: &ToolResult, _d: PostToolDecision| {
                Err(Failure::new("post hook broke"))
            },
        ),
    );
    let r = rt.execute(input("c1", "echo", json!({"text": "x"}))).await;
    assert_eq!(
        shape(&r),
        json!({"content": [text("Error: post hook broke")], "error": {"message": "post hook broke"}, "isError": true})
    );
}

// FIN-22 skipped: TS-only compile-time test. `dsh_core::ResultObserver::on_result` is a
// synchronous method returning `()`, so an async observer does not type-check.

/// Collects the messages of WARN events on the current thread.
#[derive(Clone, Default)]
struct Warnings(Arc<Mutex<Vec<String>>>);

struct Fields(String);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!("{}={value:?} ", field.name()));
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.push_str(&format!("{}={value} ", field.name()));
    }
}

impl tracing::Subscriber for Warnings {
    fn enabled(&self, _m: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _s: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _s: &tracing::span::Id, _v: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _s: &tracing::span::Id, _f: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if *event.metadata().level() == tracing::Level::WARN {
            let mut f = Fields(String::new());
            event.record(&mut f);
            self.0.lock().push(f.0);
        }
    }
    fn enter(&self, _s: &tracing::span::Id) {}
    fn exit(&self, _s: &tracing::span::Id) {}
}

/// The outermost wrapper: runs the body, then discards its result for a failure of its own.
struct Discard;

#[async_trait]
impl ExecuteWrapper for Discard {
    async fn around(&self, call: Dispatch, next: ExecuteNext<'_>) -> Result<ToolResult, Failure> {
        let _real = next.run(call).await?;
        Ok(ToolResult::failure_with_content(
            Failure::new("outer failure"),
            text_content("outer failure"),
        ))
    }
}

#[tokio::test]
async fn fin_23_failing_observers_are_contained_and_later_ones_still_run() {
    let warnings = Warnings::default();
    let _sub = tracing::subscriber::set_default(warnings.clone());
    let rt = runtime_of([echo_tool()]);
    let _w = rt.hooks().on_execute(Scope::Global, Discard);
    let agent = AgentId::new("a");
    let saw = Recorder::new();
    let (s1, s2) = (saw.clone(), saw.clone());
    let _scoped = rt.hooks().on_result(
        Scope::Agent(agent.clone()),
        move |_e: &ToolExecution, r: &ToolResult| s1.push(format!("scoped:{}", r.is_error())),
    );
    let _unprintable = rt
        .hooks()
        .on_result(Scope::Global, |_e: &ToolExecution, _r: &ToolResult| {
            std::panic::panic_any(7_u64)
        });
    // The Rust analogue of an observer returning a rejected future: observers are synchronous,
    // so its failure can only be a panic, contained like any other.
    let _async_like = rt
        .hooks()
        .on_result(Scope::Global, |_e: &ToolExecution, _r: &ToolResult| {
            panic!("async observer failure")
        });
    let _normal = rt
        .hooks()
        .on_result(Scope::Global, move |_e: &ToolExecution, r: &ToolResult| {
            s2.push(format!("normal:{}", r.is_error()))
        });
    let r = rt
        .execute(input("c1", "echo", json!({"text": "real"})).with_agent(agent))
        .await;
    assert!(r.is_error());
    assert_eq!(shape(&r)["content"], json!([text("outer failure")]));
    assert_eq!(saw.entries(), ["scoped:true", "normal:true"]);
    let warned = warnings.0.lock().clone();
    assert_eq!(warned.len(), 2, "{warned:?}");
    assert!(
        warned[0].contains("<unprintable thrown value>"),
        "{warned:?}"
    );
    assert!(warned[1].contains("async observer failure"), "{warned:?}");
}

/// Builds the F2 pipeline for one property case and returns the final context sources.
fn context_order_case(deferred: usize, wrapper: usize, post: usize, block: bool) -> Vec<String> {
    let names = |prefix: &str, n: usize| -> Vec<String> {
        (0..n).map(|i| format!("{prefix}-{i}")).collect()
    };
    let d = names("deferred", deferred);
    let d_refs: Vec<&str> = d.iter().map(String::as_str).collect();
    let rt = runtime_of([deferring("d", &d_refs, false)]);
    let _w = rt
        .hooks()
        .on_execute(Scope::Global, AppendContexts(names("wrapper", wrapper)));
    let p = names("post", post);
    let _p = rt.hooks().on_post_execute(
        Scope::Global,
        PostFn(
            move |_e: &ToolExecution, _r: &ToolResult, d: PostToolDecision| {
                let contexts: Vec<ContextMessage> = p.iter().map(|n| ctx(n, n)).collect();
                Ok(if block {
                    PostToolDecision::Block {
                        feedback: text_content("no"),
                        contexts,
                    }
                } else {
                    contexts.into_iter().fold(d, PostToolDecision::push_context)
                })
            },
        ),
    );
    let rt2 = rt.clone();
    let r = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
        .block_on(async move { rt2.execute(input("c1", "d", json!({}))).await });
    sources(&r)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// F2: deferred, then the wrappers', then post-execute's; a block keeps only its own.
    #[test]
    fn fin_18_19_context_order_holds_for_any_counts(
        deferred in 0usize..4, wrapper in 0usize..4, post in 0usize..4, block in any::<bool>()
    ) {
        let got = context_order_case(deferred, wrapper, post, block);
        let mut want: Vec<String> = Vec::new();
        if !block {
            want.extend((0..deferred).map(|i| format!("deferred-{i}")));
            want.extend((0..wrapper).map(|i| format!("wrapper-{i}")));
        }
        want.extend((0..post).map(|i| format!("post-{i}")));
        prop_assert_eq!(got, want);
    }
}
