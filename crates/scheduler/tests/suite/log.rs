//! LOG-01..03, 05, 07, 10, 14..17 through the scheduler and turn driver, checked on the session
//! events; plus our own rule (spec F5, I1): every `tool/result` is `surfaceOp: "append"` with
//! `sourceEventSeqs: [seq of its tool/call]`.

// Tests state their expectations with `unwrap`/`expect`: a panic is the failure report.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dsh_core::{
    AbortController, Arguments, Failure, Json, PostToolDecision, PreToolDecision, Replacement,
    Signal, ToolDefinition, ToolExecution, ToolOutput, ToolRegistry, ToolResult, text_content,
};
use dsh_guard::{Hooks, Scope};
use dsh_scheduler::TurnEnd;
use dsh_session::SurfaceOp;
use dsh_test_support::{PostFn, PreFn, ctx, echo_tool};
use parking_lot::Mutex;
use serde_json::{Value, json};

use super::support::{
    assert_paired, assistant, call_event, driver, log, plugin_messages, post_ctx_per_call,
    result_error, result_event, result_is_error, result_text, runtime, text_reply, types,
};

/// A tool that records the arguments its body received.
fn arg_recorder(seen: &Arc<Mutex<Vec<Arguments>>>) -> ToolDefinition {
    let seen = seen.clone();
    ToolDefinition::builder("raw", "records its arguments")
        .output(ToolOutput::string())
        .execute(move |tcx| {
            let seen = seen.clone();
            async move {
                seen.lock().push(tcx.arguments().clone());
                Ok(Json::string("got them"))
            }
        })
        .build()
        .unwrap()
}

/// The reference loop suite's echo: `echo: <text>`.
fn loop_echo() -> ToolDefinition {
    ToolDefinition::builder("echo", "echo with a prefix")
        .output(ToolOutput::string())
        .concurrency_safe(true)
        .execute(|tcx| async move {
            let text = tcx
                .arguments()
                .json()
                .and_then(|j| {
                    j.value()
                        .get("text")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .unwrap_or_default();
            Ok(Json::string(format!("echo: {text}")))
        })
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_01_results_first_then_contexts_in_call_order() {
    let registry = ToolRegistry::new();
    registry.register(echo_tool()).unwrap().keep();
    let hooks = Hooks::new();
    post_ctx_per_call(&hooks);
    let rt = runtime(&registry, &hooks);
    let mut d = driver(&rt, 10);
    let session = d.session().clone();
    let msg = assistant(&[
        ("c1", "echo", r#"{"text":"a"}"#),
        ("c2", "echo", r#"{"text":"b"}"#),
    ]);
    d.run_turn(vec![msg, text_reply("done")], Signal::never())
        .await
        .unwrap();
    let events = log(&session);
    let last_tool = events
        .iter()
        .filter(|(_, e)| e.event_type().starts_with("tool/"))
        .map(|(s, _)| *s)
        .max()
        .unwrap();
    let ctx = plugin_messages(&session);
    let texts: Vec<&str> = ctx.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(texts, ["ctx-c1", "ctx-c2"]);
    assert!(
        ctx.iter().all(|(s, _)| *s > last_tool),
        "no context sits between calls and results"
    );
    // The batch: four tool events (a fast c1 may commit before c2 starts), then the contexts.
    let t = types(&session);
    assert_eq!(t[..3], ["turn/start", "step/start", "assistant/message"]);
    assert!(t[3..7].iter().all(|x| x.starts_with("tool/")), "{t:?}");
    assert_eq!(t[7..10], ["user/message", "user/message", "step/end"]);
    assert_paired(&session);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_02_deferred_contexts_are_logged_after_the_result_in_order() {
    let composite = ToolDefinition::builder("composite", "defers two contexts")
        .output(ToolOutput::string())
        .execute(|tcx| async move {
            tcx.defer_context(ctx("a", "from a"));
            tcx.defer_context(ctx("b", "from b"));
            Ok(Json::string("composed"))
        })
        .build()
        .unwrap();
    let registry = ToolRegistry::new();
    registry.register(composite).unwrap().keep();
    let rt = runtime(&registry, &Hooks::new());
    let mut d = driver(&rt, 10);
    let session = d.session().clone();
    let msg = assistant(&[("c1", "composite", "{}")]);
    d.run_turn(vec![msg, text_reply("done")], Signal::never())
        .await
        .unwrap();
    let result_seq = result_event(&session, "c1").0;
    let plugins: Vec<(u64, String)> = log(&session)
        .iter()
        .filter(|(_, e)| super::support::is_plugin_message(e))
        .map(|(s, e)| {
            (
                *s,
                e.data().value()["source"]["plugin"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            )
        })
        .collect();
    assert_eq!(
        plugins.iter().map(|(_, p)| p.as_str()).collect::<Vec<_>>(),
        ["a", "b"]
    );
    assert!(plugins.iter().all(|(s, _)| *s > result_seq));
    assert_paired(&session);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_03_denied_call_result_block_carries_the_reason() {
    let runs = Arc::new(AtomicUsize::new(0));
    let danger = dsh_test_support::counting_tool("danger", &runs);
    let registry = ToolRegistry::new();
    registry.register(danger).unwrap().keep();
    let hooks = Hooks::new();
    hooks
        .on_pre_execute(
            Scope::Global,
            PreFn(|e: &ToolExecution| {
                Ok((e.name() == "danger").then(|| PreToolDecision::deny("blocked dangerous tool")))
            }),
        )
        .keep();
    let rt = runtime(&registry, &hooks);
    let mut d = driver(&rt, 10);
    let session = d.session().clone();
    d.run_turn(
        vec![assistant(&[("c1", "danger", "{}")]), text_reply("ok")],
        Signal::never(),
    )
    .await
    .unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the body never runs");
    let e = result_event(&session, "c1").1;
    let block = e
        .data()
        .value()
        .pointer("/message/content/0")
        .cloned()
        .unwrap();
    assert_eq!(block["type"], "tool-result");
    assert_eq!(block["isError"], true);
    assert!(result_text(&e).contains("blocked dangerous tool"));
    assert_eq!(result_error(&e), None, "a denial carries no typed error");
    assert_paired(&session);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_05_identity_comes_from_the_model_call_id() {
    let registry = ToolRegistry::new();
    registry.register(echo_tool()).unwrap().keep();
    let hooks = Hooks::new();
    hooks
        .on_post_execute(
            Scope::Global,
            PostFn(|_e: &ToolExecution, _r: &ToolResult, d| Ok(d)),
        )
        .keep();
    hooks
        .prepend_post_execute(
            Scope::Global,
            PostFn(|e: &ToolExecution, _r: &ToolResult, d: PostToolDecision| {
                if e.call_id() == "c1" {
                    Ok(PostToolDecision::Accept {
                        replace: Some(Replacement::Content(text_content("replaced by policy"))),
                        contexts: Vec::new(),
                    })
                } else {
                    Ok(d)
                }
            }),
        )
        .keep();
    let rt = runtime(&registry, &hooks);
    let mut d = driver(&rt, 10);
    let session = d.session().clone();
    d.run_turn(
        vec![
            assistant(&[("c1", "echo", r#"{"text":"x"}"#)]),
            text_reply("ok"),
        ],
        Signal::never(),
    )
    .await
    .unwrap();
    let e = result_event(&session, "c1").1;
    let message = &e.data().value()["message"];
    assert_eq!(message["source"], json!({"kind": "tool", "callId": "c1"}));
    assert_eq!(message["content"][0]["toolCallId"], "c1");
    assert_eq!(result_text(&e), "replaced by policy");
    let blocks =
        super::support::tool_result_blocks(&super::support::history_before(&session, u64::MAX));
    assert_eq!(blocks.len(), 1);
    assert_eq!(
        blocks[0]["toolCallId"], "c1",
        "the derived history keeps the model's call id"
    );
    assert_paired(&session);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_07_tool_result_reaches_the_second_request() {
    let registry = ToolRegistry::new();
    registry.register(loop_echo()).unwrap().keep();
    let rt = runtime(&registry, &Hooks::new());
    let mut d = driver(&rt, 10);
    let session = d.session().clone();
    let pulled = Arc::new(AtomicUsize::new(0));
    let p = pulled.clone();
    let script = vec![
        assistant(&[("c1", "echo", r#"{"text":"ping"}"#)]),
        text_reply("pong"),
    ]
    .into_iter()
    .inspect(move |_| {
        p.fetch_add(1, Ordering::SeqCst);
    });
    let report = d.run_turn(script, Signal::never()).await.unwrap();
    assert_eq!(report.end, TurnEnd::Completed);
    assert_eq!(pulled.load(Ordering::SeqCst), 2, "two model requests");
    // The second request's history is the log before its assistant message.
    let events = log(&session);
    let second = events
        .iter()
        .filter(|(_, e)| e.event_type() == "assistant/message")
        .nth(1)
        .map(|(s, _)| *s)
        .unwrap();
    let blocks =
        super::support::tool_result_blocks(&super::support::history_before(&session, second));
    assert_eq!(
        blocks,
        [
            json!({"type": "tool-result", "toolCallId": "c1", "content": [{"type": "text", "text": "echo: ping"}], "isError": false})
        ]
    );
    assert_eq!(
        call_event(&session, "c1")
            .1
            .as_tool_call()
            .unwrap()
            .arguments,
        r#"{"text":"ping"}"#
    );
    assert_paired(&session);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_10_conclude_turn_skips_the_follow_up_request() {
    let concluder = ToolDefinition::builder("finish", "concludes the turn")
        .output(ToolOutput::string())
        .execute(|tcx| async move {
            tcx.conclude_turn();
            Ok(Json::string("finished"))
        })
        .build()
        .unwrap();
    let registry = ToolRegistry::new();
    registry.register(concluder).unwrap().keep();
    let rt = runtime(&registry, &Hooks::new());
    let mut d = driver(&rt, 10);
    let session = d.session().clone();
    let pulled = Arc::new(AtomicUsize::new(0));
    let p = pulled.clone();
    let script = vec![
        assistant(&[("c1", "finish", "{}")]),
        text_reply("never requested"),
    ]
    .into_iter()
    .inspect(move |_| {
        p.fetch_add(1, Ordering::SeqCst);
    });
    let report = d.run_turn(script, Signal::never()).await.unwrap();
    assert_eq!(report.end, TurnEnd::Completed);
    assert_eq!(
        pulled.load(Ordering::SeqCst),
        1,
        "exactly one model request"
    );
    assert!(
        !result_is_error(&result_event(&session, "c1").1),
        "the result is still logged"
    );
    assert_eq!(
        types(&session),
        [
            "turn/start",
            "step/start",
            "assistant/message",
            "tool/call",
            "tool/result",
            "step/end",
            "turn/end"
        ]
    );
    assert_paired(&session);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_14_invalid_json_arguments_are_logged_raw_and_passed_on_raw() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let registry = ToolRegistry::new();
    registry.register(arg_recorder(&seen)).unwrap().keep();
    registry.register(echo_tool()).unwrap().keep();
    let rt = runtime(&registry, &Hooks::new());
    let mut d = driver(&rt, 10);
    let session = d.session().clone();
    let msg = assistant(&[("c1", "raw", "not json"), ("c2", "echo", "not json")]);
    let report = d
        .run_turn(vec![msg, text_reply("ok")], Signal::never())
        .await
        .unwrap();
    assert_eq!(report.end, TurnEnd::Completed, "the loop does not crash");
    for id in ["c1", "c2"] {
        assert_eq!(
            call_event(&session, id).1.as_tool_call().unwrap().arguments,
            "not json"
        );
    }
    assert_eq!(
        *seen.lock(),
        [Arguments::Raw(Arc::from("not json"))],
        "the tool gets the raw string"
    );
    assert!(!result_is_error(&result_event(&session, "c1").1));
    // A validating tool fails it with its own validation.
    let c2 = result_event(&session, "c2").1;
    assert!(result_is_error(&c2));
    assert_eq!(
        super::support::result_code(&c2).as_deref(),
        Some("INVALID_ARGS")
    );
    assert_paired(&session);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_15_empty_arguments_become_an_empty_object() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let registry = ToolRegistry::new();
    registry.register(arg_recorder(&seen)).unwrap().keep();
    let rt = runtime(&registry, &Hooks::new());
    let mut d = driver(&rt, 10);
    let session = d.session().clone();
    d.run_turn(
        vec![assistant(&[("c1", "raw", "")]), text_reply("ok")],
        Signal::never(),
    )
    .await
    .unwrap();
    assert_eq!(
        call_event(&session, "c1")
            .1
            .as_tool_call()
            .unwrap()
            .arguments,
        ""
    );
    let seen = seen.lock().clone();
    assert_eq!(seen.len(), 1, "the tool runs");
    assert_eq!(seen[0].json().map(|j| j.value().clone()), Some(json!({})));
    assert!(!result_is_error(&result_event(&session, "c1").1));
    assert_paired(&session);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_16_harness_error_is_logged_with_name_and_code() {
    let boom = ToolDefinition::builder("boom", "throws")
        .output(ToolOutput::string())
        .execute(|_| async { Err(Failure::harness("BOOM", "exploded")) })
        .build()
        .unwrap();
    let registry = ToolRegistry::new();
    registry.register(boom).unwrap().keep();
    let rt = runtime(&registry, &Hooks::new());
    let mut d = driver(&rt, 10);
    let session = d.session().clone();
    d.run_turn(
        vec![assistant(&[("c1", "boom", "{}")]), text_reply("ok")],
        Signal::never(),
    )
    .await
    .unwrap();
    let e = result_event(&session, "c1").1;
    assert!(result_is_error(&e));
    assert_eq!(
        e.data().value()["error"],
        json!({"name": "HarnessError", "code": "BOOM"})
    );
    assert_eq!(result_text(&e), "Error: exploded");
    assert_paired(&session);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_17_presentation_meta_is_logged_as_meta() {
    let differ = ToolDefinition::builder("differ", "has presentation meta")
        .output(ToolOutput::json().with_presentation_meta(|_| {
            Ok(Some(Json::from_shallow(
                json!({"presentation": "diff-card"}),
            )))
        }))
        .execute(|_| async { Ok(Json::from_shallow(json!({"changed": 1}))) })
        .build()
        .unwrap();
    let registry = ToolRegistry::new();
    registry.register(differ).unwrap().keep();
    let rt = runtime(&registry, &Hooks::new());
    let mut d = driver(&rt, 10);
    let session = d.session().clone();
    d.run_turn(
        vec![assistant(&[("c1", "differ", "{}")]), text_reply("ok")],
        Signal::never(),
    )
    .await
    .unwrap();
    let e = result_event(&session, "c1").1;
    assert_eq!(
        e.data().value()["meta"],
        json!({"presentation": "diff-card"})
    );
    // I2: the canonical value itself never enters the log.
    assert!(
        !e.to_json_line().contains("\"changed\":1"),
        "{}",
        e.to_json_line()
    );
    assert_paired(&session);
}

/// Our rule (spec F5, I1), pinned on every kind of outcome in one batch: success, unknown tool,
/// invalid arguments, denial, body failure, and synthetic pairs after a cancel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f5_i1_every_result_appends_and_points_at_its_call() {
    let ctl = AbortController::new();
    let c = ctl.clone();
    let aborter = ToolDefinition::builder("aborter", "cancels the turn")
        .output(ToolOutput::string())
        .execute(move |_| {
            let c = c.clone();
            async move {
                c.cancel();
                Ok(Json::string("bye"))
            }
        })
        .build()
        .unwrap();
    let boom = ToolDefinition::builder("boom", "throws")
        .output(ToolOutput::string())
        .execute(|_| async { Err(Failure::harness("BOOM", "exploded")) })
        .build()
        .unwrap();
    let registry = ToolRegistry::new();
    registry.register(echo_tool()).unwrap().keep();
    registry.register(aborter).unwrap().keep();
    registry.register(boom).unwrap().keep();
    let hooks = Hooks::new();
    hooks
        .on_pre_execute(
            Scope::Global,
            PreFn(|e: &ToolExecution| {
                Ok((e.call_id() == "c4").then(|| PreToolDecision::deny("no")))
            }),
        )
        .keep();
    let rt = runtime(&registry, &hooks);
    let mut d = driver(&rt, 10);
    let session = d.session().clone();
    let msg = assistant(&[
        ("c1", "echo", r#"{"text":"hi"}"#),
        ("c2", "nope", "{}"),
        ("c3", "echo", r#"{"text":5}"#),
        ("c4", "echo", "{}"),
        ("c5", "boom", "{}"),
        ("c6", "aborter", "{}"),
        ("c7", "echo", "{}"),
        ("c8", "echo", "{}"),
    ]);
    let report = d
        .run_turn(vec![msg, text_reply("ok")], ctl.signal())
        .await
        .unwrap();
    assert!(matches!(report.end, TurnEnd::Aborted(_)));
    let events = log(&session);
    let mut checked = 0;
    for (seq, e) in &events {
        let Some(r) = e.as_tool_result() else {
            continue;
        };
        let (call_seq, _) = call_event(&session, r.call_id);
        assert_eq!(e.surface_op(), Some(&SurfaceOp::Append), "{}", r.call_id);
        assert_eq!(
            e.source_event_seqs(),
            Some(&[call_seq][..]),
            "{}",
            r.call_id
        );
        assert!(call_seq < *seq);
        let line: Value = serde_json::from_str(&e.to_json_line()).unwrap();
        assert_eq!(line["surfaceOp"], "append");
        assert_eq!(line["sourceEventSeqs"], json!([call_seq]));
        checked += 1;
    }
    assert_eq!(checked, 8, "one result per call");
    let codes: Vec<Option<String>> = (1..=8)
        .map(|i| super::support::result_code(&result_event(&session, &format!("c{i}")).1))
        .collect();
    assert_eq!(
        codes,
        [
            None,
            Some("UNKNOWN_TOOL".into()),
            Some("INVALID_ARGS".into()),
            None,
            Some("BOOM".into()),
            Some("ABORTED".into()),
            Some("ABORTED_BEFORE_DISPATCH".into()),
            Some("ABORTED_BEFORE_DISPATCH".into()),
        ]
    );
    assert_paired(&session);
}
