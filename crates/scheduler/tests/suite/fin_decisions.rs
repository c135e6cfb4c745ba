//! FIN-01..17 through `Runtime::execute`: post-execute decisions (accept, replace, block),
//! `finalize_content` (once, after unregistration, when it fails) and the contexts a decision
//! keeps.

// Tests state their expectations with `expect`: a panic is the failure report.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::{Arc, OnceLock};

use super::support::*;
use dsh_core::{
    ContentBlock, ContextMessage, Failure, Json, PostToolDecision, Registration, Replacement,
    ToolDefinition, ToolExecution, ToolOutput, ToolRegistry, ToolResult, text_content,
};
use dsh_guard::{Hooks, Scope};
use dsh_scheduler::Runtime;
use dsh_test_support::{PostFn, PreFn, Recorder, ctx, echo_tool, input, shape};
use parking_lot::Mutex;
use serde_json::{Value, json};

fn ctx_shape(c: &ContextMessage) -> Value {
    serde_json::to_value(c).expect("context serializes")
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
    let r = runtime_of([tool])
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
    let r = runtime_of([tool])
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
    let rt = runtime_of([closed_tool()]);
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
    let rt = runtime_of([echo_tool()]);
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
    let rt = runtime_of([echo_tool()]);
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
    let rt = runtime_of([echo_tool()]);
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
    let rt = runtime_of([echo_tool()]);
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
    let rt = runtime_of([tool]);
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
    let rt = runtime_of([composite, nested]);
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
    let rt = runtime_of([echo_tool()]);
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
    let rt = runtime_of([echo_tool()]);
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
    let r = runtime_of([tool])
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
    let rt = runtime_of([echo_tool()]);
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
    let rt = runtime_of([echo_tool()]);
    let context = ctx("test", "fyi");
    let _h = post_decides(&rt, accept(None, vec![context.clone()]));
    let r = rt.execute(input("c1", "echo", json!({"text": "x"}))).await;
    assert_eq!(&**r.additional_contexts(), std::slice::from_ref(&context));
    assert_eq!(r.additional_contexts()[0].first_text(), Some("fyi"));
    assert_eq!(r.additional_contexts()[0].plugin(), Some("test"));
}
