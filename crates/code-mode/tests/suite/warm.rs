//! Runs on one `QuickJs`, which starts each run on an interpreter prepared ahead: every run
//! still gets its own, under its own limits, and sees nothing a run before it did.

use std::sync::Arc;

use dsh_code_mode::{Bindings, CodeErrorKind, CodeOutcome, CodeRun, CodeRuntime, Limits, QuickJs};
use dsh_core::Signal;
use serde_json::json;

use super::support::*;

async fn run_on(js: &QuickJs, program: &str, limits: Limits) -> CodeOutcome {
    let bindings = Bindings::new([Arc::from("echo")], echo_host());
    js.run(CodeRun {
        program: program.to_owned(),
        bindings,
        signal: Signal::never(),
        limits,
    })
    .await
}

/// What a program could leave behind in its context, changed by one run and read by the next.
const TAMPER: &str = "
    globalThis.leak = 1;
    Object.prototype.polluted = 'yes';
    Array.prototype.push = function () { return 'hijacked'; };
    JSON.stringify = function () { return 'hijacked'; };
    Promise.prototype.then = function () { return 'hijacked'; };
    return 'tampered';
";

const INSPECT: &str = "
    const seen = [typeof leak, typeof ({}).polluted, [].push(1), JSON.stringify({a: 1})];
    seen.push(await tools.echo({value: 'after'}));
    return seen;
";

#[tokio::test]
async fn code_mode_warm_start_shares_no_state_between_runs() {
    let js = QuickJs::new();
    for _ in 0..3 {
        let tampered = run_on(&js, TAMPER, fast_limits()).await;
        assert_eq!(tampered.error, None);
        assert_eq!(
            tampered.value.map(|v| v.value().clone()),
            Some(json!("tampered"))
        );
        let clean = run_on(&js, INSPECT, fast_limits()).await;
        assert_eq!(clean.error, None, "{:?}", clean.error);
        assert_eq!(
            clean.value.map(|v| v.value().clone()),
            Some(json!([
                "undefined",
                "undefined",
                1,
                "{\"a\":1}",
                "echo:after"
            ]))
        );
    }
}

#[tokio::test]
async fn code_mode_warm_start_applies_each_runs_memory_limit() {
    let js = QuickJs::new();
    // About 16 MB of doubles: over an 8 MiB limit, well under the default 64 MiB.
    let program = "const a = []; for (let i = 0; i < 20; i++) a.push(new Array(100000).fill(1.5)); return a.length;";
    let small = Limits {
        memory_bytes: 8 << 20,
        ..fast_limits()
    };
    for _ in 0..2 {
        let o = run_on(&js, program, small.clone()).await;
        let e = o.error.expect("over the 8 MiB limit");
        assert_eq!(e.kind, CodeErrorKind::Memory, "{}", e.message);
        // The next interpreter was prepared under the small limit; this run's is the default.
        let o = run_on(&js, program, fast_limits()).await;
        assert_eq!(o.error, None, "{:?}", o.error);
        assert_eq!(o.value.map(|v| v.value().clone()), Some(json!(20)));
    }
}

#[tokio::test]
async fn code_mode_warm_start_applies_each_runs_stack_limit() {
    let js = QuickJs::new();
    let depth = "let d = 0; function f() { d++; f(); } try { f(); } catch (e) {} return d;";
    let small = Limits {
        stack_bytes: 256 << 10,
        ..fast_limits()
    };
    let reached = |o: CodeOutcome| -> u64 {
        assert_eq!(o.error, None, "{:?}", o.error);
        o.value.and_then(|v| v.value().as_u64()).expect("a depth")
    };
    for _ in 0..2 {
        // Prepared with the default 8 MiB stack, this run starts on a thread of its own size.
        let shallow = reached(run_on(&js, depth, small.clone()).await);
        let deep = reached(run_on(&js, depth, fast_limits()).await);
        assert!(shallow > 0);
        assert!(
            deep > shallow * 8,
            "8 MiB reached {deep} calls, 256 KiB {shallow}"
        );
    }
}

#[tokio::test]
async fn code_mode_warm_start_serves_concurrent_runs_each_on_its_own_interpreter() {
    let js = QuickJs::new();
    let program =
        "globalThis.mine = (globalThis.mine ?? 0) + 1; await tools.echo({value: 1}); return mine;";
    let runs: Vec<_> = (0..4)
        .map(|_| run_on(&js, program, fast_limits()))
        .collect();
    for o in futures::future::join_all(runs).await {
        assert_eq!(o.error, None, "{:?}", o.error);
        assert_eq!(o.value.map(|v| v.value().clone()), Some(json!(1)));
    }
}
