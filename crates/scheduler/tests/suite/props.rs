//! Property tests of the step scheduler through the turn driver (issue 4, item 5): for any batch
//! of calls with random modes, body durations, hook outcomes and a random cancel instant, the log
//! pairs every call with one result in the same step (I1, F5), results are in model order, no
//! exclusive call overlaps another call, at most `cap` bodies run at once, prepare and finalize
//! run in model order, and contexts follow all the results in model order. The harness here is
//! shared with `interleavings.rs`.

// Tests state their expectations with `unwrap`/`expect`: a panic is the failure report.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use dsh_core::{
    Failure, Json, PostExecuteHook, PostNext, PostToolDecision, PreExecuteHook, PreNext,
    PreToolDecision, Signal, ToolDefinition, ToolExecution, ToolOutput, ToolRegistry, ToolResult,
    text_content,
};
use dsh_guard::{Hooks, Scope};
use dsh_scheduler::{TurnEnd, TurnReport};
use dsh_session::{Event, Session};
use dsh_test_support::ctx;
use parking_lot::Mutex;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::support::{
    assert_paired, call_ids, inbox_texts, log, result_code, result_error, result_ids,
    result_is_error, result_text, runtime, text_reply,
};

/// What the pre-execute listener does with a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Pre {
    /// Delegates (allow).
    Allow,
    /// Denies with `denied <id>`.
    Deny,
    /// Fails with `pre exploded <id>`.
    Throw,
}

/// What the post-execute listener does with a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Post {
    /// Accepts, adding the context `ctx-<id>`.
    Accept,
    /// Blocks with feedback `blocked <id>` and the context `blk-<id>`.
    Block,
}

/// One call of a generated batch: its mode, its hook outcomes and its timing.
#[derive(Clone, Debug)]
pub(super) struct CallSpec {
    pub parallel: bool,
    pub pre: Pre,
    pub post: Post,
    pub body_ms: u64,
    pub body_yields: u32,
    pub pre_ms: u64,
    pub pre_yields: u32,
    pub post_ms: u64,
    pub post_yields: u32,
}

/// A generated batch: its calls (ids `c0..`), the pool size and when to cancel (ms after the
/// assistant message is logged), if at all.
#[derive(Clone, Debug)]
pub(super) struct Batch {
    pub calls: Vec<CallSpec>,
    pub cap: usize,
    pub cancel_at_ms: Option<u64>,
}

/// What the fakes observed while a batch ran.
#[derive(Default, Debug)]
pub(super) struct Trace {
    live: usize,
    pub peak: usize,
    exclusive_live: Option<usize>,
    pub violations: Vec<String>,
    pub body_started: Vec<usize>,
    pub body_ended: Vec<usize>,
    pub pre_seen: Vec<usize>,
    pub post_seen: Vec<usize>,
}

type Shared = Arc<(Vec<CallSpec>, Mutex<Trace>)>;

fn index_of(exec: &ToolExecution) -> usize {
    exec.arguments()
        .json()
        .and_then(|j| j.value().get("i").and_then(Value::as_u64))
        .expect("generated calls carry their index") as usize
}

async fn pause(ms: u64, yields: u32) {
    for _ in 0..yields {
        tokio::task::yield_now().await;
    }
    if ms > 0 {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}

struct PropPre(Shared);

#[async_trait]
impl PreExecuteHook for PropPre {
    async fn pre_execute(
        &self,
        exec: &ToolExecution,
        next: PreNext<'_>,
    ) -> Result<PreToolDecision, Failure> {
        let i = index_of(exec);
        let spec = self.0.0[i].clone();
        self.0.1.lock().pre_seen.push(i);
        pause(spec.pre_ms, spec.pre_yields).await;
        match spec.pre {
            Pre::Allow => next.run(exec).await,
            Pre::Deny => Ok(PreToolDecision::deny(format!("denied c{i}"))),
            Pre::Throw => Err(Failure::new(format!("pre exploded c{i}"))),
        }
    }
}

struct PropPost(Shared);

#[async_trait]
impl PostExecuteHook for PropPost {
    async fn post_execute(
        &self,
        exec: &ToolExecution,
        result: &ToolResult,
        next: PostNext<'_>,
    ) -> Result<PostToolDecision, Failure> {
        let i = index_of(exec);
        let spec = self.0.0[i].clone();
        self.0.1.lock().post_seen.push(i);
        pause(spec.post_ms, spec.post_yields).await;
        let downstream = next.run(exec, result).await?;
        Ok(match spec.post {
            Post::Accept => downstream.push_context(ctx("prop", &format!("ctx-c{i}"))),
            Post::Block => PostToolDecision::Block {
                feedback: text_content(format!("blocked c{i}")),
                contexts: vec![ctx("prop", &format!("blk-c{i}"))],
            },
        })
    }
}

fn work_tool(shared: Shared) -> ToolDefinition {
    ToolDefinition::builder("work", "a generated call: sleeps, records overlap")
        .output(ToolOutput::string())
        .classify(|v| v.get("p").and_then(Value::as_bool) == Some(true))
        .execute(move |tcx| {
            let shared = shared.clone();
            async move {
                let i = index_of(tcx.exec());
                let spec = shared.0[i].clone();
                {
                    let mut t = shared.1.lock();
                    if !spec.parallel && t.live > 0 {
                        let msg = format!("exclusive c{i} started while {} bodies ran", t.live);
                        t.violations.push(msg);
                    }
                    if let Some(x) = t.exclusive_live {
                        t.violations
                            .push(format!("c{i} started while exclusive c{x} ran"));
                    }
                    if !spec.parallel {
                        t.exclusive_live = Some(i);
                    }
                    t.live += 1;
                    t.peak = t.peak.max(t.live);
                    t.body_started.push(i);
                }
                tokio::select! {
                    _ = pause(spec.body_ms, spec.body_yields) => {}
                    _ = tcx.signal().aborted() => {}
                }
                {
                    let mut t = shared.1.lock();
                    t.live -= 1;
                    if t.exclusive_live == Some(i) {
                        t.exclusive_live = None;
                    }
                    t.body_ended.push(i);
                }
                Ok(Json::string(format!("ok c{i}")))
            }
        })
        .build()
        .expect("work tool")
}

/// Everything a finished batch left behind.
pub(super) struct Outcome {
    pub session: Session,
    pub report: TurnReport,
    pub inbox: Vec<String>,
    pub trace: Trace,
}

/// The assistant message of a batch: `work` calls `c<i>` with `{"i": i, "p": parallel}`.
pub(super) fn batch_message(batch: &Batch) -> Json {
    let content: Vec<Value> = batch
        .calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let args = json!({"i": i, "p": c.parallel}).to_string();
            json!({"type": "tool-call", "id": format!("c{i}"), "name": "work", "arguments": args})
        })
        .collect();
    Json::from_shallow(json!({"role": "assistant", "content": content}))
}

/// Runs a batch through a turn driver (step 1: the batch; step 2: a text answer) on the
/// current runtime, cancelling `cancel_at_ms` after the assistant message is logged.
pub(super) async fn run_batch(batch: &Batch) -> Outcome {
    let shared: Shared = Arc::new((batch.calls.clone(), Mutex::new(Trace::default())));
    let registry = ToolRegistry::new();
    registry
        .register(work_tool(shared.clone()))
        .expect("register")
        .keep();
    let hooks = Hooks::new();
    hooks
        .on_pre_execute(Scope::Global, PropPre(shared.clone()))
        .keep();
    hooks
        .on_post_execute(Scope::Global, PropPost(shared.clone()))
        .keep();
    let rt = runtime(&registry, &hooks);
    let session = Session::in_memory("prop");
    let ctl = dsh_core::AbortController::new();
    let signal: Signal = ctl.signal();
    let armed = Arc::new(Mutex::new(batch.cancel_at_ms));
    let _sub = session.subscribe(move |_, e: &Event| {
        if e.event_type() == "assistant/message"
            && let Some(ms) = armed.lock().take()
        {
            let ctl = ctl.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                ctl.cancel();
            });
        }
    });
    let mut d =
        dsh_scheduler::TurnDriver::new(rt, session.clone(), None).with_max_parallel(batch.cap);
    let report = d
        .run_turn(vec![batch_message(batch), text_reply("done")], signal)
        .await
        .expect("the scheduler itself never fails here");
    let inbox = inbox_texts(&d);
    let trace = std::mem::take(&mut *shared.1.lock());
    Outcome {
        session,
        report,
        inbox,
        trace,
    }
}

/// Checks every invariant of a finished batch (panics with a description on the first breach).
pub(super) fn check(batch: &Batch, out: &Outcome) {
    let n = batch.calls.len();
    let s = &out.session;
    let t = &out.trace;
    let ids: Vec<String> = (0..n).map(|i| format!("c{i}")).collect();
    let events = log(s);
    let completed = out.report.end == TurnEnd::Completed;
    if !completed {
        assert_eq!(
            out.report.end,
            TurnEnd::Aborted(dsh_core::CancelCause::User)
        );
    }

    // I1, F5: pairs in the same step, results pointing at their call, appended.
    assert_paired(s);
    // Every call is logged and answered, in model order, in turn 1 step 1.
    assert_eq!(call_ids(s), ids, "tool/call in model order");
    assert_eq!(result_ids(s), ids, "tool/result in model order");
    for (_, e) in &events {
        if let Some(c) = e.as_tool_call() {
            assert_eq!((c.turn, c.step), (Some(1), Some(1)));
        }
    }
    assert!(!out.report.steps.is_empty(), "the batch step is reported");
    assert_eq!(out.report.steps[0].results.len(), n, "one result per call");

    let seq_of = |kind: &str, i: usize| -> u64 {
        events
            .iter()
            .find(|(_, e)| {
                e.event_type() == kind
                    && (e.as_tool_call().is_some_and(|c| c.call_id == ids[i])
                        || e.as_tool_result().is_some_and(|r| r.call_id == ids[i]))
            })
            .map(|(seq, _)| *seq)
            .expect("event present")
    };
    let calls: Vec<u64> = (0..n).map(|i| seq_of("tool/call", i)).collect();
    let results: Vec<u64> = (0..n).map(|i| seq_of("tool/result", i)).collect();

    // No exclusive call overlaps another call: everything before it is committed before it
    // starts, and nothing after it starts before it is committed.
    for (k, spec) in batch.calls.iter().enumerate() {
        if spec.parallel {
            continue;
        }
        for (j, result) in results.iter().enumerate().take(k) {
            assert!(
                *result < calls[k],
                "c{j} committed before exclusive c{k} starts"
            );
        }
        for (j, call) in calls.iter().enumerate().skip(k + 1) {
            assert!(
                *call > results[k],
                "c{j} starts after exclusive c{k} commits"
            );
        }
    }
    assert!(t.violations.is_empty(), "overlap: {:?}", t.violations);
    assert!(t.peak <= batch.cap, "peak {} > cap {}", t.peak, batch.cap);
    assert_eq!(
        t.body_started.len(),
        t.body_ended.len(),
        "every started body was awaited"
    );

    // Prepare and finalize run one call at a time, in model order.
    assert!(
        t.pre_seen.windows(2).all(|w| w[0] < w[1]),
        "pre order {:?}",
        t.pre_seen
    );
    assert!(
        t.post_seen.windows(2).all(|w| w[0] < w[1]),
        "post order {:?}",
        t.post_seen
    );

    // Each call's result is the one its hooks, body and the cancel instant allow.
    for (i, spec) in batch.calls.iter().enumerate() {
        let (_, e) = &events[events
            .iter()
            .position(|(seq, _)| *seq == results[i])
            .unwrap()];
        let pre = t.pre_seen.contains(&i);
        let body = t.body_started.contains(&i);
        let post = t.post_seen.contains(&i);
        let text = result_text(e);
        let code = result_code(e);
        let id = &ids[i];
        let blocked = post && spec.post == Post::Block;
        if blocked {
            assert!(
                result_is_error(e) && text == format!("blocked {id}"),
                "{id}: {text}"
            );
            assert!(result_error(e).is_none(), "a block carries no code");
        }
        if !pre {
            assert!(!completed, "{id} skipped prepare without a cancel");
            assert!(
                !body && !post,
                "{id}: nothing runs for a call cancelled before prepare"
            );
            assert_eq!(code.as_deref(), Some("ABORTED_BEFORE_DISPATCH"), "{id}");
            continue;
        }
        match spec.pre {
            Pre::Throw => {
                assert!(!body && !post, "{id}: a thrown pre skips dispatch and post");
                assert!(result_is_error(e) && text.contains(&format!("pre exploded {id}")));
            }
            Pre::Deny => {
                assert!(!body, "{id}: denied body never runs");
                assert!(post, "{id}: a denial goes through post-execute");
                if !blocked {
                    assert!(
                        result_is_error(e) && text.contains(&format!("denied {id}")),
                        "{text}"
                    );
                    assert!(code.is_none(), "a denial carries no code");
                }
            }
            Pre::Allow if !body => {
                assert!(
                    !completed,
                    "{id}: allowed but never dispatched without a cancel"
                );
                if !blocked {
                    assert_eq!(code.as_deref(), Some("ABORTED_BEFORE_DISPATCH"), "{id}");
                }
            }
            Pre::Allow => {
                assert!(post, "{id}: a body's result goes through post-execute");
                if !blocked {
                    let ok = !result_is_error(e) && text == format!("ok {id}");
                    let aborted = !completed && code.as_deref() == Some("ABORTED");
                    assert!(ok || aborted, "{id}: {text} {code:?}");
                    if completed {
                        assert!(ok, "{id}: success without a cancel");
                    }
                }
            }
        }
    }

    // Contexts: one per call that went through post, in model order, after every result of
    // the batch and before step/end, or (cancelled batch) kept in the next-step inbox.
    let expected: Vec<String> = (0..n)
        .filter(|i| t.post_seen.contains(i))
        .map(|i| match batch.calls[i].post {
            Post::Accept => format!("ctx-c{i}"),
            Post::Block => format!("blk-c{i}"),
        })
        .collect();
    let step_end = events
        .iter()
        .find(|(_, e)| e.event_type() == "step/end")
        .map(|(seq, _)| *seq)
        .expect("step 1 ends");
    let last_result = *results.iter().max().unwrap_or(&0);
    let logged: Vec<(u64, String)> = events
        .iter()
        .filter(|(seq, e)| e.event_type() == "user/message" && *seq < step_end)
        .map(|(seq, e)| (*seq, super::support::message_text(e)))
        .collect();
    for (seq, text) in &logged {
        assert!(
            *seq > last_result,
            "context {text} sits before the last result"
        );
    }
    let logged: Vec<String> = logged.into_iter().map(|(_, t)| t).collect();
    if out.report.steps[0].aborted {
        assert!(
            logged.is_empty(),
            "a cancelled batch logs no contexts: {logged:?}"
        );
    }
    if logged.is_empty() {
        assert_eq!(out.inbox, expected, "contexts kept for the next step");
    } else {
        assert_eq!(logged, expected, "contexts logged after the results");
        assert!(out.inbox.is_empty());
    }

    // Framing: a completed turn ran the answer step too.
    let steps = events
        .iter()
        .filter(|(_, e)| e.event_type() == "step/start")
        .count();
    if completed {
        assert_eq!(steps, 2);
    }
    assert_eq!(
        steps,
        events
            .iter()
            .filter(|(_, e)| e.event_type() == "step/end")
            .count(),
        "steps balanced"
    );
}

fn pre_outcome() -> impl Strategy<Value = Pre> {
    prop_oneof![4 => Just(Pre::Allow), 1 => Just(Pre::Deny), 1 => Just(Pre::Throw)]
}

fn post_outcome() -> impl Strategy<Value = Post> {
    prop_oneof![3 => Just(Post::Accept), 1 => Just(Post::Block)]
}

fn call_spec(max_ms: u64) -> impl Strategy<Value = CallSpec> {
    (
        any::<bool>(),
        pre_outcome(),
        post_outcome(),
        0..=max_ms,
        0u32..4,
        0..=max_ms / 2,
        0u32..3,
        0..=max_ms / 2,
        0u32..3,
    )
        .prop_map(
            |(
                parallel,
                pre,
                post,
                body_ms,
                body_yields,
                pre_ms,
                pre_yields,
                post_ms,
                post_yields,
            )| {
                CallSpec {
                    parallel,
                    pre,
                    post,
                    body_ms,
                    body_yields,
                    pre_ms,
                    pre_yields,
                    post_ms,
                    post_yields,
                }
            },
        )
}

fn batch(max_ms: u64, max_calls: usize) -> impl Strategy<Value = Batch> {
    (
        prop::collection::vec(call_spec(max_ms), 1..=max_calls),
        1usize..=4,
        prop::option::weighted(0.6, 0..=max_ms * 3),
    )
        .prop_map(|(calls, cap, cancel_at_ms)| Batch {
            calls,
            cap,
            cancel_at_ms,
        })
}

/// A current-thread runtime on a paused clock: sleeps cost no wall time and the run is
/// deterministic for a given batch.
pub(super) fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("runtime")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Paused clock: durations up to 20 virtual ms, any cancel instant.
    #[test]
    fn props_batch_invariants_hold_on_a_paused_clock(b in batch(20, 8)) {
        let out = paused_runtime().block_on(run_batch(&b));
        check(&b, &out);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Real time on two worker threads: bodies truly run in parallel, durations of a few ms.
    #[test]
    fn props_batch_invariants_hold_in_real_time_on_two_threads(b in batch(4, 6)) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let out = rt.block_on(run_batch(&b));
        check(&b, &out);
    }

    /// Without a cancel, the outcome of a batch does not depend on timing: every allowed call
    /// succeeds (or is blocked by post), every denial and failure is its own.
    #[test]
    fn props_uncancelled_batches_complete_with_every_call_answered(b in batch(6, 8)) {
        let b = Batch { cancel_at_ms: None, ..b };
        let out = paused_runtime().block_on(run_batch(&b));
        prop_assert_eq!(&out.report.end, &TurnEnd::Completed);
        check(&b, &out);
        let t = &out.trace;
        prop_assert_eq!(t.pre_seen.len(), b.calls.len());
        let ran: Vec<usize> = (0..b.calls.len()).filter(|i| b.calls[*i].pre == Pre::Allow).collect();
        let mut started = t.body_started.clone();
        started.sort_unstable();
        prop_assert_eq!(started, ran);
    }
}
