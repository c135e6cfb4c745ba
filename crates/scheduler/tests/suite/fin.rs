//! FIN-01..23 through `Runtime::execute`: post-execute decisions, `finalize_content`, the order
//! of additional contexts, and the `tools/result` observers; plus a property test of the context
//! order rule (F2).

// Tests state their expectations with `expect`: a panic is the failure report.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use dsh_core::{
    AgentId, ContentBlock, ContextMessage, Dispatch, ExecuteNext, ExecuteWrapper, Failure, Json,
    PostExecuteHook, PostNext, PostToolDecision, PreExecuteHook, PreNext, PreToolDecision,
    Registration, Replacement, ToolDefinition, ToolExecution, ToolOutput, ToolRegistry, ToolResult,
    text_content,
};
use dsh_guard::{Hooks, Scope};
use dsh_scheduler::Runtime;
use dsh_test_support::{PostFn, PreFn, Recorder, ctx, echo_tool, input, shape};
use parking_lot::Mutex;
use proptest::prelude::*;
use serde::{Serialize, Serializer};
use serde_json::{Value, json};

fn runtime(tools: impl IntoIterator<Item = ToolDefinition>) -> Runtime {
    let registry = ToolRegistry::new();
    for t in tools {
        registry.register(t).expect("registers").keep();
    }
    Runtime::new(registry, Hooks::new())
}

fn text(s: &str) -> Value {
    json!({"type": "text", "text": s})
}

/// The `source.plugin` of each context of a result, in order.
fn sources(r: &ToolResult) -> Vec<String> {
    r.additional_contexts()
        .iter()
        .map(|c| c.plugin().unwrap_or("?").to_owned())
        .collect()
}

fn ctx_shape(c: &ContextMessage) -> Value {
    serde_json::to_value(c).expect("context serializes")
}

/// Registers a post-execute listener that replaces whatever the waterfall decided.
fn post_decides(rt: &Runtime, decision: PostToolDecision) -> dsh_guard::HookHandle {
    rt.hooks().on_post_execute(
        Scope::Global,
        PostFn(
            move |_e: &ToolExecution, _r: &ToolResult, _d: PostToolDecision| Ok(decision.clone()),
        ),
    )
}

fn accept(replace: Option<Replacement>, contexts: Vec<ContextMessage>) -> PostToolDecision {
    PostToolDecision::Accept { replace, contexts }
}

/// Counts `finalize_content` runs and what they saw.
#[derive(Clone, Default)]
struct FinLog(Arc<Mutex<Vec<(String, bool)>>>);

impl FinLog {
    fn record(&self, exec: &ToolExecution, r: &ToolResult) {
        self.0.lock().push((exec.name().to_owned(), r.is_error()));
    }
    fn runs(&self) -> Vec<(String, bool)> {
        self.0.lock().clone()
    }
}

/// A value whose `Serialize` fails: the Rust analogue of a throwing getter.
struct Uncopyable(String);

impl Serialize for Uncopyable {
    fn serialize<S: Serializer>(&self, _s: S) -> Result<S::Ok, S::Error> {
        Err(serde::ser::Error::custom(&self.0))
    }
}

#[tokio::test]
async fn fin_01_finalize_runs_once_on_a_meta_copy_failure() {
    let log = FinLog::default();
    let l = log.clone();
    let tool = ToolDefinition::builder("throwing-meta", "d")
        .output(ToolOutput::string().with_presentation_meta(|_v| {
            Json::snapshot(&Uncopyable("m".repeat(5000)))
                .map(Some)
                .map_err(|e| Failure::new(e.to_string()))
        }))
        .execute(|_ctx| async { Ok(Json::string("ok")) })
        .finalize_content(move |exec, r| {
            l.record(exec, r);
            let first: String = r
                .first_text()
                .unwrap_or_default()
                .chars()
                .take(32)
                .collect();
            Ok(Some(text_content(first)))
        })
        .build()
        .expect("builds");
    let r = runtime([tool])
        .execute(input("c1", "throwing-meta", json!({})))
        .await;
    assert!(r.is_error());
    let first = r.first_text().expect("text");
    assert!(
        first.starts_with("Error: tool \"throwing-meta\""),
        "{first}"
    );
    assert_eq!(first.chars().count(), 32);
    assert_eq!(log.runs(), [("throwing-meta".to_owned(), true)]);
}

#[tokio::test]
async fn fin_02_a_failing_finalizer_fails_the_call_and_is_not_called_again() {
    let log = FinLog::default();
    let l = log.clone();
    let tool = ToolDefinition::builder("strict", "d")
        .output(ToolOutput::string())
        .execute(|_ctx| async { Ok(Json::string("ok")) })
        .finalize_content(move |exec, r| {
            l.record(exec, r);
            Err(Failure::new("finalizer violated its total contract"))
        })
        .build()
        .expect("builds");
    let r = runtime([tool])
        .execute(input("c1", "strict", json!({})))
        .await;
    assert_eq!(
        shape(&r),
        json!({
            "content": [text("Error: finalizer violated its total contract")],
            "isError": true,
            "error": {"message": "finalizer violated its total contract"},
        })
    );
    assert_eq!(log.runs(), [("strict".to_owned(), false)]);
}

/// Closed object `{text}` output, rendered `render:<text>`, meta `{projected: <text>}`.
fn closed_tool() -> ToolDefinition {
    let output = ToolOutput::new(
        Json::from_shallow(json!({
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
            "additionalProperties": false
        })),
        |v| {
            Ok(text_content(format!(
                "render:{}",
                v.value()["text"].as_str().unwrap_or_default()
            )))
        },
    )
    .with_presentation_meta(|v| {
        Ok(Some(Json::from_shallow(
            json!({"projected": v.value()["text"].clone()}),
        )))
    });
    ToolDefinition::builder("closed", "d")
        .output(output)
        .execute(|_ctx| async { Ok(Json::from_shallow(json!({"text": "body"}))) })
        .build()
        .expect("builds")
}

#[tokio::test]
async fn fin_03_replacing_content_keeps_value_and_meta_replacing_value_recomputes_them() {
    let rt = runtime([closed_tool()]);
    let h = post_decides(
        &rt,
        accept(
            Some(Replacement::Content(text_content("policy content"))),
            vec![],
        ),
    );
    let a = rt.execute(input("c1", "closed", json!({}))).await;
    assert_eq!(
        shape(&a),
        json!({
            "isError": false,
            "value": {"text": "body"},
            "content": [text("policy content")],
            "meta": {"projected": "body"},
        })
    );
    h.dispose();
    let context = ctx("policy", "policy context");
    let _h = post_decides(
        &rt,
        accept(
            Some(Replacement::Value(Json::from_shallow(
                json!({"text": "policy value"}),
            ))),
            vec![context.clone()],
        ),
    );
    let b = rt.execute(input("c2", "closed", json!({}))).await;
    assert_eq!(
        shape(&b),
        json!({
            "isError": false,
            "value": {"text": "policy value"},
            "content": [text("render:policy value")],
            "meta": {"projected": "policy value"},
            "additionalContexts": [{
                "content": [text("policy context")],
                "source": {"kind": "plugin", "plugin": "policy"},
                "role": "user",
                "id": &*context.id,
            }],
        })
    );
}

// FIN-04 (a), replacing both value and content in one decision, cannot be expressed: a
// `Replacement` is either `Content` or `Value`.
#[tokio::test]
async fn fin_04_a_replacement_value_is_validated_against_the_output_schema() {
    let rt = runtime([echo_tool()]);
    let _h = post_decides(
        &rt,
        accept(
            Some(Replacement::Value(Json::from_shallow(json!(1)))),
            vec![],
        ),
    );
    let r = rt.execute(input("c1", "echo", json!({"text": "x"}))).await;
    let v = shape(&r);
    assert_eq!(
        v["error"]["info"],
        json!({"name": "ToolOutputError", "code": "INVALID_TOOL_OUTPUT"})
    );
    assert!(v.get("value").is_none(), "{v}");
}

#[tokio::test]
async fn fin_05_a_block_uses_its_feedback_verbatim() {
    let rt = runtime([echo_tool()]);
    let _h = post_decides(
        &rt,
        PostToolDecision::block(text_content("blocked by policy")),
    );
    let r = rt.execute(input("c1", "echo", json!({"text": "x"}))).await;
    assert_eq!(
        shape(&r),
        json!({
            "isError": true,
            "error": {"message": "blocked by policy"},
            "content": [text("blocked by policy")],
        })
    );
}

#[tokio::test]
async fn fin_06_accepting_a_replacement_value_without_contexts() {
    let rt = runtime([echo_tool()]);
    let _h = post_decides(
        &rt,
        accept(
            Some(Replacement::Value(Json::string("replacement"))),
            vec![],
        ),
    );
    let r = rt.execute(input("c1", "echo", json!({"text": "x"}))).await;
    assert_eq!(
        shape(&r),
        json!({"isError": false, "value": "replacement", "content": [text("replacement")]})
    );
}

#[tokio::test]
async fn fin_07_block_messages_for_empty_and_non_text_feedback() {
    let rt = runtime([echo_tool()]);
    let h = post_decides(&rt, PostToolDecision::block(Arc::from(Vec::new())));
    let r = rt.execute(input("c1", "echo", json!({}))).await;
    assert_eq!(
        r.error().expect("blocked").message(),
        "tool result blocked by post-execute policy"
    );
    h.dispose();
    let reasoning =
        ContentBlock::from_value(json!({"type": "reasoning", "text": "hmm"})).expect("block");
    let _h = post_decides(&rt, PostToolDecision::block(Arc::from(vec![reasoning])));
    let r = rt.execute(input("c2", "echo", json!({}))).await;
    assert_eq!(r.error().expect("blocked").message(), "[reasoning content]");
    assert_eq!(
        shape(&r)["content"],
        json!([{"type": "reasoning", "text": "hmm"}])
    );
}

// FIN-08 skipped: TS-only. Content blocks hold `dsh_core::Json`, which is lossless by
// construction, so block feedback cannot carry a non-JSON field.

#[tokio::test]
async fn fin_09_the_value_of_a_failure_cannot_be_replaced() {
    let tool = ToolDefinition::builder("boom", "d")
        .output(ToolOutput::string())
        .execute(|_ctx| async { Err(Failure::new("exploded")) })
        .build()
        .expect("builds");
    let rt = runtime([tool]);
    let _h = post_decides(
        &rt,
        accept(Some(Replacement::Value(Json::string("patched"))), vec![]),
    );
    let r = rt.execute(input("c1", "boom", json!({}))).await;
    assert_eq!(
        shape(&r)["error"],
        json!({"message": "tools/post-execute cannot replace the value of a failed result"})
    );
}

#[tokio::test]
async fn fin_10_a_replacement_value_for_a_tool_unregistered_meanwhile_is_unknown_tool() {
    let registry = ToolRegistry::new();
    let reg = Mutex::new(Some(registry.register(echo_tool()).expect("registers")));
    let rt = Runtime::new(registry.clone(), Hooks::new());
    let _h = rt.hooks().on_post_execute(
        Scope::Global,
        PostFn(
            move |_e: &ToolExecution, _r: &ToolResult, _d: PostToolDecision| {
                if let Some(r) = reg.lock().take() {
                    r.dispose();
                }
                Ok(accept(
                    Some(Replacement::Value(Json::string("new"))),
                    vec![],
                ))
            },
        ),
    );
    let r = rt.execute(input("c1", "echo", json!({"text": "x"}))).await;
    assert!(registry.get("echo", None).is_none());
    assert_eq!(
        shape(&r)["error"],
        json!({"message": "unknown tool \"echo\"",
               "info": {"name": "ToolNotFoundError", "code": "UNKNOWN_TOOL"}})
    );
}

/// A composite tool calling `nested` as a sub-call and forwarding its turn-conclusion marker.
fn composite_runtime() -> Runtime {
    let cell: Arc<OnceLock<Runtime>> = Arc::default();
    let c = cell.clone();
    let composite = ToolDefinition::builder("composite", "d")
        .output(ToolOutput::string())
        .execute(move |ctx| {
            let rt = c.get().expect("runtime set").clone();
            async move {
                let exec = ctx.exec();
                let sub = input(&format!("{}:sub", exec.call_id()), "nested", json!({}))
                    .with_parent(exec.token(), Arc::from(exec.root_call_id()));
                let nested = rt.execute(sub).await;
                if nested.concludes_turn() {
                    ctx.conclude_turn();
                }
                Ok(Json::string("composite"))
            }
        })
        .build()
        .expect("builds");
    let nested = ToolDefinition::builder("nested", "d")
        .output(ToolOutput::string())
        .execute(|ctx| async move {
            ctx.conclude_turn();
            Ok(Json::string("nested"))
        })
        .build()
        .expect("builds");
    let rt = runtime([composite, nested]);
    assert!(cell.set(rt.clone()).is_ok());
    rt
}

#[tokio::test]
async fn fin_11_a_blocked_nested_call_never_carries_the_conclusion_marker() {
    let rt = composite_runtime();
    let blocked = Recorder::new();
    let b = blocked.clone();
    let h = rt.hooks().on_post_execute(
        Scope::Global,
        PostFn(
            move |e: &ToolExecution, _r: &ToolResult, d: PostToolDecision| {
                if e.parent().is_some() {
                    b.push(e.name().to_owned());
                    return Ok(PostToolDecision::block(text_content("nested blocked")));
                }
                Ok(d)
            },
        ),
    );
    let a = rt.execute(input("c1", "composite", json!({}))).await;
    assert_eq!(blocked.entries(), ["nested"]);
    assert!(!a.is_error());
    assert!(!a.concludes_turn());
    assert!(shape(&a).get("concludesTurn").is_none());
    h.dispose();
    let b = rt.execute(input("c2", "composite", json!({}))).await;
    assert_eq!(
        shape(&b),
        json!({"content": [text("composite")], "isError": false, "value": "composite", "concludesTurn": true})
    );
}

#[tokio::test]
async fn fin_12_accept_with_replacement_content() {
    let rt = runtime([echo_tool()]);
    let _h = post_decides(
        &rt,
        accept(
            Some(Replacement::Content(text_content("rewritten"))),
            vec![],
        ),
    );
    let r = rt.execute(input("c1", "echo", json!({"text": "x"}))).await;
    assert!(!r.is_error());
    assert_eq!(r.first_text(), Some("rewritten"));
}

#[tokio::test]
async fn fin_13_block_feedback_is_the_first_content_block() {
    let rt = runtime([echo_tool()]);
    let _h = post_decides(
        &rt,
        PostToolDecision::block(text_content("output rejected: try again")),
    );
    let r = rt.execute(input("c1", "echo", json!({"text": "x"}))).await;
    assert!(r.is_error());
    assert_eq!(r.first_text(), Some("output rejected: try again"));
}

#[tokio::test]
async fn fin_14_the_finalizer_captured_at_call_start_runs_after_unregistration() {
    let log = FinLog::default();
    let l = log.clone();
    let tool = ToolDefinition::builder("bounded", "d")
        .output(ToolOutput::string())
        .execute(|_ctx| async { Ok(Json::string("ok")) })
        .finalize_content(move |exec, r| {
            l.record(exec, r);
            Ok(r.is_error().then(|| text_content("bounded failure")))
        })
        .build()
        .expect("builds");
    let registry = ToolRegistry::new();
    let reg: Mutex<Option<Registration>> =
        Mutex::new(Some(registry.register(tool).expect("registers")));
    let rt = Runtime::new(registry.clone(), Hooks::new());
    let _pre = rt.hooks().on_pre_execute(
        Scope::Global,
        PreFn(move |_e: &ToolExecution| {
            if let Some(r) = reg.lock().take() {
                r.dispose();
            }
            Err(Failure::harness("POLICY_FAILED", "policy failed"))
        }),
    );
    let r = rt.execute(input("c1", "bounded", json!({}))).await;
    assert!(registry.get("bounded", None).is_none());
    assert_eq!(
        shape(&r),
        json!({
            "content": [text("bounded failure")],
            "isError": true,
            "error": {"message": "policy failed", "info": {"name": "HarnessError", "code": "POLICY_FAILED"}},
        })
    );
    assert_eq!(log.runs(), [("bounded".to_owned(), true)]);
}

#[tokio::test]
async fn fin_15_a_finalizer_returning_nothing_keeps_the_content() {
    let log = FinLog::default();
    let l = log.clone();
    let tool = ToolDefinition::builder("quiet", "d")
        .output(ToolOutput::string())
        .execute(|_ctx| async { Ok(Json::string("")) })
        .finalize_content(move |exec, r| {
            l.record(exec, r);
            Ok(None)
        })
        .build()
        .expect("builds");
    let r = runtime([tool])
        .execute(input("c1", "quiet", json!({})))
        .await;
    assert_eq!(
        shape(&r),
        json!({"content": [text("")], "isError": false, "value": ""})
    );
    assert_eq!(log.runs(), [("quiet".to_owned(), false)]);
}

#[tokio::test]
async fn fin_16_a_block_with_a_context_keeps_exactly_that_context() {
    let rt = runtime([echo_tool()]);
    let context = ctx("blocker", "why");
    let _h = post_decides(
        &rt,
        PostToolDecision::Block {
            feedback: text_content("rejected"),
            contexts: vec![context.clone()],
        },
    );
    let r = rt.execute(input("c1", "echo", json!({"text": "x"}))).await;
    assert!(r.is_error());
    assert_eq!(r.first_text(), Some("rejected"));
    assert_eq!(
        shape(&r)["additionalContexts"],
        json!([ctx_shape(&context)])
    );
}

#[tokio::test]
async fn fin_17_an_accept_with_a_context_carries_exactly_that_context() {
    let rt = runtime([echo_tool()]);
    let context = ctx("test", "fyi");
    let _h = post_decides(&rt, accept(None, vec![context.clone()]));
    let r = rt.execute(input("c1", "echo", json!({"text": "x"}))).await;
    assert_eq!(&**r.additional_contexts(), std::slice::from_ref(&context));
    assert_eq!(r.additional_contexts()[0].first_text(), Some("fyi"));
    assert_eq!(r.additional_contexts()[0].plugin(), Some("test"));
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
    let rt = runtime([deferring("d", &["nested-1", "nested-2"], false)]);
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
    let rt = runtime([deferring("d", &["nested"], true)]);
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
    let rt = runtime([tool]);
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
    let rt = runtime([echo_tool()]);
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
    let rt = runtime([echo_tool()]);
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
    let rt = runtime([deferring("d", &d_refs, false)]);
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
