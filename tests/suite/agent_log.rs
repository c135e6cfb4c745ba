//! A log written by the agent loop is a log like any other: `dsh check` accepts it, and the
//! transcript `dsh transcript` exports from it is the history the model was sent.

use std::sync::Arc;

use dsh::core::{Json, ToolDefinition, ToolOutput, ToolRegistry};
use dsh::guard::Hooks;
use dsh::scheduler::Runtime;
use dsh::session::{OpenOptions, Session};
use dsh_agent::{Agent, AgentConfig};
use dsh_model::{OpenAiConfig, OpenAiProvider};
use dsh_test_support::mock_provider::{MockProvider, Reply, openai};
use serde_json::Value;

use super::support::*;

async fn agent_run(log: &std::path::Path) -> MockProvider {
    let server = MockProvider::start().await.unwrap();
    let mut call = vec![openai::role()];
    call.extend(openai::reasoning(&["I should ", "echo."]));
    call.extend(openai::tool_call(
        0,
        "call_1",
        "echo",
        &["{\"text\"", ": \"hi\"}"],
    ));
    call.extend(openai::finish("tool_calls", 20, 5));
    server.push_all([Reply::Stream(call), openai::text_reply(&["echoed ", "hi"])]);
    let registry = ToolRegistry::new();
    registry
        .add(
            ToolDefinition::builder("echo", "Echoes.")
                .output(ToolOutput::string())
                .execute(|_ctx| async { Ok(Json::string("hi")) })
                .build()
                .unwrap(),
        )
        .unwrap();
    let runtime = Arc::new(Runtime::new(registry, Hooks::new()));
    let (session, _) = Session::open_jsonl(log, OpenOptions::new()).await.unwrap();
    let provider = OpenAiProvider::new(
        OpenAiConfig::deepseek()
            .with_base_url(&server.openai_base_url())
            .with_api_key("sk-test"),
    )
    .unwrap();
    let agent = Agent::new(
        runtime,
        session.clone(),
        AgentConfig::new(Arc::new(provider), "deepseek-chat"),
    );
    let outcome = agent.prompt("please echo hi").await.unwrap().unwrap();
    assert_eq!(outcome.text, "echoed hi");
    session.close().await.unwrap();
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_the_agent_loop_wrote_passes_dsh_check_and_its_transcript_is_what_the_model_saw() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("agent.jsonl");
    let server = agent_run(&log).await;

    let check = dsh_run(&["check", s(&log)]);
    assert_eq!(check.code, 0, "{}", check.both());

    let out = dsh_run(&["transcript", s(&log), "--format", "openai"]);
    assert_eq!(out.code, 0, "{}", out.both());
    let transcript: Vec<Value> = serde_json::from_str(&out.stdout).unwrap();
    // The last request carried everything but the final answer.
    let bodies = server.bodies();
    let sent = bodies.last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(transcript.len(), sent.len() + 1, "{transcript:#?}");
    for (i, (exported, sent)) in transcript.iter().zip(&sent).enumerate() {
        assert_eq!(exported["role"], sent["role"], "message {i}");
        assert_eq!(exported.get("content"), sent.get("content"), "message {i}");
        assert_eq!(
            exported.get("tool_calls"),
            sent.get("tool_calls"),
            "message {i}"
        );
        assert_eq!(
            exported.get("tool_call_id"),
            sent.get("tool_call_id"),
            "message {i}"
        );
    }
}
