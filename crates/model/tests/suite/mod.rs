//! Shared helpers: adapters pointed at a mock server, and stream collection.

mod anthropic;
mod assemble;
mod closed;
mod failures;
mod not_a_stream;
mod openai;
mod retry;
mod statuses;
mod watchdog;

use std::time::Duration;

use dsh_model::{
    AnthropicConfig, AnthropicProvider, Chunk, ChunkStream, HttpSettings, ModelError, OpenAiConfig,
    OpenAiProvider, RetryPolicy,
};
use dsh_test_support::mock_provider::MockProvider;
use futures::StreamExt;

/// Short retries and a generous idle timeout, so failure tests run fast.
pub fn fast_http() -> HttpSettings {
    HttpSettings {
        idle_timeout: Duration::from_secs(10),
        deadline: None,
        retry: RetryPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_millis(20),
        },
    }
}

/// A DeepSeek-named Chat Completions adapter on the mock server, key `sk-test`.
pub fn openai(server: &MockProvider) -> OpenAiProvider {
    openai_with(server, fast_http())
}

/// The same with other HTTP settings.
pub fn openai_with(server: &MockProvider, http: HttpSettings) -> OpenAiProvider {
    let config = OpenAiConfig::new("deepseek", &server.openai_base_url(), "DEEPSEEK_API_KEY")
        .with_api_key("sk-test")
        .with_http(http);
    OpenAiProvider::new(config).expect("the shared client builds")
}

/// A Messages adapter on the mock server, key `sk-ant-test`.
pub fn anthropic(server: &MockProvider) -> AnthropicProvider {
    let config = AnthropicConfig::default()
        .with_base_url(&server.anthropic_base_url())
        .with_api_key("sk-ant-test")
        .with_http(fast_http());
    AnthropicProvider::new(config).expect("the shared client builds")
}

/// Every chunk up to the end or the first error, and that error.
pub async fn collect(mut stream: ChunkStream) -> (Vec<Chunk>, Option<ModelError>) {
    let mut chunks = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(c) => chunks.push(c),
            Err(e) => {
                assert!(stream.next().await.is_none(), "nothing after an error");
                return (chunks, Some(e));
            }
        }
    }
    (chunks, None)
}
