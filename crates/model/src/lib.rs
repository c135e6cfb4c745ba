//! # dsh-model
//!
//! The model seam of dsh: one provider-neutral [`Request`] in, one [`ChunkStream`] out, whatever
//! the provider, and the HTTP adapters that speak the providers' streaming APIs:
//! [`OpenAiProvider`] for OpenAI-compatible Chat Completions (OpenAI, DeepSeek with its
//! `reasoning_content`, OpenRouter, vLLM, llama.cpp's server, Ollama) and
//! [`AnthropicProvider`] for Anthropic Messages (tool use, thinking and redacted thinking).
//!
//! It holds: the request vocabulary ([`Request`], [`Message`], [`Options`]), the chunk
//! vocabulary in the reference's shape ([`Chunk`]), the [`Provider`] trait, the assembler that
//! turns chunks into an [`AssistantMessage`] with each tool call's arguments kept as the raw
//! text the model produced ([`Assembler`], [`assemble()`]), the shared HTTP client, retries and
//! status errors ([`HttpSettings`], [`RetryPolicy`], [`ModelError`]) and the stream idle
//! watchdog ([`IdleWatchdog`], TMO-34..38). Its modules are private: everything public is
//! re-exported at the root.
//!
//! It deliberately does NOT: run tools, keep a session log, decide what a turn is, or retry a
//! stream that has opened: a cut or a stall mid-stream is an item of the stream, and the agent
//! loop above decides (its request-error path, LOOP-20/21). It knows nothing about sessions,
//! scheduling or policy, and depends on `dsh-core` alone among the dsh crates.
//!
//! ## Example
//!
//! Streaming one answer from an OpenAI-compatible server (here the mock provider of
//! `dsh-test-support`, on 127.0.0.1) and assembling it, incrementally as a loop would:
//!
//! ```
//! use std::sync::Arc;
//! use dsh_model::{Assembler, FinishReason, Message, OpenAiConfig, OpenAiProvider, Provider, Request};
//! use dsh_test_support::mock_provider::{MockProvider, openai};
//! use futures::StreamExt;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let server = MockProvider::start().await?;
//! server.push(openai::text_reply(&["Hel", "lo"]));
//!
//! let config = OpenAiConfig::deepseek()
//!     .with_base_url(&server.openai_base_url())
//!     .with_api_key("sk-test");
//! let provider = OpenAiProvider::new(config)?;
//! let request = Request::new("deepseek-chat", vec![Message::user("Say hello.")]);
//!
//! let mut stream = provider.stream(Arc::new(request)).await?;
//! let mut assembler = Assembler::new();
//! while let Some(chunk) = stream.next().await {
//!     assembler.push(&chunk?);
//! }
//! let message = assembler.finish();
//! assert_eq!(message.text(), "Hello");
//! assert_eq!(message.finish, Some(FinishReason::Stop));
//! # Ok(())
//! # }
//! ```
//!
//! Against a real provider, `OpenAiConfig::deepseek()` reads the key from `DEEPSEEK_API_KEY`
//! and [`dsh_model::assemble`](assemble()) reads a whole stream in one call.
//!
//! Rules held here (by id, see `docs/rules.md`): TMO-34..38 (the idle watchdog) and the
//! adapter side of LOOP-20/21 (a mid-stream failure surfaces once, never retried).

mod anthropic;
mod assemble;
mod chunk;
mod error;
mod http;
mod openai;
mod provider;
mod request;
mod retry;
mod sse;
mod sse_parser;
mod watchdog;

pub use anthropic::{ANTHROPIC_VERSION, AnthropicConfig, AnthropicProvider};
pub use assemble::{Assembler, AssistantMessage, assemble};
pub use chunk::{BlockKind, Chunk, ChunkStream, FinishReason, Usage};
pub use error::ModelError;
pub use http::{HttpSettings, shared_client};
pub use openai::{MaxTokensField, OpenAiConfig, OpenAiProvider};
pub use provider::Provider;
pub use request::{AssistantBlock, Effort, Message, Options, Reasoning, Request, ToolCall};
pub use retry::{RetryPolicy, retry_after};
pub use watchdog::{IDLE_TIMEOUT_CODE, IdleWatchdog, WatchdogError, idle_timeout_from_ms};
