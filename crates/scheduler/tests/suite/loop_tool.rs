//! The agent-loop lines marked (tool), as far as they apply to a scripted-model turn driver:
//! LOOP-15, LOOP-33 (tool row), LOOP-35, LOOP-51.
//!
//! LOOP-19 (a half-streamed tool-call block dropped whole on cancel) is not ported: streaming
//! belongs to the model adapter, and the scripted driver only ever receives complete assistant
//! messages, so there is no partial block to drop. The parts of LOOP-51 about session-start
//! preambles and pre-step prompt rejection need hook points this crate does not have.

// Tests state their expectations with `unwrap`/`expect`: a panic is the failure report.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dsh_core::{
    AbortController, CancelCause, Json, PreToolDecision, Signal, ToolDefinition, ToolExecution,
    ToolOutput, ToolRegistry, ToolResult,
};
use dsh_guard::{Hooks, Scope};
use dsh_scheduler::TurnEnd;
use dsh_session::Event;
use dsh_test_support::{PostFn, PreFn, ctx, echo_tool};
use parking_lot::Mutex;
use serde_json::json;

use super::support::{
    assert_paired, assistant, call_event, driver, log, plugin_messages, result_event,
    result_is_error, runtime, spawn_turn, text_reply, types,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_15_cancel_at_assistant_message_pairs_the_call_and_replays_it() {
    let runs = Arc::new(AtomicUsize::new(0));
    let danger = dsh_test_support::counting_tool("danger", &runs);
    let registry = ToolRegistry::new();
    registry.register(danger).unwrap().keep();
    let rt = runtime(&registry, &Hooks::new());
    let mut d = driver(&rt, 10);
    let session = d.session().clone();
    let ctl = AbortController::new();
    let c = ctl.clone();
    let sub = session.subscribe(move |_, e: &Event| {
        if e.event_type() == "assistant/message" {
            c.cancel();
        }
    });
    let report = d
        .run_turn(
            vec![assistant(&[("c1", "danger", "{}")]), text_reply("done")],
            ctl.signal(),
        )
        .await
        .unwrap();
    drop(sub);
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the body runs 0 times");
    assert_eq!(report.end, TurnEnd::Aborted(CancelCause::User));
    call_event(&session, "c1");
    let e = result_event(&session, "c1").1;
    let message = &e.data().value()["message"];
    assert_eq!(message["source"], json!({"kind": "tool", "callId": "c1"}));
    let block = &message["content"][0];
    assert_eq!(
        (&block["type"], &block["toolCallId"], &block["isError"]),
        (&json!("tool-result"), &json!("c1"), &json!(true))
    );
    assert_eq!(message["content"].as_array().map(Vec::len), Some(1));
    assert_eq!(
        e.data().value()["error"],
        json!({"name": "AbortError", "code": "ABORTED_BEFORE_DISPATCH"})
    );
    let end = log(&session)
        .iter()
        .find(|(_, e)| e.event_type() == "turn/end")
        .map(|(_, e)| e.data().value()["reason"].clone())
        .unwrap();
    assert_eq!(end, json!({"kind": "aborted", "reason": {"kind": "user"}}));

    // The next prompt: its request is derived from a log that holds the paired result.
    let report2 = d
        .run_turn(vec![text_reply("next")], Signal::never())
        .await
        .unwrap();
    assert_eq!(report2.end, TurnEnd::Completed);
    let events = log(&session);
    let answer = events
        .iter()
        .filter(|(_, e)| e.event_type() == "assistant/message")
        .map(|(s, _)| *s)
        .max()
        .unwrap();
    let replayed: Vec<(String, bool)> =
        super::support::tool_result_blocks(&super::support::history_before(&session, answer))
            .iter()
            .map(|b| {
                (
                    b["toolCallId"].as_str().unwrap().to_owned(),
                    b["isError"] == true,
                )
            })
            .collect();
    assert_eq!(replayed, [("c1".to_owned(), true)]);
    assert_paired(&session);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_33_tool_body_waiting_on_its_signal_settles_on_cancel() {
    let observed = Arc::new(Mutex::new(None::<(bool, bool, bool)>));
    let started = Arc::new(tokio::sync::Notify::new());
    let ctl = AbortController::new();
    let turn_signal = ctl.signal();
    let (o, s, ts) = (observed.clone(), started.clone(), turn_signal.clone());
    let waiter = ToolDefinition::builder("waiter", "waits for the turn signal")
        .output(ToolOutput::string())
        .execute(move |tcx| {
            let (o, s, ts) = (o.clone(), s.clone(), ts.clone());
            async move {
                s.notify_one();
                tcx.signal().aborted().await;
                let exec_signal = tcx.exec().signal();
                *o.lock() = Some((
                    Signal::same(exec_signal, &ts),
                    exec_signal.is_aborted(),
                    tcx.signal().is_aborted(),
                ));
                Ok(Json::string("settled"))
            }
        })
        .build()
        .unwrap();
    let registry = ToolRegistry::new();
    registry.register(waiter).unwrap().keep();
    let rt = runtime(&registry, &Hooks::new());
    let d = driver(&rt, 10);
    let session = d.session().clone();
    let h = spawn_turn(
        d,
        vec![assistant(&[("c1", "waiter", "{}")]), text_reply("done")],
        turn_signal,
    );
    started.notified().await;
    assert!(observed.lock().is_none(), "the body is waiting");
    ctl.cancel();
    let (_, report) = tokio::time::timeout(std::time::Duration::from_secs(5), h)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(report.unwrap().end, TurnEnd::Aborted(CancelCause::User));
    assert_eq!(
        *observed.lock(),
        Some((true, true, true)),
        "exec.signal is the turn's signal, aborted by the agent's cancel"
    );
    let reason = log(&session)
        .iter()
        .find(|(_, e)| e.event_type() == "turn/end")
        .map(|(_, e)| e.data().value()["reason"].clone())
        .unwrap();
    assert_eq!(
        reason,
        json!({"kind": "aborted", "reason": {"kind": "user"}})
    );
    assert_eq!(
        super::support::result_code(&result_event(&session, "c1").1).as_deref(),
        Some("ABORTED")
    );
    assert_paired(&session);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_35_tool_continuation_step_proposes_no_new_messages() {
    let registry = ToolRegistry::new();
    registry.register(echo_tool()).unwrap().keep();
    let rt = runtime(&registry, &Hooks::new());
    let mut d = driver(&rt, 10);
    let session = d.session().clone();
    d.run_turn(
        vec![
            assistant(&[("c1", "echo", r#"{"text":"x"}"#)]),
            text_reply("done"),
        ],
        Signal::never(),
    )
    .await
    .unwrap();
    assert_eq!(
        types(&session),
        [
            "turn/start",
            "step/start",
            "assistant/message",
            "tool/call",
            "tool/result",
            "step/end",
            "step/start",
            "assistant/message",
            "step/end",
            "turn/end"
        ]
    );
    let steps: Vec<serde_json::Value> = log(&session)
        .iter()
        .filter(|(_, e)| e.event_type() == "step/start")
        .map(|(_, e)| e.data().value().clone())
        .collect();
    assert_eq!(
        steps,
        [json!({"turn": 1, "step": 1}), json!({"turn": 1, "step": 2})]
    );
    assert!(
        !types(&session).contains(&"user/message".to_owned()),
        "no new messages in step 2"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_51_native_plugin_hooks_log_no_hook_events() {
    let registry = ToolRegistry::new();
    registry.register(echo_tool()).unwrap().keep();
    let hooks = Hooks::new();
    // One plugin: its handles live together and go together.
    let plugin = vec![
        hooks.on_pre_execute(
            Scope::Global,
            PreFn(|e: &ToolExecution| {
                Ok((e.name() == "danger").then(|| PreToolDecision::deny("no danger")))
            }),
        ),
        hooks.on_post_execute(
            Scope::Global,
            PostFn(
                |_e: &ToolExecution, _r: &ToolResult, d: dsh_core::PostToolDecision| {
                    Ok(match d {
                        dsh_core::PostToolDecision::Accept { .. } => {
                            d.push_context(ctx("audit", "audited"))
                        }
                        other => other,
                    })
                },
            ),
        ),
    ];
    let rt = runtime(&registry, &hooks);
    let mut d = driver(&rt, 10);
    let session = d.session().clone();
    d.run_turn(
        vec![
            assistant(&[("c1", "echo", r#"{"text":"hi"}"#)]),
            text_reply("done"),
        ],
        Signal::never(),
    )
    .await
    .unwrap();
    assert!(
        !result_is_error(&result_event(&session, "c1").1),
        "a successful tool/result"
    );
    let ctx = plugin_messages(&session);
    assert_eq!(
        ctx.iter().map(|(_, t)| t.as_str()).collect::<Vec<_>>(),
        ["audited"]
    );
    assert!(
        types(&session).iter().all(|t| !t.starts_with("hook/")),
        "a native plugin needs no hook protocol: {:?}",
        types(&session)
    );
    assert_paired(&session);
    drop(plugin);
}
