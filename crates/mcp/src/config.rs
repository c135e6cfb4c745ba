//! One `[mcp.servers.<name>]` table: how to start a server and how long to wait for it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

/// How to reach one MCP server: `command` (stdio: a child process speaking JSON-RPC on its
/// stdin and stdout) or `url` (streamable HTTP), exactly one of them.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ServerConfig {
    /// The program (stdio).
    pub command: Option<String>,
    /// The endpoint (streamable HTTP), e.g. `https://mcp.example.com/mcp`.
    pub url: Option<String>,
    /// Headers sent with every HTTP request.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The environment variable holding a bearer token for `url` (sent as
    /// `Authorization: Bearer <token>`; the token itself never goes in the policy file).
    pub bearer_token_env: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment variables set for it (on top of dsh's own environment).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Its working directory (default: dsh's).
    pub cwd: Option<PathBuf>,
    /// `false` leaves the server out.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Each call's budget in milliseconds (default 60,000).
    pub timeout_ms: Option<u64>,
    /// How long the server may take to start and list its tools (default 30,000 ms).
    pub startup_timeout_ms: Option<u64>,
}

fn yes() -> bool {
    true
}

impl ServerConfig {
    /// A server started as `command args...`, with the defaults.
    pub fn command<I, S>(command: &str, args: I) -> ServerConfig
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        ServerConfig {
            command: Some(command.to_owned()),
            url: None,
            headers: BTreeMap::new(),
            bearer_token_env: None,
            args: args.into_iter().map(Into::into).collect(),
            env: BTreeMap::new(),
            cwd: None,
            enabled: true,
            timeout_ms: None,
            startup_timeout_ms: None,
        }
    }

    /// A server at the streamable HTTP endpoint `url`, with the defaults.
    pub fn http(url: &str) -> ServerConfig {
        ServerConfig {
            url: Some(url.to_owned()),
            command: None,
            ..ServerConfig::command("", std::iter::empty::<String>())
        }
    }

    /// Checks that the table says how to reach the server: `command` or `url`, not both, and
    /// what a command server cannot use (`headers`, `bearer_token_env`) only with `url`; that
    /// `command` is not empty and neither budget is 0; and that the server's name keeps tool
    /// names unambiguous (no `__` in it, no `_` at its end).
    pub fn check(&self, server: &str) -> Result<(), crate::McpError> {
        let refuse = |problem: String| {
            Err(crate::McpError::Config {
                server: server.to_owned(),
                problem,
            })
        };
        if server.contains("__") || server.ends_with('_') {
            return refuse(format!(
                "a server's name may not hold `__` or end with `_`: its tools are named \
                 `mcp__<server>__<tool>`, which must say which server a tool is of (servers \
                 `x` with a tool `y__hello` and `x__y` with a tool `hello` would both give \
                 `mcp__x__y__hello`); rename `{server}`"
            ));
        }
        if self.command.as_deref().is_some_and(|c| c.trim().is_empty()) {
            return refuse(
                "`command` is empty: name the program that starts the server".to_owned(),
            );
        }
        if self.timeout_ms == Some(0) {
            return refuse(
                "`timeout_ms` is 0, which would time every call out at once: give each call's \
                 budget in milliseconds (default 60000)"
                    .to_owned(),
            );
        }
        if self.startup_timeout_ms == Some(0) {
            return refuse(
                "`startup_timeout_ms` is 0, which would give the server no time to start: give \
                 its start-up budget in milliseconds (default 30000)"
                    .to_owned(),
            );
        }
        let problem = match (&self.command, &self.url) {
            (Some(_), Some(_)) => Some("give `command` (stdio) or `url` (HTTP), not both"),
            (None, None) => Some("give `command` (stdio) or `url` (HTTP)"),
            (Some(_), None) if !self.headers.is_empty() || self.bearer_token_env.is_some() => {
                Some("`headers` and `bearer_token_env` go with `url`, not `command`")
            }
            (None, Some(url)) if !(url.starts_with("http://") || url.starts_with("https://")) => {
                Some("`url` must be an http:// or https:// URL")
            }
            (None, Some(_))
                if !self.args.is_empty() || !self.env.is_empty() || self.cwd.is_some() =>
            {
                Some("`args`, `env` and `cwd` go with `command`, not `url`")
            }
            _ => None,
        };
        match problem {
            Some(p) => refuse(p.to_owned()),
            None => Ok(()),
        }
    }

    /// Each call's budget.
    pub fn call_timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.unwrap_or(60_000))
    }

    /// The start-up budget.
    pub fn startup_timeout(&self) -> Duration {
        Duration::from_millis(self.startup_timeout_ms.unwrap_or(30_000))
    }
}
