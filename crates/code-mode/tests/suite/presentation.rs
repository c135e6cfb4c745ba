//! Presentation modes and the SDK (CODE-01..05, 08..10, 12..18, 23, 24, 72..82, SCH-27): what
//! each agent is shown, what it may call directly, and the generated description of `tools`.

use std::sync::Arc;

use dsh_code_mode::{
    CODE_ONLY_SECTION, CodeMode, CodeModeConfig, CodeOutcome, CodeRuntime, PresentationMode,
    SDK_SECTION, UNLISTED_TOOLS, render_sdk,
};
use dsh_core::RUN_CODE;
use dsh_core::codes;
use dsh_core::{
    AbortReason, AgentId, Arguments, CancelCause, ExecutionMode, Json, Signal, ToolDefinition,
    ToolFilter, ToolOutput, ToolRegistry,
};
use dsh_scheduler::{StepContext, ToolCallBlock};
use dsh_session::{Event, Session};
use parking_lot::Mutex;
use serde_json::{Value, json};

use super::support::*;

fn names(tools: &[dsh_core::ToolSchema]) -> Vec<String> {
    tools.iter().map(|t| t.name.to_string()).collect()
}

fn mount(registry: &ToolRegistry, configure: impl FnOnce(&mut CodeModeConfig)) -> CodeMode {
    let mut config = CodeModeConfig {
        runtime: Some(Arc::new(dsh_code_mode::QuickJs::new())),
        limits: fast_limits(),
        ..CodeModeConfig::default()
    };
    configure(&mut config);
    CodeMode::new(registry, config).expect("mount")
}

fn registry_with(tools: Vec<ToolDefinition>) -> (ToolRegistry, Vec<dsh_core::Registration>) {
    let registry = ToolRegistry::new();
    let keep = tools
        .into_iter()
        .map(|t| registry.register(t).expect("register"))
        .collect();
    (registry, keep)
}

#[test]
fn code_01_native_without_a_runtime_presents_the_tools_and_no_sdk() {
    let (registry, _k) = registry_with(vec![echo_tool()]);
    let code = mount(&registry, |c| c.runtime = None);
    let a = code.assemble(None).expect("assembles without a runtime");
    assert_eq!(a.tool_names(), ["echo"]);
    assert!(a.section(SDK_SECTION).is_none());
}

#[test]
fn code_02_code_presents_only_run_code_and_an_sdk_of_the_tools() {
    let (registry, _k) = registry_with(vec![echo_tool()]);
    let code = mount(&registry, |c| c.mode = PresentationMode::Code);
    let a = code.assemble(None).expect("assemble");
    assert_eq!(a.tool_names(), [RUN_CODE]);
    let sdk = &a.section(SDK_SECTION).expect("sdk").text;
    assert!(sdk.contains("declare const tools: {"), "{sdk}");
    assert!(sdk.contains("  echo(args: {"), "{sdk}");
    assert!(sdk.contains("value: string;"), "{sdk}");
    assert!(!sdk.contains("run_code("), "{sdk}");
}

#[test]
fn code_03_the_code_only_section_comes_before_guidance_and_the_sdk() {
    let (registry, _k) = registry_with(vec![echo_tool()]);
    let code = mount(&registry, |c| c.mode = PresentationMode::Code);
    let a = code.assemble(None).expect("assemble");
    let only = a.section(CODE_ONLY_SECTION).expect("code-only");
    assert!(only.text.contains("Only `run_code` is callable directly"));
    let guidance_order = 100;
    assert!(only.order < guidance_order);
    assert!(only.order < a.section(SDK_SECTION).expect("sdk").order);
    let ids: Vec<&str> = a.sections.iter().map(|s| s.id).collect();
    assert_eq!(ids, [CODE_ONLY_SECTION, SDK_SECTION]);
}

#[test]
fn code_04_08_both_presents_native_tools_then_run_code_without_the_code_only_text() {
    let (registry, _k) = registry_with(vec![echo_tool()]);
    let code = mount(&registry, |c| c.mode = PresentationMode::Both);
    let a = code.assemble(None).expect("assemble");
    assert_eq!(a.tool_names(), ["echo", RUN_CODE]);
    assert!(
        a.section(CODE_ONLY_SECTION).is_none(),
        "empty text is dropped"
    );
    assert!(a.section(SDK_SECTION).is_some());
}

#[test]
fn code_05_a_5000_deep_schema_renders_without_overflow() {
    // Built by hand: `json!` would serialize the interpolated value recursively.
    let mut deep = json!({"type": "string"});
    for _ in 0..5000 {
        let mut m = serde_json::Map::new();
        m.insert(
            "oneOf".into(),
            Value::Array(vec![deep, json!({"type": "null"})]),
        );
        deep = Value::Object(m);
    }
    let deep = Json::new(deep).expect("json");
    let raw = ToolDefinition::builder("raw", "A raw tool")
        .parameters(deep.clone())
        .output(ToolOutput::new(deep, |_| Ok(dsh_core::text_content("x"))))
        .execute(|_| async { Ok(Json::null()) })
        .build()
        .expect("raw");
    let (registry, _k) = registry_with(vec![raw]);
    let code = mount(&registry, |c| c.mode = PresentationMode::Code);
    // Render on a small stack: the projection must not recurse with the schema's depth.
    let handle = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || code.sdk(None).expect("sdk").expect("text"))
        .expect("thread");
    let sdk = handle.join().expect("no overflow");
    assert!(
        sdk.contains("  raw(args: Record<string, unknown>): Promise<unknown>;"),
        "{sdk}"
    );
}

#[test]
fn code_09_10_restrictions_shape_the_tools_the_sdk_and_the_bindings() {
    for mode in [PresentationMode::Code, PresentationMode::Both] {
        for (filter, kept, hidden) in [
            (ToolFilter::Allow(vec!["echo".into()]), "echo", "hidden"),
            (ToolFilter::Deny(vec!["denied".into()]), "kept", "denied"),
        ] {
            let (registry, _k) =
                registry_with(vec![echo_tool_named(kept), echo_tool_named(hidden)]);
            let code = mount(&registry, |c| c.mode = mode);
            let agent = AgentId::from("a");
            let restriction = registry.restrict(Some(&agent), filter).expect("restrict");
            let expected: Vec<&str> = match mode {
                PresentationMode::Code => vec![RUN_CODE],
                _ => vec![kept, RUN_CODE],
            };
            assert_eq!(names(&code.tools(Some(&agent)).expect("tools")), expected);
            let sdk = code.sdk(Some(&agent)).expect("sdk").expect("text");
            assert!(sdk.contains(&format!("  {kept}(")), "{sdk}");
            assert!(!sdk.contains(&format!("  {hidden}(")), "{sdk}");
            assert_eq!(code.binding_names(Some(&agent)), [kept]);
            restriction.dispose();
            let expected: Vec<&str> = match mode {
                PresentationMode::Code => vec![RUN_CODE],
                _ => vec![kept, hidden, RUN_CODE],
            };
            assert_eq!(names(&code.tools(Some(&agent)).expect("tools")), expected);
        }
    }
}

#[tokio::test]
async fn code_09_13_the_program_sees_exactly_the_visible_bindings() {
    let h = Harness::new(vec![echo_tool(), echo_tool_named("hidden")], |c| {
        c.mode = PresentationMode::Both
    })
    .await;
    let agent = AgentId::from("a");
    let _r = h
        .registry
        .restrict(Some(&agent), ToolFilter::Allow(vec!["echo".into()]))
        .expect("restrict");
    let r = h
        .runtime
        .execute(
            input(
                "call-1",
                RUN_CODE,
                json!({"code": "let p = tools, found = false; while (p) { if (Object.prototype.hasOwnProperty.call(p, 'run_code')) found = true; p = Object.getPrototypeOf(p) } \
                        const why = async (f) => { try { await f({value: 'x'}); return 'called' } catch (e) { return e.message } }; \
                        return [Object.keys(tools), found, 'run_code' in tools, 'hidden' in tools, await why(tools.run_code), await why(tools.hidden)]",
                       "description": "inspect"}),
            )
            .with_agent(agent),
        )
        .await;
    assert_eq!(
        value_of(&r)["result"],
        json!([
            ["echo"],
            false,
            false,
            false,
            "unknown tool \"run_code\"; tools: echo",
            "unknown tool \"hidden\"; tools: echo"
        ]),
        "{r:?}"
    );
}

#[test]
fn code_12_23_tool_order() {
    for (mode, expected) in [
        (PresentationMode::Code, vec![RUN_CODE]),
        (PresentationMode::Both, vec![RUN_CODE, "echo"]),
    ] {
        let (registry, _k) = registry_with(vec![echo_tool()]);
        let code = mount(&registry, |c| {
            c.mode = mode;
            c.tool_order = Some(vec![RUN_CODE.into(), UNLISTED_TOOLS.into()]);
        });
        assert_eq!(names(&code.tools(None).expect("tools")), expected);
    }
    let (registry, _k) = registry_with(vec![echo_tool()]);
    let code = mount(&registry, |c| {
        c.mode = PresentationMode::Code;
        c.tool_order = Some(vec!["echo".into()]);
    });
    let e = code.assemble(None).expect_err("echo is not presented");
    assert_eq!(e.to_string(), "toolOrder lists unregistered tool \"echo\"");
}

#[test]
fn code_14_the_sdk_is_byte_identical_across_assemblies() {
    let (registry, _k) = registry_with(vec![echo_tool(), echo_tool_named("other")]);
    let code = mount(&registry, |c| c.mode = PresentationMode::Code);
    let a = code.sdk(None).expect("sdk");
    let b = code.sdk(None).expect("sdk");
    assert!(a.is_some());
    assert_eq!(a, b);
}

#[test]
fn code_15_82_modes_showing_run_code_require_a_runtime() {
    let (registry, _k) = registry_with(vec![echo_tool()]);
    let code = mount(&registry, |c| {
        c.mode = PresentationMode::Code;
        c.runtime = None;
    });
    for _ in 0..2 {
        let e = code.assemble(None).expect_err("needs a runtime");
        assert!(e.to_string().contains("requires a code runtime"), "{e}");
    }
    let (registry, _k) = registry_with(vec![echo_tool()]);
    let code = mount(&registry, |c| c.runtime = None);
    let agent = AgentId::from("a");
    let _d = code
        .declare_mode(Some(&agent), PresentationMode::Both)
        .expect("declare");
    let e = code.assemble(Some(&agent)).expect_err("needs a runtime");
    assert_eq!(e.to_string(), "mode \"both\" requires a code runtime");
    assert!(
        code.assemble(None).is_ok(),
        "the native deployment is unaffected"
    );
}

#[test]
fn code_16_17_18_sdk_renderers_by_language() {
    let e = render_sdk("ruby", &[]).expect_err("no ruby");
    assert_eq!(
        e.to_string(),
        "no SDK renderer registered for runtime language \"ruby\""
    );
    struct Py;
    #[async_trait::async_trait]
    impl CodeRuntime for Py {
        fn language(&self) -> &str {
            "python"
        }
        async fn run(&self, _run: dsh_code_mode::CodeRun) -> CodeOutcome {
            CodeOutcome::default()
        }
    }
    let (registry, _k) = registry_with(vec![echo_tool()]);
    let code = mount(&registry, |c| {
        c.mode = PresentationMode::Both;
        c.runtime = Some(Arc::new(Py));
    });
    let sdk = code.sdk(None).expect("sdk").expect("text");
    assert!(sdk.contains("class Tools(Protocol):"), "{sdk}");
    assert!(
        sdk.contains("    async def echo(self, args: dict[str, Any]) -> Any:"),
        "{sdk}"
    );
    assert!(sdk.contains("top-level await"), "{sdk}");
    let tools = code.tools(None).expect("tools");
    assert_eq!(names(&tools), ["echo", RUN_CODE]);
    let run_code = tools
        .iter()
        .find(|t| &*t.name == RUN_CODE)
        .expect("run_code");
    assert!(run_code.description.contains("Python program"));
}

#[test]
fn code_24_unmounting_removes_run_code_and_the_sdk() {
    let (registry, _k) = registry_with(vec![echo_tool()]);
    let code = mount(&registry, |c| c.mode = PresentationMode::Code);
    assert!(registry.get(RUN_CODE, None).is_some());
    code.unmount();
    assert!(registry.get(RUN_CODE, None).is_none());
    let a = code.assemble(None).expect("assemble");
    assert!(a.tools.is_empty());
    assert!(a.sections.is_empty());
    let code = mount(&registry, |c| c.mode = PresentationMode::Code);
    assert!(registry.get(RUN_CODE, None).is_some());
    drop(code);
    assert!(
        registry.get(RUN_CODE, None).is_none(),
        "the last handle unmounts"
    );
}

#[tokio::test]
async fn code_72_73_a_direct_call_under_code_is_unknown_before_any_policy() {
    let ran = Arc::new(Mutex::new(0));
    let r2 = ran.clone();
    let write = tool_fn("write", false, move |_| {
        let r = r2.clone();
        async move {
            *r.lock() += 1;
            Ok(Json::string("wrote"))
        }
    });
    let h = Harness::new(vec![write], |_| {}).await;
    let policy = dsh_test_support::Recorder::new();
    let p2 = policy.clone();
    let _pre = h.hooks.prepend_pre_execute(
        dsh_guard::Scope::Global,
        dsh_test_support::PreFn(move |exec: &dsh_core::ToolExecution| {
            p2.push(exec.name());
            Ok(None)
        }),
    );
    let r = h.runtime.execute(input("m-1", "write", json!({}))).await;
    assert_eq!(
        dsh_test_support::shape(&r)["error"],
        json!({"message": "unknown tool \"write\": only `run_code` is callable directly — call `write` from inside a `run_code` program instead",
               "info": {"name": "ToolNotFoundError", "code": "UNKNOWN_TOOL"}})
    );
    assert!(policy.entries().is_empty(), "no policy ran");
    assert_eq!(*ran.lock(), 0);
    let aborted = Signal::aborted_with(AbortReason::Cancelled(CancelCause::User));
    let r = h
        .runtime
        .execute(input("m-2", "write", json!({})).with_signal(aborted))
        .await;
    assert_eq!(
        r.error().and_then(|e| e.code()),
        Some(codes::ABORTED_BEFORE_DISPATCH)
    );
}

#[tokio::test]
async fn code_74_an_agent_declares_code_in_a_native_deployment() {
    let ran = Arc::new(Mutex::new(0));
    let r2 = ran.clone();
    let echo = tool_fn("echo", true, move |_| {
        let r = r2.clone();
        async move {
            *r.lock() += 1;
            Ok(Json::string("echo"))
        }
    });
    let h = Harness::new(vec![echo], |c| c.mode = PresentationMode::Native).await;
    let agent = AgentId::from("a");
    let _d = h
        .code
        .declare_mode(Some(&agent), PresentationMode::Code)
        .expect("declare");
    assert_eq!(
        names(&h.code.tools(Some(&agent)).expect("tools")),
        [RUN_CODE]
    );
    assert!(
        h.code
            .sdk(Some(&agent))
            .expect("sdk")
            .expect("text")
            .contains("  echo(")
    );
    let r = h
        .runtime
        .execute(input("m-1", "echo", json!({})).with_agent(agent.clone()))
        .await;
    assert_eq!(r.error().and_then(|e| e.code()), Some(codes::UNKNOWN_TOOL));
    assert_eq!(*ran.lock(), 0);
    let global = h.code.assemble(None).expect("global");
    assert_eq!(global.tool_names(), ["echo"]);
    assert!(global.section(SDK_SECTION).is_none());
}

#[tokio::test]
async fn code_75_a_preset_scope_declares_code_for_the_agents_joined_to_it() {
    let h = Harness::new(vec![echo_tool()], |c| c.mode = PresentationMode::Native).await;
    let preset = AgentId::from("preset");
    let joined = AgentId::from("joined");
    let lone = AgentId::from("lone");
    let _scope = h.registry.declare_scope(&joined, Some(&preset));
    let _d = h
        .code
        .declare_mode(Some(&preset), PresentationMode::Code)
        .expect("declare");
    assert!(h.code.get(RUN_CODE, Some(&joined)).is_some());
    assert_eq!(
        names(&h.code.tools(Some(&joined)).expect("tools")),
        [RUN_CODE]
    );
    let args = Arguments::Json(Json::new(json!({"value": "x"})).expect("json"));
    assert_eq!(
        h.code.execution_mode("echo", Some(&joined), &args),
        ExecutionMode::Exclusive
    );
    let r = h
        .runtime
        .execute(input("m-1", "echo", json!({"value": "x"})).with_agent(joined))
        .await;
    assert_eq!(r.error().and_then(|e| e.code()), Some(codes::UNKNOWN_TOOL));
    assert!(h.code.get(RUN_CODE, Some(&lone)).is_none());
    assert_eq!(names(&h.code.tools(Some(&lone)).expect("tools")), ["echo"]);
    assert_eq!(
        h.code.execution_mode("echo", Some(&lone), &args),
        ExecutionMode::Parallel
    );
    let r = h
        .runtime
        .execute(input("m-2", "echo", json!({"value": "loner"})).with_agent(lone))
        .await;
    assert_eq!(
        r.value().map(|v| v.value().clone()),
        Some(json!("echo:loner"))
    );
}

#[test]
fn code_76_run_code_resolves_only_for_agents_that_show_it() {
    let (registry, _k) = registry_with(vec![echo_tool()]);
    let code = mount(&registry, |_| {});
    let coder = AgentId::from("coder");
    let plain = AgentId::from("plain");
    let _d = code
        .declare_mode(Some(&coder), PresentationMode::Code)
        .expect("declare");
    assert!(code.get(RUN_CODE, Some(&coder)).is_some());
    assert!(code.get(RUN_CODE, Some(&plain)).is_none());
    assert!(code.get(RUN_CODE, None).is_none());
}

#[test]
fn code_77_78_an_agent_may_opt_out_and_a_disposed_declaration_falls_back() {
    let (registry, _k) = registry_with(vec![echo_tool()]);
    let code = mount(&registry, |c| c.mode = PresentationMode::Code);
    let agent = AgentId::from("a");
    let d = code
        .declare_mode(Some(&agent), PresentationMode::Native)
        .expect("declare");
    assert_eq!(names(&code.tools(Some(&agent)).expect("tools")), ["echo"]);
    assert_eq!(code.sdk(Some(&agent)).expect("sdk").unwrap_or_default(), "");
    d.dispose();
    assert_eq!(names(&code.tools(Some(&agent)).expect("tools")), [RUN_CODE]);
    let (registry, _k) = registry_with(vec![echo_tool()]);
    let code = mount(&registry, |_| {});
    let d = code
        .declare_mode(Some(&agent), PresentationMode::Code)
        .expect("declare");
    assert_eq!(names(&code.tools(Some(&agent)).expect("tools")), [RUN_CODE]);
    d.dispose();
    assert_eq!(names(&code.tools(Some(&agent)).expect("tools")), ["echo"]);
    assert_eq!(code.sdk(Some(&agent)).expect("sdk"), None);
}

#[test]
fn code_79_80_declarations_are_scoped_and_unique() {
    let (registry, _k) = registry_with(vec![echo_tool()]);
    let code = mount(&registry, |_| {});
    let agent = AgentId::from("a");
    let _d = code
        .declare_mode(Some(&agent), PresentationMode::Code)
        .expect("declare");
    let e = code
        .declare_mode(Some(&agent), PresentationMode::Both)
        .err()
        .unwrap_or_else(|| panic!("second declaration"));
    assert!(
        e.to_string()
            .contains("conflicts with \"code\" already declared"),
        "{e}"
    );
    let e = code
        .declare_mode(None, PresentationMode::Code)
        .err()
        .unwrap_or_else(|| panic!("root declaration"));
    assert!(e.to_string().contains("requires a scoped context"), "{e}");
}

#[test]
fn code_81_run_code_is_reserved_in_a_native_deployment() {
    let (registry, _k) = registry_with(vec![]);
    let _code = mount(&registry, |_| {});
    let e = registry
        .register(echo_tool_named(RUN_CODE))
        .err()
        .unwrap_or_else(|| panic!("reserved"));
    assert!(e.to_string().contains("is reserved"), "{e}");
}

#[tokio::test]
async fn sch_27_a_direct_call_through_the_loop_is_unknown_and_never_runs() {
    let ran = Arc::new(Mutex::new(0));
    let r2 = ran.clone();
    let write = tool_fn("write", false, move |_| {
        let r = r2.clone();
        async move {
            *r.lock() += 1;
            Ok(Json::string("wrote"))
        }
    });
    let h = Harness::new(vec![write], |_| {}).await;
    let session = Session::in_memory("loop");
    session.append(Event::turn_start(1)).await.expect("turn");
    session.append(Event::step_start(1, 1)).await.expect("step");
    let runtime = Arc::new(h.runtime.clone());
    let cx = StepContext {
        session: session.clone(),
        turn: 1,
        step: 1,
        agent: None,
        signal: Signal::never(),
        max_parallel: 10,
    };
    let out = runtime
        .run_step(&cx, &[ToolCallBlock::new("m-1", "write", "{}")])
        .await
        .expect("step");
    assert_eq!(*ran.lock(), 0);
    assert_eq!(out.results.len(), 1);
    let result_event: Value = session
        .events()
        .pairs()
        .find(|(_, e)| e.event_type() == "tool/result")
        .map(|(_, e)| e.data().value().clone())
        .expect("tool/result");
    assert_eq!(
        result_event["error"],
        json!({"name": "ToolNotFoundError", "code": "UNKNOWN_TOOL"})
    );
}

#[tokio::test]
async fn agent_sessions_route_records_by_agent() {
    let h = Harness::new(vec![echo_tool()], |c| {
        c.runtime = Some(fixed(CodeOutcome::default()))
    })
    .await;
    let other = Session::in_memory("other");
    other.append(Event::turn_start(1)).await.expect("turn");
    let b = AgentId::from("b");
    h.sessions.insert(Some(b.clone()), other.clone());
    let h2 = Harness::new(vec![echo_tool()], |_| {}).await;
    h2.sessions.insert(Some(b.clone()), other.clone());
    let r = h2
        .runtime
        .execute(
            input(
                "call-9",
                RUN_CODE,
                json!({"code": "return await tools.echo({value: 'b'})", "description": "d"}),
            )
            .with_agent(b.clone()),
        )
        .await;
    assert!(!r.is_error(), "{r:?}");
    let in_other = other
        .events()
        .pairs()
        .filter(|(_, e)| e.event_type().starts_with("tool/code-dispatch"))
        .count();
    assert_eq!(in_other, 2);
    assert!(
        h2.dispatch_records().is_empty(),
        "agent b's records go to its own session"
    );
    h2.sessions.remove(Some(&b));
    drop(h);
}
