//! # dsh-model
//!
//! The model seam of dsh: one provider-neutral [`Request`] in, one [`ChunkStream`] out, whatever
//! the provider, and the HTTP adapters that speak the providers' streaming APIs:
//! [`OpenAiProvider`] for OpenAI-compatible Chat Completions (OpenAI, DeepSeek with its
//! `reasoning_content`, OpenRouter, vLLM, llama.cpp's server, Ollama) and
//! [`AnthropicProvider`] for Anthropic Messages (tool use, thinking and redacted thinking).
//!
//! It holds: the request vocabulary ([`request`]), the chunk vocabulary in the reference's
//! shape ([`chunk`]), the [`Provider`] trait ([`provider`]), the assembler that turns chunks into
//! an [`AssistantMessage`] with each tool call's arguments kept as the raw text the model
//! produced ([`assemble`]), the shared HTTP client, retries and status errors ([`http`],
//! [`retry`], [`ModelError`]) and the stream idle watchdog ([`watchdog`], TMO-34..38).
//!
//! It deliberately does NOT: run tools, keep a session log, decide what a turn is, or retry a
//! stream that has opened: a cut or a stall mid-stream is an item of the stream, and the agent
//! loop above decides (its request-error path, LOOP-20/21). It knows nothing about sessions,
//! scheduling or policy, and depends on `dsh-core` alone among the dsh crates.
//!
//! ## Example
//!
//! Streaming one answer from an OpenAI-compatible server and assembling it:
//!
//! ```no_run
//! use std::sync::Arc;
//! use dsh_model::{Message, OpenAiConfig, OpenAiProvider, Provider, Request, assemble};
//!
//! # async fn run() -> Result<(), dsh_model::ModelError> {
//! let provider = OpenAiProvider::new(OpenAiConfig::deepseek())?;
//! let request = Request::new("deepseek-chat", vec![Message::user("Say hello.")]);
//! let stream = provider.stream(Arc::new(request)).await?;
//! let message = assemble(stream).await?;
//! println!("{} ({:?})", message.text(), message.finish);
//! # Ok(())
//! # }
//! ```
//!
//! Rules held here (by id, see `docs/rules.md`): TMO-34..38 (the idle watchdog) and the
//! adapter side of LOOP-20/21 (a mid-stream failure surfaces once, never retried).

pub mod anthropic;
pub mod assemble;
pub mod chunk;
mod error;
pub mod http;
pub mod openai;
pub mod provider;
pub mod request;
pub mod retry;
mod sse;
pub mod watchdog;

pub use anthropic::{AnthropicConfig, AnthropicProvider};
pub use assemble::{Assembler, AssistantMessage, assemble};
pub use chunk::{BlockKind, Chunk, ChunkStream, FinishReason, Usage};
pub use error::ModelError;
pub use http::{HttpSettings, shared_client};
pub use openai::{MaxTokensField, OpenAiConfig, OpenAiProvider};
pub use provider::Provider;
pub use request::{AssistantBlock, Effort, Message, Options, Reasoning, Request, ToolCall};
pub use retry::RetryPolicy;
pub use watchdog::{IDLE_TIMEOUT_CODE, IdleWatchdog, WatchdogError};
