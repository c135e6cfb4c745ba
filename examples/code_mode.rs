//! Code Mode over your own tools: the model is offered `run_code` alone, and sends a program
//! whose `tools.<name>(args)` calls go through the same pipeline as direct calls.
//!
//! Run: `cargo run --example code_mode`

use dsh::core::{Json, Signal, ToolDefinition, ToolOutput};
use dsh::serde_json::json;
use dsh::{Harness, Policy};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let price = ToolDefinition::builder("price", "The price of an item, in cents.")
        .output(ToolOutput::json())
        .concurrency_safe(true)
        .execute(|ctx| async move {
            let item = ctx.arguments().json().map(|j| j.value()["item"].clone());
            let cents = match item.as_ref().and_then(|v| v.as_str()) {
                Some("apple") => 40,
                Some("pear") => 55,
                _ => 0,
            };
            Ok(Json::new(json!({"cents": cents})).unwrap_or_else(|_| Json::empty_object()))
        })
        .build()?;

    // `mode = "code"`: only `run_code` is callable directly (`both` offers both).
    let session = dsh::session::Session::in_memory("code-mode");
    let harness = Harness::builder(session.clone())
        .policy(Policy::parse("mode = \"code\"")?)
        .tool(price)
        .build()
        .await?;

    // What the model is offered: `run_code`, and a typed SDK of `tools` for the system prompt.
    if let Some(code) = harness.code_mode() {
        let assembly = code.assemble(Some(harness.agent()))?;
        let offered: Vec<_> = assembly.tools.iter().map(|t| t.name.to_string()).collect();
        println!("offered: {offered:?}");
    }

    let program = r#"
        const [a, p] = await Promise.all([tools.price({item: "apple"}), tools.price({item: "pear"})]);
        console.log(`apple ${a.cents}, pear ${p.cents}`);
        return a.cents + p.cents;
    "#;
    let args = json!({"code": program, "description": "Add two prices"}).to_string();
    let message = Json::new(json!({"role": "assistant", "content": [
        {"type": "tool-call", "id": "c1", "name": "run_code", "arguments": args}
    ]}))?;
    let report = harness
        .driver()
        .run_turn([message], Signal::never())
        .await?;
    let text = report.steps[0].results[0].first_text().unwrap_or_default();
    println!("{text}");
    assert!(text.contains("apple 40, pear 55") && text.contains("95"));
    // Both sub-calls are in the log, under the parent call.
    let sub_calls = session
        .events()
        .iter()
        .filter(|(_, e)| e.event_type() == "tool/code-dispatch")
        .count();
    assert_eq!(sub_calls, 2);
    Ok(())
}

#[test]
fn example_runs() -> Result<(), Box<dyn std::error::Error>> {
    main()
}
