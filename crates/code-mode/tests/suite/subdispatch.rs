//! Sub-dispatch through the staged runtime (CODE-25..47, 50..52, 59..63): ids, pool, barriers,
//! sequential prepare and finalize, records, rejections, deferred contexts, the run's end.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use dsh_code_mode::{CodeErrorKind, CodeOutcome, PresentationMode};
use dsh_core::{
    AbortController, ContentBlock, ContextMessage, Failure, Json, PostExecuteHook, PostNext,
    PostToolDecision, PreExecuteHook, PreNext, PreToolDecision, Replacement, ToolDefinition,
    ToolExecution, ToolOutput, ToolResult, text_content,
};
use dsh_guard::Scope;
use dsh_test_support::{Latch, PostFn, PreFn, Recorder, context_texts};
use futures::FutureExt;
use parking_lot::Mutex;
use serde_json::{Value, json};

use super::support::*;

fn spawn_run(h: &Arc<Harness>, program: &str) -> tokio::task::JoinHandle<Arc<ToolResult>> {
    let h = h.clone();
    let program = program.to_owned();
    tokio::spawn(async move { h.run_code(&program).await })
}

async fn finished(j: tokio::task::JoinHandle<Arc<ToolResult>>) -> Arc<ToolResult> {
    tokio::time::timeout(Duration::from_secs(5), j)
        .await
        .expect("run_code finishes")
        .expect("joins")
}

#[tokio::test]
async fn code_25_safe_sub_calls_overlap_with_ids_in_submission_order() {
    let board = Board::new();
    let h = Arc::new(Harness::new(vec![board.tool("safe_read", true)], |_| {}).await);
    let run = spawn_run(
        &h,
        "const r = await Promise.all(['a', 'b', 'c'].map(id => tools.safe_read({id}))); return r.join(',')",
    );
    board
        .wait_for(|b| b.started().len() == 3, "three starts")
        .await;
    assert_eq!(board.peak(), 3, "all three start before any completes");
    board.release_all();
    let r = finished(run).await;
    assert_eq!(
        value_of(&r)["result"],
        json!("safe_read:a,safe_read:b,safe_read:c")
    );
    assert_eq!(
        h.starts(),
        ["call-1:code:1", "call-1:code:2", "call-1:code:3"]
    );
    let mut settles = h.settles();
    settles.sort();
    assert_eq!(settles, ["call-1:code:1", "call-1:code:2", "call-1:code:3"]);
    assert_paired(&h.dispatch_records());
}

#[tokio::test]
async fn code_26_an_exclusive_call_is_a_barrier() {
    let board = Board::new();
    let h = Arc::new(
        Harness::new(
            vec![board.tool("read", true), board.tool("write", false)],
            |_| {},
        )
        .await,
    );
    let run = spawn_run(
        &h,
        "return (await Promise.all([tools.read({id: 'r1'}), tools.read({id: 'r2'}), \
         tools.write({id: 'w'}), tools.read({id: 'r3'})])).join(',')",
    );
    board.wait_started("r1").await;
    board.wait_started("r2").await;
    board.settle_a_moment().await;
    assert!(!board.is_started("w"), "w waits for the reads");
    board.release("r1");
    board.settle_a_moment().await;
    assert!(!board.is_started("w"), "w waits for both reads");
    board.release("r2");
    board.wait_started("w").await;
    board.settle_a_moment().await;
    assert!(!board.is_started("r3"), "r3 does not start while w is live");
    assert_eq!(board.live(), 1, "w runs alone");
    board.release("w");
    board.wait_started("r3").await;
    board.release("r3");
    let r = finished(run).await;
    assert_eq!(
        value_of(&r)["result"],
        json!("read:r1,read:r2,write:w,read:r3")
    );
    let events = board.events();
    let pos = |e: &str| events.iter().position(|x| x == e).expect(e);
    assert!(pos("start:w") < pos("end:w"));
    assert!(pos("end:r1") < pos("start:w") && pos("end:r2") < pos("start:w"));
    assert!(pos("end:w") < pos("start:r3"));
}

#[tokio::test]
async fn code_27_the_pool_caps_live_sub_calls() {
    let board = Board::new();
    let h = Arc::new(
        Harness::new(vec![board.tool("safe", true)], |c| {
            c.max_parallel_sub_calls = 2
        })
        .await,
    );
    let run = spawn_run(
        &h,
        "return (await Promise.all(['a', 'b', 'c'].map(id => tools.safe({id})))).join(',')",
    );
    board
        .wait_for(|b| b.started().len() == 2, "two starts")
        .await;
    board.settle_a_moment().await;
    assert_eq!(board.started().len(), 2, "only two are live");
    board.release("a");
    board.wait_started("c").await;
    board.release_all();
    finished(run).await;
    assert_eq!(board.peak(), 2);
}

#[tokio::test]
async fn code_28_a_tool_unregistered_meanwhile_is_a_final_unknown_tool() {
    let ran = Arc::new(Mutex::new(0));
    let r2 = ran.clone();
    let ephemeral = tool_fn("ephemeral", true, move |_| {
        let r = r2.clone();
        async move {
            *r.lock() += 1;
            Ok(Json::string("ran"))
        }
    });
    let registration: Arc<Mutex<Option<dsh_core::Registration>>> = Arc::new(Mutex::new(None));
    let reg = registration.clone();
    let rejection = Arc::new(Mutex::new(None));
    let rej = rejection.clone();
    let h = Harness::new(vec![], move |c| {
        c.runtime = Some(scripted(move |run| {
            let reg = reg.clone();
            let rej = rej.clone();
            async move {
                assert!(run.bindings.contains("ephemeral"));
                if let Some(r) = reg.lock().take() {
                    r.dispose();
                }
                *rej.lock() = run.bindings.call("ephemeral", Some("{}")).await.err();
                CodeOutcome::default()
            }
            .boxed()
        }))
    })
    .await;
    *registration.lock() = Some(h.registry.register(ephemeral).expect("register"));
    let post = Recorder::new();
    let p2 = post.clone();
    let _post = h.hooks.on_post_execute(
        Scope::Global,
        PostFn(move |exec: &ToolExecution, _r: &ToolResult, d| {
            p2.push(exec.call_id());
            Ok(d)
        }),
    );
    let r = h.run_code("x").await;
    assert!(!r.is_error());
    let e = rejection.lock().clone().expect("rejected");
    assert_eq!(e.message, "unknown tool \"ephemeral\"");
    assert_eq!(e.tool_name, "ephemeral");
    assert_eq!(*ran.lock(), 0, "the body never runs");
    assert_eq!(
        post.entries(),
        vec!["call-1".to_owned()],
        "post-execute skipped for the sub-call"
    );
}

struct StallPre {
    rec: Recorder,
    latch: Latch,
}

#[async_trait]
impl PreExecuteHook for StallPre {
    async fn pre_execute(
        &self,
        exec: &ToolExecution,
        next: PreNext<'_>,
    ) -> Result<PreToolDecision, Failure> {
        if exec.parent().is_none() {
            return next.run(exec).await;
        }
        self.rec.push(format!("pre-enter {}", exec.call_id()));
        if exec.call_id().ends_with(":1") {
            self.latch.hold().await;
        }
        self.rec.push(format!("pre-exit {}", exec.call_id()));
        next.run(exec).await
    }
}

#[tokio::test]
async fn code_29_prepare_is_strictly_sequential() {
    let board = Board::new();
    let h = Arc::new(Harness::new(vec![board.tool("safe", true)], |_| {}).await);
    let rec = Recorder::new();
    let latch = Latch::new();
    let _pre = h.hooks.on_pre_execute(
        Scope::Global,
        StallPre {
            rec: rec.clone(),
            latch: latch.clone(),
        },
    );
    board.release_all();
    let run = spawn_run(
        &h,
        "await Promise.all([tools.safe({id: 'a'}), tools.safe({id: 'b'})])",
    );
    latch.reached().await;
    board.settle_a_moment().await;
    assert_eq!(rec.entries(), ["pre-enter call-1:code:1"]);
    latch.release();
    finished(run).await;
    assert_eq!(
        rec.entries(),
        [
            "pre-enter call-1:code:1",
            "pre-exit call-1:code:1",
            "pre-enter call-1:code:2",
            "pre-exit call-1:code:2"
        ]
    );
}

struct StallPost {
    rec: Recorder,
    latch: Latch,
    name: &'static str,
}

#[async_trait]
impl PostExecuteHook for StallPost {
    async fn post_execute(
        &self,
        exec: &ToolExecution,
        result: &ToolResult,
        next: PostNext<'_>,
    ) -> Result<PostToolDecision, Failure> {
        if exec.name() == self.name {
            self.rec.push("post-enter");
            self.latch.hold().await;
            self.rec.push("post-exit");
        }
        next.run(exec, result).await
    }
}

#[tokio::test]
async fn code_30_an_exclusive_call_holds_its_barrier_through_commit() {
    let board = Board::new();
    let h = Arc::new(
        Harness::new(
            vec![board.tool("write", false), board.tool("read", true)],
            |_| {},
        )
        .await,
    );
    let rec = Recorder::new();
    let latch = Latch::new();
    let _post = h.hooks.on_post_execute(
        Scope::Global,
        StallPost {
            rec: rec.clone(),
            latch: latch.clone(),
            name: "write",
        },
    );
    let pre = Recorder::new();
    let p2 = pre.clone();
    let _pre = h.hooks.on_pre_execute(
        Scope::Global,
        PreFn(move |exec: &ToolExecution| {
            p2.push(exec.name());
            Ok(None)
        }),
    );
    board.release_all();
    let run = spawn_run(
        &h,
        "await Promise.all([tools.write({id: 'w'}), tools.read({id: 'r'})])",
    );
    latch.reached().await;
    board.settle_a_moment().await;
    assert!(!board.is_started("r"), "the read's body has not started");
    assert_eq!(
        pre.entries(),
        ["run_code", "write"],
        "the read has no pre-execute yet"
    );
    latch.release();
    finished(run).await;
    assert!(board.is_started("r"));
    assert_eq!(rec.entries(), ["post-enter", "post-exit"]);
}

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

#[tokio::test]
async fn code_32_post_execute_runs_in_submission_order_and_contexts_follow() {
    let board = Board::new();
    let h = Arc::new(Harness::new(vec![board.tool("safe", true)], |_| {}).await);
    let seen = Recorder::new();
    let s2 = seen.clone();
    let _post = h.hooks.on_post_execute(
        Scope::Global,
        PostFn(
            move |exec: &ToolExecution, _r: &ToolResult, d: PostToolDecision| {
                if exec.parent().is_some() {
                    s2.push(exec.call_id());
                    return Ok(d.push_context(ContextMessage::plugin_text(
                        "test",
                        format!("ctx:{}", exec.call_id()),
                    )));
                }
                Ok(d)
            },
        ),
    );
    let run = spawn_run(
        &h,
        "await Promise.all([tools.safe({id: 'a'}), tools.safe({id: 'b'})])",
    );
    board
        .wait_for(|b| b.started().len() == 2, "both started")
        .await;
    board.release("b");
    board.settle_a_moment().await;
    board.release("a");
    let r = finished(run).await;
    assert_eq!(seen.entries(), ["call-1:code:1", "call-1:code:2"]);
    assert_eq!(
        context_texts(&r),
        ["ctx:call-1:code:1", "ctx:call-1:code:2"]
    );
}

#[tokio::test]
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
                    tokio::time::sleep(Duration::from_millis(20)).await;
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
async fn code_37_exclusive_sub_calls_never_overlap() {
    let board = Board::new();
    board.release_all();
    let h = Harness::new(vec![board.tool("step", false)], |_| {}).await;
    let r = h
        .run_code(
            "const r = await Promise.all(['a', 'b', 'c'].map(id => tools.step({id}))); \
             return r.map(s => s.split(':')[1]).join(',')",
        )
        .await;
    assert_eq!(text(&r), "a,b,c");
    assert_eq!(
        board.events(),
        ["start:a", "end:a", "start:b", "end:b", "start:c", "end:c"]
    );
    assert_eq!(board.peak(), 1);
}

#[tokio::test]
async fn code_38_a_body_failure_rejects_with_the_bare_message() {
    let failing = tool_fn("fails", true, |_| async {
        Err(Failure::new("deliberate failure"))
    });
    let h = Harness::new(vec![failing], |_| {}).await;
    let r = h
        .run_code("try { await tools.fails({}) } catch (e) { return 'caught: ' + e.message }")
        .await;
    assert_eq!(text(&r), "caught: deliberate failure");
}

#[tokio::test]
async fn code_39_a_failing_dispatch_log_listener_keeps_the_original_content() {
    let h = Harness::new(vec![echo_tool()], |_| {}).await;
    let _l = h
        .code
        .dispatch_log()
        .on(|_record, _next| panic!("listener exploded"));
    let r = h.run_code("return await tools.echo({value: 'x'})").await;
    assert!(!r.is_error());
    let settle = h
        .dispatch_records()
        .into_iter()
        .find(|(t, _)| t == "tool/code-dispatch")
        .expect("settled");
    assert_eq!(
        settle.1["content"],
        json!([{"type": "text", "text": "echo:x"}])
    );
    assert_eq!(settle.1["isError"], json!(false));
}

#[tokio::test]
async fn dispatch_log_listener_shapes_the_logged_content() {
    let h = Harness::new(vec![echo_tool()], |_| {}).await;
    let _l = h.code.dispatch_log().on(|record, next| {
        if record.exec.name() == "echo" {
            text_content("[redacted]")
        } else {
            next.run(record)
        }
    });
    let r = h
        .run_code("return await tools.echo({value: 'secret'})")
        .await;
    assert_eq!(
        value_of(&r)["result"],
        json!("echo:secret"),
        "the program still sees the value"
    );
    let settle = h
        .dispatch_records()
        .into_iter()
        .find(|(t, _)| t == "tool/code-dispatch")
        .expect("settled");
    assert_eq!(
        settle.1["content"],
        json!([{"type": "text", "text": "[redacted]"}])
    );
}

#[tokio::test]
async fn code_40_a_failing_pre_execute_listener_rejects_and_skips_the_rest() {
    let ran = Arc::new(Mutex::new(0));
    let r2 = ran.clone();
    let sub = tool_fn("sub", true, move |_| {
        let r = r2.clone();
        async move {
            *r.lock() += 1;
            Ok(Json::string("ran"))
        }
    });
    let h = Harness::new(vec![sub], |_| {}).await;
    let _pre = h.hooks.on_pre_execute(
        Scope::Global,
        PreFn(|exec: &ToolExecution| {
            if exec.name() == "sub" {
                Err(Failure::new("gate exploded"))
            } else {
                Ok(None)
            }
        }),
    );
    let post = Recorder::new();
    let p2 = post.clone();
    let _post = h.hooks.on_post_execute(
        Scope::Global,
        PostFn(move |exec: &ToolExecution, _r: &ToolResult, d| {
            p2.push(exec.name());
            Ok(d)
        }),
    );
    let r = h
        .run_code("try { await tools.sub({}) } catch (e) { return e.message }")
        .await;
    assert_eq!(value_of(&r)["result"], json!("gate exploded"));
    assert_eq!(*ran.lock(), 0);
    assert_eq!(post.entries(), ["run_code"]);
    let settles: Vec<Value> = h
        .dispatch_records()
        .into_iter()
        .filter(|(t, _)| t == "tool/code-dispatch")
        .map(|(_, d)| d)
        .collect();
    assert_eq!(settles.len(), 1);
    assert_eq!(settles[0]["isError"], json!(true));
}

#[tokio::test]
async fn code_41_a_denial_rejects_with_its_reason() {
    let h = Harness::new(vec![echo_tool()], |_| {}).await;
    let _pre = h.hooks.on_pre_execute(
        Scope::Global,
        PreFn(|exec: &ToolExecution| {
            Ok((exec.name() == "echo").then(|| PreToolDecision::deny("not on my watch")))
        }),
    );
    let r = h
        .run_code("try { await tools.echo({value: 'x'}); return 'ran' } catch (e) { return [e.name, e.toolName, e.message] }")
        .await;
    let v = value_of(&r)["result"].clone();
    assert_eq!(v[0], json!("ToolCallError"));
    assert_eq!(v[1], json!("echo"));
    assert!(v[2].as_str().expect("message").contains("not on my watch"));
}

#[tokio::test]
async fn code_42_non_json_arguments_are_rejected_before_dispatch() {
    let h = Harness::new(vec![echo_tool()], |_| {}).await;
    let r = h
        .run_code("try { await tools.echo({value: 'x', big: 10n}) } catch (e) { return e.message }")
        .await;
    let m = value_of(&r)["result"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(m.contains("lossless JSON"), "{m}");
    assert!(
        h.dispatch_records().is_empty(),
        "nothing dispatched, nothing logged"
    );
}

#[tokio::test]
async fn code_43_62_prototype_less_arguments_arrive_as_plain_equal_copies() {
    let got = Arc::new(Mutex::new(None));
    let g2 = got.clone();
    let probe = tool_fn("probe", true, move |ctx| {
        let g = g2.clone();
        async move {
            *g.lock() = ctx.arguments().json().cloned();
            Ok(Json::string("ok"))
        }
    });
    let h = Harness::new(vec![probe], |_| {}).await;
    let r = h
        .run_code(
            "const o = Object.create(null); o.value = 'x'; o.nested = [Object.assign(Object.create(null), {value: 'x'})]; \
             const list = ['original']; await tools.probe(o); await tools.probe({list}); list.push('changed'); return 'ok'",
        )
        .await;
    assert!(!r.is_error(), "{r:?}");
    assert_eq!(
        got.lock().as_ref().map(|j| j.value().clone()),
        Some(json!({"list": ["original"]}))
    );
    let logged: Vec<Value> = h
        .dispatch_records()
        .into_iter()
        .filter(|(t, _)| t == "tool/code-dispatch")
        .map(|(_, d)| d["arguments"].clone())
        .collect();
    assert_eq!(
        logged,
        [
            json!({"value": "x", "nested": [{"value": "x"}]}),
            json!({"list": ["original"]})
        ]
    );
}

#[tokio::test]
async fn code_44_sub_call_contexts_are_deferred_onto_the_outer_result_in_order() {
    let h = Harness::new(vec![echo_tool()], |_| {}).await;
    let _post = h.hooks.on_post_execute(
        Scope::Global,
        PostFn(
            |exec: &ToolExecution, _r: &ToolResult, d: PostToolDecision| {
                Ok(if exec.parent().is_some() {
                    d.push_context(ContextMessage::plugin_text(
                        "test",
                        format!("context for {}", exec.call_id()),
                    ))
                } else {
                    d
                })
            },
        ),
    );
    let r = h
        .run_code("await tools.echo({value: '1'}); await tools.echo({value: '2'}); return 'done'")
        .await;
    let contexts = r.additional_contexts();
    assert_eq!(
        context_texts(&r),
        ["context for call-1:code:1", "context for call-1:code:2"]
    );
    for c in contexts.iter() {
        assert_eq!(&*c.role, "user");
        assert_eq!(c.plugin(), Some("test"));
    }
}

fn image_tool() -> ToolDefinition {
    ToolDefinition::builder("snap", "Returns a picture")
        .output(ToolOutput::content_blocks())
        .concurrency_safe(true)
        .execute(|_| async {
            Ok(Json::new(json!([
                {"type": "text", "text": "a picture"},
                {"type": "image", "data": "aGk=", "mimeType": "image/png"}
            ]))
            .expect("json"))
        })
        .build()
        .expect("snap")
}

#[tokio::test]
async fn code_45_images_are_deferred_as_one_context() {
    let h = Harness::new(vec![image_tool()], |_| {}).await;
    let r = h
        .run_code("const v = await tools.snap({}); return v.length")
        .await;
    assert_eq!(value_of(&r)["result"], json!(2));
    let contexts = r.additional_contexts();
    assert_eq!(contexts.len(), 1);
    assert_eq!(&*contexts[0].role, "user");
    assert_eq!(
        contexts[0].source.value(),
        &json!({"kind": "plugin", "plugin": "tools-code-mode"})
    );
    assert_eq!(contexts[0].content.len(), 2);
    assert!(matches!(contexts[0].content[1], ContentBlock::Image { .. }));
}

#[tokio::test]
async fn code_46_an_image_is_deferred_only_if_it_survives_post_execute() {
    for block in [true, false] {
        let h = Harness::new(vec![image_tool()], |_| {}).await;
        let _post = h.hooks.on_post_execute(
            Scope::Global,
            PostFn(move |exec: &ToolExecution, _r: &ToolResult, d| {
                if exec.name() != "snap" {
                    return Ok(d);
                }
                Ok(if block {
                    PostToolDecision::block(text_content("no pictures"))
                } else {
                    PostToolDecision::Accept {
                        replace: Some(Replacement::Content(text_content("described"))),
                        contexts: vec![],
                    }
                })
            }),
        );
        let r = h
            .run_code("try { await tools.snap({}) } catch (e) {} return 1")
            .await;
        assert!(r.additional_contexts().is_empty(), "block={block}");
    }
}

#[tokio::test]
async fn code_47_contexts_survive_a_failed_program() {
    let h = Harness::new(vec![echo_tool()], |c| c.mode = PresentationMode::Both).await;
    let _post = h.hooks.on_post_execute(
        Scope::Global,
        PostFn(
            |exec: &ToolExecution, _r: &ToolResult, d: PostToolDecision| {
                Ok(if exec.parent().is_some() {
                    d.push_context(ContextMessage::plugin_text("test", "nested context"))
                } else {
                    d
                })
            },
        ),
    );
    let r = h
        .run_code("await tools.echo({value: 'x'}); throw new Error('after')")
        .await;
    assert!(r.is_error());
    assert_eq!(context_texts(&r), ["nested context"]);
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

#[tokio::test]
async fn code_59_the_settle_record_keeps_the_whole_sub_content() {
    let long = "l".repeat(300);
    let l2 = long.clone();
    let mixed = ToolDefinition::builder("mixed", "Mixed content")
        .output(ToolOutput::new(
            Json::from_shallow(json!({"type": "string"})),
            move |_v| {
                Ok(Arc::from(vec![
                    ContentBlock::text(l2.as_str()),
                    ContentBlock::from_value(json!({"type": "reasoning", "text": "thinking"}))
                        .map_err(|e| Failure::new(e.to_string()))?,
                ]))
            },
        ))
        .concurrency_safe(true)
        .execute(|_| async { Ok(Json::string("mixed-value")) })
        .build()
        .expect("mixed");
    let h = Harness::new(vec![mixed], |_| {}).await;
    let r = h.run_code("return await tools.mixed({})").await;
    assert_eq!(text(&r), "mixed-value");
    let settle = h
        .dispatch_records()
        .into_iter()
        .find(|(t, _)| t == "tool/code-dispatch")
        .expect("settled");
    assert_eq!(
        settle.1["content"],
        json!([{"type": "text", "text": long}, {"type": "reasoning", "text": "thinking"}])
    );
}

#[tokio::test]
async fn code_60_argument_rejections_before_dispatch() {
    let h = Harness::new(vec![echo_tool()], |_| {}).await;
    let r = h
        .run_code(
            "const msgs = []; \
             const attempt = async (f) => { try { await f(); msgs.push('dispatched') } catch (e) { msgs.push(e.message) } }; \
             await attempt(() => tools.echo()); \
             await attempt(() => tools.echo({get value() { throw 'raw-throw' }})); \
             await attempt(() => tools.echo({get value() { throw new Error('error-throw') }})); \
             await attempt(() => tools.echo({value: new Map()})); \
             await attempt(() => tools.echo({value: () => 1})); \
             return msgs",
        )
        .await;
    let msgs: Vec<String> = serde_json::from_value(value_of(&r)["result"].clone()).expect("list");
    assert!(
        msgs[0].contains("call the tool with an arguments object"),
        "{msgs:?}"
    );
    assert!(msgs[1].contains("lossless JSON: raw-throw"), "{msgs:?}");
    assert!(msgs[2].contains("lossless JSON: error-throw"), "{msgs:?}");
    let total: usize = msgs
        .iter()
        .map(|m| m.matches("tool arguments must be lossless JSON").count())
        .sum();
    assert_eq!(total, 5, "{msgs:?}");
    assert!(h.dispatch_records().is_empty());
    // The Rust analogue: text that is not JSON never reaches the host.
    let host = echo_host();
    let bindings = dsh_code_mode::Bindings::new(vec![Arc::from("echo")], host.clone());
    let e = bindings
        .call("echo", Some("{not json"))
        .await
        .expect_err("rejected");
    assert!(
        e.message
            .starts_with("tool arguments must be lossless JSON: "),
        "{}",
        e.message
    );
    let e = bindings.call("echo", None).await.expect_err("rejected");
    assert!(e.message.contains("call the tool with an arguments object"));
    assert!(host.calls.lock().is_empty());
}

#[tokio::test]
async fn code_61_deep_arguments_reach_the_tool_and_the_durable_log() {
    let depth_tool = tool_fn("depth", true, |ctx| async move {
        // Walk by reference: a recursive copy of a 5,000-deep value is exactly what must not
        // happen anywhere on the way.
        let args = ctx
            .arguments()
            .json()
            .cloned()
            .ok_or_else(|| Failure::new("no args"))?;
        let mut cur = args
            .value()
            .get("list")
            .ok_or_else(|| Failure::new("no list"))?;
        let mut d = 0u64;
        while let Some(next) = cur
            .as_array()
            .filter(|a| a.len() == 1)
            .and_then(|a| a.first())
        {
            d += 1;
            cur = next;
        }
        if cur != &json!("leaf") {
            return Err(Failure::new("unexpected shape"));
        }
        Ok(Json::string(d.to_string()))
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("session.jsonl");
    let (session, _) = dsh_session::Session::open_jsonl(&path, dsh_session::OpenOptions::new())
        .await
        .expect("open");
    session
        .append(dsh_session::Event::turn_start(1))
        .await
        .expect("turn");
    let s2 = session.clone();
    let h = Harness::new(vec![depth_tool], move |c| {
        let s = s2.clone();
        c.sessions = Some(Arc::new(move |_exec: &ToolExecution| Some(s.clone())));
    })
    .await;
    let r = h
        .run_code("let a = 'leaf'; for (let i = 0; i < 5000; i++) a = [a]; return Number(await tools.depth({list: a}))")
        .await;
    assert_eq!(value_of(&r), json!({"logs": [], "result": 5000}));
    drop(h);
    session.close().await.expect("close");
    let text = std::fs::read_to_string(&path).expect("read");
    let line = text
        .lines()
        .find(|l| l.contains("\"tool/code-dispatch\""))
        .expect("durable settle record");
    let event = Json::parse(line).expect("parses");
    let args = &event.value()["data"]["arguments"]["list"];
    let mut d = 0;
    let mut cur = args;
    while let Some(next) = cur.as_array().and_then(|a| a.first()) {
        d += 1;
        cur = next;
    }
    assert_eq!((d, cur.clone()), (5000, json!("leaf")));
}

#[tokio::test]
async fn code_63_a_tool_named_proto_is_an_ordinary_binding() {
    let proto = tool_fn("__proto__", true, |_| async {
        Ok(Json::string("proto-tool-ok"))
    });
    let h = Harness::new(vec![proto], |_| {}).await;
    let r = h
        .run_code("return [Object.getPrototypeOf(tools), Object.keys(tools), await tools['__proto__']({})]")
        .await;
    assert_eq!(
        value_of(&r)["result"],
        json!([null, ["__proto__"], "proto-tool-ok"])
    );
}

#[tokio::test]
async fn three_tools_two_parallel_one_exclusive_overlap_and_order() {
    let board = Board::new();
    let h = Arc::new(
        Harness::new(
            vec![
                board.tool("read_a", true),
                board.tool("read_b", true),
                board.tool("write", false),
            ],
            |_| {},
        )
        .await,
    );
    let run = spawn_run(
        &h,
        "const [a, b, w] = await Promise.all([tools.read_a({id: 'a'}), tools.read_b({id: 'b'}), tools.write({id: 'w'})]); \
         return [a, b, w]",
    );
    board
        .wait_for(|b| b.started().len() == 2, "both reads")
        .await;
    assert_eq!(board.live(), 2, "the two parallel-safe reads overlap");
    board.settle_a_moment().await;
    assert!(!board.is_started("w"));
    board.release("b");
    board.release("a");
    board.wait_started("w").await;
    assert_eq!(board.live(), 1, "the exclusive write runs alone");
    board.release("w");
    let r = finished(run).await;
    assert_eq!(
        value_of(&r)["result"],
        json!(["read_a:a", "read_b:b", "write:w"])
    );
    let log: Vec<String> = h
        .dispatch_records()
        .iter()
        .map(|(t, d)| {
            format!(
                "{}:{}",
                if t == "tool/code-dispatch-start" {
                    "start"
                } else {
                    "settle"
                },
                d["subCallId"]
                    .as_str()
                    .unwrap_or_default()
                    .rsplit(':')
                    .next()
                    .unwrap_or_default()
            )
        })
        .collect();
    // Reads start together; both commit in submission order; the write starts only after.
    assert_eq!(
        log,
        [
            "start:1", "start:2", "settle:1", "settle:2", "start:3", "settle:3"
        ]
    );
    assert_paired(&h.dispatch_records());
}

#[tokio::test]
async fn code_68_dispatch_records_never_enter_the_model_history() {
    let h = Harness::new(vec![echo_tool()], |_| {}).await;
    let session = dsh_session::Session::in_memory("history");
    session
        .append(dsh_session::Event::user_message(
            &ContextMessage::plugin_text("user", "hello"),
        ))
        .await
        .expect("user");
    h.sessions.insert(None, session.clone());
    let r = h.run_code("return await tools.echo({value: 'x'})").await;
    assert!(!r.is_error(), "{r:?}");
    assert_eq!(
        session
            .events()
            .pairs()
            .filter(|(_, e)| e.event_type() == "tool/code-dispatch")
            .count(),
        1
    );
    let messages = dsh_session::derive_messages(&session.events());
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0].value()["role"], json!("user"));
}

#[tokio::test]
async fn a_body_completing_at_once_runs_where_the_program_calls_it_and_a_waiting_one_as_a_task() {
    let threads: Arc<Mutex<Vec<(String, String)>>> = Arc::new(Mutex::new(Vec::new()));
    let here = || std::thread::current().name().unwrap_or_default().to_owned();
    let t1 = threads.clone();
    let now = tool_fn("now", true, move |_ctx| {
        let t = t1.clone();
        async move {
            t.lock().push(("now".to_owned(), here()));
            Ok(Json::string("now"))
        }
    });
    let t2 = threads.clone();
    let later = tool_fn("later", true, move |_ctx| {
        let t = t2.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            t.lock().push(("later".to_owned(), here()));
            Ok(Json::string("later"))
        }
    });
    let h = Harness::new(vec![now, later], |_| {}).await;
    let r = h
        .run_code(
            "return [await tools.now({}), await tools.later({}), await tools.now({})].join(',')",
        )
        .await;
    assert_eq!(value_of(&r)["result"], json!("now,later,now"));
    let threads = threads.lock().clone();
    assert_eq!(threads.len(), 3);
    for (tool, thread) in &threads {
        match tool.as_str() {
            "now" => assert_eq!(
                thread, "dsh-code-mode",
                "no hand-off for a body done at once"
            ),
            _ => assert_ne!(
                thread, "dsh-code-mode",
                "a waiting body continues as a task"
            ),
        }
    }
    assert_eq!(
        h.starts(),
        ["call-1:code:1", "call-1:code:2", "call-1:code:3"]
    );
    assert_eq!(h.settles(), h.starts());
    assert_paired(&h.dispatch_records());
}

/// A tool whose body panics: at its first poll (`now`), or after it had to wait (`later`, so it
/// runs as a task of the pool); `finalize_content` counts the calls it sees.
fn panicking_tool(name: &str, later: bool, finalized: Recorder) -> ToolDefinition {
    ToolDefinition::builder(name, "A tool whose body panics")
        .output(ToolOutput::string())
        .concurrency_safe(true)
        .execute(move |_ctx| async move {
            if later {
                tokio::task::yield_now().await;
            }
            panic!("body exploded");
            #[allow(unreachable_code)]
            Ok(Json::string("unreachable"))
        })
        .finalize_content(move |exec, _r| {
            finalized.push(exec.call_id());
            Ok(None)
        })
        .build()
        .expect("panicking tool")
}

#[tokio::test]
async fn s2_cm2_every_sub_call_outcome_goes_through_finalize_and_the_observers_exactly_once() {
    let finalized = Recorder::new();
    let ephemeral = tool_fn("ephemeral", true, |_| async { Ok(Json::string("ran")) });
    let registration: Arc<Mutex<Option<dsh_core::Registration>>> = Arc::new(Mutex::new(None));
    let reg = registration.clone();
    let answers = Arc::new(Mutex::new(Vec::new()));
    let got = answers.clone();
    let h = Harness::new(
        vec![
            panicking_tool("boom_now", false, finalized.clone()),
            panicking_tool("boom_later", true, finalized.clone()),
            echo_tool(),
        ],
        move |c| {
            c.runtime = Some(scripted(move |run| {
                let reg = reg.clone();
                let got = got.clone();
                async move {
                    if let Some(r) = reg.lock().take() {
                        r.dispose();
                    }
                    let calls = [
                        ("boom_now", Some("{}")),
                        ("boom_later", Some("{}")),
                        ("echo", Some(r#"{"text":"fine"}"#)),
                        ("ephemeral", Some("{}")),
                    ];
                    for (name, args) in calls {
                        let answer = run.bindings.call(name, args).await;
                        got.lock().push((name, answer.map_err(|e| e.message)));
                    }
                    CodeOutcome::default()
                }
                .boxed()
            }))
        },
    )
    .await;
    *registration.lock() = Some(h.registry.register(ephemeral).expect("register"));
    let observed = Recorder::new();
    let o2 = observed.clone();
    let _observer = h.hooks.on_result(
        Scope::Global,
        move |exec: &ToolExecution, r: &ToolResult| {
            o2.push(format!("{} {}", exec.call_id(), r.is_error()));
        },
    );
    let r = h.run_code("x").await;
    assert!(!r.is_error(), "{}", text(&r));
    let answers = answers.lock().clone();
    assert_eq!(answers.len(), 4);
    for (name, answer) in &answers[..2] {
        let message = answer.as_ref().err().cloned().unwrap_or_default();
        assert!(
            message.contains("panicked") && message.contains("body exploded"),
            "{name}: {message}"
        );
    }
    assert!(answers[2].1.is_ok());
    assert_eq!(answers[3].1, Err("unknown tool \"ephemeral\"".to_owned()));
    // One observer call per sub-call outcome, the run_code call itself last.
    assert_eq!(
        observed.entries(),
        vec![
            "call-1:code:1 true".to_owned(),
            "call-1:code:2 true".to_owned(),
            "call-1:code:3 false".to_owned(),
            "call-1:code:4 true".to_owned(),
            "call-1 false".to_owned(),
        ]
    );
    // finalize_content ran once for each panicking call.
    assert_eq!(
        finalized.entries(),
        vec!["call-1:code:1".to_owned(), "call-1:code:2".to_owned()]
    );
    assert_paired(&h.dispatch_records());
}
