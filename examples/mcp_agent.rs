//! The agent loop with an MCP server's tools: the model calls `mcp__py__add`, a tool of an MCP
//! server dsh starts (here the Python SDK server of dsh's tests, `tests/mcp/server.py`), and the
//! call goes through the whole pipeline like any other; then the model answers.
//!
//! The model is the mock provider of `dsh-test-support` (real HTTP and SSE), so this runs
//! offline; it needs `python3` with the `mcp` package (`cargo xtask test` installs it).
//!
//! Run: `cargo run --example mcp_agent`

use std::sync::Arc;

use dsh::core::ToolRegistry;
use dsh::guard::Hooks;
use dsh::mcp::{McpServer, ServerConfig};
use dsh::scheduler::{Runtime, TurnEnd};
use dsh::session::Session;
use dsh_agent::{Agent, AgentConfig};
use dsh_model::{OpenAiConfig, OpenAiProvider};
use dsh_test_support::mock_provider::{MockProvider, Reply, openai};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The MCP server, started as a child process; its tools become `mcp__py__<tool>`.
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp/server.py");
    let server = McpServer::connect("py", &ServerConfig::command("python3", [script])).await?;
    let registry = ToolRegistry::new();
    for tool in server.tools()? {
        registry.add(tool)?;
    }
    // Rules, hooks and guards would go on `Hooks`; they see `mcp__py__add` like any tool.
    let runtime = Arc::new(Runtime::new(registry, Hooks::new()));

    // The model: it calls the MCP tool, then answers with its result.
    let model = MockProvider::start().await?;
    let mut call = vec![openai::role()];
    call.extend(openai::tool_call(
        0,
        "call_1",
        "mcp__py__add",
        &["{\"a\": 19", ", \"b\": 23}"],
    ));
    call.extend(openai::finish("tool_calls", 30, 10));
    model.push(Reply::Stream(call));
    model.push(openai::text_reply(&["19 + 23 is 42."]));
    let provider = OpenAiProvider::new(
        OpenAiConfig::deepseek()
            .with_base_url(&model.openai_base_url())
            .with_api_key("sk-example"),
    )?;

    let session = Session::in_memory("mcp-example");
    let agent = Agent::new(
        runtime,
        session.clone(),
        AgentConfig::new(Arc::new(provider), "deepseek-chat"),
    );
    let outcome = agent
        .prompt("What is 19 + 23?")
        .await?
        .ok_or("no turn ran")?;
    assert_eq!(outcome.end, TurnEnd::Completed);
    println!("{}", outcome.text);

    // The tool's result went back to the model as the MCP server computed it.
    let second = &model.bodies()[1];
    assert!(
        second["messages"].to_string().contains("19 + 23 = 42"),
        "{second}"
    );
    Ok(())
}

#[test]
fn example_runs() -> Result<(), Box<dyn std::error::Error>> {
    main()
}
