//! Tracing and metrics: the pipeline emits a `tracing` span per turn, step, call and stage; the
//! metrics wrapper counts calls and latency per tool. The libraries only emit: installing a
//! subscriber is the program's choice (here `tracing-subscriber`'s `fmt`, at `debug`).
//!
//! Run: `cargo run --example tracing_output`

use dsh::core::{Json, Signal, ToolDefinition, ToolOutput};
use dsh::guard::Metrics;
use dsh::serde_json::json;
use dsh::{Approvals, Harness};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Spans and events of the dsh crates, at debug, on stdout.
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter("dsh_scheduler=debug,dsh_guard=debug")
        .with_writer(std::io::stdout)
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let ping = ToolDefinition::builder("ping", "Answers pong.")
        .output(ToolOutput::string())
        .execute(|_ctx| async { Ok(Json::string("pong")) })
        .build()?;
    let session = dsh::session::Session::in_memory("traced");
    let harness = Harness::builder(session)
        .tool(ping)
        .approvals(Approvals::Never)
        .build()
        .await?;
    // The metrics wrapper goes around every dispatch.
    let metrics = Metrics::new();
    metrics.install(harness.hooks()).keep();

    let message = Json::new(json!({"role": "assistant", "content": [
        {"type": "tool-call", "id": "c1", "name": "ping", "arguments": "{}"},
        {"type": "tool-call", "id": "c2", "name": "ping", "arguments": "{}"}
    ]}))?;
    harness
        .driver()
        .run_turn([message], Signal::never())
        .await?;

    let snapshot = metrics.snapshot();
    let ping = snapshot.tool("ping").ok_or("no metrics for ping")?;
    println!("ping: {ping:?}");
    assert_eq!(ping.calls, 2);
    Ok(())
}

#[test]
fn example_runs() -> Result<(), Box<dyn std::error::Error>> {
    main()
}
