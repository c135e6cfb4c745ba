//! One `[mcp.servers.<name>]` table: how to start a server and how long to wait for it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

/// How to start one MCP server (stdio: a child process speaking JSON-RPC on its stdin and
/// stdout).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ServerConfig {
    /// The program.
    pub command: String,
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
            command: command.to_owned(),
            args: args.into_iter().map(Into::into).collect(),
            env: BTreeMap::new(),
            cwd: None,
            enabled: true,
            timeout_ms: None,
            startup_timeout_ms: None,
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
