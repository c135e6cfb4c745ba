//! Sub-dispatch on the scheduler's one pool (CODE-25, 27..30, 32, 37; S2, CM2): the
//! Code-Mode side of it, sub-call ids and dispatch records, the `max_parallel_sub_calls` cap,
//! sequential prepare and commit, barriers, where a body runs, and every outcome (a panic
//! included) through finalize and the observers exactly once. The pool's own scheduling rules
//! are tested once, in `dsh-scheduler` (SCH-11..26).

// CODE-26 (sub-calls obey the parallel and exclusive rules) is SCH-12 on the one pool; the Code
// Mode side of it is CODE-37 and the record order of the three-tool test below.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use dsh_code_mode::CodeOutcome;
use dsh_core::{
    ContextMessage, Failure, Json, PostExecuteHook, PostNext, PostToolDecision, PreExecuteHook,
    PreNext, PreToolDecision, ToolDefinition, ToolExecution, ToolOutput, ToolResult,
};
use dsh_guard::Scope;
use dsh_test_support::{Latch, PostFn, PreFn, Recorder, context_texts};
use futures::FutureExt;
use parking_lot::Mutex;
use serde_json::json;

use super::support::*;

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

#[tokio::test(start_paused = true)]
async fn code_27_the_pool_caps_live_sub_calls() {
    let board = Board::new();
    let h = Arc::new(
        Harness::new(vec![board.tool("safe", true)], |c| {
            c.max_parallel_sub_calls = 2;
            c.runtime = Some(submits_together(&[
                ("safe", r#"{"id":"a"}"#),
                ("safe", r#"{"id":"b"}"#),
                ("safe", r#"{"id":"c"}"#),
            ]));
        })
        .await,
    );
    let run = spawn_run(&h, "x");
    board
        .wait_for(|b| b.started().len() >= 2, "two starts")
        .await;
    quiescent().await;
    assert!(!board.is_started("c"), "only two are live");
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

#[tokio::test(start_paused = true)]
async fn code_29_prepare_is_strictly_sequential() {
    let board = Board::new();
    let h = Arc::new(
        Harness::new(vec![board.tool("safe", true)], |c| {
            c.runtime = Some(submits_together(&[
                ("safe", r#"{"id":"a"}"#),
                ("safe", r#"{"id":"b"}"#),
            ]));
        })
        .await,
    );
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
    let run = spawn_run(&h, "x");
    latch.reached().await;
    quiescent().await;
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

#[tokio::test(start_paused = true)]
async fn code_30_an_exclusive_call_holds_its_barrier_through_commit() {
    let board = Board::new();
    let h = Arc::new(
        Harness::new(
            vec![board.tool("write", false), board.tool("read", true)],
            |c| {
                c.runtime = Some(submits_together(&[
                    ("write", r#"{"id":"w"}"#),
                    ("read", r#"{"id":"r"}"#),
                ]));
            },
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
    let run = spawn_run(&h, "x");
    latch.reached().await;
    quiescent().await;
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
    board
        .wait_for(|b| b.events().iter().any(|e| e == "end:b"), "b to end")
        .await;
    board.release("a");
    let r = finished(run).await;
    assert_eq!(seen.entries(), ["call-1:code:1", "call-1:code:2"]);
    assert_eq!(
        context_texts(&r),
        ["ctx:call-1:code:1", "ctx:call-1:code:2"]
    );
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
