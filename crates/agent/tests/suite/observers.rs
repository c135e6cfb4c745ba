//! Session observers around the loop: an observer sees its event already in the log, and one
//! that panics changes nothing about the turn (LOOP-23, 25, 34, 39, 66..68, 75, 76, 78).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use dsh_agent::{Agent, AgentHooks, Cancel, HookFailure, PreStepDecision};
use dsh_scheduler::StepInput;
use dsh_test_support::mock_provider::{Frame, Reply, openai};
use serde_json::json;

use super::support::*;

fn balanced(rig: &Rig) {
    assert_eq!(rig.count("turn/start"), rig.count("turn/end"));
    assert_eq!(rig.count("step/start"), rig.count("step/end"));
    let types = rig.types();
    assert_eq!(types.last().map(String::as_str), Some("turn/end"));
}

#[tokio::test]
async fn loop_67_a_step_start_observer_finds_its_event_already_last_in_the_log() {
    let rig = rig().await;
    let session = rig.session.clone();
    let last_was_it = Arc::new(AtomicBool::new(false));
    let flag = last_was_it.clone();
    let _sub = rig.session.subscribe(move |seq, e| {
        if e.event_type() == "step/start" {
            let events = session.events();
            let last = events.iter().last().map(|(s, _)| *s);
            flag.store(last == Some(seq), Ordering::SeqCst);
        }
    });
    rig.server.push(say("ok"));
    rig.agent.prompt("go").await.unwrap();
    assert!(last_was_it.load(Ordering::SeqCst));
}

async fn panicking_observer(on: &'static str, provider_fails: bool) -> Rig {
    let rig = rig().await;
    let _sub = rig.session.subscribe(move |_, e| {
        if e.event_type() == on {
            panic!("observer of {on} broke");
        }
    });
    std::mem::forget(_sub);
    if provider_fails {
        rig.server
            .push(openai::error(401, "bad key", "authentication_error", None));
    } else {
        rig.server.push(say("ok"));
    }
    rig.agent.prompt("go").await.unwrap();
    rig
}

#[tokio::test]
async fn loop_68_75_76_78_a_panicking_framing_observer_leaves_the_turn_completed_and_balanced() {
    for on in ["step/start", "turn/start", "step/end", "turn/end"] {
        let rig = panicking_observer(on, false).await;
        assert_eq!(rig.reasons(), vec![completed()], "observer of {on}");
        assert_eq!(rig.count("agent/error"), 0, "observer of {on}");
        balanced(&rig);
        rig.server.push(say("again"));
        rig.agent.prompt("next").await.unwrap();
        assert_eq!(rig.count("turn/end"), 2, "observer of {on}");
    }
}

#[tokio::test]
async fn loop_72_77_a_panicking_observer_on_a_failed_turn_leaves_one_error_and_a_balanced_log() {
    for on in ["agent/error", "step/end"] {
        let rig = panicking_observer(on, true).await;
        assert_eq!(rig.count("agent/error"), 1, "observer of {on}");
        assert_eq!(rig.reasons()[0]["error"]["code"], "AUTH");
        balanced(&rig);
        rig.server.push(say("works"));
        rig.agent.prompt("again").await.unwrap();
        assert_eq!(rig.reasons()[1], completed());
    }
}

#[tokio::test]
async fn loop_23_a_cancel_from_a_step_start_observer_streams_nothing() {
    let rig = rig().await;
    let agent = rig.agent.clone();
    let _sub = rig.session.subscribe(move |_, e| {
        if e.event_type() == "step/start" {
            agent.cancel(Cancel::user());
        }
    });
    rig.server.push(say("never"));
    rig.agent.prompt("go").await.unwrap();
    assert_eq!(rig.count("assistant/chunk"), 0);
    assert_eq!(rig.bodies().len(), 0);
    assert_eq!(rig.reasons(), vec![aborted("user")]);
    balanced(&rig);
}

/// Cancels the agent from the stopping hook.
struct CancelsWhenStopping;

#[async_trait::async_trait]
impl AgentHooks for CancelsWhenStopping {
    async fn stopping(&self, agent: &Agent, _turn: u32, _step: u32) -> Result<(), HookFailure> {
        agent.cancel(Cancel::user());
        Ok(())
    }
}

#[tokio::test]
async fn loop_25_a_cancel_from_the_stopping_hook_ends_after_one_step_as_aborted() {
    let rig = rig().await;
    rig.agent.set_hooks(CancelsWhenStopping);
    rig.server.push(say("one step"));
    rig.agent.prompt("go").await.unwrap();
    assert_eq!(rig.count("step/start"), 1);
    assert_eq!(rig.reasons(), vec![aborted("user")]);
}

/// Records what pre-step saw.
struct Sees(Arc<parking_lot::Mutex<Vec<serde_json::Value>>>);

#[async_trait::async_trait]
impl AgentHooks for Sees {
    async fn pre_step(
        &self,
        _agent: &Agent,
        input: &StepInput,
    ) -> Result<PreStepDecision, HookFailure> {
        for m in &input.messages {
            self.0
                .lock()
                .push(serde_json::to_value(&*m.content).unwrap());
        }
        Ok(PreStepDecision::Enter)
    }
}

#[tokio::test]
async fn loop_34_36_pre_step_sees_the_prompt_and_the_log_holds_exactly_it() {
    let rig = rig().await;
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    rig.agent.set_hooks(Sees(seen.clone()));
    rig.server.push(say("ok"));
    rig.agent.prompt("hello").await.unwrap();
    assert_eq!(
        *seen.lock(),
        vec![json!([{"type": "text", "text": "hello"}])]
    );
    assert_eq!(
        rig.data("user/message")[0]["content"],
        json!([{"type": "text", "text": "hello"}])
    );
}

/// Injects a context when stopping, and empties step 2's input.
struct InjectsThenEmpties;

#[async_trait::async_trait]
impl AgentHooks for InjectsThenEmpties {
    async fn stopping(&self, agent: &Agent, _turn: u32, step: u32) -> Result<(), HookFailure> {
        if step == 1 {
            agent.inject("p", "more").await.unwrap();
        }
        Ok(())
    }

    async fn pre_step(
        &self,
        _agent: &Agent,
        input: &StepInput,
    ) -> Result<PreStepDecision, HookFailure> {
        Ok(if input.step == 2 {
            PreStepDecision::Rewrite(Vec::new())
        } else {
            PreStepDecision::Enter
        })
    }
}

#[tokio::test]
async fn loop_39_an_emptied_step_after_stopping_opens_no_second_step() {
    let rig = rig().await;
    rig.agent.set_hooks(InjectsThenEmpties);
    rig.server.push(say("one"));
    rig.agent.prompt("go").await.unwrap();
    assert_eq!(rig.bodies().len(), 1);
    assert_eq!(rig.count("step/start"), 1);
}

#[tokio::test]
async fn loop_66_an_error_event_mid_stream_ends_the_turn_with_its_code_verbatim() {
    let rig = rig().await;
    let frames = vec![
        openai::role(),
        Frame::Bytes(
            "data: {\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\"}}\n\n".into(),
        ),
    ];
    rig.server.push(Reply::Stream(frames));
    rig.agent.prompt("go").await.unwrap();
    let reason = &rig.reasons()[0];
    assert_eq!(reason["kind"], "error");
    assert_eq!(reason["error"]["code"], "UNKNOWN");
    assert_eq!(rig.count("agent/error"), 1);
    assert_eq!(rig.count("assistant/message"), 0);
}
