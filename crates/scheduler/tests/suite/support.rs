//! Helpers shared by the loop-level files (`sch_*`, `can_loop`, `log`, `loop_tool`, `props`,
//! `interleavings`, `placement`, `tracing_spans`): assistant messages, log views, the pairing
//! check, a driver on a spawned turn, and waiting for the runtime to go quiet; and those of the
//! runtime-level files (`dsp_*`, `fin_*`): a runtime over some tools, tools that count or fail,
//! a short-circuiting wrapper and fixed post-execute decisions; and a sink that keeps every
//! write (`group_durability`, `turn_durability`).

// Tests state their expectations with `unwrap`/`expect`: a panic is the failure report.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use dsh_core::{
    ContextMessage, Dispatch, ExecuteNext, ExecuteWrapper, Failure, Json, PostToolDecision,
    Replacement, Signal, ToolDefinition, ToolExecution, ToolOutput, ToolRegistry, ToolResult,
};
use dsh_guard::{Hooks, Scope};
use dsh_scheduler::{Runtime, SchedulerError, TurnDriver, TurnReport};
use dsh_session::{Event, LogSink, Session, SurfaceOp};
use dsh_test_support::{PostFn, PreFn, Recorder};
use parking_lot::Mutex;
use serde::{Serialize, Serializer};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

/// An assistant message holding tool-call blocks `(id, name, raw arguments)`, in order.
pub(super) fn assistant(calls: &[(&str, &str, &str)]) -> Json {
    let content: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| json!({"type": "tool-call", "id": id, "name": name, "arguments": args}))
        .collect();
    Json::from_shallow(json!({"role": "assistant", "content": content}))
}

/// An assistant message holding only text (the model's final answer).
pub(super) fn text_reply(text: &str) -> Json {
    Json::from_shallow(json!({"role": "assistant", "content": [{"type": "text", "text": text}]}))
}

/// `n` calls `c1..cn` to `name` with `{}` arguments.
pub(super) fn calls_to(name: &str, n: usize) -> Json {
    let ids: Vec<String> = (1..=n).map(|i| format!("c{i}")).collect();
    let calls: Vec<(&str, &str, &str)> = ids.iter().map(|id| (id.as_str(), name, "{}")).collect();
    assistant(&calls)
}

/// Every durable event with its seq.
pub(super) fn log(s: &Session) -> Vec<(u64, Event)> {
    s.events().to_vec()
}

/// The model-visible history derived from the log (spec I3), limited to events before `before`
/// (a seq), as each message's JSON value.
pub(super) fn history_before(s: &Session, before: u64) -> Vec<Value> {
    let events = log(s);
    dsh_session::derive_messages_from(
        events
            .iter()
            .filter(|(seq, _)| *seq < before)
            .map(|(seq, e)| (*seq, e)),
    )
    .into_iter()
    .map(|m| m.value().clone())
    .collect()
}

/// The tool-result blocks of a derived history, in order.
pub(super) fn tool_result_blocks(history: &[Value]) -> Vec<Value> {
    history
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool-result")
        .collect()
}

/// The event types, in order.
pub(super) fn types(s: &Session) -> Vec<String> {
    log(s)
        .iter()
        .map(|(_, e)| e.event_type().to_owned())
        .collect()
}

/// `call <id>` / `result <id>` for every tool event, in log order.
pub(super) fn tool_trace(s: &Session) -> Vec<String> {
    log(s)
        .iter()
        .filter_map(|(_, e)| {
            if let Some(c) = e.as_tool_call() {
                Some(format!("call {}", c.call_id))
            } else {
                e.as_tool_result().map(|r| format!("result {}", r.call_id))
            }
        })
        .collect()
}

/// The call ids of the `tool/result` events, in log order.
pub(super) fn result_ids(s: &Session) -> Vec<String> {
    log(s)
        .iter()
        .filter_map(|(_, e)| e.as_tool_result().map(|r| r.call_id.to_owned()))
        .collect()
}

/// The call ids of the `tool/call` events, in log order.
pub(super) fn call_ids(s: &Session) -> Vec<String> {
    log(s)
        .iter()
        .filter_map(|(_, e)| e.as_tool_call().map(|c| c.call_id.to_owned()))
        .collect()
}

/// The `tool/result` event for `call_id` (panics if there is not exactly one).
pub(super) fn result_event(s: &Session, call_id: &str) -> (u64, Event) {
    let found: Vec<(u64, Event)> = log(s)
        .into_iter()
        .filter(|(_, e)| e.as_tool_result().is_some_and(|r| r.call_id == call_id))
        .collect();
    assert_eq!(found.len(), 1, "exactly one tool/result for {call_id}");
    found.into_iter().next().unwrap()
}

/// The `tool/call` event for `call_id` (panics if there is not exactly one).
pub(super) fn call_event(s: &Session, call_id: &str) -> (u64, Event) {
    let found: Vec<(u64, Event)> = log(s)
        .into_iter()
        .filter(|(_, e)| e.as_tool_call().is_some_and(|c| c.call_id == call_id))
        .collect();
    assert_eq!(found.len(), 1, "exactly one tool/call for {call_id}");
    found.into_iter().next().unwrap()
}

/// The texts of a `tool/result`'s tool-result block content, joined by newlines.
pub(super) fn result_text(e: &Event) -> String {
    let view = e.as_tool_result().expect("a tool/result");
    view.content
        .and_then(Value::as_array)
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// `isError` of a `tool/result`.
pub(super) fn result_is_error(e: &Event) -> bool {
    e.as_tool_result()
        .and_then(|r| r.is_error)
        .expect("isError")
}

/// The `error` of a `tool/result` (`{name, code}`), if typed.
pub(super) fn result_error(e: &Event) -> Option<Value> {
    e.as_tool_result().and_then(|r| r.error.cloned())
}

/// `error.code` of a `tool/result`, if typed.
pub(super) fn result_code(e: &Event) -> Option<String> {
    result_error(e).and_then(|v| v.get("code").and_then(Value::as_str).map(str::to_owned))
}

/// Whether a `user/message` comes from a plugin.
pub(super) fn is_plugin_message(e: &Event) -> bool {
    e.event_type() == "user/message"
        && e.data()
            .value()
            .pointer("/source/kind")
            .and_then(Value::as_str)
            == Some("plugin")
}

/// The first text of a `user/message`.
pub(super) fn message_text(e: &Event) -> String {
    e.data()
        .value()
        .pointer("/content/0/text")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// `(seq, text)` of every plugin `user/message`, in order.
pub(super) fn plugin_messages(s: &Session) -> Vec<(u64, String)> {
    log(s)
        .iter()
        .filter(|(_, e)| is_plugin_message(e))
        .map(|(seq, e)| (*seq, message_text(e)))
        .collect()
}

/// The texts of the contexts waiting in a driver's inbox.
pub(super) fn inbox_texts(d: &TurnDriver) -> Vec<String> {
    d.inbox()
        .snapshot()
        .iter()
        .filter_map(|c| c.first_text().map(str::to_owned))
        .collect()
}

/// Checks spec I1 and F5 over a whole log: every `tool/call` has exactly one `tool/result`, in
/// the same turn and step, after it, with `surfaceOp: "append"` and `sourceEventSeqs: [call
/// seq]`; no result without its call. Also asks the session crate's own checker.
pub(super) fn assert_paired(s: &Session) {
    let events = log(s);
    let problems = dsh_session::check_events(events.iter().map(|(seq, e)| (*seq, e)));
    assert!(problems.is_empty(), "log checker: {problems:?}");
    let mut calls: Vec<(u64, String, Option<u64>, Option<u64>)> = Vec::new();
    for (seq, e) in &events {
        if let Some(c) = e.as_tool_call() {
            calls.push((*seq, c.call_id.to_owned(), c.turn, c.step));
        }
    }
    let mut paired = vec![0usize; calls.len()];
    for (seq, e) in &events {
        let Some(r) = e.as_tool_result() else {
            continue;
        };
        assert_eq!(
            e.surface_op(),
            Some(&SurfaceOp::Append),
            "F5: result {} surfaceOp",
            r.call_id
        );
        let seqs = e.source_event_seqs().expect("F5: sourceEventSeqs present");
        assert_eq!(seqs.len(), 1, "F5: one source seq for {}", r.call_id);
        let idx = calls
            .iter()
            .position(|(cs, _, _, _)| *cs == seqs[0])
            .unwrap_or_else(|| {
                panic!(
                    "I1: result {} points at seq {} which is no call",
                    r.call_id, seqs[0]
                )
            });
        let (cs, cid, turn, step) = &calls[idx];
        assert_eq!(cid, r.call_id, "I1: result points at its own call");
        assert!(cs < seq, "I1: result after its call");
        assert_eq!((turn, step), (&r.turn, &r.step), "I1: same turn and step");
        paired[idx] += 1;
    }
    for (i, n) in paired.iter().enumerate() {
        assert_eq!(*n, 1, "I1: call {} has {n} results", calls[i].1);
    }
}

/// A runtime over a registry and hooks.
pub(super) fn runtime(registry: &ToolRegistry, hooks: &Hooks) -> Arc<Runtime> {
    Arc::new(Runtime::new(registry.clone(), hooks.clone()))
}

/// A driver over a fresh in-memory session, with pool size `cap`.
pub(super) fn driver(rt: &Arc<Runtime>, cap: usize) -> TurnDriver {
    TurnDriver::new(rt.clone(), Session::in_memory("loop-test"), None).with_max_parallel(cap)
}

/// What a spawned turn gives back.
pub(super) type TurnJoin = JoinHandle<(TurnDriver, Result<TurnReport, SchedulerError>)>;

/// Runs one turn on a task, so the test can steer gates meanwhile.
pub(super) fn spawn_turn(mut d: TurnDriver, steps: Vec<Json>, signal: Signal) -> TurnJoin {
    tokio::spawn(async move {
        let r = d.run_turn(steps, signal).await;
        (d, r)
    })
}

/// Waits (yielding) until `cond` holds, up to `ms` milliseconds.
pub(super) async fn wait_until(ms: u64, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_millis(ms);
    loop {
        if cond() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Waiting for the runtime to go quiet, shared with the other crates' suites.
pub(super) use dsh_test_support::{quiescent, yield_until};

/// A pre-execute listener that records every call id it sees.
pub(super) fn record_pre(hooks: &Hooks, rec: &Recorder) {
    let rec = rec.clone();
    hooks
        .on_pre_execute(
            Scope::Global,
            PreFn(move |e: &ToolExecution| {
                rec.push(format!("pre:{}", e.call_id()));
                Ok(None)
            }),
        )
        .keep();
}

/// A post-execute listener that records every call id it sees.
pub(super) fn record_post(hooks: &Hooks, rec: &Recorder) {
    let rec = rec.clone();
    hooks
        .on_post_execute(
            Scope::Global,
            PostFn(move |e: &ToolExecution, _r: &ToolResult, d| {
                rec.push(format!("post:{}", e.call_id()));
                Ok(d)
            }),
        )
        .keep();
}

/// A post-execute listener adding a plugin context `ctx-<callId>` to every call.
pub(super) fn post_ctx_per_call(hooks: &Hooks) {
    hooks
        .on_post_execute(
            Scope::Global,
            PostFn(
                |e: &ToolExecution, _r: &ToolResult, d: dsh_core::PostToolDecision| {
                    Ok(d.push_context(dsh_test_support::ctx(
                        "test",
                        &format!("ctx-{}", e.call_id()),
                    )))
                },
            ),
        )
        .keep();
}

/// Entries of a recorder with a prefix, prefix stripped.
pub(super) fn seen(rec: &Recorder, prefix: &str) -> Vec<String> {
    rec.entries()
        .iter()
        .filter_map(|e| e.strip_prefix(prefix).map(str::to_owned))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Runtime-level helpers (`dsp_*`, `fin_*`): one call through `Runtime::execute`
// ---------------------------------------------------------------------------------------------

/// A runtime over a fresh registry holding `tools`, with no hooks.
pub(super) fn runtime_of(tools: impl IntoIterator<Item = ToolDefinition>) -> Runtime {
    let registry = ToolRegistry::new();
    for t in tools {
        registry.register(t).expect("registers").keep();
    }
    Runtime::new(registry, Hooks::new())
}

/// A text content block.
pub(super) fn text(s: &str) -> Value {
    json!({"type": "text", "text": s})
}

/// A string tool whose body counts its runs and returns `reply`.
pub(super) fn counted(name: &str, reply: &str, runs: &Arc<AtomicUsize>) -> ToolDefinition {
    let runs = runs.clone();
    let reply = reply.to_owned();
    ToolDefinition::builder(name, "counted")
        .output(ToolOutput::string())
        .execute(move |_ctx| {
            runs.fetch_add(1, Ordering::SeqCst);
            let r = reply.clone();
            async move { Ok(Json::string(r)) }
        })
        .build()
        .expect("builds")
}

/// A string tool whose body fails with `failure`.
pub(super) fn failing(name: &str, failure: Failure) -> ToolDefinition {
    ToolDefinition::builder(name, "fails")
        .output(ToolOutput::string())
        .execute(move |_ctx| {
            let f = failure.clone();
            async move { Err(f) }
        })
        .build()
        .expect("builds")
}

/// A value whose `Serialize` always fails: the Rust analogue of a throwing getter.
pub(super) struct Uncopyable(pub(super) String);

impl Serialize for Uncopyable {
    fn serialize<S: Serializer>(&self, _s: S) -> Result<S::Ok, S::Error> {
        Err(serde::ser::Error::custom(&self.0))
    }
}

/// A wrapper that never calls `next` and returns a fixed outcome.
pub(super) struct ShortCircuit(pub(super) Result<ToolResult, Failure>);

#[async_trait]
impl ExecuteWrapper for ShortCircuit {
    async fn around(&self, _call: Dispatch, _next: ExecuteNext<'_>) -> Result<ToolResult, Failure> {
        self.0.clone()
    }
}

/// Registers a post-execute listener that replaces whatever the waterfall decided.
pub(super) fn post_decides(rt: &Runtime, decision: PostToolDecision) -> dsh_guard::HookHandle {
    rt.hooks().on_post_execute(
        Scope::Global,
        PostFn(
            move |_e: &ToolExecution, _r: &ToolResult, _d: PostToolDecision| Ok(decision.clone()),
        ),
    )
}

/// An accept decision.
pub(super) fn accept(
    replace: Option<Replacement>,
    contexts: Vec<ContextMessage>,
) -> PostToolDecision {
    PostToolDecision::Accept { replace, contexts }
}

/// A sink standing for the disk: it keeps every write it was given, as one string per write.
#[derive(Clone, Default)]
pub(super) struct Writes(pub(super) Arc<Mutex<Vec<String>>>);

impl LogSink for Writes {
    fn append_durably(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.0
            .lock()
            .push(String::from_utf8_lossy(bytes).into_owned());
        Ok(())
    }
    fn truncate(&mut self, _len: u64) -> std::io::Result<()> {
        Ok(())
    }
}
