//! Whole turns: prompt → request → stream → message → step → results → request, in the
//! reference's framing, against the OpenAI-compatible and Anthropic wire formats.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;

use dsh_agent::{Agent, AgentConfig, Limits};
use dsh_guard::Hooks;
use dsh_model::{AnthropicConfig, AnthropicProvider};
use dsh_scheduler::{Runtime, TurnEnd};
use dsh_session::{OpenOptions, Session};
use dsh_test_support::mock_provider::{MockProvider, Reply, anthropic};
use serde_json::json;

use super::support::*;

#[tokio::test]
async fn a_prompt_runs_a_tool_and_the_model_answers_its_result() {
    let rig = rig().await;
    rig.server.push_all([echo_call("call_1"), say("done")]);
    let outcome = rig.agent.prompt("use echo").await.unwrap().unwrap();
    assert_eq!(outcome.end, TurnEnd::Completed);
    assert_eq!(outcome.text, "done");
    assert_eq!(rig.runs(), 1);
    let kinds: Vec<String> = rig
        .types()
        .into_iter()
        .filter(|t| !t.contains("chunk") && t != "request/header")
        .collect();
    assert_eq!(
        kinds,
        [
            "agent/inbox/spliced",
            "turn/start",
            "agent/inbox/spliced",
            "step/start",
            "user/message",
            "assistant/message",
            "tool/call",
            "tool/result",
            "step/end",
            "step/start",
            "assistant/message",
            "step/end",
            "turn/end",
        ]
    );
    // The second request answers the call right after its assistant message (the mock
    // refuses a request that does not).
    let bodies = rig.bodies();
    assert_eq!(bodies.len(), 2);
    let messages = bodies[1]["messages"].as_array().unwrap();
    assert_eq!(messages[1]["tool_calls"][0]["id"], "call_1");
    assert_eq!(
        messages[1]["tool_calls"][0]["function"]["arguments"],
        "{\"text\": \"hi\"}"
    );
    assert_eq!(messages[2]["role"], "tool");
    assert_eq!(messages[2]["tool_call_id"], "call_1");
    let problems = dsh_session::check_events(rig.session.events().pairs());
    assert!(problems.is_empty(), "{problems:?}");
}

#[tokio::test]
async fn the_message_points_at_the_chunk_events_it_was_assembled_from() {
    let rig = rig().await;
    rig.server.push(echo_call("call_1"));
    rig.server.push(say("done"));
    rig.agent.prompt("go").await.unwrap();
    let events = rig.session.events();
    let (msg_seq, msg) = events
        .iter()
        .find(|(_, e)| e.event_type() == "assistant/message")
        .map(|(s, e)| (*s, e.clone()))
        .unwrap();
    let seqs: Vec<u64> = msg.source_event_seqs().unwrap().to_vec();
    assert!(!seqs.is_empty());
    // Every chunk seq of step 1 is a source, and the message comes right after them.
    let chunk_seqs: Vec<u64> = events
        .iter()
        .filter(|(s, e)| *s < msg_seq && (e.event_type() == "assistant/chunk" || e.is_chunk_run()))
        .flat_map(|(s, e)| *s..*s + e.seq_span())
        .collect();
    assert_eq!(seqs, chunk_seqs);
    assert_eq!(*seqs.last().unwrap() + 1, msg_seq);
    // The arguments streamed in three pieces are one compressed run, as the reference logs it.
    let run = rig.data("tool-call-chunks");
    assert_eq!(run.len(), 1);
    assert_eq!(run[0]["id"], "call_1");
    assert_eq!(run[0]["name"], "echo");
    assert_eq!(run[0]["args"], json!(["", "{\"te", "xt\":", " \"hi\"}"]));
    assert_eq!(run[0]["dt"].as_array().unwrap().len(), 4);
    let ends: Vec<_> = rig
        .data("assistant/chunk")
        .into_iter()
        .filter(|c| c["chunk"]["type"] == "block-end")
        .collect();
    assert_eq!(
        ends[0]["chunk"]["block"],
        json!({"type": "tool-call", "id": "call_1", "name": "echo", "arguments": "{\"text\": \"hi\"}"})
    );
}

#[tokio::test]
async fn loop_63_an_agent_on_a_seeded_log_numbers_its_next_turn_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let server = MockProvider::start().await.unwrap();
    server.push_all([say("one"), say("two")]);
    for expected in [1, 2] {
        let (session, _) = Session::open_jsonl(&path, OpenOptions::new())
            .await
            .unwrap();
        let log = session.clone();
        let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let runtime = Arc::new(Runtime::new(registry(&runs, &[]), Hooks::new()));
        let agent = Agent::new(
            runtime,
            session,
            AgentConfig::new(openai_provider(&server), "deepseek-chat"),
        );
        let outcome = agent.prompt("hi").await.unwrap().unwrap();
        assert_eq!(outcome.turn, expected);
        // Release the file and its lock now, not whenever the agent's last clone of the
        // session is dropped: the next iteration opens the same file.
        log.close().await.unwrap();
    }
    // The second request carries the first turn's exchange, read back from the file.
    let bodies = server.bodies();
    assert_eq!(bodies[1]["messages"].as_array().unwrap().len(), 3);
    let problems = dsh_session::check_file(&path).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
}

#[tokio::test]
async fn loop_35_pre_step_runs_once_per_step_and_a_continuation_proposes_no_messages() {
    use dsh_agent::{AgentHooks, HookFailure, PreStepDecision};
    use parking_lot::Mutex;
    struct Seen(Arc<Mutex<Vec<(u32, u32, usize)>>>);
    #[async_trait::async_trait]
    impl AgentHooks for Seen {
        async fn pre_step(
            &self,
            _agent: &Agent,
            input: &dsh_scheduler::StepInput,
        ) -> Result<PreStepDecision, HookFailure> {
            self.0
                .lock()
                .push((input.turn, input.step, input.messages.len()));
            Ok(PreStepDecision::Enter)
        }
    }
    let rig = rig().await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    rig.agent.set_hooks(Seen(seen.clone()));
    rig.server.push_all([echo_call("c1"), say("done")]);
    rig.agent.prompt("go").await.unwrap();
    assert_eq!(*seen.lock(), vec![(1, 1, 1), (1, 2, 0)]);
}

#[tokio::test]
async fn a_step_limit_ends_the_turn_with_a_logged_reason() {
    let rig = rig_with(
        |c| {
            c.with_limits(Limits {
                max_steps: Some(1),
                ..Limits::default()
            })
        },
        &[],
    )
    .await;
    rig.server.push_all([echo_call("c1"), say("never asked")]);
    let outcome = rig.agent.prompt("go").await.unwrap().unwrap();
    assert_eq!(outcome.end, TurnEnd::Limit(Arc::from("steps")));
    assert_eq!(rig.bodies().len(), 1);
    assert_eq!(
        rig.reasons(),
        vec![json!({"kind": "limit", "limit": "steps"})]
    );
    assert_eq!(rig.count("tool/result"), 1);
}

#[tokio::test]
async fn an_anthropic_turn_runs_a_tool_and_alternates_roles_on_the_wire() {
    let server = MockProvider::start().await.unwrap();
    let mut frames = vec![anthropic::message_start(12, 0)];
    frames.extend(anthropic::thinking_block(0, &["let me ", "echo"], "sig-1"));
    frames.extend(anthropic::tool_use_block(
        1,
        "toolu_1",
        "echo",
        &["{\"text\"", ": \"hi\"}"],
    ));
    frames.extend(anthropic::message_end("tool_use", 9));
    server.push(Reply::Stream(frames));
    server.push(anthropic::text_reply(&["all ", "done"]));
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let runtime = Arc::new(Runtime::new(registry(&runs, &[]), Hooks::new()));
    let session = Session::in_memory("anthropic");
    let provider = AnthropicProvider::new(
        AnthropicConfig::default()
            .with_base_url(&server.anthropic_base_url())
            .with_api_key("sk-ant"),
    )
    .unwrap();
    let agent = Agent::new(
        runtime,
        session.clone(),
        AgentConfig::new(Arc::new(provider), "claude-sonnet-4-5").with_system("Be brief."),
    );
    let outcome = agent.prompt("use echo").await.unwrap().unwrap();
    assert_eq!(outcome.end, TurnEnd::Completed);
    assert_eq!(outcome.text, "all done");
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 1);
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[1]["system"], "Be brief.");
    let messages = bodies[1]["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user"]);
    // The thinking block goes back with its signature, the call with its input.
    assert_eq!(messages[1]["content"][0]["signature"], "sig-1");
    assert_eq!(messages[1]["content"][1]["input"], json!({"text": "hi"}));
    assert_eq!(messages[2]["content"][0]["tool_use_id"], "toolu_1");
    assert!(server.requests().iter().all(|r| r.refused.is_none()));
}
