//! The agent loop with a model: a prompt, the model's streamed answer, its tool call run
//! through the whole pipeline, the result sent back, the model's final answer; every step in
//! a session log you can `dsh check` and `dsh transcript`.
//!
//! The model here is the mock provider of `dsh-test-support` on 127.0.0.1 (real HTTP and SSE in
//! DeepSeek's wire format), so the example runs offline. For a real model, replace the
//! provider with `OpenAiProvider::new(OpenAiConfig::deepseek())?` (the key from
//! `DEEPSEEK_API_KEY`), `OpenAiConfig::openai()`, or `AnthropicProvider`.
//!
//! Run: `cargo run --example agent_loop`

use std::sync::Arc;

use dsh::core::{Json, ToolDefinition, ToolOutput, ToolRegistry};
use dsh::guard::Hooks;
use dsh::scheduler::{Runtime, TurnEnd};
use dsh::session::{OpenOptions, Session};
use dsh_agent::{Agent, AgentConfig, AgentHooks};
use dsh_model::{Chunk, OpenAiConfig, OpenAiProvider};
use dsh_test_support::mock_provider::{MockProvider, Reply, openai};

/// Prints the model's text as it streams, as a terminal would.
struct Print;

impl AgentHooks for Print {
    fn on_chunk(&self, _agent: &Agent, _turn: u32, _step: u32, chunk: &Chunk) {
        if let Chunk::TextDelta { text, .. } = chunk {
            print!("{text}");
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The model: first it calls `weather`, then it answers with the result.
    let server = MockProvider::start().await?;
    let mut call = vec![openai::role()];
    call.extend(openai::tool_call(
        0,
        "call_1",
        "weather",
        &["{\"city\"", ": \"Paris\"}"],
    ));
    call.extend(openai::finish("tool_calls", 40, 12));
    server.push(Reply::Stream(call));
    server.push(openai::text_reply(&["It is ", "sunny in ", "Paris."]));

    // The tools and the pipeline in front of them (add rules, hooks and guards to `Hooks`).
    let registry = ToolRegistry::new();
    registry.add(
        ToolDefinition::builder("weather", "The weather in a city.")
            .output(ToolOutput::string())
            .execute(|_ctx| async { Ok(Json::string("sunny, 21 °C")) })
            .build()?,
    )?;
    let runtime = Arc::new(Runtime::new(registry, Hooks::new()));

    // The session log: every request the model is sent can be rebuilt from it.
    let dir = tempfile::tempdir()?;
    let log = dir.path().join("session.jsonl");
    let (session, _) = Session::open_jsonl(&log, OpenOptions::new()).await?;

    let provider = OpenAiProvider::new(
        OpenAiConfig::deepseek()
            .with_base_url(&server.openai_base_url())
            .with_api_key("sk-example"),
    )?;
    let config = AgentConfig::new(Arc::new(provider), "deepseek-chat")
        .with_system("You answer in one sentence.");
    let agent = Agent::new(runtime, session.clone(), config);
    agent.set_hooks(Print);

    let outcome = agent
        .prompt("What is the weather in Paris?")
        .await?
        .ok_or("no turn ran")?;
    println!();
    assert_eq!(outcome.end, TurnEnd::Completed);
    assert_eq!(outcome.text, "It is sunny in Paris.");
    session.close().await?;

    // The log passes the same checks `dsh check` runs.
    let problems = dsh::session::check_file(&log)?;
    assert!(problems.is_empty(), "{problems:?}");
    println!(
        "turn {} ended {:?}; log: {}",
        outcome.turn,
        outcome.end,
        log.display()
    );
    Ok(())
}

#[test]
fn example_runs() -> Result<(), Box<dyn std::error::Error>> {
    main()
}
