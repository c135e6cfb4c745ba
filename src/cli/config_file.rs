//! The configuration files of `dsh agent` and `dsh chat`: `$XDG_CONFIG_HOME/dsh/config.toml`
//! (or `~/.config/dsh/config.toml`), then the workspace's `.dsh/config.toml`, the later
//! winning key by key.
//!
//! A file holds the agent's keys (`provider`, `model`, `base_url`, `api_key_env`, `system`,
//! `max_steps`, `idle_timeout`, the prices) and, beside them, any key of the policy file (`mode`, `preset`, `approval`,
//! `max_parallel_tool_calls`, `[permissions]`, `[tools.NAME]`), validated as a policy file is,
//! its errors naming this file's own lines. The policy keys of one file are taken whole: the
//! workspace's when it has any, else the user's.
//!
//! Guarantees: a key neither set defines, or a value of the wrong type, is refused naming the
//! file, the line and the key (exit 2). A workspace's own file is written by whoever wrote the
//! repository, so it never sends the user's key elsewhere nor widens the sandbox on its own: its
//! `base_url`, `api_key_env` and policy keys apply only when the workspace is trusted
//! (`--trust-workspace`), and are otherwise named on stderr as not applied.

use std::ops::Range;
use std::path::{Path, PathBuf};

use dsh::Policy;
use serde::Deserialize;
use toml::Spanned;

use super::Exit;
use super::model_config::ProviderArg;

/// One `config.toml`: every key optional.
#[derive(Debug, Default)]
pub struct ConfigFile {
    /// `deepseek`, `openai` or `anthropic`.
    pub provider: Option<ProviderArg>,
    /// The model's name as the provider knows it.
    pub model: Option<String>,
    /// The API root (`https://api.deepseek.com/v1`, `http://127.0.0.1:11434/v1`, ...).
    pub base_url: Option<String>,
    /// The environment variable holding the key (instead of the provider's usual one).
    pub api_key_env: Option<String>,
    /// The system prompt (instead of dsh's).
    pub system: Option<String>,
    /// At most this many model requests per turn.
    pub max_steps: Option<u32>,
    /// How long the model's answer may send nothing (`"90s"`, `"10m"`, or a number of
    /// seconds), checked as `--idle-timeout` is.
    pub idle_timeout: Option<std::time::Duration>,
    /// What the model's tokens cost (`input_price`, `output_price`, `cached_input_price`: US
    /// dollars per million tokens), for the status line after each turn.
    pub prices: Option<super::stream_view::Prices>,
    /// The policy keys, when the file has any.
    pub policy: Option<Policy>,
}

/// The agent's keys of a file, each with where its value sits.
#[derive(Deserialize)]
struct AgentKeys {
    provider: Option<Spanned<ProviderArg>>,
    model: Option<Spanned<String>>,
    base_url: Option<Spanned<String>>,
    api_key_env: Option<Spanned<String>>,
    system: Option<Spanned<String>>,
    max_steps: Option<Spanned<u32>>,
    idle_timeout: Option<Spanned<toml::Value>>,
    input_price: Option<Spanned<f64>>,
    output_price: Option<Spanned<f64>>,
    cached_input_price: Option<Spanned<f64>>,
}

/// The agent's keys, for messages.
const AGENT_KEYS: &str = "provider, model, base_url, api_key_env, system, max_steps, \
                          idle_timeout, input_price, output_price, cached_input_price";

impl ConfigFile {
    /// `later`'s keys over this file's; the policy keys whole.
    fn merged(self, later: ConfigFile) -> ConfigFile {
        ConfigFile {
            provider: later.provider.or(self.provider),
            model: later.model.or(self.model),
            base_url: later.base_url.or(self.base_url),
            api_key_env: later.api_key_env.or(self.api_key_env),
            system: later.system.or(self.system),
            max_steps: later.max_steps.or(self.max_steps),
            idle_timeout: later.idle_timeout.or(self.idle_timeout),
            prices: later.prices.or(self.prices),
            policy: later.policy.or(self.policy),
        }
    }
}

fn line_at(text: &str, offset: usize) -> usize {
    text.get(..offset)
        .map_or(1, |t| t.matches('\n').count() + 1)
}

/// Reads `path` when it exists.
fn read(path: &Path) -> Result<ConfigFile, Exit> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse(path, &text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ConfigFile::default()),
        Err(e) => Err(Exit::usage(format!("{}: {e}", path.display()))),
    }
}

fn parse(path: &Path, text: &str) -> Result<ConfigFile, Exit> {
    let keys: AgentKeys = toml::from_str(text).map_err(|e| {
        let line = line_at(text, e.span().map_or(0, |s| s.start));
        Exit::usage(format!("{}: line {line}: {}", path.display(), e.message()))
    })?;
    let spans: Vec<Range<usize>> = [
        keys.provider.as_ref().map(Spanned::span),
        keys.model.as_ref().map(Spanned::span),
        keys.base_url.as_ref().map(Spanned::span),
        keys.api_key_env.as_ref().map(Spanned::span),
        keys.system.as_ref().map(Spanned::span),
        keys.max_steps.as_ref().map(Spanned::span),
        keys.idle_timeout.as_ref().map(Spanned::span),
        keys.input_price.as_ref().map(Spanned::span),
        keys.output_price.as_ref().map(Spanned::span),
        keys.cached_input_price.as_ref().map(Spanned::span),
    ]
    .into_iter()
    .flatten()
    .collect();
    // The policy keys: the same text with the agent's lines blanked, so the policy's own
    // errors name this file's lines.
    let rest = blank_lines(text, &spans);
    let has_policy = toml::from_str::<toml::Table>(&rest).is_ok_and(|t| !t.is_empty());
    let price = |p: &Option<Spanned<f64>>, key: &str| -> Result<Option<f64>, Exit> {
        match p {
            Some(v) if !(v.get_ref().is_finite() && *v.get_ref() >= 0.0) => {
                Err(Exit::usage(format!(
                    "{}: line {}: {key} must be a number of US dollars per million tokens, 0 or more",
                    path.display(),
                    line_at(text, v.span().start)
                )))
            }
            Some(v) => Ok(Some(*v.get_ref())),
            None => Ok(None),
        }
    };
    let prices = match (
        price(&keys.input_price, "input_price")?,
        price(&keys.output_price, "output_price")?,
        price(&keys.cached_input_price, "cached_input_price")?,
    ) {
        (Some(input), Some(output), cached_input) => Some(super::stream_view::Prices {
            input,
            output,
            cached_input,
        }),
        (None, None, None) => None,
        _ => {
            return Err(Exit::usage(format!(
                "{}: input_price and output_price go together (cached_input_price is optional)",
                path.display()
            )));
        }
    };
    let idle_timeout = match &keys.idle_timeout {
        Some(v) => {
            let checked = match v.get_ref() {
                toml::Value::String(text) => super::duration::idle_timeout(text),
                toml::Value::Integer(secs) => super::duration::idle_timeout(&secs.to_string()),
                other => Err(format!(
                    "a {} is not a duration: write a string such as \"90s\" or \"10m\", or a number of seconds",
                    other.type_str()
                )),
            };
            Some(checked.map_err(|e| {
                Exit::usage(format!(
                    "{}: line {}: idle_timeout: {e}",
                    path.display(),
                    line_at(text, v.span().start)
                ))
            })?)
        }
        None => None,
    };
    let policy = if has_policy {
        Some(Policy::parse(&rest).map_err(|e| policy_error(path, e))?)
    } else {
        None
    };
    Ok(ConfigFile {
        provider: keys.provider.map(Spanned::into_inner),
        model: keys.model.map(Spanned::into_inner),
        base_url: keys.base_url.map(Spanned::into_inner),
        api_key_env: keys.api_key_env.map(Spanned::into_inner),
        system: keys.system.map(Spanned::into_inner),
        max_steps: keys.max_steps.map(Spanned::into_inner),
        idle_timeout,
        prices,
        policy,
    })
}

/// `text` with every line a span touches turned into spaces (its newlines kept). Top-level
/// keys come before any table, one `key = value` from the start of their line.
fn blank_lines(text: &str, spans: &[Range<usize>]) -> String {
    let mut bytes = text.as_bytes().to_vec();
    for span in spans {
        let start = text[..span.start].rfind('\n').map_or(0, |i| i + 1);
        let end = text[span.end..]
            .find('\n')
            .map_or(text.len(), |i| span.end + i);
        for b in &mut bytes[start..end] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    }
    // Whole lines became ASCII spaces: still UTF-8.
    String::from_utf8(bytes).unwrap_or_default()
}

fn policy_error(path: &Path, e: dsh::PolicyError) -> Exit {
    let message = match e {
        dsh::PolicyError::Invalid { line, message, .. } => {
            let hint = if message.contains("unknown field") {
                format!(" (or one of the agent's keys: {AGENT_KEYS})")
            } else {
                String::new()
            };
            format!("line {line}: {message}{hint}")
        }
        other => {
            let text = other.to_string();
            match text.strip_prefix("policy file: ") {
                Some(rest) => rest.to_owned(),
                None => text,
            }
        }
    };
    Exit::usage(format!("{}: {message}", path.display()))
}

/// The user's config file, in the directory of their hook settings and trust store.
fn user_file() -> Option<PathBuf> {
    dsh::hooks::user_config_dir().map(|d| d.join("config.toml"))
}

/// The user's file, then the workspace's (its `base_url`, `api_key_env` and policy keys only
/// when `trusted`).
pub fn load(workspace: &Path, trusted: bool) -> Result<ConfigFile, Exit> {
    let user = match user_file() {
        Some(p) => read(&p)?,
        None => ConfigFile::default(),
    };
    let path = workspace.join(".dsh").join("config.toml");
    let mut own = read(&path)?;
    if !trusted {
        let mut held = Vec::new();
        if own.base_url.take().is_some() {
            held.push("base_url");
        }
        if own.api_key_env.take().is_some() {
            held.push("api_key_env");
        }
        if own.policy.take().is_some() {
            held.push("its policy keys");
        }
        if !held.is_empty() {
            err_line!(
                "dsh: not applying {} of {}: this workspace is not trusted, and they could send your key elsewhere or widen the sandbox; pass --trust-workspace to apply them",
                held.join(", "),
                super::render::sanitize(&path.display().to_string())
            );
        }
    }
    Ok(user.merged(own))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(r: Result<ConfigFile, Exit>) -> String {
        match r {
            Ok(_) => panic!("refused"),
            Err(e) => e.message.unwrap_or_default(),
        }
    }

    #[test]
    fn policy_keys_beside_the_agent_keys_keep_their_line_numbers() {
        let path = Path::new("c.toml");
        let m = message(parse(
            path,
            "provider = \"openai\"\nmodel = \"m\"\nmode = \"sideways\"\n",
        ));
        assert!(m.starts_with("c.toml: line 3: mode"), "{m}");
        let Ok(file) = parse(path, "model = \"m\"\nmax_parallel_tool_calls = 3\n") else {
            panic!("valid");
        };
        assert_eq!(file.model.as_deref(), Some("m"));
        assert_eq!(file.policy.map(|p| p.max_parallel_tool_calls), Some(3));
        let Ok(file) = parse(path, "system = \"\"\"\nline one\nline two\n\"\"\"\n") else {
            panic!("a multi-line system prompt");
        };
        assert!(file.policy.is_none());
        let m = message(parse(path, "modle = \"x\"\n"));
        assert!(
            m.contains("line 1") && m.contains("modle") && m.contains("api_key_env"),
            "{m}"
        );
        let Ok(file) = parse(path, "idle_timeout = \"2m\"\nmode = \"native\"\n") else {
            panic!("a duration beside a policy key");
        };
        assert_eq!(file.idle_timeout, Some(std::time::Duration::from_secs(120)));
        assert!(file.policy.is_some());
        let Ok(file) = parse(path, "idle_timeout = 45\n") else {
            panic!("a number of seconds");
        };
        assert_eq!(file.idle_timeout, Some(std::time::Duration::from_secs(45)));
        for (text, says) in [
            ("model = \"m\"\nidle_timeout = \"0s\"\n", "0 would fail"),
            ("model = \"m\"\nidle_timeout = 0\n", "0 would fail"),
            (
                "model = \"m\"\nidle_timeout = true\n",
                "a boolean is not a duration",
            ),
            (
                "model = \"m\"\nidle_timeout = \"soon\"\n",
                "is not a duration",
            ),
        ] {
            let m = message(parse(path, text));
            assert!(
                m.starts_with("c.toml: line 2: idle_timeout: ") && m.contains(says),
                "{text}: {m}"
            );
        }
        let m = message(parse(path, "\nprovider = \"mistral\"\n"));
        assert!(
            m.starts_with("c.toml: line 2:") && m.contains("mistral"),
            "{m}"
        );
    }
}
