//! A typed tool in about ten lines, and one call of it through the whole pipeline.
//!
//! Run: `cargo run --example typed_tool`

use dsh::core::{Failure, Signal, ToolDefinition, ToolOutput};
use dsh::schemars::JsonSchema;
use dsh::serde::Deserialize;
use dsh::{Approvals, Harness};

/// The tool's input: its JSON Schema (sent to the model) comes from this type.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "dsh::serde")]
#[schemars(crate = "dsh::schemars")]
struct WeatherInput {
    /// The city to look up.
    city: String,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The tool: a name, a description, an output contract and a typed body.
    let weather = ToolDefinition::builder("weather", "Today's weather in a city.")
        .output(ToolOutput::string())
        .execute_typed(|input: WeatherInput, _ctx| async move {
            if input.city.is_empty() {
                return Err(Failure::new("name a city"));
            }
            Ok(format!("sunny in {}", input.city))
        })
        .build()?;

    // A harness over an in-memory session; `ask` decisions have no channel (fail closed).
    let session = dsh::session::Session::in_memory("typed-tool");
    let harness = Harness::builder(session.clone())
        .tool(weather)
        .approvals(Approvals::NoChannel)
        .build()
        .await?;

    // What the model sent: one assistant message with one tool call.
    let message = dsh::core::Json::new(dsh::serde_json::json!({
        "role": "assistant",
        "content": [{"type": "tool-call", "id": "call_1", "name": "weather",
                     "arguments": "{\"city\": \"Paris\"}"}]
    }))?;
    let report = harness
        .driver()
        .run_turn([message], Signal::never())
        .await?;

    let result = &report.steps[0].results[0];
    println!("weather -> {}", result.first_text().unwrap_or_default());
    assert_eq!(result.first_text(), Some("sunny in Paris"));
    // The log holds the call and its one result.
    assert!(dsh::session::check_events(&session.events()).is_empty());
    Ok(())
}

#[test]
fn example_runs() -> Result<(), Box<dyn std::error::Error>> {
    main()
}
