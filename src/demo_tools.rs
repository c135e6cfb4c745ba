//! Small tools for scripted runs and tests: `echo {text}` (parallel-safe), `sleep {ms}`
//! (parallel-safe, cooperative, reports the time it measured itself) and `fail {message}`.

use std::time::Instant;

use dsh_core::{CoreError, Failure, ToolDefinition, ToolOutput};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, JsonSchema)]
struct EchoInput {
    /// The text to return.
    text: String,
}

#[derive(Deserialize, JsonSchema)]
struct SleepInput {
    /// How long to sleep, in milliseconds.
    ms: u64,
}

#[derive(Serialize)]
struct SleepOutput {
    requested_ms: u64,
    elapsed_ms: u64,
}

#[derive(Deserialize, JsonSchema)]
struct FailInput {
    /// The failure message.
    message: String,
}

/// `echo`, `sleep` and `fail`.
pub fn demo_tools() -> Result<Vec<ToolDefinition>, CoreError> {
    let echo = ToolDefinition::builder("echo", "Return the given text.")
        .output(ToolOutput::string())
        .concurrency_safe(true)
        .execute_typed(|input: EchoInput, _ctx| async move { Ok::<_, Failure>(input.text) })
        .build()?;
    let sleep = ToolDefinition::builder(
        "sleep",
        "Sleep for `ms` milliseconds (stops early when cancelled).",
    )
    .output(ToolOutput::json())
    .concurrency_safe(true)
    .execute_typed(|input: SleepInput, ctx| async move {
        let start = Instant::now();
        tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_millis(input.ms)) => {}
            _ = ctx.signal().aborted() => {}
        }
        Ok::<_, Failure>(SleepOutput {
            requested_ms: input.ms,
            elapsed_ms: start.elapsed().as_millis() as u64,
        })
    })
    .build()?;
    let fail = ToolDefinition::builder("fail", "Fail with the given message.")
        .output(ToolOutput::string())
        .concurrency_safe(true)
        .execute_typed(|input: FailInput, _ctx| async move {
            Err::<String, _>(Failure::new(input.message))
        })
        .build()?;
    Ok(vec![echo, sleep, fail])
}
