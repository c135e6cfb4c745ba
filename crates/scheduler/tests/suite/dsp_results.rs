//! DSP-01..14 through `Runtime::execute`: what a dispatched call's result holds (content,
//! value, presentation meta), output validation and rendering, and how unknown tools, failing
//! bodies and panics are normalized.

// Tests state their expectations with `expect`: a panic is the failure report.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::support::*;
use async_trait::async_trait;
use dsh_core::{
    AbortController, Dispatch, ExecuteNext, ExecuteWrapper, ExecutionToken, Failure, Json,
    PostToolDecision, ToolDefinition, ToolExecution, ToolOutput, ToolRegistry, ToolResult,
    text_content,
};
use dsh_guard::{Hooks, Scope};
use dsh_scheduler::Runtime;
use dsh_test_support::{PostFn, Recorder, ctx, echo_tool, input, shape};
use parking_lot::Mutex;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize, JsonSchema)]
struct NoArgs {}

#[tokio::test]
async fn dsp_01_echo_result_is_exactly_content_is_error_value_and_observed_as_is() {
    let rt = runtime_of([echo_tool()]);
    let seen: Arc<Mutex<Vec<(usize, Value)>>> = Arc::default();
    let s = seen.clone();
    let _o = rt
        .hooks()
        .on_result(Scope::Global, move |_e: &ToolExecution, r: &ToolResult| {
            s.lock().push((r as *const ToolResult as usize, shape(r)));
        });
    let caller = AbortController::new();
    let r = rt
        .execute(input("c1", "echo", json!({"text": "hi"})).with_signal(caller.signal()))
        .await;
    let expected = json!({"content": [text("hi")], "isError": false, "value": "hi"});
    assert_eq!(shape(&r), expected);
    let seen = seen.lock();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].1, expected);
    assert_eq!(
        seen[0].0,
        Arc::as_ptr(&r) as usize,
        "the observer sees the returned result"
    );
}

fn meta_tool(name: &str, meta: Value) -> ToolDefinition {
    let meta = Json::from_shallow(meta);
    ToolDefinition::builder(name, "with meta")
        .output(ToolOutput::string().with_presentation_meta(move |_v| Ok(Some(meta.clone()))))
        .execute(|_ctx| async { Ok(Json::string("ok")) })
        .build()
        .expect("builds")
}

#[tokio::test]
async fn dsp_02_presentation_meta_is_projected_into_meta() {
    let diffs = json!({"diffs": [{"path": "a.txt", "added": 2, "removed": 1}]});
    let rt = runtime_of([meta_tool("diff", diffs.clone())]);
    let r = rt.execute(input("c1", "diff", json!({}))).await;
    assert_eq!(
        shape(&r),
        json!({"content": [text("ok")], "isError": false, "meta": diffs, "value": "ok"})
    );
}

#[tokio::test]
async fn dsp_03_no_presentation_meta_means_no_meta_key() {
    let rt = runtime_of([echo_tool()]);
    let r = rt.execute(input("c1", "echo", json!({"text": "x"}))).await;
    let v = shape(&r);
    assert!(!v.as_object().expect("object").contains_key("meta"), "{v}");
    assert_eq!(r.meta(), None);
    assert_eq!(
        v,
        json!({"content": [text("x")], "isError": false, "value": "x"})
    );
}

#[tokio::test]
async fn dsp_04_a_meta_value_that_is_not_lossless_json_is_invalid_output() {
    let tool = ToolDefinition::builder("lossy-meta", "d")
        .output(ToolOutput::string().with_presentation_meta(|_v| {
            Json::snapshot(&f64::NAN)
                .map(Some)
                .map_err(|e| Failure::new(e.to_string()))
        }))
        .execute(|_ctx| async { Ok(Json::string("ok")) })
        .build()
        .expect("builds");
    let rt = runtime_of([tool]);
    let observed = Arc::new(Mutex::new(None));
    let o = observed.clone();
    let _o = rt
        .hooks()
        .on_result(Scope::Global, move |_e: &ToolExecution, r: &ToolResult| {
            *o.lock() = Some(r.is_error());
        });
    let r = rt.execute(input("c1", "lossy-meta", json!({}))).await;
    assert!(r.is_error());
    assert!(r.first_text().expect("text").starts_with("Error:"));
    let v = shape(&r);
    assert_eq!(
        v["error"]["info"],
        json!({"name": "ToolOutputError", "code": "INVALID_TOOL_OUTPUT"})
    );
    assert!(v.get("value").is_none() && v.get("meta").is_none(), "{v}");
    assert_eq!(*observed.lock(), Some(true));
}

#[tokio::test]
async fn dsp_05_bad_body_values_are_invalid_output_decided_before_post_execute() {
    // (a) The Rust analogue of a non-JSON value: a typed body returning a non-finite number.
    let lossy = ToolDefinition::builder("lossy", "d")
        .output(ToolOutput::json())
        .execute_typed(|_a: NoArgs, _ctx| async { Ok(f64::NAN) })
        .build()
        .expect("builds");
    // (b) 42 for a string schema.
    let wrong = ToolDefinition::builder("wrong", "d")
        .output(ToolOutput::string())
        .execute(|_ctx| async { Ok(Json::from_shallow(json!(42))) })
        .build()
        .expect("builds");
    let rt = runtime_of([lossy, wrong]);
    let post_saw = Recorder::new();
    let p = post_saw.clone();
    let _p = rt.hooks().on_post_execute(
        Scope::Global,
        PostFn(
            move |e: &ToolExecution, r: &ToolResult, d: PostToolDecision| {
                p.push(format!(
                    "{}:{}",
                    e.name(),
                    r.error().and_then(Failure::code).unwrap_or("-")
                ));
                Ok(d)
            },
        ),
    );
    for (name, needle) in [
        ("lossy", "not lossless JSON"),
        ("wrong", "\"value\" must be a string"),
    ] {
        let r = rt.execute(input("c1", name, json!({}))).await;
        let v = shape(&r);
        assert_eq!(
            v["error"]["info"],
            json!({"name": "ToolOutputError", "code": "INVALID_TOOL_OUTPUT"}),
            "{name}: {v}"
        );
        assert!(
            r.error().expect("error").message().contains(needle),
            "{name}: {v}"
        );
        assert!(v.get("value").is_none(), "{v}");
    }
    assert_eq!(
        post_saw.entries(),
        ["lossy:INVALID_TOOL_OUTPUT", "wrong:INVALID_TOOL_OUTPUT"]
    );
}

#[tokio::test]
async fn dsp_06_a_value_whose_copy_fails_is_a_value_snapshot_failure() {
    let tool = ToolDefinition::builder("uncopyable", "d")
        .output(ToolOutput::json())
        .execute_typed(|_a: NoArgs, _ctx| async { Ok(Uncopyable("getter exploded".into())) })
        .build()
        .expect("builds");
    let rt = runtime_of([tool]);
    let r = rt.execute(input("c1", "uncopyable", json!({}))).await;
    let e = r.error().expect("fails");
    assert!(
        e.message()
            .contains("value snapshot failed: getter exploded"),
        "{}",
        e.message()
    );
    assert_eq!(
        shape(&r)["error"]["info"],
        json!({"name": "ToolOutputError", "code": "INVALID_TOOL_OUTPUT"})
    );
}

#[derive(Clone, Copy, Debug)]
enum Projector {
    RenderErr,
    RenderPanic,
    MetaErr,
    MetaPanic,
    RenderCopy,
    MetaCopy,
}

fn projector_tool(row: Projector) -> ToolDefinition {
    let render = move |v: &Json| -> Result<dsh_core::Content, Failure> {
        match row {
            Projector::RenderErr => Err(Failure::new("renderer exploded")),
            Projector::RenderPanic => panic!("renderer exploded"),
            Projector::RenderCopy => Json::snapshot(&Uncopyable("render copy failed".into()))
                .map(|_| text_content("never"))
                .map_err(|e| Failure::new(e.to_string())),
            _ => Ok(text_content(v.as_str().unwrap_or_default())),
        }
    };
    let output = ToolOutput::new(Json::from_shallow(json!({"type": "string"})), render)
        .with_presentation_meta(move |_v| match row {
            Projector::MetaErr => Err(Failure::new("metadata exploded")),
            Projector::MetaPanic => panic!("metadata exploded"),
            Projector::MetaCopy => Json::snapshot(&Uncopyable("meta copy failed".into()))
                .map(Some)
                .map_err(|e| Failure::new(e.to_string())),
            _ => Ok(None),
        });
    ToolDefinition::builder("projected", "d")
        .output(output)
        .execute(|_ctx| async { Ok(Json::string("v")) })
        .build()
        .expect("builds")
}

async fn assert_projector_failure(row: Projector, needle: &str) {
    let rt = runtime_of([projector_tool(row)]);
    let r = rt.execute(input("c1", "projected", json!({}))).await;
    let v = shape(&r);
    assert!(r.is_error(), "{row:?}: {v}");
    assert!(
        r.error().expect("error").message().contains(needle),
        "{row:?}: {v}"
    );
    assert_eq!(
        v["error"]["info"],
        json!({"name": "ToolOutputError", "code": "INVALID_TOOL_OUTPUT"}),
        "{row:?}"
    );
    assert!(v.get("value").is_none(), "{row:?}: {v}");
}

#[tokio::test]
async fn dsp_07_a_failing_render_or_meta_projector_is_one_failed_call() {
    assert_projector_failure(Projector::RenderErr, "renderer exploded").await;
    assert_projector_failure(Projector::RenderPanic, "renderer exploded").await;
    assert_projector_failure(Projector::MetaErr, "metadata exploded").await;
    assert_projector_failure(Projector::MetaPanic, "metadata exploded").await;
}

#[tokio::test]
async fn dsp_08_projector_data_whose_copy_fails_names_the_cause() {
    assert_projector_failure(Projector::RenderCopy, "render copy failed").await;
    assert_projector_failure(Projector::MetaCopy, "meta copy failed").await;
}

#[tokio::test]
async fn dsp_09_a_wrapper_authored_failure_is_kept_verbatim() {
    let runs = Arc::new(AtomicUsize::new(0));
    let rt = runtime_of([counted("echo", "body", &runs)]);
    let context = ctx("wrapper", "wrapper context");
    let authored = ToolResult::failure_with_content(
        Failure::new("wrapped failure"),
        text_content("wrapper content"),
    )
    .with_meta(Some(Json::from_shallow(json!({"wrapped": true}))))
    .with_contexts(Arc::from(vec![context.clone()]));
    let _w = rt
        .hooks()
        .on_execute(Scope::Global, ShortCircuit(Ok(authored)));
    let r = rt.execute(input("c1", "echo", json!({}))).await;
    assert_eq!(
        shape(&r),
        json!({
            "content": [text("wrapper content")],
            "isError": true,
            "error": {"message": "wrapped failure"},
            "meta": {"wrapped": true},
            "additionalContexts": [{
                "content": [text("wrapper context")],
                "source": {"kind": "plugin", "plugin": "wrapper"},
                "role": "user",
                "id": &*context.id,
            }],
        })
    );
    assert!(!context.id.is_empty());
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

/// Unregisters the tool, then returns a success of its own.
struct UnregisterThenSucceed(Mutex<Option<dsh_core::Registration>>);

#[async_trait]
impl ExecuteWrapper for UnregisterThenSucceed {
    async fn around(&self, _call: Dispatch, _next: ExecuteNext<'_>) -> Result<ToolResult, Failure> {
        if let Some(reg) = self.0.lock().take() {
            reg.dispose();
        }
        Ok(ToolResult::success(Json::string("authored")))
    }
}

#[tokio::test]
async fn dsp_10_a_wrapper_success_is_revalidated_against_the_tool_resolving_now() {
    let registry = ToolRegistry::new();
    let reg = registry.register(echo_tool()).expect("registers");
    let rt = Runtime::new(registry.clone(), Hooks::new());
    let _w = rt
        .hooks()
        .on_execute(Scope::Global, UnregisterThenSucceed(Mutex::new(Some(reg))));
    let r = rt.execute(input("c1", "echo", json!({"text": "hi"}))).await;
    assert!(
        registry.get("echo", None).is_none(),
        "the wrapper unregistered echo"
    );
    assert_eq!(
        shape(&r)["error"],
        json!({"message": "unknown tool \"echo\"",
               "info": {"name": "ToolNotFoundError", "code": "UNKNOWN_TOOL"}})
    );
}

#[tokio::test]
async fn dsp_11_meta_is_projected_only_for_root_calls() {
    let tool = ToolDefinition::builder("card", "d")
        .output(
            ToolOutput::string()
                .with_presentation_meta(|_v| Ok(Some(Json::from_shallow(json!({"card": true}))))),
        )
        .execute(|_ctx| async { Ok(Json::string("")) })
        .build()
        .expect("builds");
    let rt = runtime_of([tool]);
    let direct = rt.execute(input("c1", "card", json!({}))).await;
    assert_eq!(
        shape(&direct),
        json!({"content": [text("")], "isError": false, "value": "", "meta": {"card": true}})
    );
    let nested = rt
        .execute(
            input("c1:code:1", "card", json!({}))
                .with_parent(ExecutionToken::fresh(), Arc::from("c1")),
        )
        .await;
    assert_eq!(
        shape(&nested),
        json!({"content": [text("")], "isError": false, "value": ""})
    );
}

#[tokio::test]
async fn dsp_12_unknown_tools_and_failing_bodies_are_normalized() {
    let rt = runtime_of([failing("boom", Failure::new("exploded"))]);
    let a = rt.execute(input("c1", "nope", json!({}))).await;
    assert_eq!(
        shape(&a),
        json!({
            "content": [text("Error: unknown tool \"nope\"")],
            "isError": true,
            "error": {"message": "unknown tool \"nope\"",
                      "info": {"name": "ToolNotFoundError", "code": "UNKNOWN_TOOL"}},
        })
    );
    let b = rt.execute(input("c2", "boom", json!({}))).await;
    assert!(b.is_error());
    assert_eq!(shape(&b)["content"], json!([text("Error: exploded")]));
}

fn explode_unprintably() -> Result<Json, Failure> {
    std::panic::panic_any(42_u32)
}

#[tokio::test]
async fn dsp_13_an_unprintable_panic_resolves_with_the_placeholder() {
    let tool = ToolDefinition::builder("hostile", "d")
        .output(ToolOutput::string())
        .execute(|_ctx| async { explode_unprintably() })
        .build()
        .expect("builds");
    let rt = runtime_of([tool]);
    let r = rt.execute(input("c1", "hostile", json!({}))).await;
    assert!(r.is_error());
    // Our panic messages name where the panic happened (a documented decision of dsh-core);
    // the placeholder is what replaces the unprintable payload.
    assert_eq!(
        shape(&r)["content"],
        json!([text(
            "Error: tool \"hostile\" panicked: <unprintable thrown value>"
        )])
    );
    assert!(r.error().expect("error").info().is_none());
}

#[tokio::test]
async fn dsp_14_the_not_found_error_is_typed() {
    let f = Failure::unknown_tool("ghost");
    let info = f.info().expect("typed");
    assert_eq!(
        (&*info.name, &*info.code),
        ("ToolNotFoundError", "UNKNOWN_TOOL")
    );
    assert_eq!(f.message(), "unknown tool \"ghost\"");
    let r = runtime_of([])
        .execute(input("c1", "ghost", json!({})))
        .await;
    assert_eq!(r.error(), Some(&f));
}
