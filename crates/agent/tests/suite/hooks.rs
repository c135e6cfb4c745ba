//! The agent's hooks: pre-step (LOOP-34..47, 55), stopping (LOOP-56/57).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use dsh_agent::{Agent, AgentHooks, HookFailure, PreStepDecision};
use dsh_core::ContextMessage;
use dsh_scheduler::StepInput;
use serde_json::json;

use super::support::*;

/// A pre-step hook answering with a fixed decision for every step.
struct PreStep(fn(&StepInput) -> Result<PreStepDecision, HookFailure>);

#[async_trait::async_trait]
impl AgentHooks for PreStep {
    async fn pre_step(
        &self,
        _agent: &Agent,
        input: &StepInput,
    ) -> Result<PreStepDecision, HookFailure> {
        (self.0)(input)
    }
}

#[tokio::test]
async fn loop_37_pre_step_rewrites_what_is_logged_and_sent() {
    let rig = rig().await;
    rig.agent.set_hooks(PreStep(|input| {
        Ok(if input.step == 1 {
            PreStepDecision::Rewrite(vec![dsh_agent::user_prompt("REWRITTEN")])
        } else {
            PreStepDecision::Enter
        })
    }));
    rig.server.push(say("ok"));
    rig.agent.prompt("original").await.unwrap();
    assert_eq!(rig.user_texts(), ["REWRITTEN"]);
    assert!(rig.request_holds(0, "REWRITTEN"));
    assert!(!rig.request_holds(0, "original"));
}

#[tokio::test]
async fn loop_38_an_extra_message_from_a_plugin_is_logged_and_sent() {
    let rig = rig().await;
    rig.agent.set_hooks(PreStep(|input| {
        let mut messages = input.messages.clone();
        messages.push(ContextMessage::plugin_text("test", "extra"));
        Ok(PreStepDecision::Rewrite(messages))
    }));
    rig.server.push(say("ok"));
    rig.agent.prompt("hello").await.unwrap();
    let logged = rig.data("user/message");
    assert_eq!(logged.len(), 2);
    assert_eq!(
        logged[1]["source"],
        json!({"kind": "plugin", "plugin": "test"})
    );
    assert!(rig.request_holds(0, "extra"));
}

#[tokio::test]
async fn loop_40_a_rejected_prompt_opens_no_step_and_sends_nothing() {
    let rig = rig().await;
    rig.agent
        .set_hooks(PreStep(|_| Ok(PreStepDecision::Reject)));
    rig.agent.prompt("rm -rf /").await.unwrap();
    assert_eq!(rig.bodies().len(), 0);
    let framing: Vec<String> = rig
        .types()
        .into_iter()
        .filter(|t| t != "agent/inbox/spliced")
        .collect();
    assert_eq!(framing, ["turn/start", "turn/end"]);
    assert_eq!(rig.reasons(), vec![json!({"kind": "blocked"})]);
}

#[tokio::test]
async fn loop_42_a_rejection_keeps_staged_steering_for_the_next_turn() {
    let rig = rig().await;
    rig.agent.set_hooks(PreStep(|input| {
        Ok(
            if input
                .messages
                .iter()
                .any(|m| m.first_text() == Some("secret"))
            {
                PreStepDecision::Reject
            } else {
                PreStepDecision::Enter
            },
        )
    }));
    rig.agent
        .steer(ContextMessage::plugin_text("ctx", "staged context"))
        .await
        .unwrap();
    rig.agent.prompt("secret").await.unwrap();
    assert_eq!(rig.bodies().len(), 0);
    assert_eq!(rig.agent.next_step_inbox().len(), 1);
    rig.server.push(say("ok"));
    rig.agent.prompt("safe").await.unwrap();
    assert!(rig.request_holds(0, "staged context"));
    assert!(!rig.request_holds(0, "secret"));
}

#[tokio::test]
async fn loop_47_a_failing_pre_step_ends_the_turn_in_error_and_the_queue_waits() {
    let rig = rig().await;
    let calls = Arc::new(AtomicU32::new(0));
    struct Breaks(Arc<AtomicU32>);
    #[async_trait::async_trait]
    impl AgentHooks for Breaks {
        async fn pre_step(
            &self,
            _agent: &Agent,
            _input: &StepInput,
        ) -> Result<PreStepDecision, HookFailure> {
            if self.0.fetch_add(1, Ordering::SeqCst) == 0 {
                Err(HookFailure("prompt hook broke".into()))
            } else {
                Ok(PreStepDecision::Enter)
            }
        }
    }
    rig.agent.set_hooks(Breaks(calls));
    rig.server.push(say("second ran"));
    rig.agent.send("first").await.unwrap();
    rig.agent.send("second").await.unwrap();
    rig.agent.idle().await;
    let errors = rig.data("agent/error");
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0]["error"]["message"], "prompt hook broke");
    assert_eq!(
        rig.reasons()[0],
        json!({"kind": "error", "error": {"message": "prompt hook broke", "code": "UNKNOWN"}})
    );
    // The queue waits for the next send.
    assert!(rig.user_texts().is_empty());
    assert_eq!(rig.agent.next_turn_inbox().len(), 1);
    assert_eq!(rig.bodies().len(), 0);
    rig.server.push(say("third ran"));
    rig.agent.send("third").await.unwrap();
    rig.agent.idle().await;
    assert_eq!(rig.user_texts(), ["second", "third"]);
}

#[tokio::test]
async fn loop_55_pre_step_entering_with_no_messages_sends_nothing_and_completes() {
    let rig = rig().await;
    rig.agent
        .set_hooks(PreStep(|_| Ok(PreStepDecision::Rewrite(Vec::new()))));
    rig.agent.prompt("hi").await.unwrap();
    assert_eq!(rig.bodies().len(), 0);
    assert_eq!(rig.count("step/start"), 0);
    assert_eq!(rig.reasons(), vec![completed()]);
    assert!(rig.agent.next_turn_inbox().is_empty());
}

/// Steers once when the turn would stop, or fails once.
struct Stopping {
    fail: bool,
    done: AtomicU32,
}

#[async_trait::async_trait]
impl AgentHooks for Stopping {
    async fn stopping(&self, agent: &Agent, _turn: u32, _step: u32) -> Result<(), HookFailure> {
        if self.done.fetch_add(1, Ordering::SeqCst) > 0 {
            return Ok(());
        }
        if self.fail {
            return Err(HookFailure("broken continuation plugin".into()));
        }
        agent
            .steer(ContextMessage::plugin_text("goal", "keep going"))
            .await
            .map_err(|e| HookFailure(e.to_string()))
    }
}

#[tokio::test]
async fn loop_56_steering_from_the_stopping_hook_opens_another_step() {
    let rig = rig().await;
    rig.agent.set_hooks(Stopping {
        fail: false,
        done: AtomicU32::new(0),
    });
    rig.server.push_all([say("first"), say("second")]);
    rig.agent.prompt("go").await.unwrap();
    assert_eq!(rig.bodies().len(), 2);
    assert!(rig.request_holds(1, "keep going"));
    assert_eq!(rig.count("turn/start"), 1);
    assert_eq!(rig.reasons(), vec![completed()]);
}

#[tokio::test]
async fn loop_57_a_failing_stopping_hook_ends_the_turn_in_error_and_the_loop_survives() {
    let rig = rig().await;
    rig.agent.set_hooks(Stopping {
        fail: true,
        done: AtomicU32::new(0),
    });
    rig.server.push_all([say("first"), say("second")]);
    rig.agent.prompt("go").await.unwrap();
    assert_eq!(
        rig.reasons(),
        vec![
            json!({"kind": "error", "error": {"message": "broken continuation plugin", "code": "UNKNOWN"}})
        ]
    );
    rig.agent.prompt("again").await.unwrap();
    assert_eq!(rig.bodies().len(), 2);
    assert_eq!(rig.reasons()[1], completed());
}
