//! # dsh-agent
//!
//! The agent loop: a prompt becomes a model request built from the session log, the model's
//! streamed answer is logged chunk by chunk and committed as an `assistant/message`, its tool
//! calls run as one step through the step scheduler (every call under the whole pipeline), the
//! results go back to the model, and so on until the model stops, a limit ends the turn, or it
//! is cancelled. Prompts queue while a turn runs; steering and injected contexts wait in the
//! next-step inbox.
//!
//! It owns: the [`Agent`] (inbox, steering, cancel and dispose, status), the model side of a
//! turn (`source.rs`: requests, streaming, interruption, `max-tokens`, request errors), the
//! chunk events in the reference's format (`chunk_log.rs`), the history sent to a provider
//! (`history.rs`) and the request header with the tools in configured order (`config.rs`).
//!
//! It deliberately does NOT: frame turns and steps or run tools (dsh-scheduler's turn driver
//! and step scheduler do, through the `StepSource` seam this crate implements), speak any
//! provider's wire format (dsh-model), or decide policy (dsh-guard).
//!
//! The one promise that ties it together: the log alone rebuilds every request the model was
//! sent (`derive_messages` of the log before each `assistant/message`, behind the logged
//! `request/header`).
//!
//! ## Example
//!
//! One turn against an OpenAI-compatible server (here the mock provider of
//! `dsh-test-support`, on 127.0.0.1): the model calls `ping`, the call runs through the
//! pipeline, the model reads its result and answers.
//!
//! ```
//! use std::sync::Arc;
//! use dsh_agent::{Agent, AgentConfig};
//! use dsh_core::{Json, ToolDefinition, ToolOutput, ToolRegistry};
//! use dsh_model::{OpenAiConfig, OpenAiProvider};
//! use dsh_scheduler::{Runtime, TurnEnd};
//! use dsh_session::Session;
//! use dsh_test_support::mock_provider::{MockProvider, Reply, openai};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let server = MockProvider::start().await?;
//! let mut call = vec![openai::role()];
//! call.extend(openai::tool_call(0, "call_1", "ping", &["{}"]));
//! call.extend(openai::finish("tool_calls", 20, 5));
//! server.push(Reply::Stream(call));
//! server.push(openai::text_reply(&["It ", "answered pong."]));
//!
//! let registry = ToolRegistry::new();
//! registry.add(
//!     ToolDefinition::builder("ping", "Answers pong.")
//!         .output(ToolOutput::string())
//!         .execute(|_ctx| async { Ok(Json::string("pong")) })
//!         .build()?,
//! )?;
//! let runtime = Arc::new(Runtime::new(registry, dsh_guard::Hooks::new()));
//! let provider = OpenAiProvider::new(
//!     OpenAiConfig::deepseek()
//!         .with_base_url(&server.openai_base_url())
//!         .with_api_key("sk-test"),
//! )?;
//! let config = AgentConfig::new(Arc::new(provider), "deepseek-chat").with_system("Be brief.");
//! let agent = Agent::new(runtime, Session::in_memory("example"), config);
//!
//! let outcome = agent.prompt("Ping, please.").await?.expect("one turn ran");
//! assert_eq!(outcome.end, TurnEnd::Completed);
//! assert_eq!(outcome.text, "It answered pong.");
//! # Ok(())
//! # }
//! ```
//!
//! Against a real provider, `OpenAiConfig::deepseek()` reads its key from `DEEPSEEK_API_KEY`
//! (or `OpenAiConfig::openai()`, `AnthropicConfig`, ... from dsh-model).
//!
//! Rules held here (by id, see `docs/rules.md`): LOOP-01..33 (inbox, cancel, dispose),
//! LOOP-17..22 (cancel mid-stream), LOOP-34..47 (pre-step), LOOP-56/57 (stopping),
//! LOOP-64..66 (model failures), LOG-06/08/11/12/13, REG-81..84.

mod agent;
mod chunk_log;
mod config;
mod error;
mod history;
mod hooks;
mod source;

pub use agent::{Agent, Cancel, Status, TurnOutcome};
pub use config::{AgentConfig, Limits, ToolOffer};
pub use error::AgentError;
pub use history::{block_json, provider_messages, to_provider_messages};
pub use hooks::{AgentHooks, HookFailure, NoHooks, PreStepDecision, RequestErrorAction};
pub use source::{failure_json, user_prompt};
