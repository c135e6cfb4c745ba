//! The `run_code` tool: its definition flavors, arguments, output rendering, failures as
//! `CODE_RUN_FAILED`, cancellation and configuration (CODE-11, 19..22, 48, 49, 53..58, 64..71).

use std::sync::Arc;

use dsh_code_mode::{
    CodeErrorKind, CodeMode, CodeModeConfig, CodeOutcome, KNOWN_LANGUAGES, PresentationMode,
    flavor, validate_max_parallel_sub_calls,
};
use dsh_core::RUN_CODE;
use dsh_core::codes;
use dsh_core::{
    AbortController, AbortReason, CancelCause, Json, PostToolDecision, Replacement, Signal,
    ToolRegistry, text_content,
};
use dsh_guard::Scope;
use dsh_test_support::{PostFn, shape};
use futures::FutureExt;
use parking_lot::Mutex;
use serde_json::json;

use super::support::*;

fn outcome(value: Option<serde_json::Value>, logs: &[&str]) -> CodeOutcome {
    CodeOutcome::success(
        value.map(|v| Json::new(v).expect("json")),
        logs.iter().map(|s| (*s).to_owned()).collect(),
    )
}

#[tokio::test]
async fn code_56_output_rendering_rows() {
    let rows: [(Option<serde_json::Value>, &[&str], &str); 4] = [
        (None, &["printed"], "printed"),
        (Some(json!("returned")), &[], "returned"),
        (Some(json!("returned")), &["printed"], "printed\nreturned"),
        (None, &[], "(run_code completed with no output)"),
    ];
    for (value, logs, expected) in rows {
        let h = Harness::new(vec![echo_tool()], |c| {
            c.runtime = Some(fixed(outcome(value.clone(), logs)))
        })
        .await;
        let r = h.run_code("ignored").await;
        assert!(!r.is_error(), "{r:?}");
        assert_eq!(r.content().len(), 1);
        assert_eq!(text(&r), expected);
    }
}

#[tokio::test]
async fn code_64_result_rendering() {
    let h = Harness::new(vec![], |_| {}).await;
    let cases = [
        (
            "return {n: 42, ok: true}",
            "{\n  \"n\": 42,\n  \"ok\": true\n}",
        ),
        ("return {}", "{}"),
        ("return []", "[]"),
        ("return ['x', 2]", "[\n  \"x\",\n  2\n]"),
        ("return null", "null"),
        ("return 'raw'", "raw"),
    ];
    for (program, expected) in cases {
        let r = h.run_code(program).await;
        assert_eq!(text(&r), expected, "{program}");
    }
    let r = h.run_code("return undefined").await;
    assert_eq!(text(&r), "(run_code completed with no output)");
    assert_eq!(value_of(&r), json!({"logs": []}));
}

#[tokio::test]
async fn code_65_deep_results_render_without_recursion_and_capped() {
    let h = Harness::new(vec![], |_| {}).await;
    let r = h
        .run_code("let v = {leaf: 'leaf'}; for (let i = 0; i < 5000; i++) v = [v]; return v")
        .await;
    assert!(!r.is_error(), "{r:?}");
    let t = text(&r);
    assert!(t.starts_with("[\n  [\n    ["), "{}", &t[..40]);
    assert!(t.contains("\"leaf\""));
    assert!(t.ends_with(']'));
    assert!(t.len() < 11_000, "{}", t.len());
}

#[tokio::test]
async fn code_34_values_logs_and_records() {
    let h = Harness::new(vec![echo_tool()], |_| {}).await;
    let r = h
        .run_code(
            "const first = await tools.echo({value: 'one'}); const second = await tools.echo({value: 'two'}); \
             console.log('saw ' + first); return second",
        )
        .await;
    assert_eq!(
        value_of(&r),
        json!({"logs": ["saw echo:one"], "result": "echo:two"})
    );
    assert_eq!(
        shape(&r)["content"],
        json!([{"type": "text", "text": "saw echo:one\necho:two"}])
    );
    assert!(r.meta().is_none());
    let settles: Vec<serde_json::Value> = h
        .dispatch_records()
        .into_iter()
        .filter(|(t, _)| t == "tool/code-dispatch")
        .map(|(_, d)| d)
        .collect();
    assert_eq!(
        settles,
        vec![
            json!({"rootCallId": "call-1", "parentCallId": "call-1", "subCallId": "call-1:code:1",
                   "name": "echo", "arguments": {"value": "one"}, "isError": false,
                   "content": [{"type": "text", "text": "echo:one"}]}),
            json!({"rootCallId": "call-1", "parentCallId": "call-1", "subCallId": "call-1:code:2",
                   "name": "echo", "arguments": {"value": "two"}, "isError": false,
                   "content": [{"type": "text", "text": "echo:two"}]}),
        ]
    );
}

#[tokio::test]
async fn code_48_timeout_failure_is_code_run_failed_with_logs() {
    let o = CodeOutcome::failure(
        CodeErrorKind::Timeout,
        "compute budget exhausted (300ms busy)",
        vec!["got this far".into()],
    );
    let h = Harness::new(vec![], |c| c.runtime = Some(fixed(o))).await;
    let r = h.run_code("x").await;
    assert!(r.is_error());
    let info = r.error().and_then(|e| e.info()).expect("typed");
    assert_eq!(
        (&*info.name, &*info.code),
        ("CodeRunFailedError", "CODE_RUN_FAILED")
    );
    let t = text(&r);
    assert!(t.contains("code run failed (timeout)"), "{t}");
    assert!(t.contains("compute budget exhausted (300ms busy)"));
    assert!(t.contains("got this far"));
}

#[tokio::test]
async fn code_48_real_timeout_names_the_limit() {
    let h = Harness::new(vec![], |c| {
        c.limits.wall_time = std::time::Duration::from_millis(100)
    })
    .await;
    let r = h.run_code("console.log('got this far'); for (;;) {}").await;
    let t = text(&r);
    assert!(t.starts_with("Error: code run failed (timeout): "), "{t}");
    assert!(t.contains("wallTime"), "{t}");
    assert!(t.ends_with("Captured output:\ngot this far"), "{t}");
}

#[tokio::test]
async fn code_49_the_failure_is_typed() {
    let o = CodeOutcome::failure(CodeErrorKind::Exception, "x", vec![]);
    let f = dsh_code_mode::code_run_failed(&o).expect("failure");
    assert_eq!(f.code(), Some(codes::CODE_RUN_FAILED));
    assert_eq!(
        f.info().map(|i| &*i.name),
        Some(codes::CODE_RUN_FAILED_ERROR)
    );
    assert!(dsh_code_mode::code_run_failed(&CodeOutcome::default()).is_none());
}

#[tokio::test]
async fn code_58_output_limit_content_is_exact() {
    let o = CodeOutcome::failure(
        CodeErrorKind::OutputLimit,
        "outer output exceeded 8 bytes",
        vec!["captured before failure".into()],
    );
    let h = Harness::new(vec![], |c| c.runtime = Some(fixed(o))).await;
    let r = h.run_code("x").await;
    assert_eq!(
        shape(&r)["content"],
        json!([{"type": "text", "text": "Error: code run failed (output-limit): outer output exceeded 8 bytes\nCaptured output:\ncaptured before failure"}])
    );
}

#[tokio::test]
async fn code_53_no_runtime_is_a_structured_error() {
    let h = Harness::new(vec![echo_tool()], |c| c.runtime = None).await;
    let r = h.run_code("return 1").await;
    assert!(r.is_error());
    assert!(text(&r).contains("requires a code runtime"), "{}", text(&r));
}

#[tokio::test]
async fn code_55_whitespace_description_is_invalid() {
    let h = Harness::new(vec![], |_| {}).await;
    let r = h
        .runtime
        .execute(input(
            "call-1",
            "run_code",
            json!({"code": "return 1", "description": "  \n\t "}),
        ))
        .await;
    assert!(r.is_error());
    assert!(text(&r).contains("invalid description"), "{}", text(&r));
    let r = h
        .runtime
        .execute(input(
            "call-1",
            "run_code",
            json!({"description": "no code"}),
        ))
        .await;
    assert_eq!(r.error().and_then(|e| e.code()), Some(codes::INVALID_ARGS));
}

#[tokio::test]
async fn code_57_post_execute_replacement_is_kept() {
    let h = Harness::new(vec![], |_| {}).await;
    let _hook = h.hooks.on_post_execute(
        Scope::Global,
        PostFn(
            |exec: &dsh_core::ToolExecution, _r: &dsh_core::ToolResult, d| {
                if exec.name() == RUN_CODE {
                    Ok(PostToolDecision::Accept {
                        replace: Some(Replacement::Content(text_content("[spilled: preview]"))),
                        contexts: vec![],
                    })
                } else {
                    Ok(d)
                }
            },
        ),
    );
    let r = h.run_code("return 'x'.repeat(100)").await;
    assert_eq!(
        shape(&r)["content"],
        json!([{"type": "text", "text": "[spilled: preview]"}])
    );
}

#[tokio::test]
async fn code_66_pre_aborted_outer_signal_never_invokes_the_runtime() {
    let invoked = Arc::new(Mutex::new(0));
    let seen = invoked.clone();
    let h = Harness::new(vec![echo_tool()], move |c| {
        c.runtime = Some(scripted(move |_| {
            *seen.lock() += 1;
            async { CodeOutcome::default() }.boxed()
        }))
    })
    .await;
    let signal = Signal::aborted_with(AbortReason::Cancelled(CancelCause::User));
    let r = h
        .runtime
        .execute(
            input(
                "call-1",
                "run_code",
                json!({"code": "return 1", "description": "d"}),
            )
            .with_signal(signal),
        )
        .await;
    assert_eq!(
        shape(&r),
        json!({"content": [{"type": "text", "text": "Error: tool call aborted before dispatch"}],
               "isError": true,
               "error": {"message": "tool call aborted before dispatch",
                         "info": {"name": "AbortError", "code": "ABORTED_BEFORE_DISPATCH"}}})
    );
    assert_eq!(*invoked.lock(), 0);
}

#[tokio::test]
async fn code_67_abort_during_the_run_rejects_later_bindings_and_ends_aborted() {
    let called = Arc::new(Mutex::new(0));
    let c2 = called.clone();
    let echo = tool_fn("echo", true, move |_ctx| {
        let c = c2.clone();
        async move {
            *c.lock() += 1;
            Ok(Json::string("echo"))
        }
    });
    let ctl = AbortController::new();
    let ctl2 = ctl.clone();
    let rejection = Arc::new(Mutex::new(String::new()));
    let rej = rejection.clone();
    let h = Harness::new(vec![echo], move |c| {
        c.runtime = Some(scripted(move |run| {
            let ctl = ctl2.clone();
            let rej = rej.clone();
            async move {
                ctl.cancel();
                let r = run.bindings.call("echo", Some("{}")).await;
                *rej.lock() = r.err().map(|e| e.message).unwrap_or_default();
                CodeOutcome::success(Some(Json::string("done")), vec![])
            }
            .boxed()
        }))
    })
    .await;
    let r = h
        .runtime
        .execute(
            input(
                "call-1",
                "run_code",
                json!({"code": "x", "description": "d"}),
            )
            .with_signal(ctl.signal()),
        )
        .await;
    assert_eq!(*called.lock(), 0, "echo is never called");
    assert_eq!(*rejection.lock(), "tool call aborted before dispatch");
    assert_eq!(
        shape(&r),
        json!({"content": [{"type": "text", "text": "Error: tool call aborted"}],
               "isError": true,
               "error": {"message": "tool call aborted",
                         "info": {"name": "AbortError", "code": "ABORTED"}}})
    );
    assert!(h.dispatch_records().is_empty());
}

#[tokio::test]
async fn code_19_20_22_description_flavors() {
    let ts = flavor("typescript").expect("ts");
    assert!(ts.description.contains("TypeScript program"));
    assert!(ts.description.contains("body of an async function"));
    assert!(ts.description.contains("`description`"));
    assert_eq!(
        ts.parameters.value()["properties"]["code"]["description"],
        json!("The program: the body of an async TypeScript function.")
    );
    let py = flavor("python").expect("py");
    assert!(py.description.contains("Python"));
    assert!(py.description.contains("return"));
    assert!(py.description.contains("`description`"));
    assert!(!py.description.contains("TypeScript"));
    assert_eq!(
        py.parameters.value()["properties"]["code"]["description"],
        json!("The program: the body of an async Python function.")
    );
    // CODE-22: no runtime mounted falls back to the TypeScript flavor.
    let registry = ToolRegistry::new();
    let code = CodeMode::new(
        &registry,
        CodeModeConfig {
            mode: PresentationMode::Code,
            ..CodeModeConfig::default()
        },
    )
    .expect("mount");
    let def = registry.get(RUN_CODE, None).expect("run_code");
    assert_eq!(def.description(), ts.description);
    assert_eq!(def.parameters(), &ts.parameters);
    assert_eq!(code.flavor().language, "typescript");
    // The embedded runtime is plain JavaScript and says so.
    let js = flavor("javascript").expect("js");
    assert!(js.description.contains("JavaScript program"));
}

#[tokio::test]
async fn code_21_unknown_language_flavor_fails_listing_the_known_ones() {
    let e = flavor("ruby").expect_err("ruby has no flavor");
    let known: Vec<String> = KNOWN_LANGUAGES.iter().map(|l| format!("\"{l}\"")).collect();
    assert_eq!(
        e.to_string(),
        format!(
            "no run_code schema flavor registered for runtime language \"ruby\" (known: {})",
            known.join(", ")
        )
    );
    let registry = ToolRegistry::new();
    let mounted = CodeMode::new(
        &registry,
        CodeModeConfig {
            runtime: Some(Arc::new(Scripted {
                language: "ruby",
                f: |_| async { CodeOutcome::default() }.boxed(),
            })),
            ..CodeModeConfig::default()
        },
    );
    assert!(mounted.is_err());
    assert!(registry.get(RUN_CODE, None).is_none());
}

#[tokio::test]
async fn code_69_70_71_configuration() {
    let registry = ToolRegistry::new();
    let e = CodeMode::new(
        &registry,
        CodeModeConfig {
            max_parallel_sub_calls: 0,
            ..CodeModeConfig::default()
        },
    )
    .expect_err("zero pool");
    assert_eq!(
        e.to_string(),
        "maxParallelSubCalls must be a positive integer"
    );
    assert!(validate_max_parallel_sub_calls(0).is_err());
    assert_eq!(validate_max_parallel_sub_calls(3).ok(), Some(3));
    // CODE-70: code mode without a cap loads with the default pool; run_code is defined.
    let code = CodeMode::new(
        &registry,
        CodeModeConfig {
            mode: PresentationMode::Code,
            runtime: Some(Arc::new(dsh_code_mode::QuickJs::new())),
            ..CodeModeConfig::default()
        },
    )
    .expect("mount");
    assert!(code.get(RUN_CODE, None).is_some());
    drop(code);
    // CODE-71: no config is native: no run_code, no SDK.
    let code = CodeMode::new(&registry, CodeModeConfig::default()).expect("mount");
    assert!(code.get(RUN_CODE, None).is_none());
    assert_eq!(code.sdk(None).expect("sdk"), None);
    assert!(code.assemble(None).expect("assemble").sections.is_empty());
}

#[tokio::test]
async fn code_11_run_code_cannot_be_registered_shadowed_or_restricted() {
    let h = Harness::new(vec![echo_tool()], |c| {
        c.runtime = Some(fixed(CodeOutcome::default()))
    })
    .await;
    let agent = dsh_core::AgentId::from("a");
    let fake = echo_tool_named(RUN_CODE);
    let global = h
        .registry
        .register(fake.clone())
        .err()
        .unwrap_or_else(|| panic!("global refused"));
    assert!(
        global
            .to_string()
            .contains("reserved for the Code Mode presentation transport")
    );
    let scoped = h
        .registry
        .register_scoped(&agent, fake)
        .err()
        .unwrap_or_else(|| panic!("scoped refused"));
    assert!(
        scoped
            .to_string()
            .contains("reserved for the Code Mode presentation transport")
    );
    for filter in [
        dsh_core::ToolFilter::Allow(vec![RUN_CODE.into()]),
        dsh_core::ToolFilter::Deny(vec![RUN_CODE.into()]),
    ] {
        let e = h
            .registry
            .restrict(Some(&agent), filter)
            .err()
            .unwrap_or_else(|| panic!("refused"));
        assert!(
            e.to_string()
                .contains("cannot name reserved Code Mode presentation transport")
        );
    }
    let _safe = h
        .registry
        .register_scoped(&agent, echo_tool_named("scoped_safe"))
        .expect("ok");
    let tools = h.code.tools(Some(&agent)).expect("tools");
    assert_eq!(tools.iter().filter(|t| &*t.name == RUN_CODE).count(), 1);
    let global_def = h.code.get(RUN_CODE, None).expect("global");
    let agent_def = h.code.get(RUN_CODE, Some(&agent)).expect("agent");
    assert!(Arc::ptr_eq(&global_def, &agent_def));
    assert_eq!(
        global_def.description(),
        flavor("typescript").expect("ts").description
    );
    let r = h
        .runtime
        .execute(
            input(
                "call-1",
                "run_code",
                json!({"code": "x", "description": "d"}),
            )
            .with_agent(agent),
        )
        .await;
    assert_eq!(text(&r), "(run_code completed with no output)");
}

#[tokio::test]
async fn code_54_present_call_card() {
    let card = dsh_code_mode::present_call(
        &json!({"code": "return 1", "description": "Return the constant one"}),
    );
    assert_eq!(card.title, "Return the constant one");
    assert_eq!(card.kind, "execute");
    assert_eq!(card.raw_input, "return 1");
}
