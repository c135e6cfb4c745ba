//! The escape suite at the runtime seam: programs that reach for authority they must not have,
//! or try to exhaust the host. Each is denied or bounded with a clear error, and the process
//! goes on running programs afterwards.

use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_code_mode::{Bindings, CodeErrorKind, CodeRun, Limits, run_quickjs};
use dsh_core::{AbortController, Signal};
use serde_json::json;

use super::support::*;

async fn healthy() {
    let o = run_plain("return 1 + 1").await;
    assert_eq!(value(&o), json!(2), "the process still runs programs");
}

#[tokio::test]
async fn escape_require_is_not_defined() {
    let o = run_plain("return require('fs')").await;
    let e = o.error.expect("require must fail");
    assert_eq!(e.kind, CodeErrorKind::Exception);
    assert!(
        e.message.contains("require is not defined"),
        "{}",
        e.message
    );
    healthy().await;
}

#[tokio::test]
async fn escape_dynamic_import_is_refused() {
    let o = run_plain(
        "try { await import('fs'); return 'loaded' } catch (e) { return 'refused: ' + e.message }",
    )
    .await;
    let v = value(&o);
    assert!(v.as_str().is_some_and(|s| s.starts_with("refused")), "{v}");
    let o = run_plain("await import('./x.js')").await;
    assert_eq!(o.error.map(|e| e.kind), Some(CodeErrorKind::Exception));
    healthy().await;
}

#[tokio::test]
async fn escape_no_ambient_globals() {
    let o = run_plain(
        "return ['process', 'Deno', 'std', 'os', 'fetch', 'XMLHttpRequest', 'setTimeout', 'setInterval', \
         'Date', 'performance', 'WebAssembly', 'scriptArgs', 'print', 'Worker', 'SharedArrayBuffer'] \
         .filter(n => typeof globalThis[n] !== 'undefined')",
    )
    .await;
    assert_eq!(value(&o), json!([]));
}

#[tokio::test]
async fn escape_eval_of_host_objects_finds_nothing() {
    // eval runs in the same sandbox: it reaches no host object, and the bridge's natives are
    // not globals.
    let o = run_with(
        "const seen = eval('[typeof hostCall, typeof hostLog, typeof pending, typeof settle]'); \
         const f = tools.echo.constructor('return typeof hostCall'); \
         return [seen, await f(), Object.getOwnPropertyNames(globalThis).filter(n => /host|settle|poll|pending/.test(n))]",
        &["echo"],
        echo_host(),
        fast_limits(),
    )
    .await;
    assert_eq!(
        value(&o),
        json!([
            ["undefined", "undefined", "undefined", "undefined"],
            "undefined",
            []
        ])
    );
}

#[tokio::test]
async fn escape_tools_cannot_be_polluted_or_replaced() {
    let host = echo_host();
    let o = run_with(
        "Object.prototype.run_code = async () => 'forged'; \
         Object.prototype.write = async () => 'forged'; \
         try { tools.echo = async () => 'mine' } catch (e) {} \
         try { tools.extra = 1 } catch (e) {} \
         try { Object.setPrototypeOf(tools, {run_code: 1}) } catch (e) {} \
         try { globalThis.tools = {} } catch (e) {} \
         try { delete globalThis.tools } catch (e) {} \
         const why = async (f) => { try { await f({}); return 'called' } catch (e) { return e.message } }; \
         return [await why(tools.run_code), await why(tools.write), Object.keys(tools), await tools.echo({value: 'x'}), \
                 Object.getPrototypeOf(tools), Object.isFrozen(tools), 'run_code' in tools]",
        &["echo"],
        host.clone(),
        fast_limits(),
    )
    .await;
    assert_eq!(
        value(&o),
        json!([
            "unknown tool \"run_code\"; tools: echo",
            "unknown tool \"write\"; tools: echo",
            ["echo"],
            "echo:x",
            null,
            true,
            false
        ])
    );
    assert_eq!(host.calls.lock().len(), 1);
}

#[tokio::test]
async fn escape_builtins_replaced_by_the_program_do_not_break_the_bridge() {
    let o = run_with(
        "JSON.stringify = () => 'evil'; JSON.parse = () => 'evil'; Promise.prototype.then = function () { throw 1 }; \
         Array.isArray = () => false; Object.getPrototypeOf = () => 1; \
         const r = await tools.echo({value: 'ok'}); return {r}",
        &["echo"],
        echo_host(),
        fast_limits(),
    )
    .await;
    // `await` itself uses the engine's own promise machinery, so the program still completes.
    assert_eq!(value(&o), json!({"r": "echo:ok"}));
}

#[tokio::test]
async fn escape_deep_recursion_is_a_range_error_naming_the_stack_limit() {
    let o = run_plain("function f(n) { return f(n + 1) + 1 } return f(0)").await;
    let e = o.error.expect("recursion must fail");
    assert_eq!(e.kind, CodeErrorKind::Exception);
    assert!(e.message.contains("stack"), "{}", e.message);
    assert!(e.message.contains("stackBytes"), "{}", e.message);
    healthy().await;
}

#[tokio::test]
async fn escape_memory_bomb_hits_the_memory_limit() {
    let limits = Limits {
        memory_bytes: 8 << 20,
        ..fast_limits()
    };
    let o = run_with(
        "const a = []; while (true) a.push(new Array(100000).fill(1.5));",
        &[],
        echo_host(),
        limits.clone(),
    )
    .await;
    let e = o.error.expect("must fail");
    assert_eq!(e.kind, CodeErrorKind::Memory, "{}", e.message);
    assert!(e.message.contains("memoryBytes"), "{}", e.message);
    let o = run_with(
        "let s = 'x'; while (true) s = s + s;",
        &[],
        echo_host(),
        limits,
    )
    .await;
    let e = o.error.expect("must fail");
    assert!(
        e.kind == CodeErrorKind::Memory || e.message.contains("string too long"),
        "{e:?}"
    );
    healthy().await;
}

#[tokio::test]
async fn escape_huge_logs_hit_the_output_limit() {
    let limits = Limits {
        max_output_bytes: 1000,
        ..fast_limits()
    };
    let o = run_with(
        "for (let i = 0; ; i++) { try { console.log('line ' + i + ' ' + 'x'.repeat(50)) } catch (e) {} }",
        &[],
        echo_host(),
        limits,
    )
    .await;
    let e = o.error.expect("must fail");
    assert_eq!(e.kind, CodeErrorKind::OutputLimit);
    assert!(e.message.contains("maxOutputBytes"), "{}", e.message);
    let kept: usize = o.logs.iter().map(|l| l.len() + 1).sum();
    assert!(kept <= 1001 && !o.logs.is_empty(), "{kept}");
    assert_eq!(o.logs[0], format!("line 0 {}", "x".repeat(50)));
}

#[tokio::test]
async fn escape_big_result_hits_the_output_limit() {
    let limits = Limits {
        max_output_bytes: 100,
        ..fast_limits()
    };
    let o = run_with("return 'y'.repeat(200)", &[], echo_host(), limits).await;
    assert_eq!(o.error.map(|e| e.kind), Some(CodeErrorKind::OutputLimit));
}

#[tokio::test]
async fn escape_program_size_is_bounded() {
    let limits = Limits {
        max_program_bytes: 64,
        ..fast_limits()
    };
    let o = run_with(
        &format!("return '{}'", "z".repeat(100)),
        &[],
        echo_host(),
        limits,
    )
    .await;
    let e = o.error.expect("must fail");
    assert!(e.message.contains("maxProgramBytes"), "{}", e.message);
}

#[tokio::test]
async fn escape_tool_call_count_is_bounded() {
    let host = echo_host();
    let limits = Limits {
        max_sub_calls: 3,
        ..fast_limits()
    };
    let o = run_with(
        "for (let i = 0; i < 10; i++) { try { await tools.echo({value: i}) } catch (e) {} } return 'done'",
        &["echo"],
        host.clone(),
        limits,
    )
    .await;
    let e = o.error.expect("must fail");
    assert!(e.message.contains("maxSubCalls"), "{}", e.message);
    assert_eq!(host.calls.lock().len(), 3);
}

#[tokio::test]
async fn escape_waiting_on_slow_tools_counts_against_wall_time() {
    struct Slow;
    impl dsh_code_mode::Host for Slow {
        fn call(
            &self,
            _name: &str,
            _args: dsh_core::Json,
        ) -> futures::future::BoxFuture<'static, Result<dsh_core::Json, dsh_code_mode::ToolCallError>>
        {
            Box::pin(async {
                tokio::time::sleep(Duration::from_secs(30)).await;
                Ok(dsh_core::Json::null())
            })
        }
    }
    let limits = Limits {
        wall_time: Duration::from_millis(150),
        ..fast_limits()
    };
    let start = Instant::now();
    let o = run_with(
        "await tools.slow({}); return 1",
        &["slow"],
        Arc::new(Slow),
        limits,
    )
    .await;
    assert_eq!(o.error.map(|e| e.kind), Some(CodeErrorKind::Timeout));
    assert!(start.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn escape_a_promise_that_never_settles_fails_at_once() {
    let start = Instant::now();
    let o = run_plain("await new Promise(() => {}); return 1").await;
    let e = o.error.expect("must fail");
    assert!(e.message.contains("never settle"), "{}", e.message);
    assert!(start.elapsed() < Duration::from_secs(1));
}

#[tokio::test]
async fn escape_abort_stops_a_busy_program() {
    let ctl = AbortController::new();
    let signal = ctl.signal();
    let run = tokio::spawn(run_quickjs(CodeRun {
        program: "while (true) {}".into(),
        bindings: Bindings::new(Vec::new(), echo_host()),
        signal,
        limits: Limits {
            wall_time: Duration::from_secs(20),
            ..Limits::default()
        },
    }));
    tokio::time::sleep(Duration::from_millis(50)).await;
    ctl.cancel();
    let o = tokio::time::timeout(Duration::from_secs(2), run)
        .await
        .expect("stops promptly")
        .expect("joins");
    assert_eq!(o.error.map(|e| e.kind), Some(CodeErrorKind::Abort));
    let pre = run_quickjs(CodeRun {
        program: "return 1".into(),
        bindings: Bindings::new(Vec::new(), echo_host()),
        signal: Signal::aborted_with(dsh_core::AbortReason::Cancelled(
            dsh_core::CancelCause::User,
        )),
        limits: Limits::default(),
    })
    .await;
    assert_eq!(pre.error.map(|e| e.kind), Some(CodeErrorKind::Abort));
}

#[tokio::test]
async fn escape_catching_the_interrupt_is_impossible() {
    let mut limits = fast_limits();
    limits.wall_time = Duration::from_millis(150);
    let o = run_with(
        "for (;;) { try { while (true) {} } catch (e) { console.log('caught') } }",
        &[],
        echo_host(),
        limits,
    )
    .await;
    assert_eq!(o.error.map(|e| e.kind), Some(CodeErrorKind::Timeout));
    assert!(o.logs.is_empty(), "{:?}", o.logs);
}

#[tokio::test]
async fn escape_non_json_return_values_are_invalid_output() {
    for program in [
        "return 10n",
        "return () => 1",
        "return {f() {}}",
        "return [1, undefined]",
        "return NaN",
        "return new Map()",
        "const a = {}; a.self = a; return a",
    ] {
        let o = run_plain(program).await;
        let e = o.error.unwrap_or_else(|| panic!("{program} must fail"));
        assert_eq!(
            e.kind,
            CodeErrorKind::InvalidOutput,
            "{program}: {}",
            e.message
        );
        assert!(e.message.contains("lossless JSON"), "{}", e.message);
    }
}

// ---------------------------------------------------------------------------------------------
// Escapes through the pipeline: recursion into run_code, forged parents, the log stays paired.
// ---------------------------------------------------------------------------------------------

mod pipeline {
    use std::sync::Arc;
    use std::time::Duration;

    use dsh_code_mode::{CodeOutcome, PresentationMode};
    use dsh_core::RUN_CODE;
    use dsh_core::{ExecutionToken, codes};
    use futures::FutureExt;
    use parking_lot::Mutex;
    use serde_json::json;

    use super::super::support::*;

    #[tokio::test]
    async fn escape_recursion_into_run_code_is_impossible() {
        let h = Harness::new(vec![echo_tool()], |c| c.mode = PresentationMode::Both).await;
        let r = h
            .run_code(
                "const viaProto = Object.getPrototypeOf(tools); \
                 let direct; try { await tools['run_code']({code: 'return 1', description: 'x'}) } catch (e) { direct = e.message } \
                 return ['run_code' in tools, viaProto, direct]",
            )
            .await;
        let v = value_of(&r)["result"].clone();
        assert_eq!(v[0], json!(false));
        assert_eq!(v[1], json!(null));
        assert_eq!(v[2], json!("unknown tool \"run_code\"; tools: echo"));
        // A runtime that asks the host for run_code by name is refused before dispatch.
        let refused = Arc::new(Mutex::new(None));
        let r2 = refused.clone();
        let h = Harness::new(vec![echo_tool()], move |c| {
            c.runtime = Some(scripted(move |run| {
                let r2 = r2.clone();
                async move {
                    *r2.lock() = run
                        .bindings
                        .call(RUN_CODE, Some(r#"{"code":"return 1","description":"x"}"#))
                        .await
                        .err();
                    CodeOutcome::default()
                }
                .boxed()
            }))
        })
        .await;
        h.run_code("x").await;
        let e = refused.lock().clone().expect("refused");
        assert_eq!(e.message, "unknown tool \"run_code\"");
        assert!(h.dispatch_records().is_empty());
    }

    #[tokio::test]
    async fn escape_a_sub_call_of_run_code_is_refused_even_with_a_live_parent() {
        let mount: Arc<Mutex<Option<dsh_code_mode::CodeMode>>> = Arc::new(Mutex::new(None));
        let outer: Arc<Mutex<Option<ExecutionToken>>> = Arc::new(Mutex::new(None));
        let verdicts = Arc::new(Mutex::new(Vec::new()));
        let (m2, o2, v2) = (mount.clone(), outer.clone(), verdicts.clone());
        let h = Harness::new(vec![echo_tool()], move |c| {
            c.runtime = Some(scripted(move |_run| {
                let (m2, o2, v2) = (m2.clone(), o2.clone(), v2.clone());
                async move {
                    let token = o2.lock().expect("outer token");
                    let code = m2.lock().clone().expect("mount");
                    for name in [RUN_CODE, "echo"] {
                        let exec = dsh_core::ToolExecution::new(
                            input("call-1:code:9", name, json!({}))
                                .with_parent(token, Arc::from("call-1")),
                        );
                        v2.lock().push(
                            code.check_direct_call(&exec)
                                .and_then(|f| f.code().map(str::to_owned)),
                        );
                    }
                    CodeOutcome::default()
                }
                .boxed()
            }))
        })
        .await;
        *mount.lock() = Some(h.code.clone());
        let o3 = outer.clone();
        let _pre = h.hooks.on_pre_execute(
            dsh_guard::Scope::Global,
            dsh_test_support::PreFn(move |exec: &dsh_core::ToolExecution| {
                if exec.name() == RUN_CODE {
                    *o3.lock() = Some(exec.token());
                }
                Ok(None)
            }),
        );
        let r = h.run_code("x").await;
        assert!(!r.is_error(), "{r:?}");
        assert_eq!(
            *verdicts.lock(),
            [Some(codes::UNKNOWN_TOOL.to_owned()), None],
            "run_code is refused as a sub-call; other tools are admitted"
        );
        drop(h);
        mount.lock().take();
    }

    #[tokio::test]
    async fn escape_forged_parent_tokens_buy_nothing() {
        let h = Harness::new(vec![echo_tool()], |_| {}).await;
        // Under `code`, a call claiming a parent that is not a live run is a direct call.
        let forged = input("m-1", "echo", json!({"value": "x"}))
            .with_parent(ExecutionToken::fresh(), Arc::from("m-0"));
        let r = h.runtime.execute(forged).await;
        assert_eq!(r.error().and_then(|e| e.code()), Some(codes::UNKNOWN_TOOL));
        assert!(
            r.first_text()
                .is_some_and(|t| t.contains("only `run_code` is callable directly"))
        );
        // The token of a run that has ended is no longer live either.
        let tokens = Arc::new(Mutex::new(Vec::new()));
        let t2 = tokens.clone();
        let _obs = h.hooks.on_result(
            dsh_guard::Scope::Global,
            move |exec: &dsh_core::ToolExecution, _r: &dsh_core::ToolResult| {
                if exec.name() == RUN_CODE {
                    t2.lock().push(exec.token());
                }
            },
        );
        h.run_code("return 1").await;
        let stale = tokens.lock()[0];
        let replay =
            input("m-2", "echo", json!({"value": "x"})).with_parent(stale, Arc::from("call-1"));
        let r = h.runtime.execute(replay).await;
        assert_eq!(r.error().and_then(|e| e.code()), Some(codes::UNKNOWN_TOOL));
    }

    #[tokio::test]
    async fn escape_runaway_programs_leave_the_log_paired_and_the_process_healthy() {
        let board = Board::new();
        let h = Harness::new(
            vec![echo_tool(), board.tool_ending_on_abort("slow", true)],
            |c| c.limits.wall_time = Duration::from_millis(300),
        )
        .await;
        let programs = [
            "tools.slow({id: 'a'}); for (;;) {}",
            "tools.slow({id: 'b'}); let s = []; for (;;) s.push(new Array(100000).fill(1))",
            "tools.slow({id: 'c'}); function f() { return f() + 1 } return f()",
            "tools.slow({id: 'd'}); for (;;) console.log('x'.repeat(1000))",
            "await Promise.all([tools.echo({value: '1'}), tools.slow({id: 'e'})])",
        ];
        for (i, p) in programs.iter().enumerate() {
            let r = h.run_code_as(&format!("run-{i}"), p).await;
            assert!(r.is_error(), "{p}: {r:?}");
            assert!(
                r.first_text()
                    .is_some_and(|t| t.starts_with("Error: code run failed (")),
                "{p}: {r:?}"
            );
        }
        assert_paired(&h.dispatch_records());
        assert_eq!(
            board.aborted(),
            ["a", "b", "c", "d", "e"],
            "every in-flight call saw its run end"
        );
        let r = h
            .run_code("return await tools.echo({value: 'still fine'})")
            .await;
        assert_eq!(value_of(&r)["result"], json!("echo:still fine"));
    }

    #[tokio::test]
    async fn escape_an_unrecordable_start_refuses_the_call() {
        // A session with its invariants on and no open turn refuses dispatch records: the call
        // is refused rather than run unrecorded.
        let h = Harness::new(vec![echo_tool()], |_| {}).await;
        let closed = dsh_session::Session::in_memory("no-turn");
        closed.enable_invariants().expect("invariants");
        h.sessions.insert(None, closed.clone());
        let r = h
            .run_code("try { await tools.echo({value: 'x'}) } catch (e) { return e.message }")
            .await;
        let m = value_of(&r)["result"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(m.contains("could not be recorded"), "{m}");
        assert_eq!(closed.events().len(), 0);
    }
}
