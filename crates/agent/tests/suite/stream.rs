//! The stream side of a step: cancel mid-stream (LOOP-17..22), a `max-tokens` finish
//! (LOG-12/13), a failed request and the request-error hook (LOOP-20/21, 64).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::atomic::{AtomicU32, Ordering};

use dsh_agent::{Agent, AgentHooks, Cancel, RequestErrorAction};
use dsh_model::{Chunk, ModelError};
use dsh_scheduler::TurnEnd;
use dsh_test_support::mock_provider::{Frame, Reply, openai};
use serde_json::json;

use super::support::*;

/// Cancels the agent on the first chunk `when` accepts.
struct CancelOn(fn(&Chunk) -> bool);

#[async_trait::async_trait]
impl AgentHooks for CancelOn {
    fn on_chunk(&self, agent: &Agent, _turn: u32, _step: u32, chunk: &Chunk) {
        if (self.0)(chunk) {
            agent.cancel(Cancel::user());
        }
    }
}

fn assistant_messages(rig: &Rig) -> Vec<serde_json::Value> {
    rig.data("assistant/message")
}

#[tokio::test]
async fn loop_17_a_cancel_mid_stream_commits_the_text_so_far_as_an_interrupted_message() {
    let rig = rig().await;
    rig.agent.set_hooks(CancelOn(
        |c| matches!(c, Chunk::TextDelta { text, .. } if text == "partial"),
    ));
    rig.server.push(stalled(openai::text(&["partial"])));
    rig.server.push(say("later"));
    rig.agent.prompt("go").await.unwrap();
    let messages = assistant_messages(&rig);
    assert_eq!(messages.len(), 1);
    assert_eq!(
        messages[0]["message"]["content"],
        json!([{"type": "text", "text": "partial"}])
    );
    assert_eq!(messages[0]["message"]["interrupted"], true);
    let events = rig.session.events();
    let seq_of = |t: &str| {
        events
            .iter()
            .find(|(_, e)| e.event_type() == t)
            .map(|(s, _)| *s)
            .unwrap()
    };
    assert!(seq_of("assistant/message") < seq_of("step/end"));
    assert!(seq_of("step/end") < seq_of("turn/end"));
    let (_, msg) = events
        .iter()
        .find(|(_, e)| e.event_type() == "assistant/message")
        .unwrap();
    let chunk_seqs: Vec<u64> = events
        .iter()
        .filter(|(_, e)| e.event_type() == "assistant/chunk" || e.is_chunk_run())
        .flat_map(|(s, e)| *s..*s + e.seq_span())
        .collect();
    assert_eq!(msg.source_event_seqs().unwrap().to_vec(), chunk_seqs);
    assert_eq!(rig.reasons(), vec![aborted("user")]);
    // The next request includes what streamed.
    rig.agent.prompt("again").await.unwrap();
    assert!(rig.request_holds(1, "partial"));
}

#[tokio::test]
async fn loop_18_a_cancel_after_reasoning_and_usage_keeps_both() {
    let rig = rig().await;
    rig.agent
        .set_hooks(CancelOn(|c| matches!(c, Chunk::Usage(_))));
    let mut frames = openai::reasoning(&["thinking ", "about it"]);
    frames.push(openai::data(&openai::usage(7, 4, 0, 0)));
    rig.server.push(stalled(frames));
    rig.agent.prompt("go").await.unwrap();
    let messages = assistant_messages(&rig);
    assert_eq!(messages.len(), 1);
    assert_eq!(
        messages[0]["message"]["content"],
        json!([{"type": "reasoning", "text": "thinking about it"}])
    );
    assert_eq!(messages[0]["usage"]["inputTokens"], 7);
    assert_eq!(messages[0]["usage"]["outputTokens"], 4);
}

#[tokio::test]
async fn loop_19_a_cancel_drops_a_half_streamed_call_whole_and_keeps_the_text() {
    let rig = rig().await;
    rig.agent.set_hooks(CancelOn(
        |c| matches!(c, Chunk::ToolCallDelta { arguments, .. } if arguments == "{\"pa"),
    ));
    let mut frames = openai::text(&["reading the file"]);
    frames.extend(openai::tool_call(0, "c1", "echo", &["{\"pa"]));
    rig.server.push(stalled(frames));
    rig.agent.prompt("go").await.unwrap();
    let messages = assistant_messages(&rig);
    assert_eq!(
        messages[0]["message"]["content"],
        json!([{"type": "text", "text": "reading the file"}])
    );
    assert_eq!(rig.count("tool/call"), 0);
    assert_eq!(rig.runs(), 0);
}

#[tokio::test]
async fn loop_22_a_cancel_with_only_a_partial_call_streamed_commits_no_message() {
    let rig = rig().await;
    rig.agent.set_hooks(CancelOn(
        |c| matches!(c, Chunk::ToolCallDelta { arguments, .. } if arguments == "{\"pa"),
    ));
    rig.server
        .push(stalled(openai::tool_call(0, "c1", "echo", &["{\"pa"])));
    rig.agent.prompt("go").await.unwrap();
    assert_eq!(rig.count("assistant/message"), 0);
    assert_eq!(rig.count("tool/call"), 0);
    assert_eq!(rig.reasons(), vec![aborted("user")]);
    assert_eq!(rig.count("step/start"), rig.count("step/end"));
}

#[tokio::test]
async fn log_12_max_tokens_after_a_complete_call_runs_nothing_and_keeps_the_usage() {
    let rig = rig().await;
    let mut frames = vec![openai::role()];
    frames.extend(openai::tool_call(0, "c1", "echo", &["{}"]));
    frames.extend(openai::finish("length", 30, 12));
    rig.server.push(Reply::Stream(frames));
    let outcome = rig.agent.prompt("go").await.unwrap().unwrap();
    assert_eq!(outcome.end, TurnEnd::MaxTokens);
    assert_eq!(rig.count("tool/call"), 0);
    assert_eq!(rig.runs(), 0);
    assert_eq!(rig.reasons(), vec![json!({"kind": "max-tokens"})]);
    let messages = assistant_messages(&rig);
    assert_eq!(messages[0]["message"]["content"], json!([]));
    assert_eq!(messages[0]["usage"]["outputTokens"], 12);
    let history = dsh_session::derive_messages(&rig.session.events());
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].value()["role"], "user");
}

#[tokio::test]
async fn log_13_max_tokens_after_text_and_a_partial_call_keeps_only_the_text() {
    let rig = rig().await;
    let mut frames = vec![openai::role()];
    frames.extend(openai::text(&["let me look"]));
    frames.extend(openai::tool_call(0, "c1", "echo", &["{\"text\": \"h"]));
    frames.extend(openai::finish("length", 30, 12));
    rig.server.push(Reply::Stream(frames));
    rig.agent.prompt("go").await.unwrap();
    assert_eq!(rig.count("tool/call"), 0);
    assert_eq!(
        assistant_messages(&rig)[0]["message"]["content"],
        json!([{"type": "text", "text": "let me look"}])
    );
}

#[tokio::test]
async fn loop_64_a_refused_key_ends_the_turn_with_the_failure_as_it_came() {
    let rig = rig().await;
    rig.server.push(openai::error(
        401,
        "Authentication Fails",
        "authentication_error",
        Some("invalid_api_key"),
    ));
    let outcome = rig.agent.prompt("go").await.unwrap().unwrap();
    let errors = rig.data("agent/error");
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0]["turn"], 1);
    assert_eq!(errors[0]["step"], 1);
    assert_eq!(errors[0]["error"]["code"], "AUTH");
    assert_eq!(errors[0]["error"]["status"], 401);
    let message = errors[0]["error"]["message"].as_str().unwrap();
    assert!(message.contains("DEEPSEEK_API_KEY"), "{message}");
    assert_eq!(
        rig.reasons(),
        vec![json!({"kind": "error", "error": errors[0]["error"]})]
    );
    assert!(matches!(outcome.end, TurnEnd::Failed(_)));
    assert_eq!(rig.count("assistant/message"), 0);
    assert_eq!(rig.count("step/start"), rig.count("step/end"));
}

/// Retries once, then fails.
struct RetryOnce(AtomicU32);

#[async_trait::async_trait]
impl AgentHooks for RetryOnce {
    async fn request_error(
        &self,
        _agent: &Agent,
        _error: &ModelError,
        _attempt: u32,
    ) -> RequestErrorAction {
        if self.0.fetch_add(1, Ordering::SeqCst) == 0 {
            RequestErrorAction::Retry
        } else {
            RequestErrorAction::Fail
        }
    }
}

#[tokio::test]
async fn loop_21_a_retry_after_a_cut_stream_commits_one_message_from_the_new_attempt_only() {
    let rig = rig().await;
    rig.agent.set_hooks(RetryOnce(AtomicU32::new(0)));
    let mut cut = vec![openai::role()];
    cut.extend(openai::text(&["broken"]));
    cut.push(Frame::Cut);
    rig.server.push(Reply::Stream(cut));
    rig.server.push(say("recovered"));
    let outcome = rig.agent.prompt("go").await.unwrap().unwrap();
    assert_eq!(outcome.end, TurnEnd::Completed);
    let messages = assistant_messages(&rig);
    assert_eq!(messages.len(), 1);
    assert_eq!(
        messages[0]["message"]["content"],
        json!([{"type": "text", "text": "recovered"}])
    );
    assert!(messages[0]["message"].get("interrupted").is_none());
    let events = rig.session.events();
    let (_, msg) = events
        .iter()
        .find(|(_, e)| e.event_type() == "assistant/message")
        .unwrap();
    let broken: Vec<u64> = events
        .iter()
        .filter(|(_, e)| {
            e.event_type() == "text-chunks" && e.data().value()["texts"][0] == "broken"
        })
        .map(|(s, _)| *s)
        .collect();
    assert_eq!(
        broken.len(),
        1,
        "the failed attempt's chunk stays in the log"
    );
    assert!(!msg.source_event_seqs().unwrap().contains(&broken[0]));
    assert_eq!(rig.bodies().len(), 2);
}

/// Cancels the agent from the request-error hook.
struct CancelOnError;

#[async_trait::async_trait]
impl AgentHooks for CancelOnError {
    async fn request_error(
        &self,
        agent: &Agent,
        _error: &ModelError,
        _attempt: u32,
    ) -> RequestErrorAction {
        agent.cancel(Cancel::user());
        RequestErrorAction::Retry
    }
}

#[tokio::test]
async fn loop_20_a_cancel_from_the_request_error_hook_commits_no_message() {
    let rig = rig().await;
    rig.agent.set_hooks(CancelOnError);
    let mut cut = vec![openai::role()];
    cut.extend(openai::text(&["partial"]));
    cut.push(Frame::Cut);
    rig.server.push(Reply::Stream(cut));
    rig.agent.prompt("go").await.unwrap();
    assert_eq!(rig.count("assistant/message"), 0);
    assert_eq!(rig.reasons(), vec![aborted("user")]);
    assert_eq!(rig.bodies().len(), 1);
}

#[tokio::test]
async fn a_model_that_is_not_served_names_the_model() {
    let rig = rig().await;
    rig.server.push(openai::error(
        404,
        "Model Not Exist",
        "invalid_request_error",
        None,
    ));
    rig.agent.prompt("go").await.unwrap();
    let errors = rig.data("agent/error");
    let message = errors[0]["error"]["message"].as_str().unwrap();
    assert!(message.contains("deepseek-chat"), "{message}");
    assert_eq!(errors[0]["error"]["code"], "NOT_FOUND");
}
