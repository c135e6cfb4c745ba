//! SCH-23..26: prepare and finalize one call at a time in model order, contexts in model order,
//! a failure of the scheduler itself; plus the no-starvation check of issue 4 (item 3).

// Tests state their expectations with `unwrap`/`expect`: a panic is the failure report.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::support::*;
use async_trait::async_trait;
use dsh_core::{
    Failure, Json, PreExecuteHook, PreNext, PreToolDecision, Signal, ToolDefinition, ToolExecution,
    ToolOutput, ToolRegistry,
};
use dsh_guard::{Hooks, Scope};
use dsh_scheduler::{DEFAULT_MAX_PARALLEL, SchedulerError, TurnDriver, TurnEnd};
use dsh_session::Session;
use dsh_test_support::{Gate, PreFn, Recorder};
use tokio::sync::Notify;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sch_23_pre_and_post_execute_run_in_model_order() {
    let gate = Gate::new();
    let registry = ToolRegistry::new();
    registry.register(gate.tool("g", true)).unwrap().keep();
    let hooks = Hooks::new();
    let rec = Recorder::new();
    record_pre(&hooks, &rec);
    record_post(&hooks, &rec);
    let rt = runtime(&registry, &hooks);
    let d = driver(&rt, DEFAULT_MAX_PARALLEL);
    let session = d.session().clone();
    let h = spawn_turn(
        d,
        vec![calls_to("g", 3), text_reply("done")],
        Signal::never(),
    );
    assert!(gate.wait_started(3, 2000).await);
    for id in ["c3", "c2", "c1"] {
        gate.release(id);
        let end = format!("end:{id}");
        assert!(wait_until(2000, || gate.events().contains(&end)).await);
    }
    let (_, report) = h.await.unwrap();
    report.unwrap();
    assert_eq!(seen(&rec, "pre:"), ["c1", "c2", "c3"]);
    assert_eq!(seen(&rec, "post:"), ["c1", "c2", "c3"]);
    assert_paired(&session);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sch_24_contexts_follow_the_last_result_in_model_order() {
    let gate = Gate::new();
    let registry = ToolRegistry::new();
    registry.register(gate.tool("g", true)).unwrap().keep();
    let hooks = Hooks::new();
    post_ctx_per_call(&hooks);
    let rt = runtime(&registry, &hooks);
    let d = driver(&rt, 2);
    let session = d.session().clone();
    let h = spawn_turn(
        d,
        vec![calls_to("g", 2), text_reply("done")],
        Signal::never(),
    );
    assert!(gate.wait_started(2, 2000).await);
    gate.release("c2");
    assert!(wait_until(2000, || gate.events().contains(&"end:c2".to_owned())).await);
    gate.release("c1");
    let (_, report) = h.await.unwrap();
    report.unwrap();
    let ctx = plugin_messages(&session);
    let texts: Vec<&str> = ctx.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(texts, ["ctx-c1", "ctx-c2"]);
    let last_result = log(&session)
        .iter()
        .filter(|(_, e)| e.event_type() == "tool/result")
        .map(|(s, _)| *s)
        .max()
        .unwrap();
    assert!(
        ctx[0].0 > last_result,
        "the first context comes after the last result"
    );
    assert_paired(&session);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sch_25_denied_and_throwing_prepare_keep_model_order() {
    let gate = Gate::new();
    gate.release_all();
    let registry = ToolRegistry::new();
    registry.register(gate.tool("g", true)).unwrap().keep();
    let hooks = Hooks::new();
    hooks
        .on_pre_execute(
            Scope::Global,
            PreFn(|e: &ToolExecution| match e.call_id() {
                "c2" => Ok(Some(PreToolDecision::deny("blocked by policy"))),
                "c3" => Err(Failure::new("pre exploded")),
                _ => Ok(None),
            }),
        )
        .keep();
    let rec = Recorder::new();
    record_post(&hooks, &rec);
    let rt = runtime(&registry, &hooks);
    let mut d = driver(&rt, DEFAULT_MAX_PARALLEL);
    let session = d.session().clone();
    let report = d
        .run_turn(vec![calls_to("g", 3), text_reply("done")], Signal::never())
        .await
        .unwrap();
    assert_eq!(report.end, TurnEnd::Completed);
    assert_eq!(gate.started(), ["c1"], "only call 1's body ever starts");
    assert_eq!(
        seen(&rec, "post:"),
        ["c1", "c2"],
        "a denial goes through post; a thrown pre does not"
    );
    assert_eq!(result_ids(&session), ["c1", "c2", "c3"]);
    let c2 = result_event(&session, "c2").1;
    let c3 = result_event(&session, "c3").1;
    assert!(result_is_error(&c2) && result_text(&c2).contains("blocked by policy"));
    assert!(result_is_error(&c3) && result_text(&c3).contains("pre exploded"));
    assert!(!result_is_error(&result_event(&session, "c1").1));
    assert_paired(&session);
}

/// A sink that fails the first write containing `needle`, then accepts everything else (the
/// session poisons itself after a failed write, so later appends fail anyway).
struct FailOnce {
    needle: &'static str,
    fired: Arc<AtomicBool>,
}

impl dsh_session::LogSink for FailOnce {
    fn append_durably(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let text = String::from_utf8_lossy(bytes);
        if !self.fired.load(Ordering::SeqCst) && text.contains(self.needle) {
            self.fired.store(true, Ordering::SeqCst);
            return Err(std::io::Error::other("scheduler exploded"));
        }
        Ok(())
    }
    fn truncate(&mut self, _len: u64) -> std::io::Result<()> {
        Ok(())
    }
}

// SCH-26: the stages cannot be swapped for fault injectors here; the scheduler's own failure
// is the session log refusing an append. With a cap of 2, c1 and c2 are recorded (one group)
// and run; c1 ends, and c3's `tool/call` append, made for the slot c1 freed, fails while c2's
// body runs.
// The session's writer is a thread of its own, so the test waits for it by yielding (a paused
// clock would move while the runtime waits for that thread) and calls `quiescent()` only once
// the failing write is done (the writer's answer to it is what wakes the driver next).
#[tokio::test(start_paused = true)]
async fn sch_26_scheduler_failure_stops_starting_drains_and_surfaces_the_first_error() {
    let gate = Gate::new();
    let registry = ToolRegistry::new();
    registry.register(gate.tool("g", true)).unwrap().keep();
    let hooks = Hooks::new();
    let rec = Recorder::new();
    record_pre(&hooks, &rec);
    let rt = runtime(&registry, &hooks);
    let header = dsh_session::Header::new("sch-26", "/tmp");
    let fired = Arc::new(AtomicBool::new(false));
    let session = Session::with_sink(
        header,
        FailOnce {
            needle: r#""type":"tool/call","data":{"turn":1,"step":1,"callId":"c3""#,
            fired: fired.clone(),
        },
    )
    .unwrap();
    let d = TurnDriver::new(rt.clone(), session.clone(), None).with_max_parallel(2);
    let h = spawn_turn(
        d,
        vec![calls_to("g", 3), text_reply("done")],
        Signal::never(),
    );

    yield_until(|| gate.started().len() == 2).await;
    gate.release("c1");
    yield_until(|| fired.load(Ordering::SeqCst)).await;
    quiescent().await;
    assert!(
        !h.is_finished(),
        "the turn does not end while c2's started body runs"
    );
    gate.release("c2");
    // The session's writer answers from its own thread, which a paused clock does not wait
    // for (a clock-based timeout would fire while it writes): yield until the turn is done.
    yield_until(|| h.is_finished()).await;
    let (_, outcome) = h.await.unwrap();
    let err = outcome.expect_err("the scheduler failure is reported");
    assert!(
        matches!(
            err,
            SchedulerError::Session(dsh_session::SessionError::Write(_))
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("scheduler exploded"), "{err}");
    let mut started = gate.started();
    started.sort();
    assert_eq!(started, ["c1", "c2"], "c3 is never dispatched");
    assert_eq!(
        seen(&rec, "pre:"),
        ["c1", "c2"],
        "c3 is never even prepared"
    );
    assert!(
        gate.events().contains(&"end:c2".to_owned()),
        "c2's body was drained"
    );
    // Nothing is fabricated: no result follows the failure (c1's, written before it, may be
    // there, in a write of its own).
    let results = result_ids(&session);
    assert!(
        results.is_empty() || results == ["c1"],
        "{:?}",
        tool_trace(&session)
    );
}

// SCH-27 (Code Mode through the loop: a direct `write` under the `code` presentation) belongs to
// the Code Mode crate, which owns presentation modes; it is not ported here.

// ---------------------------------------------------------------------------------------------
// Issue 4, item 3: no starvation
// ---------------------------------------------------------------------------------------------

/// A pre-execute listener that, for one call id, does not return until `until` is notified:
/// a prepare as slow as the test wants, without a clock.
struct WaitingPre {
    call_id: &'static str,
    until: Arc<Notify>,
    rec: Recorder,
}

#[async_trait]
impl PreExecuteHook for WaitingPre {
    async fn pre_execute(
        &self,
        exec: &ToolExecution,
        next: PreNext<'_>,
    ) -> Result<PreToolDecision, Failure> {
        if exec.call_id() == self.call_id {
            self.rec.push(format!("pre-begin:{}", exec.call_id()));
            self.until.notified().await;
            self.rec.push(format!("pre-end:{}", exec.call_id()));
        }
        next.run(exec).await
    }
}

// c2's prepare cannot finish before c1's body does: if the driver stopped polling the running
// body while it waits in c2's prepare, neither could finish and the turn would time out. The
// clock is paused, so the body's wait and the time-out cost no wall time and cannot race.
#[tokio::test(start_paused = true)]
async fn s3_no_starvation_running_body_is_not_delayed_by_a_slow_later_prepare() {
    let rec = Recorder::new();
    let c1_done = Arc::new(Notify::new());
    let (r, done) = (rec.clone(), c1_done.clone());
    let waits = ToolDefinition::builder("waits", "waits a while, then tells c2's prepare")
        .output(ToolOutput::string())
        .concurrency_safe(true)
        .execute(move |ctx| {
            let (r, done) = (r.clone(), done.clone());
            async move {
                let id = ctx.exec().call_id().to_owned();
                r.push(format!("body-begin:{id}"));
                tokio::time::sleep(Duration::from_millis(100)).await;
                r.push(format!("body-end:{id}"));
                if id == "c1" {
                    done.notify_one();
                }
                Ok(Json::string("done"))
            }
        })
        .build()
        .unwrap();
    let registry = ToolRegistry::new();
    registry.register(waits).unwrap().keep();
    let hooks = Hooks::new();
    let slow = WaitingPre {
        call_id: "c2",
        until: c1_done,
        rec: rec.clone(),
    };
    hooks.on_pre_execute(Scope::Global, slow).keep();
    let rt = runtime(&registry, &hooks);
    let mut d = driver(&rt, DEFAULT_MAX_PARALLEL);
    let report = tokio::time::timeout(
        Duration::from_secs(60),
        d.run_turn(
            vec![calls_to("waits", 2), text_reply("done")],
            Signal::never(),
        ),
    )
    .await
    .expect("c1's body ran while c2's prepare waited for it")
    .unwrap();
    assert_eq!(report.end, TurnEnd::Completed);
    assert_eq!(
        rec.entries(),
        [
            "body-begin:c1",
            "pre-begin:c2",
            "body-end:c1",
            "pre-end:c2",
            "body-begin:c2",
            "body-end:c2"
        ]
    );
    assert_paired(d.session());
}
