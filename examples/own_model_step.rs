//! Your own model client driving the step scheduler for one step: the client returns an
//! assistant message; the scheduler runs its tool calls (two in parallel here), records each
//! call before anything runs and each result in model order, and hands back what to send to the
//! model next.
//!
//! Run: `cargo run --example own_model_step`

use dsh::core::{Json, Signal, ToolDefinition, ToolOutput};
use dsh::scheduler::{Runtime, StepContext, tool_calls_of};
use dsh::serde_json::json;

/// Stands in for an HTTP client of a model provider: it answers one assistant message, in the
/// reference shape (`content` blocks of `type: "tool-call"` with the raw argument text).
struct MyModel;

impl MyModel {
    async fn complete(&self, _prompt: &str) -> Result<Json, dsh::core::JsonError> {
        Json::new(json!({"role": "assistant", "content": [
            {"type": "text", "text": "Checking both."},
            {"type": "tool-call", "id": "a", "name": "lookup", "arguments": "{\"key\": \"x\"}"},
            {"type": "tool-call", "id": "b", "name": "lookup", "arguments": "{\"key\": \"y\"}"}
        ]}))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The layers, wired by hand: a registry, hook points, and the staged runtime over them.
    let registry = dsh::core::ToolRegistry::new();
    registry.add(
        ToolDefinition::builder("lookup", "Look a key up.")
            .output(ToolOutput::string())
            .concurrency_safe(true) // calls of it may run side by side
            .execute(|ctx| async move {
                let key = ctx.arguments().json().map(|j| j.value()["key"].to_string());
                Ok(Json::string(format!(
                    "value of {}",
                    key.unwrap_or_default()
                )))
            })
            .build()?,
    )?;
    let runtime = std::sync::Arc::new(Runtime::new(registry, dsh::guard::Hooks::new()));
    let session = dsh::session::Session::in_memory("own-model");

    // One turn, one step: the framing events are yours to write when you drive steps yourself.
    let message = MyModel.complete("look up x and y").await?;
    session.append(dsh::session::Event::turn_start(1)).await?;
    session
        .append(dsh::session::Event::step_start(1, 1))
        .await?;
    session
        .append(dsh::session::Event::assistant_message(
            1,
            1,
            message.clone(),
        ))
        .await?;
    let cx = StepContext {
        session: session.clone(),
        turn: 1,
        step: 1,
        agent: None,
        signal: Signal::never(),
        max_parallel: dsh::scheduler::DEFAULT_MAX_PARALLEL,
    };
    let outcome = runtime.run_step(&cx, &tool_calls_of(&message)).await?;
    session.append(dsh::session::Event::step_end(1, 1)).await?;
    let completed = Json::new(json!({"kind": "completed"}))?;
    session
        .append(dsh::session::Event::turn_end(1, completed))
        .await?;
    assert!(dsh::session::check_events(&session.events()).is_empty());

    // The results, in the model's order, ready to go back to the model.
    let texts: Vec<_> = outcome.results.iter().map(|r| r.first_text()).collect();
    println!("{texts:?}");
    assert_eq!(texts, [Some("value of \"x\""), Some("value of \"y\"")]);
    // The history a model is sent back, rebuilt from the log alone (OpenAI's shape here).
    let history = dsh::session::to_openai(&dsh::session::derive_messages(&session.events()));
    println!("{}", dsh::serde_json::to_string_pretty(history.value())?);
    Ok(())
}

#[test]
fn example_runs() -> Result<(), Box<dyn std::error::Error>> {
    main()
}
