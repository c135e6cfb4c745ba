//! CAN-18..25: loop-level cancellation through the turn driver — no new call starts after a
//! cancel, started calls finish and commit in order, unstarted calls get synthetic pairs, and a
//! cancelled batch's contexts wait in the next-step inbox instead of being logged.
//!
//! Agent inbox injection and plugin disposal do not exist here: the parts of CAN-22 and CAN-24
//! that need a body to inject into the agent's inbox are not ported (noted at each test);
//! disposal is the turn signal cancelled with cause `disposed`.

// Tests state their expectations with `unwrap`/`expect`: a panic is the failure report.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;

use dsh_core::{
    AbortController, AbortReason, CancelCause, Json, Signal, ToolDefinition, ToolExecution,
    ToolOutput, ToolRegistry, ToolResult,
};
use dsh_guard::{Hooks, Scope};
use dsh_scheduler::TurnEnd;
use dsh_session::{Event, Session};
use dsh_test_support::{Gate, PostFn, PreFn, Recorder, ctx};
use serde_json::json;

use super::support::{
    assert_paired, assistant, calls_to, driver, inbox_texts, log, plugin_messages,
    post_ctx_per_call, quiescent, record_pre, result_error, result_event, result_ids,
    result_is_error, runtime, seen, spawn_turn, text_reply, tool_trace, types,
};

fn abort_error() -> serde_json::Value {
    json!({"name": "AbortError", "code": "ABORTED_BEFORE_DISPATCH"})
}

/// A tool whose body cancels the turn through `ctl`, then succeeds.
fn aborter(name: &str, ctl: &AbortController) -> ToolDefinition {
    let ctl = ctl.clone();
    ToolDefinition::builder(name, "cancels the agent, then succeeds")
        .output(ToolOutput::string())
        .execute(move |_| {
            let ctl = ctl.clone();
            async move {
                ctl.cancel();
                Ok(Json::string("aborted the agent"))
            }
        })
        .build()
        .unwrap()
}

/// Event types of one turn (from its `turn/start` to its `turn/end`).
fn turn_types(s: &Session, turn: u64) -> Vec<String> {
    let events = log(s);
    let start = events
        .iter()
        .position(|(_, e)| e.event_type() == "turn/start" && e.data().value()["turn"] == turn)
        .expect("turn started");
    events[start..]
        .iter()
        .map(|(_, e)| e.event_type().to_owned())
        .scan(false, |ended, t| {
            if *ended {
                return None;
            }
            *ended = t == "turn/end";
            Some(t)
        })
        .collect()
}

fn turn_end_reason(s: &Session, turn: u64) -> serde_json::Value {
    log(s)
        .iter()
        .find(|(_, e)| e.event_type() == "turn/end" && e.data().value()["turn"] == turn)
        .map(|(_, e)| e.data().value()["reason"].clone())
        .expect("turn ended")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn can_18_cancel_at_assistant_message_starts_no_body() {
    let gate = Gate::new();
    gate.release_all();
    let registry = ToolRegistry::new();
    registry.register(gate.tool("g", true)).unwrap().keep();
    let hooks = Hooks::new();
    let rec = Recorder::new();
    record_pre(&hooks, &rec);
    let rt = runtime(&registry, &hooks);
    let mut d = driver(&rt, 10);
    let session = d.session().clone();
    let ctl = AbortController::new();
    let c = ctl.clone();
    let _sub = session.subscribe(move |_, e: &Event| {
        if e.event_type() == "assistant/message" {
            c.cancel();
        }
    });
    let report = d
        .run_turn(vec![calls_to("g", 2), text_reply("done")], ctl.signal())
        .await
        .unwrap();
    assert_eq!(report.end, TurnEnd::Aborted(CancelCause::User));
    assert!(gate.started().is_empty(), "no body starts");
    assert!(
        rec.entries().is_empty(),
        "no policy runs for calls cancelled before they start"
    );
    assert_eq!(
        tool_trace(&session),
        ["call c1", "result c1", "call c2", "result c2"]
    );
    for id in ["c1", "c2"] {
        let e = result_event(&session, id).1;
        assert!(result_is_error(&e));
        assert_eq!(result_error(&e), Some(abort_error()));
    }
    assert_paired(&session);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn can_19_pre_execute_cancelling_on_c1_aborts_both_before_dispatch() {
    let gate = Gate::new();
    gate.release_all();
    let registry = ToolRegistry::new();
    registry.register(gate.tool("g", true)).unwrap().keep();
    let hooks = Hooks::new();
    let ctl = AbortController::new();
    let (c, rec) = (ctl.clone(), Recorder::new());
    let r = rec.clone();
    hooks
        .on_pre_execute(
            Scope::Global,
            PreFn(move |e: &ToolExecution| {
                r.push(format!("pre:{}", e.call_id()));
                if e.call_id() == "c1" {
                    c.cancel();
                }
                Ok(None)
            }),
        )
        .keep();
    let rt = runtime(&registry, &hooks);
    let mut d = driver(&rt, 10);
    let session = d.session().clone();
    let report = d
        .run_turn(vec![calls_to("g", 2), text_reply("done")], ctl.signal())
        .await
        .unwrap();
    assert_eq!(report.end, TurnEnd::Aborted(CancelCause::User));
    assert!(gate.started().is_empty(), "no body starts");
    assert_eq!(
        seen(&rec, "pre:"),
        ["c1"],
        "c2 never starts: it gets a synthetic pair"
    );
    assert_eq!(
        tool_trace(&session),
        ["call c1", "result c1", "call c2", "result c2"]
    );
    for id in ["c1", "c2"] {
        let e = result_event(&session, id).1;
        assert!(result_is_error(&e));
        assert_eq!(result_error(&e), Some(abort_error()), "{id}");
    }
    assert_paired(&session);
}

#[tokio::test(start_paused = true)]
async fn can_20_cancelled_batch_keeps_contexts_for_the_next_step() {
    let gate = Gate::new();
    let registry = ToolRegistry::new();
    registry.register(gate.tool("g", true)).unwrap().keep();
    let hooks = Hooks::new();
    post_ctx_per_call(&hooks);
    let rt = runtime(&registry, &hooks);
    let d = driver(&rt, 2);
    let session = d.session().clone();
    let ctl = AbortController::new();
    let h = spawn_turn(d, vec![calls_to("g", 4), text_reply("done")], ctl.signal());
    assert!(gate.wait_started(2, 2000).await);
    ctl.cancel();
    quiescent().await;
    gate.release_all();
    let (mut d, report) = h.await.unwrap();
    let report = report.unwrap();
    assert_eq!(report.end, TurnEnd::Aborted(CancelCause::User));
    assert_eq!(gate.started().len(), 2, "bodies 1 and 2 ran, and only they");
    assert_eq!(
        tool_trace(&session),
        [
            "call c1",
            "call c2",
            "result c1",
            "result c2",
            "call c3",
            "result c3",
            "call c4",
            "result c4"
        ]
    );
    for id in ["c3", "c4"] {
        let e = result_event(&session, id).1;
        assert!(result_is_error(&e));
        assert_eq!(result_error(&e), Some(abort_error()));
    }
    assert!(
        plugin_messages(&session).is_empty(),
        "no plugin user/message in that turn"
    );
    assert_eq!(inbox_texts(&d), ["ctx-c1", "ctx-c2"]);
    assert_paired(&session);

    // The follow-up turn opens with those contexts, in order.
    let turn1_len = log(&session).len();
    let report2 = d
        .run_turn(vec![text_reply("hello again")], Signal::never())
        .await
        .unwrap();
    assert_eq!(report2.end, TurnEnd::Completed);
    let ctx = plugin_messages(&session);
    let texts: Vec<&str> = ctx.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(texts, ["ctx-c1", "ctx-c2"]);
    assert!(
        ctx.iter().all(|(seq, _)| *seq >= turn1_len as u64),
        "logged in the new turn"
    );
    assert!(d.inbox().is_empty());
    assert_eq!(
        turn_types(&session, 2),
        [
            "turn/start",
            "step/start",
            "user/message",
            "user/message",
            "assistant/message",
            "step/end",
            "turn/end"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn can_21_exclusive_call_after_cancel_never_runs() {
    let gate = Gate::new();
    let registry = ToolRegistry::new();
    registry.register(gate.tool("p", true)).unwrap().keep();
    registry.register(gate.tool("x", false)).unwrap().keep();
    let rt = runtime(&registry, &Hooks::new());
    let d = driver(&rt, 2);
    let session = d.session().clone();
    let ctl = AbortController::new();
    let msg = assistant(&[("c1", "p", "{}"), ("c2", "p", "{}"), ("c3", "x", "{}")]);
    let h = spawn_turn(d, vec![msg, text_reply("done")], ctl.signal());
    assert!(gate.wait_started(2, 2000).await);
    ctl.cancel();
    gate.release_all();
    let (_, report) = h.await.unwrap();
    assert_eq!(report.unwrap().end, TurnEnd::Aborted(CancelCause::User));
    assert!(
        !gate.started().contains(&"c3".to_owned()),
        "x3's body never runs"
    );
    assert_eq!(super::support::call_ids(&session), ["c1", "c2", "c3"]);
    assert_eq!(result_ids(&session).last().map(String::as_str), Some("c3"));
    let c3 = result_event(&session, "c3").1;
    assert!(result_is_error(&c3));
    assert_eq!(result_error(&c3), Some(abort_error()));
    assert_paired(&session);
}

// CAN-22: the body's own agent-inbox injection (made before the cancel, and dropped by a cancel
// that does not keep the inbox) needs agent inbox injection, which does not exist here; the
// rest is ported: a body that cancels the agent and succeeds, and post-execute's context.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn can_22_context_accepted_after_abort_waits_for_the_next_turn() {
    let ctl = AbortController::new();
    let registry = ToolRegistry::new();
    registry.register(aborter("aborter", &ctl)).unwrap().keep();
    let hooks = Hooks::new();
    hooks
        .on_post_execute(
            Scope::Global,
            PostFn(
                |_e: &ToolExecution, _r: &ToolResult, d: dsh_core::PostToolDecision| {
                    Ok(d.push_context(ctx("test", "accepted result context after abort")))
                },
            ),
        )
        .keep();
    let rt = runtime(&registry, &hooks);
    let mut d = driver(&rt, 10);
    let session = d.session().clone();
    let msg = assistant(&[("c1", "aborter", "{}")]);
    let report = d
        .run_turn(vec![msg, text_reply("done")], ctl.signal())
        .await
        .unwrap();
    assert_eq!(report.end, TurnEnd::Aborted(CancelCause::User));
    let relevant: Vec<String> = turn_types(&session, 1)
        .into_iter()
        .skip_while(|t| t != "tool/result")
        .filter(|t| ["tool/result", "user/message", "step/end", "turn/end"].contains(&t.as_str()))
        .collect();
    assert_eq!(relevant, ["tool/result", "step/end", "turn/end"]);
    assert_eq!(inbox_texts(&d), ["accepted result context after abort"]);

    d.run_turn(vec![text_reply("woken")], Signal::never())
        .await
        .unwrap();
    let ctx = plugin_messages(&session);
    let texts: Vec<&str> = ctx.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(
        texts,
        ["accepted result context after abort"],
        "logged exactly once, after the wake"
    );
    assert_paired(&session);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn can_23_exclusive_pair_with_aborter_logs_no_context_for_the_batch() {
    let ctl = AbortController::new();
    let registry = ToolRegistry::new();
    registry
        .register(dsh_test_support::reply_tool("first"))
        .unwrap()
        .keep();
    registry.register(aborter("aborter", &ctl)).unwrap().keep();
    let hooks = Hooks::new();
    hooks
        .on_post_execute(
            Scope::Global,
            PostFn(
                |e: &ToolExecution, _r: &ToolResult, d: dsh_core::PostToolDecision| {
                    Ok(if e.call_id() == "c1" {
                        d.push_context(ctx("test", "first context"))
                    } else {
                        d
                    })
                },
            ),
        )
        .keep();
    let rt = runtime(&registry, &hooks);
    let mut d = driver(&rt, 10);
    let session = d.session().clone();
    let msg = assistant(&[("c1", "first", "{}"), ("c2", "aborter", "{}")]);
    let report = d
        .run_turn(vec![msg, text_reply("done")], ctl.signal())
        .await
        .unwrap();
    assert_eq!(report.end, TurnEnd::Aborted(CancelCause::User));
    let relevant: Vec<String> = turn_types(&session, 1)
        .into_iter()
        .skip_while(|t| t != "tool/result")
        .filter(|t| ["tool/result", "user/message", "step/end", "turn/end"].contains(&t.as_str()))
        .collect();
    assert_eq!(
        relevant,
        ["tool/result", "tool/result", "step/end", "turn/end"]
    );
    assert!(plugin_messages(&session).is_empty());
    // c1 committed before the cancel; its context is kept for the next step, not dropped.
    assert_eq!(inbox_texts(&d), ["first context"]);
    assert!(!result_is_error(&result_event(&session, "c1").1));
    assert_paired(&session);
}

// CAN-24: plugin disposal is modelled as the turn signal cancelled with cause `disposed`; the
// body's agent-inbox injection is not ported (no inbox injection here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn can_24_disposed_mid_call_keeps_only_the_post_context() {
    let started = Arc::new(tokio::sync::Notify::new());
    let s2 = started.clone();
    let waiter = ToolDefinition::builder("waiter", "waits on its signal")
        .output(ToolOutput::string())
        .execute(move |tcx| {
            let s2 = s2.clone();
            async move {
                s2.notify_one();
                tcx.signal().aborted().await;
                Ok(Json::string("woke up"))
            }
        })
        .build()
        .unwrap();
    let registry = ToolRegistry::new();
    registry.register(waiter).unwrap().keep();
    let hooks = Hooks::new();
    hooks
        .on_post_execute(
            Scope::Global,
            PostFn(
                |_e: &ToolExecution, _r: &ToolResult, d: dsh_core::PostToolDecision| {
                    Ok(d.push_context(ctx("test", "post context")))
                },
            ),
        )
        .keep();
    let rt = runtime(&registry, &hooks);
    let d = driver(&rt, 10);
    let session = d.session().clone();
    let ctl = AbortController::new();
    let msg = assistant(&[("c1", "waiter", "{}")]);
    let h = spawn_turn(d, vec![msg, text_reply("done")], ctl.signal());
    started.notified().await;
    ctl.abort(AbortReason::Cancelled(CancelCause::Disposed));
    let (d, report) = h.await.unwrap();
    assert_eq!(report.unwrap().end, TurnEnd::Aborted(CancelCause::Disposed));
    assert!(
        plugin_messages(&session).is_empty(),
        "no plugin user/message is logged"
    );
    assert_eq!(inbox_texts(&d), ["post context"]);
    assert_eq!(
        types(&session)
            .iter()
            .filter(|t| *t == "turn/start")
            .count(),
        1
    );
    assert_eq!(
        turn_end_reason(&session, 1),
        json!({"kind": "aborted", "reason": {"kind": "disposed"}})
    );
    assert_eq!(
        super::support::result_code(&result_event(&session, "c1").1).as_deref(),
        Some("ABORTED")
    );
    assert_paired(&session);
}

// CAN-25: there are no pre-step listeners here; the turn-2 context comes from post-execute on an
// ordinary tool call of turn 2. What is checked is the same: a skipped pair of an earlier,
// cancelled batch does not defer or suppress a later batch's contexts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn can_25_old_skipped_pair_does_not_suppress_later_contexts() {
    let ctl = AbortController::new();
    let registry = ToolRegistry::new();
    registry.register(aborter("aborter", &ctl)).unwrap().keep();
    registry
        .register(dsh_test_support::reply_tool("second"))
        .unwrap()
        .keep();
    registry
        .register(dsh_test_support::echo_tool())
        .unwrap()
        .keep();
    let hooks = Hooks::new();
    hooks
        .on_post_execute(
            Scope::Global,
            PostFn(
                |e: &ToolExecution, _r: &ToolResult, d: dsh_core::PostToolDecision| {
                    Ok(if e.call_id() == "t2" {
                        d.push_context(ctx("test", "turn-2 context"))
                    } else {
                        d
                    })
                },
            ),
        )
        .keep();
    let rt = runtime(&registry, &hooks);
    let mut d = driver(&rt, 10);
    let session = d.session().clone();
    let turn1 = assistant(&[("c1", "aborter", "{}"), ("c2", "second", "{}")]);
    let r1 = d
        .run_turn(vec![turn1, text_reply("done")], ctl.signal())
        .await
        .unwrap();
    assert_eq!(r1.end, TurnEnd::Aborted(CancelCause::User));
    let c2 = result_event(&session, "c2").1;
    assert_eq!(result_error(&c2), Some(abort_error()), "c2 never ran");

    let turn2 = assistant(&[("t2", "echo", r#"{"text":"hi"}"#)]);
    let r2 = d
        .run_turn(vec![turn2, text_reply("done")], Signal::never())
        .await
        .unwrap();
    assert_eq!(r2.end, TurnEnd::Completed);
    let ctx = plugin_messages(&session);
    assert_eq!(ctx.first().map(|(_, t)| t.as_str()), Some("turn-2 context"));
    let t2_result = result_event(&session, "t2").0;
    let turn2_start = log(&session)
        .iter()
        .find(|(_, e)| e.event_type() == "turn/start" && e.data().value()["turn"] == 2)
        .map(|(s, _)| *s)
        .unwrap();
    assert!(
        ctx[0].0 > t2_result && ctx[0].0 > turn2_start,
        "logged in turn 2, after its result"
    );
    // It reaches the next model request: it precedes turn 2's answer step.
    let answer = log(&session)
        .iter()
        .filter(|(_, e)| e.event_type() == "assistant/message")
        .map(|(s, _)| *s)
        .max()
        .unwrap();
    assert!(ctx[0].0 < answer);
    assert!(d.inbox().is_empty());
    assert_paired(&session);
}
