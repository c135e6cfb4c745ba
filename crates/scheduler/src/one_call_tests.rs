//! A step of one call (`one_call.rs`) against the general step (`step.rs`) given the same call:
//! the same outcome and the same log, for any body, policy, cancellation, arguments, timing and
//! kind of session.

// Tests state their expectations with `unwrap`/`expect`: a panic is the failure report.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;

use async_trait::async_trait;
use dsh_core::{
    AbortController, AbortReason, Failure, Json, PreExecuteHook, PreNext, PreToolDecision,
    ToolDefinition, ToolExecution, ToolOutput, ToolRegistry,
};
use dsh_guard::{Hooks, Scope};
use dsh_session::{OpenOptions, Session};
use proptest::prelude::*;
use serde_json::Value;

use crate::runtime::{Runtime, RuntimeConfig};
use crate::step::{StepContext, StepOutcome};
use crate::{SchedulerError, ToolCallBlock};

/// What one case does.
#[derive(Clone, Debug)]
struct Case {
    /// 0 returns a value, 1 fails, 2 panics, 3 aborts the turn's signal and returns a value.
    body: u8,
    /// 0 no listener, 1 a denying listener, 2 a listener that fails.
    pre: u8,
    aborted_before: bool,
    timing: bool,
    durable: bool,
    args: &'static str,
    known: bool,
}

fn cases() -> impl Strategy<Value = Case> {
    (
        0u8..4,
        0u8..3,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        prop::sample::select(vec!["{}", "", "not json", r#"{"x":1}"#]),
        any::<bool>(),
    )
        .prop_map(
            |(body, pre, aborted_before, timing, durable, args, known)| Case {
                body,
                pre,
                aborted_before,
                timing,
                durable,
                args,
                known,
            },
        )
}

struct Pre(u8);

#[async_trait]
impl PreExecuteHook for Pre {
    async fn pre_execute(
        &self,
        exec: &ToolExecution,
        next: PreNext<'_>,
    ) -> Result<PreToolDecision, Failure> {
        match self.0 {
            1 => Ok(PreToolDecision::Deny {
                reason: Arc::from("not here"),
            }),
            2 => Err(Failure::new("the listener failed")),
            _ => next.run(exec).await,
        }
    }
}

fn runtime(case: &Case, turn: &AbortController) -> Arc<Runtime> {
    let registry = ToolRegistry::new();
    let body = case.body;
    let abort = turn.clone();
    let tool = ToolDefinition::builder("t", "The case's tool.")
        .output(ToolOutput::string())
        .execute(move |_ctx| {
            let abort = abort.clone();
            async move {
                match body {
                    1 => Err(Failure::new("the body failed")),
                    2 => panic!("the body panicked"),
                    3 => {
                        abort.cancel();
                        Ok(Json::string("done"))
                    }
                    _ => Ok(Json::string("done")),
                }
            }
        })
        .build()
        .unwrap();
    registry.register(tool).unwrap().keep();
    let hooks = Hooks::new();
    if case.pre != 0 {
        hooks.on_pre_execute(Scope::Global, Pre(case.pre)).keep();
    }
    Arc::new(Runtime::new(registry, hooks).with_config(RuntimeConfig {
        step_timing: case.timing,
        ..RuntimeConfig::default()
    }))
}

/// What a step left: its outcome (results as JSON) and its log (type and data of each event;
/// a message without its fresh id, a timing event by the ids of the calls it times, its
/// figures being times).
type Left = (
    Result<(Vec<Value>, bool, bool, usize), String>,
    Vec<(String, Value)>,
);

async fn run(case: &Case, general: bool, dir: &std::path::Path) -> Left {
    let turn = AbortController::new();
    if case.aborted_before {
        turn.abort(AbortReason::Cancelled(dsh_core::CancelCause::User));
    }
    let rt = runtime(case, &turn);
    let session = if case.durable {
        let path = dir.join(if general {
            "general.jsonl"
        } else {
            "one.jsonl"
        });
        Session::open_jsonl(&path, OpenOptions::new())
            .await
            .unwrap()
            .0
    } else {
        Session::in_memory("case")
    };
    let cx = StepContext {
        session: session.clone(),
        turn: 1,
        step: 1,
        agent: None,
        signal: turn.signal(),
        max_parallel: 4,
    };
    let block = ToolCallBlock::new("c1", if case.known { "t" } else { "gone" }, case.args);
    let blocks = [block];
    let out: Result<StepOutcome, SchedulerError> = if general {
        rt.run_step_in(&cx, &blocks).await
    } else {
        rt.run_step(&cx, &blocks).await
    };
    let out = out
        .map(|o| {
            let results = o
                .results
                .iter()
                .map(|r| serde_json::to_value(&**r).unwrap())
                .collect();
            (results, o.aborted, o.concludes_turn, o.contexts.len())
        })
        .map_err(|e| e.to_string());
    let log = session
        .events()
        .pairs()
        .map(|(_, e)| {
            let mut data = e.data().value().clone();
            // A message's id is minted fresh for each run.
            if let Some(m) = data.get_mut("message").and_then(Value::as_object_mut) {
                m.remove("id");
            }
            let data = if e.event_type() == crate::STEP_TIMING {
                Value::from(
                    data["calls"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|c| c["callId"].clone())
                        .collect::<Vec<_>>(),
                )
            } else {
                data
            };
            (e.event_type().to_owned(), data)
        })
        .collect();
    session.close().await.unwrap();
    (out, log)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// S2-S5, C1-C3, I1: a step of one call leaves what the general step leaves.
    #[test]
    fn s4_c1_a_step_of_one_call_leaves_the_outcome_and_log_the_general_step_leaves(case in cases()) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (one, general) = rt.block_on(async {
            (run(&case, false, dir.path()).await, run(&case, true, dir.path()).await)
        });
        prop_assert_eq!(&one.0, &general.0, "outcome");
        prop_assert_eq!(&one.1, &general.1, "log");
        prop_assert!(one.1.len() >= 2, "a call and its result: {:?}", one.1);
    }
}
