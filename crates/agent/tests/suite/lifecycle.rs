//! Status listeners, session start, disposal and cancel while the loop waits on a hook
//! (LOOP-10..13, 26, 27, 41..50, 59, 73, 74, 79..83).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use dsh_agent::{
    Agent, AgentConfig, AgentError, AgentHooks, Cancel, HookFailure, PreStepDecision, Status,
};
use dsh_core::ContextMessage;
use dsh_scheduler::StepInput;
use dsh_session::{Header, LogSink, Session};
use serde_json::json;

use super::support::*;

#[tokio::test]
async fn loop_10_dispose_from_the_running_listener_starts_no_turn() {
    let rig = rig().await;
    rig.agent.on_status(|agent, status| {
        if status == Status::Running {
            agent.dispose();
        }
    });
    rig.agent.send("go").await.unwrap();
    rig.agent.idle().await;
    assert_eq!(rig.count("turn/start"), 0);
    assert!(rig.user_texts().is_empty());
    assert_eq!(rig.bodies().len(), 0);
    assert_eq!(rig.agent.status(), Status::Idle);
}

#[tokio::test]
async fn loop_26_a_cancel_from_the_running_listener_starts_no_turn() {
    let rig = rig().await;
    rig.agent.on_status(|agent, status| {
        if status == Status::Running {
            agent.cancel(Cancel::user());
        }
    });
    rig.agent.send("go").await.unwrap();
    rig.agent.idle().await;
    assert_eq!(rig.count("turn/start"), 0);
    assert_eq!(rig.count("assistant/chunk"), 0);
}

#[tokio::test]
async fn loop_27_a_running_listener_that_cancels_and_sends_runs_only_the_new_work() {
    let rig = rig().await;
    let once = Arc::new(AtomicBool::new(false));
    rig.agent.on_status(move |agent, status| {
        if status == Status::Running && !once.swap(true, Ordering::SeqCst) {
            agent.cancel(Cancel::user());
            let agent = agent.clone();
            tokio::spawn(async move { agent.send("B").await });
        }
    });
    rig.server.push_all([say("b"), say("c")]);
    rig.agent.send("A").await.unwrap();
    wait_until("B ran", || rig.count("turn/end") == 1).await;
    rig.agent.idle().await;
    assert_eq!(rig.user_texts(), ["B"]);
    assert_eq!(rig.bodies().len(), 1);
    assert!(rig.agent.next_turn_inbox().is_empty());
    rig.agent.prompt("C").await.unwrap();
    assert_eq!(rig.count("turn/end"), 2);
}

#[tokio::test]
async fn loop_11_an_idle_waiter_resolves_after_a_cancel_before_the_first_step() {
    let rig = rig().await;
    rig.server.push(stuck());
    rig.agent.send("go").await.unwrap();
    let waiter = tokio::spawn({
        let agent = rig.agent.clone();
        async move { agent.idle().await }
    });
    rig.agent.cancel(Cancel::user());
    waiter.await.unwrap();
    assert_eq!(rig.agent.status(), Status::Idle);
}

#[tokio::test]
async fn loop_59_a_panicking_idle_listener_does_not_hang_the_driver() {
    let rig = rig().await;
    rig.agent.on_status(|_, status| {
        if status == Status::Idle {
            panic!("idle listener broke");
        }
    });
    rig.server.push(say("ok"));
    rig.agent.prompt("go").await.unwrap();
    rig.agent.dispose();
    assert_eq!(rig.agent.status(), Status::Idle);
    assert!(matches!(
        rig.agent.send("after").await,
        Err(AgentError::Disposed)
    ));
}

#[tokio::test]
async fn loop_73_dispose_during_a_stuck_request_ends_one_turn_as_disposed_without_error() {
    let rig = rig().await;
    rig.server.push(stuck());
    rig.agent.send("go").await.unwrap();
    rig.requested(1).await;
    rig.agent.dispose();
    rig.agent.idle().await;
    assert_eq!(rig.count("turn/start"), 1);
    assert_eq!(rig.reasons(), vec![aborted("disposed")]);
    assert_eq!(rig.count("agent/error"), 0);
}

/// Hooks that block until the turn's signal aborts, at the given point.
struct Blocks {
    in_system_prompt: bool,
}

#[async_trait::async_trait]
impl AgentHooks for Blocks {
    async fn system_prompt(
        &self,
        _agent: &Agent,
        _configured: Option<&str>,
    ) -> Result<Option<String>, HookFailure> {
        if self.in_system_prompt {
            std::future::pending::<()>().await;
        }
        Ok(None)
    }

    async fn pre_step(
        &self,
        _agent: &Agent,
        _input: &StepInput,
    ) -> Result<PreStepDecision, HookFailure> {
        std::future::pending::<()>().await;
        Ok(PreStepDecision::Enter)
    }
}

async fn blocked_then(in_system_prompt: bool, dispose: bool) -> Rig {
    let rig = rig().await;
    rig.agent.set_hooks(Blocks { in_system_prompt });
    rig.agent.send("go").await.unwrap();
    wait_until("the turn started", || rig.count("turn/start") == 1).await;
    if dispose {
        rig.agent.dispose();
    } else {
        rig.agent.cancel(Cancel::user());
    }
    rig.agent.idle().await;
    rig
}

fn framing(rig: &Rig) -> Vec<String> {
    rig.types()
        .into_iter()
        .filter(|t| t != "agent/inbox/spliced")
        .collect()
}

#[tokio::test]
async fn loop_79_83_disposal_while_the_system_prompt_is_assembled_opens_no_step() {
    let rig = blocked_then(true, true).await;
    assert_eq!(framing(&rig), ["turn/start", "turn/end"]);
    assert_eq!(rig.reasons(), vec![aborted("disposed")]);
    assert_eq!(rig.bodies().len(), 0);
}

#[tokio::test]
async fn loop_80_a_cancel_while_the_system_prompt_is_assembled_opens_no_step() {
    let rig = blocked_then(true, false).await;
    assert_eq!(framing(&rig), ["turn/start", "turn/end"]);
    assert_eq!(rig.reasons(), vec![aborted("user")]);
    assert_eq!(rig.count("assistant/message"), 0);
}

#[tokio::test]
async fn loop_81_disposal_while_pre_step_is_blocked_opens_no_step() {
    let rig = blocked_then(false, true).await;
    assert_eq!(framing(&rig), ["turn/start", "turn/end"]);
    assert_eq!(rig.reasons(), vec![aborted("disposed")]);
}

#[tokio::test]
async fn loop_82_a_cancel_while_pre_step_is_blocked_opens_no_step() {
    let rig = blocked_then(false, false).await;
    assert_eq!(framing(&rig), ["turn/start", "turn/end"]);
    assert_eq!(rig.reasons(), vec![aborted("user")]);
}

/// A pre-step hook that disposes the agent and then fails.
struct DisposesThenFails;

#[async_trait::async_trait]
impl AgentHooks for DisposesThenFails {
    async fn pre_step(
        &self,
        agent: &Agent,
        _input: &StepInput,
    ) -> Result<PreStepDecision, HookFailure> {
        agent.dispose();
        Err(HookFailure("after dispose".into()))
    }
}

#[tokio::test]
async fn loop_74_a_hook_that_disposes_then_fails_ends_as_disposed_without_error() {
    let rig = rig().await;
    rig.agent.set_hooks(DisposesThenFails);
    rig.agent.send("go").await.unwrap();
    rig.agent.idle().await;
    assert_eq!(framing(&rig), ["turn/start", "turn/end"]);
    assert_eq!(rig.reasons(), vec![aborted("disposed")]);
    assert_eq!(rig.count("agent/error"), 0);
}

/// Session start injects a preamble (or fails).
struct Preamble {
    fail: bool,
    seen: Arc<parking_lot::Mutex<Vec<String>>>,
}

#[async_trait::async_trait]
impl AgentHooks for Preamble {
    async fn session_start(&self, agent: &Agent, source: &str) -> Result<(), HookFailure> {
        self.seen.lock().push(source.to_owned());
        if self.fail {
            return Err(HookFailure("session start broke".into()));
        }
        agent
            .steer(ContextMessage::plugin_text("test", "the preamble"))
            .await
            .map_err(|e| HookFailure(e.to_string()))
    }
}

#[tokio::test]
async fn loop_48_49_session_start_runs_once_before_any_turn_and_its_preamble_opens_the_first_request()
 {
    let rig = rig().await;
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let agent = Agent::start(
        rig.runtime.clone(),
        rig.session.clone(),
        AgentConfig::new(openai_provider(&rig.server), "deepseek-chat"),
        Preamble {
            fail: false,
            seen: seen.clone(),
        },
    )
    .await;
    assert_eq!(*seen.lock(), ["startup"]);
    rig.server.push_all([say("one"), say("two")]);
    agent.prompt("hello").await.unwrap();
    agent.prompt("again").await.unwrap();
    assert_eq!(*seen.lock(), ["startup"]);
    assert!(rig.request_holds(0, "the preamble"));
    let preamble: Vec<_> = rig
        .data("user/message")
        .into_iter()
        .filter(|d| d["source"] == json!({"kind": "plugin", "plugin": "test"}))
        .collect();
    assert_eq!(preamble.len(), 1);
}

#[tokio::test]
async fn loop_50_a_failing_session_start_still_gives_a_working_agent() {
    let rig = rig().await;
    let agent = Agent::start(
        rig.runtime.clone(),
        rig.session.clone(),
        AgentConfig::new(openai_provider(&rig.server), "deepseek-chat"),
        Preamble {
            fail: true,
            seen: Arc::default(),
        },
    )
    .await;
    rig.server.push(say("ok"));
    agent.prompt("go").await.unwrap();
    assert_eq!(rig.bodies().len(), 1);
}

/// A pre-step hook that stages context and steering while it decides.
struct StagesWhileDeciding {
    reject_first: bool,
    calls: std::sync::atomic::AtomicU32,
}

#[async_trait::async_trait]
impl AgentHooks for StagesWhileDeciding {
    async fn pre_step(
        &self,
        agent: &Agent,
        _input: &StepInput,
    ) -> Result<PreStepDecision, HookFailure> {
        if self.calls.fetch_add(1, Ordering::SeqCst) > 0 {
            return Ok(PreStepDecision::Enter);
        }
        agent.inject("state", "state change").await.unwrap();
        agent
            .steer(dsh_agent::user_prompt("steering"))
            .await
            .unwrap();
        // Nothing staged is a user/message yet.
        assert_eq!(agent.next_step_inbox().len(), 2);
        Ok(if self.reject_first {
            PreStepDecision::Reject
        } else {
            PreStepDecision::Enter
        })
    }
}

#[tokio::test]
async fn loop_41_context_and_steering_staged_during_pre_step_reach_the_next_request() {
    let rig = rig().await;
    rig.agent.set_hooks(StagesWhileDeciding {
        reject_first: false,
        calls: Default::default(),
    });
    rig.server.push_all([say("one"), say("two")]);
    rig.agent.prompt("prompt").await.unwrap();
    assert!(rig.request_holds(0, "prompt"));
    assert!(!rig.request_holds(0, "state change"));
    assert!(rig.request_holds(1, "state change"));
    assert!(rig.request_holds(1, "steering"));
    let texts: Vec<String> = rig
        .data("user/message")
        .iter()
        .map(|d| d["content"][0]["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(texts, ["prompt", "state change", "steering"]);
}

#[tokio::test]
async fn loop_43_44_46_a_rejected_prompt_leaves_staged_work_and_the_queue_for_the_next_wake() {
    let rig = rig().await;
    rig.agent.set_hooks(StagesWhileDeciding {
        reject_first: true,
        calls: Default::default(),
    });
    rig.agent.send("secret").await.unwrap();
    rig.agent.send("later prompt").await.unwrap();
    rig.agent.idle().await;
    assert_eq!(rig.count("turn/start"), 1);
    assert_eq!(rig.count("turn/end"), 1);
    assert_eq!(rig.reasons(), vec![json!({"kind": "blocked"})]);
    assert_eq!(rig.agent.next_step_inbox().len(), 2);
    assert_eq!(rig.agent.next_turn_inbox().len(), 1);
    assert_eq!(rig.bodies().len(), 0);
    rig.server.push_all([say("a"), say("b")]);
    rig.agent.prompt("wake").await.unwrap();
    let first = rig.bodies()[0].to_string();
    assert!(first.contains("later prompt"));
    assert!(first.contains("state change"));
    assert!(first.contains("steering"));
    assert!(!first.contains("secret"));
}

/// A sink whose first append fails.
struct FailsOnce(bool);

impl LogSink for FailsOnce {
    fn append_durably(&mut self, _bytes: &[u8]) -> std::io::Result<()> {
        if std::mem::replace(&mut self.0, false) {
            return Err(std::io::Error::other("append unavailable"));
        }
        Ok(())
    }

    fn truncate(&mut self, _len: u64) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn loop_45_a_send_whose_append_fails_returns_the_error_and_queues_nothing() {
    let server = dsh_test_support::mock_provider::MockProvider::start()
        .await
        .unwrap();
    let session = Session::with_sink(Header::new("s", "/tmp"), FailsOnce(true)).unwrap();
    let runs = Arc::default();
    let runtime = Arc::new(dsh_scheduler::Runtime::new(
        registry(&runs, &[]),
        dsh_guard::Hooks::new(),
    ));
    let agent = Agent::new(
        runtime,
        session.clone(),
        AgentConfig::new(openai_provider(&server), "deepseek-chat"),
    );
    let failed = agent.send("followup").await;
    let message = failed.unwrap_err().to_string();
    assert!(message.contains("append unavailable"), "{message}");
    assert!(session.events().is_empty());
    assert!(agent.next_turn_inbox().is_empty());
    assert_eq!(agent.status(), Status::Idle);
}
