//! The run's end and its sub-calls (CODE-31, 33, 35, 36, 50..52): aborts mid-commit, queued
//! calls abandoned when the program throws or the outer call is aborted, waiting for calls in
//! flight, the parent token and a nested turn conclusion, and no log without an owning session.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use dsh_code_mode::{CodeErrorKind, CodeOutcome};
use dsh_core::{
    AbortController, Failure, Json, PostExecuteHook, PostNext, PostToolDecision, ToolExecution,
    ToolResult, text_content,
};
use dsh_guard::Scope;
use dsh_test_support::{Latch, PostFn};
use futures::FutureExt;
use parking_lot::Mutex;
use serde_json::{Value, json};

use super::support::*;

struct PostUntilAborted {
    reached: Latch,
}

#[async_trait]
impl PostExecuteHook for PostUntilAborted {
    async fn post_execute(
        &self,
        exec: &ToolExecution,
        result: &ToolResult,
        next: PostNext<'_>,
    ) -> Result<PostToolDecision, Failure> {
        if exec.name() == "safe_read" {
            self.reached.release();
            self.reached.hold().await;
            exec.signal().aborted().await;
        }
        next.run(exec, result).await
    }
}

#[tokio::test]
async fn code_31_the_run_end_aborts_a_sub_call_mid_commit_and_awaits_it() {
    let board = Board::new();
    board.release_all();
    let reached = Latch::new();
    let seen = reached.clone();
    let h = Harness::new(vec![board.tool("safe_read", true)], move |c| {
        c.runtime = Some(scripted(move |run| {
            let seen = seen.clone();
            async move {
                let call = run.bindings.call("safe_read", Some(r#"{"id":"x"}"#));
                tokio::spawn(call);
                seen.reached().await;
                CodeOutcome::success(Some(Json::string("early")), vec![])
            }
            .boxed()
        }))
    })
    .await;
    let _post = h
        .hooks
        .on_post_execute(Scope::Global, PostUntilAborted { reached });
    let r = h.run_code("x").await;
    assert!(!r.is_error(), "{r:?}");
    let settles: Vec<Value> = h
        .dispatch_records()
        .into_iter()
        .filter(|(t, _)| t == "tool/code-dispatch")
        .map(|(_, d)| d)
        .collect();
    assert_eq!(settles.len(), 1);
    assert_eq!(settles[0]["name"], json!("safe_read"));
    assert_eq!(settles[0]["isError"], json!(true));
}

// The program throws once w2 is queued behind w1: on a paused clock its `quiescent()` returns
// only after the spawned submission of w2 ran as far as it can.
#[tokio::test(start_paused = true)]
async fn code_33_queued_calls_are_abandoned_when_the_program_throws() {
    let board = Board::new();
    let waiter = board.clone();
    let rejection: Arc<Mutex<Option<tokio::task::JoinHandle<_>>>> = Arc::new(Mutex::new(None));
    let rej = rejection.clone();
    let h = Harness::new(
        vec![board.tool_ending_on_abort("writer", false)],
        move |c| {
            c.runtime = Some(scripted(move |run| {
                let waiter = waiter.clone();
                let rej = rej.clone();
                async move {
                    tokio::spawn(run.bindings.call("writer", Some(r#"{"id":"w1"}"#)));
                    waiter.wait_started("w1").await;
                    *rej.lock() = Some(tokio::spawn(
                        run.bindings.call("writer", Some(r#"{"id":"w2"}"#)),
                    ));
                    quiescent().await;
                    CodeOutcome::failure(CodeErrorKind::Exception, "Error: thrown", vec![])
                }
                .boxed()
            }))
        },
    )
    .await;
    let r = h.run_code("x").await;
    assert!(r.is_error());
    assert_eq!(h.starts(), ["call-1:code:1"]);
    assert_eq!(h.settles(), ["call-1:code:1"]);
    let w2 = rejection.lock().take().expect("w2 submitted");
    let e = w2.await.expect("joins").expect_err("abandoned");
    assert_eq!(
        e.message,
        "run_code run is over (run_code settled); writer tool call abandoned"
    );
    assert!(!board.is_started("w2"));
}

/// `(call id, parent token, own token, root call id)` of one settled call.
type Seen = (
    String,
    Option<dsh_core::ExecutionToken>,
    dsh_core::ExecutionToken,
    String,
);

#[tokio::test]
async fn code_35_the_parent_is_the_outer_token() {
    let h = Harness::new(vec![echo_tool()], |_| {}).await;
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let _obs = h.hooks.on_result(
        Scope::Global,
        move |exec: &ToolExecution, _r: &ToolResult| {
            s2.lock().push((
                exec.call_id().to_owned(),
                exec.parent(),
                exec.token(),
                exec.root_call_id().to_owned(),
            ));
        },
    );
    let r = h
        .run_code("await tools.echo({value: 'x'}); return 'done'")
        .await;
    assert_eq!(text(&r), "done");
    let seen = seen.lock();
    let outer = seen.iter().find(|s| s.0 == "call-1").expect("outer");
    let sub = seen.iter().find(|s| s.0 == "call-1:code:1").expect("sub");
    assert_eq!(
        sub.1,
        Some(outer.2),
        "parent is the outer execution's token"
    );
    assert_eq!(sub.3, "call-1", "root call id is the outer root");
    assert_eq!(outer.1, None);
}

#[tokio::test]
async fn code_36_a_nested_conclude_turn_concludes_the_outer_call() {
    let concluding = tool_fn("finish", true, |ctx| async move {
        ctx.conclude_turn();
        Ok(Json::string("finished"))
    });
    let h = Harness::new(vec![concluding.clone()], |_| {}).await;
    let r = h.run_code("return await tools.finish({})").await;
    assert!(r.concludes_turn(), "{r:?}");
    let h = Harness::new(vec![concluding], |_| {}).await;
    let _block = h.hooks.on_post_execute(
        Scope::Global,
        PostFn(|exec: &ToolExecution, _r: &ToolResult, d| {
            if exec.name() == "finish" {
                Ok(PostToolDecision::block(text_content("blocked")))
            } else {
                Ok(d)
            }
        }),
    );
    let r = h
        .run_code("try { await tools.finish({}) } catch (e) { return e.message }")
        .await;
    assert!(!r.is_error());
    assert_eq!(value_of(&r)["result"], json!("blocked"));
    assert!(!r.concludes_turn());
}

#[tokio::test]
async fn code_50_an_outer_abort_stops_the_run_and_abandons_queued_calls() {
    let board = Board::new();
    let h = Arc::new(
        Harness::new(vec![board.tool_ending_on_abort("slow", false)], |c| {
            c.limits.wall_time = Duration::from_secs(5)
        })
        .await,
    );
    let ctl = AbortController::new();
    let signal = ctl.signal();
    let h2 = h.clone();
    let run = tokio::spawn(async move {
        h2.runtime
            .execute(
                input(
                    "call-1",
                    "run_code",
                    json!({"code": "await Promise.all([tools.slow({id: '1'}), tools.slow({id: '2'})])", "description": "d"}),
                )
                .with_signal(signal),
            )
            .await
    });
    board.wait_started("1").await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    ctl.cancel();
    let r = finished(run).await;
    assert!(text(&r).contains("code run failed (abort)"), "{}", text(&r));
    assert_eq!(board.started(), ["1"]);
    assert_eq!(board.aborted(), ["1"]);
    assert_eq!(h.starts(), ["call-1:code:1"]);
    assert_paired(&h.dispatch_records());
}

#[tokio::test]
async fn code_51_the_run_waits_for_in_flight_calls_before_returning() {
    let board = Board::new();
    let waiter = board.clone();
    let h = Harness::new(vec![board.tool_ending_on_abort("slow", true)], move |c| {
        c.runtime = Some(scripted(move |run| {
            let waiter = waiter.clone();
            async move {
                tokio::spawn(run.bindings.call("slow", Some(r#"{"id":"s"}"#)));
                waiter.wait_started("s").await;
                CodeOutcome::failure(CodeErrorKind::Exception, "backend exploded", vec![])
            }
            .boxed()
        }))
    })
    .await;
    let r = h.run_code("x").await;
    assert!(r.is_error());
    assert!(text(&r).contains("backend exploded"));
    assert_eq!(board.aborted(), ["s"], "the in-flight tool saw the abort");
    let settles: Vec<Value> = h
        .dispatch_records()
        .into_iter()
        .filter(|(t, _)| t == "tool/code-dispatch")
        .map(|(_, d)| d)
        .collect();
    assert_eq!(settles.len(), 1, "settled before run_code returned");
    assert_eq!(settles[0]["name"], json!("slow"));
}

#[tokio::test]
async fn code_52_without_an_owning_session_nothing_is_logged() {
    let got = Arc::new(Mutex::new(None));
    let g2 = got.clone();
    let probe = tool_fn("probe", true, move |ctx| {
        let g = g2.clone();
        async move {
            *g.lock() = ctx.arguments().json().map(|j| j.value().clone());
            Ok(Json::string("ok"))
        }
    });
    let h = Harness::new(vec![probe], |c| c.sessions = None).await;
    let r = h.run_code("return await tools.probe({value: 'x'})").await;
    assert_eq!(value_of(&r)["result"], json!("ok"));
    assert_eq!(*got.lock(), Some(json!({"value": "x"})));
    assert!(h.dispatch_records().is_empty());
}
