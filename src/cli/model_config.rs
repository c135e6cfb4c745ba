//! Which model `dsh agent` talks to: the command line over the workspace's `.dsh/config.toml`,
//! over the user's `$XDG_CONFIG_HOME/dsh/config.toml` (or `~/.config/dsh/config.toml`), over
//! the provider's defaults and its environment variables.
//!
//! The files themselves are read in `config_file.rs`. Guarantees: a provider's default server without a key is
//! refused before anything is opened, naming the environment variable to set; a base URL is
//! taken as the providers' own SDKs take it (OpenAI-compatible ones end in `/v1`, Anthropic's is
//! the host).

use std::sync::Arc;
use std::time::Duration;

use clap::ValueEnum;
use dsh_model::{AnthropicConfig, AnthropicProvider, OpenAiConfig, OpenAiProvider, Provider};
use serde::Deserialize;

use super::Exit;
use super::config_file::ConfigFile;

/// The providers `dsh agent` speaks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderArg {
    /// DeepSeek (OpenAI-compatible; `DEEPSEEK_API_KEY`), the default.
    Deepseek,
    /// OpenAI or any OpenAI-compatible server (`OPENAI_API_KEY`, `OPENAI_BASE_URL`).
    Openai,
    /// Anthropic's Messages API (`ANTHROPIC_API_KEY`).
    Anthropic,
}

/// What the command line says, over the files.
pub struct Choice {
    /// `--provider`.
    pub provider: Option<ProviderArg>,
    /// `--model`.
    pub model: Option<String>,
    /// `--base-url`.
    pub base_url: Option<String>,
    /// `--idle-timeout`, already checked.
    pub idle_timeout: Option<Duration>,
}

/// The provider and model to use.
pub struct Model {
    /// The provider, ready to send requests.
    pub provider: Arc<dyn Provider>,
    /// The model's name.
    pub model: String,
}

/// Builds the provider the command line and `file` choose.
pub fn resolve(choice: Choice, file: &ConfigFile) -> Result<Model, Exit> {
    let provider = choice
        .provider
        .or(file.provider)
        .unwrap_or(ProviderArg::Deepseek);
    let base_url = choice.base_url.or_else(|| file.base_url.clone());
    let model = choice.model.or_else(|| file.model.clone());
    let idle_timeout = choice.idle_timeout.or(file.idle_timeout);
    let key = |default_env: &str| -> (String, Option<String>) {
        let env = file
            .api_key_env
            .clone()
            .unwrap_or_else(|| default_env.to_owned());
        let key = std::env::var(&env).ok().filter(|k| !k.trim().is_empty());
        (env, key)
    };
    // A provider's own server needs a key; a server of the user's own (Ollama, vLLM, a proxy)
    // may not.
    let missing = |name: &str, env: &str| {
        Exit::usage(format!(
            "no API key for {name}: set {env} (or `api_key_env` in config.toml to name another \
             variable), or give --base-url for a server that needs none"
        ))
    };
    match provider {
        ProviderArg::Deepseek | ProviderArg::Openai => {
            let (mut config, default_model) = match provider {
                ProviderArg::Deepseek => (OpenAiConfig::deepseek(), "deepseek-chat"),
                _ => (OpenAiConfig::openai(), "gpt-4.1"),
            };
            let (env, api_key) = key(&config.key_env.clone());
            config.key_env = env.clone();
            config.api_key = api_key;
            let env_base = (provider == ProviderArg::Openai)
                .then(|| std::env::var("OPENAI_BASE_URL").ok())
                .flatten()
                .filter(|u| !u.trim().is_empty());
            let custom = base_url.or(env_base);
            if custom.is_none() && config.api_key.is_none() {
                return Err(missing(&config.name, &env));
            }
            if let Some(url) = custom {
                check_url(&url)?;
                config = config.with_base_url(url.trim_end_matches('/'));
            }
            if let Some(idle) = idle_timeout {
                config.http.idle_timeout = idle;
            }
            let provider = OpenAiProvider::new(config)
                .map_err(|e| Exit::usage(format!("the model provider: {e}")))?;
            Ok(Model {
                provider: Arc::new(provider),
                model: model.unwrap_or_else(|| default_model.to_owned()),
            })
        }
        ProviderArg::Anthropic => {
            let mut config = AnthropicConfig::default();
            let (env, api_key) = key(&config.key_env.clone());
            config.key_env = env.clone();
            config.api_key = api_key;
            if base_url.is_none() && config.api_key.is_none() {
                return Err(missing(&config.name, &env));
            }
            if let Some(url) = base_url {
                check_url(&url)?;
                config = config.with_base_url(url.trim_end_matches('/'));
            }
            if let Some(idle) = idle_timeout {
                config.http.idle_timeout = idle;
            }
            let provider = AnthropicProvider::new(config)
                .map_err(|e| Exit::usage(format!("the model provider: {e}")))?;
            Ok(Model {
                provider: Arc::new(provider),
                model: model.unwrap_or_else(|| "claude-sonnet-4-5".to_owned()),
            })
        }
    }
}

/// A base URL must be an `http` or `https` URL.
fn check_url(url: &str) -> Result<(), Exit> {
    if url.starts_with("http://") || url.starts_with("https://") {
        Ok(())
    } else {
        Err(Exit::usage(format!(
            "--base-url {url:?} is not an http:// or https:// URL"
        )))
    }
}
