//! The Anthropic Messages adapter (streaming).
//!
//! Guarantees: `x-api-key` and `anthropic-version: 2023-06-01` on every request; the base URL is
//! taken as the SDK takes it (without `/v1`; `/v1/messages` is appended); `max_tokens` is always
//! sent (the API requires it); a 401/403 names the key variable.

mod stream;
mod wire;

use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use reqwest::header::{HeaderName, HeaderValue};
use tokio::time::Instant;

use crate::chunk::ChunkStream;
use crate::error::ModelError;
use crate::http::{HttpSettings, Target, json_headers, open, shared_client};
use crate::provider::Provider;
use crate::request::Request;
use crate::sse::chunk_stream;

/// The API version sent in `anthropic-version`.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// How to reach the Messages API.
#[derive(Clone, Debug, PartialEq)]
pub struct AnthropicConfig {
    /// The adapter's name in errors and logs.
    pub name: String,
    /// The API root without `/v1` (`https://api.anthropic.com`).
    pub base_url: String,
    /// The key.
    pub api_key: Option<String>,
    /// The environment variable the key comes from, named in 401/403 errors.
    pub key_env: String,
    /// `max_tokens` when the request sets none.
    pub default_max_tokens: u32,
    /// Extra headers (`anthropic-beta`, ...).
    pub headers: Vec<(String, String)>,
    /// Timeouts and retries.
    pub http: HttpSettings,
}

impl Default for AnthropicConfig {
    /// `https://api.anthropic.com`, the key from `ANTHROPIC_API_KEY`, 8192 tokens by default.
    fn default() -> Self {
        let key_env = "ANTHROPIC_API_KEY";
        AnthropicConfig {
            name: "anthropic".to_owned(),
            base_url: "https://api.anthropic.com".to_owned(),
            api_key: std::env::var(key_env).ok().filter(|k| !k.is_empty()),
            key_env: key_env.to_owned(),
            default_max_tokens: 8192,
            headers: Vec::new(),
            http: HttpSettings::default(),
        }
    }
}

impl AnthropicConfig {
    /// The same API at another base URL.
    pub fn with_base_url(mut self, base_url: &str) -> AnthropicConfig {
        base_url.clone_into(&mut self.base_url);
        self
    }

    /// The same API with this key.
    pub fn with_api_key(mut self, key: &str) -> AnthropicConfig {
        self.api_key = Some(key.to_owned());
        self
    }

    /// The same API with these timeouts and retries.
    pub fn with_http(mut self, http: HttpSettings) -> AnthropicConfig {
        self.http = http;
        self
    }

    /// The endpoint: the base URL with `/v1/messages` appended.
    pub fn url(&self) -> String {
        format!("{}/v1/messages", self.base_url.trim_end_matches('/'))
    }
}

/// A [`Provider`] speaking streaming Anthropic Messages.
#[derive(Clone, Debug)]
pub struct AnthropicProvider {
    config: Arc<AnthropicConfig>,
    client: reqwest::Client,
    url: Arc<str>,
}

impl AnthropicProvider {
    /// An adapter on the process-wide client.
    pub fn new(config: AnthropicConfig) -> Result<AnthropicProvider, ModelError> {
        Ok(AnthropicProvider::with_client(config, shared_client()?))
    }

    /// An adapter on a given client.
    pub fn with_client(config: AnthropicConfig, client: reqwest::Client) -> AnthropicProvider {
        let url = Arc::from(config.url());
        AnthropicProvider {
            config: Arc::new(config),
            client,
            url,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &AnthropicConfig {
        &self.config
    }

    fn encode(&self, request: &Request) -> Result<Vec<u8>, ModelError> {
        wire::body(request, self.config.default_max_tokens).map_err(|source| {
            ModelError::RequestBody {
                provider: self.config.name.clone(),
                source,
            }
        })
    }

    async fn run(&self, request: Arc<Request>) -> Result<ChunkStream, ModelError> {
        let config = &self.config;
        let http = &config.http;
        let deadline = http.deadline.map(|d| (Instant::now() + d, d));
        let body = self.encode(&request)?;
        let mut headers = json_headers(&config.headers)?;
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
        if let Some(key) = &config.api_key {
            let value = HeaderValue::from_str(key).map_err(|source| ModelError::ApiKey {
                key_env: config.key_env.clone(),
                source,
            })?;
            headers.insert(HeaderName::from_static("x-api-key"), value);
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
        let decoder = stream::AnthropicDecoder::new(&config.name);
        chunk_stream(response, decoder, &config.name, http.idle_timeout, deadline)
    }
}

impl Provider for AnthropicProvider {
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
