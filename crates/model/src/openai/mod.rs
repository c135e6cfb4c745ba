//! The OpenAI-compatible Chat Completions adapter (streaming): OpenAI, DeepSeek, OpenRouter,
//! vLLM, llama.cpp's server, Ollama, and any server that speaks the same API.
//!
//! Guarantees: the base URL is taken as the SDKs take it (ending in `/v1`; `/chat/completions`
//! is appended); the key goes in `Authorization: Bearer` when there is one (local servers need
//! none), and a 401/403 names the variable it is read from; the body is built once per request
//! and sent unchanged on every retry.

mod stream;
mod wire;

use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use reqwest::header::{AUTHORIZATION, HeaderValue};
use tokio::time::Instant;

pub use wire::MaxTokensField;

use crate::chunk::ChunkStream;
use crate::error::ModelError;
use crate::http::{HttpSettings, Target, json_headers, open, shared_client};
use crate::provider::Provider;
use crate::request::Request;
use crate::sse::chunk_stream;

/// How to reach one OpenAI-compatible server.
#[derive(Clone, Debug, PartialEq)]
pub struct OpenAiConfig {
    /// The adapter's name in errors and logs (`deepseek`, `openai`, ...).
    pub name: String,
    /// The API root, ending in `/v1` (`https://api.deepseek.com/v1`).
    pub base_url: String,
    /// The key, if the server needs one.
    pub api_key: Option<String>,
    /// The environment variable the key comes from, named in 401/403 errors.
    pub key_env: String,
    /// Which member carries the output limit.
    pub max_tokens_field: MaxTokensField,
    /// Whether an assistant message's reasoning is sent back as `reasoning_content` (DeepSeek's
    /// thinking mode requires it after tool calls: [`OpenAiConfig::deepseek`] sets it; most
    /// other servers refuse or ignore it).
    pub reasoning_in_history: bool,
    /// Extra headers (OpenRouter's `HTTP-Referer`, `X-Title`, ...).
    pub headers: Vec<(String, String)>,
    /// Timeouts and retries.
    pub http: HttpSettings,
    /// Whether the model takes images: then an image block is sent as a picture (those of tool
    /// results in a user message right after the results, as a `tool` message holds text
    /// only); otherwise it is one line of text saying a picture was left out, so a text-only
    /// model is never sent one.
    pub images: bool,
}

impl OpenAiConfig {
    /// A server at `base_url`, its key read from `key_env` when set.
    pub fn new(name: &str, base_url: &str, key_env: &str) -> OpenAiConfig {
        OpenAiConfig {
            name: name.to_owned(),
            base_url: base_url.to_owned(),
            api_key: std::env::var(key_env).ok().filter(|k| !k.is_empty()),
            key_env: key_env.to_owned(),
            max_tokens_field: MaxTokensField::MaxTokens,
            reasoning_in_history: false,
            headers: Vec::new(),
            images: false,
            http: HttpSettings::default(),
        }
    }

    /// OpenAI (`OPENAI_API_KEY`, `max_completion_tokens`).
    pub fn openai() -> OpenAiConfig {
        OpenAiConfig {
            max_tokens_field: MaxTokensField::MaxCompletionTokens,
            images: true,
            ..OpenAiConfig::new("openai", "https://api.openai.com/v1", "OPENAI_API_KEY")
        }
    }

    /// DeepSeek (`DEEPSEEK_API_KEY`; reasoning arrives as `reasoning_content` and is sent back
    /// the same way: in thinking mode, the default, an assistant message that called tools must
    /// carry its `reasoning_content` in every later request, or the API answers 400; in one
    /// without tool calls it is ignored).
    pub fn deepseek() -> OpenAiConfig {
        OpenAiConfig {
            reasoning_in_history: true,
            ..OpenAiConfig::new(
                "deepseek",
                "https://api.deepseek.com/v1",
                "DEEPSEEK_API_KEY",
            )
        }
    }

    /// OpenRouter (`OPENROUTER_API_KEY`).
    pub fn openrouter() -> OpenAiConfig {
        OpenAiConfig::new(
            "openrouter",
            "https://openrouter.ai/api/v1",
            "OPENROUTER_API_KEY",
        )
    }

    /// A vLLM server (`VLLM_API_KEY` if it was started with `--api-key`).
    pub fn vllm(base_url: &str) -> OpenAiConfig {
        OpenAiConfig::new("vllm", base_url, "VLLM_API_KEY")
    }

    /// llama.cpp's `llama-server` (`LLAMA_API_KEY` if it was started with `--api-key`).
    pub fn llama_cpp(base_url: &str) -> OpenAiConfig {
        OpenAiConfig::new("llama.cpp", base_url, "LLAMA_API_KEY")
    }

    /// Ollama on its default port (`OLLAMA_API_KEY`, usually unset).
    pub fn ollama() -> OpenAiConfig {
        OpenAiConfig::new("ollama", "http://127.0.0.1:11434/v1", "OLLAMA_API_KEY")
    }

    /// The same server at another base URL.
    pub fn with_base_url(mut self, base_url: &str) -> OpenAiConfig {
        base_url.clone_into(&mut self.base_url);
        self
    }

    /// The same server with this key.
    pub fn with_api_key(mut self, key: &str) -> OpenAiConfig {
        self.api_key = Some(key.to_owned());
        self
    }

    /// The same server with these timeouts and retries.
    pub fn with_http(mut self, http: HttpSettings) -> OpenAiConfig {
        self.http = http;
        self
    }

    /// The endpoint: the base URL with `/chat/completions` appended.
    pub fn url(&self) -> String {
        format!("{}/chat/completions", self.base_url.trim_end_matches('/'))
    }
}

/// A [`Provider`] speaking streaming Chat Completions.
#[derive(Clone, Debug)]
pub struct OpenAiProvider {
    config: Arc<OpenAiConfig>,
    client: reqwest::Client,
    url: Arc<str>,
}

impl OpenAiProvider {
    /// An adapter on the process-wide client.
    pub fn new(config: OpenAiConfig) -> Result<OpenAiProvider, ModelError> {
        Ok(OpenAiProvider::with_client(config, shared_client()?))
    }

    /// An adapter on a given client.
    pub fn with_client(config: OpenAiConfig, client: reqwest::Client) -> OpenAiProvider {
        let url = Arc::from(config.url());
        OpenAiProvider {
            config: Arc::new(config),
            client,
            url,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    fn encode(&self, request: &Request) -> Result<Vec<u8>, ModelError> {
        let shape = wire::Shape {
            max_tokens_field: self.config.max_tokens_field,
            reasoning_in_history: self.config.reasoning_in_history,
            images: self.config.images,
        };
        wire::body(request, &shape).map_err(|source| ModelError::RequestBody {
            provider: self.config.name.clone(),
            source,
        })
    }

    async fn run(&self, request: Arc<Request>) -> Result<ChunkStream, ModelError> {
        let config = &self.config;
        let http = &config.http;
        let deadline = http.deadline.map(|d| (Instant::now() + d, d));
        let body = self.encode(&request)?;
        let mut headers = json_headers(&config.headers)?;
        if let Some(key) = &config.api_key {
            let value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|source| {
                ModelError::ApiKey {
                    key_env: config.key_env.clone(),
                    source,
                }
            })?;
            headers.insert(AUTHORIZATION, value);
        }
        let target = Target {
            provider: &config.name,
            url: &self.url,
            model: &request.model,
            key_env: &config.key_env,
        };
        let response = open(
            &self.client,
            &target,
            headers,
            Bytes::from(body),
            http,
            deadline,
        )
        .await?;
        let decoder = stream::OpenAiDecoder::new(&config.name);
        chunk_stream(response, decoder, &config.name, http.idle_timeout, deadline)
    }
}

impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        &self.config.name
    }

    fn body(&self, request: &Request) -> Option<Result<Vec<u8>, ModelError>> {
        Some(self.encode(request))
    }

    fn stream(&self, request: Arc<Request>) -> BoxFuture<'_, Result<ChunkStream, ModelError>> {
        Box::pin(self.run(request))
    }
}
