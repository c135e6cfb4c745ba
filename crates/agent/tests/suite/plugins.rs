//! A plugin: agent hooks and pipeline hooks from one owner, removed together (LOOP-30, 51..53,
//! 61, 62).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use dsh_agent::{Agent, AgentHooks, Cancel, HookFailure, NoHooks, PreStepDecision};
use dsh_core::{
    ContextMessage, PostToolDecision, PreToolDecision, post_execute_fn, pre_execute_fn,
};
use dsh_guard::Scope;
use dsh_model::Request;
use dsh_scheduler::StepInput;
use serde_json::json;

use super::support::*;

/// The agent side of the plugin: a preamble at session start, and no `rm -rf` prompts.
struct Guarded;

#[async_trait::async_trait]
impl AgentHooks for Guarded {
    async fn session_start(&self, agent: &Agent, _source: &str) -> Result<(), HookFailure> {
        agent
            .steer(ContextMessage::plugin_text("guarded", "the preamble"))
            .await
            .map_err(|e| HookFailure(e.to_string()))
    }

    async fn pre_step(
        &self,
        _agent: &Agent,
        input: &StepInput,
    ) -> Result<PreStepDecision, HookFailure> {
        let destructive = input
            .messages
            .iter()
            .any(|m| m.first_text().is_some_and(|t| t.contains("rm -rf")));
        Ok(if destructive {
            PreStepDecision::Reject
        } else {
            PreStepDecision::Enter
        })
    }
}

async fn plugged() -> (Rig, Agent, Vec<dsh_guard::HookHandle>) {
    let rig = rig_with(|c| c, &["danger"]).await;
    let hooks = rig.runtime.hooks();
    let handles = vec![
        hooks.on_pre_execute(
            Scope::Global,
            pre_execute_fn(|exec| {
                (exec.name() == "danger").then(|| PreToolDecision::deny("danger is not allowed"))
            }),
        ),
        hooks.on_post_execute(
            Scope::Global,
            post_execute_fn(|_exec, result| {
                (!result.is_error()).then(|| PostToolDecision::Accept {
                    replace: None,
                    contexts: vec![ContextMessage::plugin_text("guarded", "audited")],
                })
            }),
        ),
    ];
    let agent = Agent::start(
        rig.runtime.clone(),
        rig.session.clone(),
        dsh_agent::AgentConfig::new(openai_provider(&rig.server), "deepseek-chat"),
        Guarded,
    )
    .await;
    (rig, agent, handles)
}

#[tokio::test]
async fn loop_51_one_plugin_guards_the_prompt_and_the_tools_without_hook_events() {
    let (rig, agent, _handles) = plugged().await;
    rig.server.push_all([echo_call("c1"), say("done")]);
    agent.prompt("use echo").await.unwrap();
    let texts: Vec<String> = rig
        .data("user/message")
        .iter()
        .map(|d| d["content"][0]["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(texts, ["use echo", "the preamble", "audited"]);
    let results = rig.data("tool/result");
    assert_eq!(results[0]["message"]["content"][0]["isError"], false);
    assert!(rig.types().iter().all(|t| !t.starts_with("hook/")));
}

#[tokio::test]
async fn loop_52_the_plugin_rejects_a_destructive_prompt() {
    let (rig, agent, _handles) = plugged().await;
    agent.prompt("please rm -rf /").await.unwrap();
    assert_eq!(rig.bodies().len(), 0);
    assert_eq!(rig.reasons(), vec![json!({"kind": "blocked"})]);
}

#[tokio::test]
async fn loop_53_a_disposed_plugin_leaves_no_listener_behind() {
    let (rig, agent, handles) = plugged().await;
    agent.set_hooks(NoHooks);
    for handle in handles {
        handle.dispose();
    }
    rig.server.push(say("ran"));
    agent.prompt("please rm -rf /tmp/x").await.unwrap();
    assert_eq!(rig.bodies().len(), 1);
    assert_eq!(rig.user_texts(), ["please rm -rf /tmp/x"]);
}

/// Sends replacement work when the turn's signal aborts.
struct Replaces;

#[async_trait::async_trait]
impl AgentHooks for Replaces {
    async fn pre_step(
        &self,
        agent: &Agent,
        input: &StepInput,
    ) -> Result<PreStepDecision, HookFailure> {
        if input.turn == 1 {
            let signal = input.signal.clone();
            let agent = agent.clone();
            tokio::spawn(async move {
                signal.aborted().await;
                agent.send("replacement").await.unwrap();
            });
        }
        Ok(PreStepDecision::Enter)
    }
}

#[tokio::test]
async fn loop_30_work_sent_from_an_abort_listener_runs_at_convergence() {
    let rig = rig().await;
    rig.agent.set_hooks(Replaces);
    rig.server.push(stuck());
    rig.server.push(say("replaced"));
    rig.agent.send("original").await.unwrap();
    rig.requested(1).await;
    rig.agent.cancel(Cancel::user());
    wait_until("the replacement ran", || rig.count("turn/end") == 2).await;
    rig.agent.idle().await;
    assert_eq!(rig.bodies().len(), 2);
    assert_eq!(rig.user_texts(), ["original", "replacement"]);
    assert_eq!(rig.reasons(), vec![aborted("user"), completed()]);
}

/// Supplies the model of every request.
struct SuppliesModel;

#[async_trait::async_trait]
impl AgentHooks for SuppliesModel {
    async fn request(&self, _agent: &Agent, request: &mut Request) -> Result<(), HookFailure> {
        request.model = "deepseek-chat".into();
        Ok(())
    }
}

#[tokio::test]
async fn loop_61_an_agent_with_no_model_ends_its_turn_naming_the_request_hook() {
    let rig = rig_with(
        |c| dsh_agent::AgentConfig {
            model: String::new(),
            ..c
        },
        &[],
    )
    .await;
    rig.agent.prompt("go").await.unwrap();
    let reason = &rig.reasons()[0];
    assert_eq!(reason["kind"], "error");
    let message = reason["error"]["message"].as_str().unwrap();
    assert!(message.contains("has no provider/model"), "{message}");
    assert!(message.contains("agent/request"), "{message}");
    assert_eq!(rig.bodies().len(), 0);
}

#[tokio::test]
async fn loop_62_a_request_hook_supplies_the_model() {
    let rig = rig_with(
        |c| dsh_agent::AgentConfig {
            model: String::new(),
            ..c
        },
        &[],
    )
    .await;
    rig.agent.set_hooks(SuppliesModel);
    rig.server.push(say("derived"));
    let outcome = rig.agent.prompt("go").await.unwrap().unwrap();
    assert_eq!(outcome.text, "derived");
    assert_eq!(rig.bodies()[0]["model"], "deepseek-chat");
}
