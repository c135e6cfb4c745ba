//! # dsh
//!
//! The tool execution pipeline of an AI-agent harness. Every tool call a model makes is recorded
//! in a session log before anything runs, checked by hooks, permission rules, approval and
//! deny-only guards, run under timeout/retry/metrics wrappers, checked again after it ran,
//! rendered, and recorded as the one result the model sees.
//!
//! This facade re-exports each layer explicitly and wires them in a [`Harness`]. Teams that want
//! one layer only can depend on its crate directly. It owns the wiring (the [`Harness`] and its
//! builder), the policy file, the scripted-model reader and the `dsh` program; it adds no
//! pipeline behaviour of its own and never knows a model provider: you bring the model client.
//!
//! ## Example
//!
//! A typed tool and one model message through the whole pipeline (more in the repository's
//! `examples/`: your own model client, guards and rules, the file tools alone, Code Mode, a
//! crashed session repaired, tracing):
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use dsh::core::{Json, Signal, ToolDefinition, ToolOutput};
//! use dsh::{Harness, schemars::JsonSchema, serde::Deserialize};
//!
//! #[derive(Deserialize, JsonSchema)]
//! #[serde(crate = "dsh::serde")]
//! #[schemars(crate = "dsh::schemars")]
//! struct Input { city: String }
//!
//! let weather = ToolDefinition::builder("weather", "Today's weather in a city.")
//!     .output(ToolOutput::string())
//!     .execute_typed(|input: Input, _ctx| async move { Ok(format!("sunny in {}", input.city)) })
//!     .build()?;
//! let session = dsh::session::Session::in_memory("s1");
//! let harness = Harness::builder(session).tool(weather).build().await?;
//! let message = Json::new(dsh::serde_json::json!({"role": "assistant", "content": [
//!     {"type": "tool-call", "id": "c1", "name": "weather", "arguments": "{\"city\":\"Paris\"}"}
//! ]}))?;
//! let report = harness.driver().run_turn([message], Signal::never()).await?;
//! assert_eq!(report.steps[0].results[0].first_text(), Some("sunny in Paris"));
//! # Ok(()) }
//! ```
//!
//! ## Approval, in one place
//!
//! A rule, hook or policy that answers `ask` puts the call to a person (or a program): the
//! *question* is an [`ApprovalRequest`] (the tool, the call's arguments and subject, why), the
//! *answer* an [`ApprovalOutcome`]. To answer, implement [`Answerer`] or wrap a closure with
//! [`answer_fn`], and give it to [`HarnessBuilder::approvals`] as [`Approvals::Answerer`]; the
//! other [`Approvals`] say "allow every ask", "reject every ask" or "nobody can be asked" (every
//! ask denied: fail closed). That is all a host uses. Underneath, the scheduler asks through its
//! own seam (`dsh::scheduler::Approver`), which the guard's approval service implements; only
//! a host that replaces that service altogether implements it.
//!
//! ## Feature flags
//!
// Each feature's line links its items only when they are in this build (with the feature off
// a link would render as brackets).
#![cfg_attr(
    feature = "fs",
    doc = "- `fs` (default): the filesystem seam, read-before-write policy and file tools, as [`fs`]."
)]
#![cfg_attr(
    not(feature = "fs"),
    doc = "- `fs` (default): the filesystem seam, read-before-write policy and file tools, as `fs`."
)]
#![cfg_attr(
    feature = "bash",
    doc = "- `bash` (default): the `bash` tool with its OS sandbox and permission presets, as \
           [`bash`], and [`HarnessBuilder::bash`] (implies `fs`)."
)]
#![cfg_attr(
    not(feature = "bash"),
    doc = "- `bash` (default): the `bash` tool with its OS sandbox and permission presets, as \
           `bash`, and `HarnessBuilder::bash` (implies `fs`)."
)]
#![cfg_attr(
    feature = "jsonl",
    doc = "- `jsonl` (default): [`jsonl`], durable sessions in the JSON Lines store: where a \
           workspace keeps its logs, and opening one (created, or repaired and resumed)."
)]
#![cfg_attr(
    not(feature = "jsonl"),
    doc = "- `jsonl` (default): `jsonl`, durable sessions in the JSON Lines store: where a \
           workspace keeps its logs, and opening one (created, or repaired and resumed)."
)]
#![cfg_attr(
    feature = "hooks",
    doc = "- `hooks` (default): user command hooks in the Claude Code settings format, as \
           [`hooks`], and [`HarnessBuilder::settings`]."
)]
#![cfg_attr(
    not(feature = "hooks"),
    doc = "- `hooks` (default): user command hooks in the Claude Code settings format, as \
           `hooks`, and `HarnessBuilder::settings`."
)]
#![cfg_attr(
    feature = "code-mode",
    doc = "- `code-mode` (default): Code Mode, `run_code` on an embedded QuickJS, for the policy \
           modes `code` and `both`, as [`code_mode`] and [`Harness::code_mode`]."
)]
#![cfg_attr(
    not(feature = "code-mode"),
    doc = "- `code-mode` (default): Code Mode, `run_code` on an embedded QuickJS, for the policy \
           modes `code` and `both`, as `code_mode` and `Harness::code_mode`."
)]
//! - `cli` (default): the `dsh` command-line program (implies `fs`, `jsonl`, `bash` and `hooks`).
//! - `view` (default): `dsh view`, sessions in the browser from a local server (implies `cli`).
//!
//! Always present: [`core`], [`session`], [`guard`], [`scheduler`], the [`Harness`], the policy
//! file and the scripted-model reader.
//!
#![cfg_attr(
    any(feature = "bash", feature = "mcp", feature = "hooks"),
    doc = "With `bash`, `mcp` or `hooks`: [`process`], the process groups their commands, servers \
           and hooks lead, in one registry ([`process::kill_all_live_groups`] for a process \
           about to exit at once)."
)]
#![cfg_attr(
    not(any(feature = "bash", feature = "mcp", feature = "hooks")),
    doc = "With `bash`, `mcp` or `hooks`: `process`, the process groups their commands, servers \
           and hooks lead, in one registry (`process::kill_all_live_groups` for a process about \
           to exit at once)."
)]

#[cfg(feature = "code-mode")]
pub use dsh_code_mode as code_mode;
pub use dsh_core as core;
pub use dsh_guard as guard;
#[cfg(feature = "hooks")]
pub use dsh_hooks as hooks;
#[cfg(feature = "mcp")]
pub use dsh_mcp as mcp;
#[cfg(any(feature = "bash", feature = "mcp", feature = "hooks"))]
pub use dsh_process as process;
pub use dsh_scheduler as scheduler;
pub use dsh_session as session;
#[cfg(feature = "bash")]
pub use dsh_tool_bash as bash;
#[cfg(feature = "fs")]
pub use dsh_tool_fs as fs;

#[cfg(feature = "bash")]
mod bash_tool;
pub mod demo_tools;
pub mod grants;
mod harness;
#[cfg(feature = "jsonl")]
pub mod jsonl;
#[cfg(feature = "mcp")]
mod mcp_tools;
#[cfg(feature = "hooks")]
pub mod permissions;
pub mod policy;
mod registrations;
pub mod script;

// What a tool definition needs, at the versions dsh itself builds with (derive through them
// with `#[serde(crate = "dsh::serde")]` and `#[schemars(crate = "dsh::schemars")]`).
pub use async_trait::async_trait;
pub use schemars;
pub use serde;
pub use serde_json;

#[cfg(feature = "bash")]
pub use bash_tool::BashOptions;
pub use dsh_guard::{Answerer, ApprovalOutcome, ApprovalRequest, Feedback, answer_fn};
pub use grants::{GrantScope, Grants};
pub use harness::{Approvals, Harness, HarnessBuilder, HarnessError};
pub use policy::{Mode, Policy, PolicyError};
pub use script::{Script, ScriptError, parse_script};
