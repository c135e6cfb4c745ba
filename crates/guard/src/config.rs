//! The generic loader path: one TOML text configures the built-in policies (`[permissions]`,
//! `[timeout]`, `[retry]`, `[metrics]`, `[approval]`) and [`GuardConfig::install`] registers them.
//!
//! Guarantees: everything is validated when the text is loaded (a bad rule, key or value is an
//! error naming it and its line), so installing never fails halfway; other top-level tables are
//! left to their owners.

use std::collections::BTreeMap;

use dsh_core::ToolRegistry;
use serde::Deserialize;

use crate::approval::{ApprovalConfig, ApprovalPolicy};
use crate::error::GuardError;
use crate::hookset::{HookHandle, Hooks};
use crate::metrics::Metrics;
use crate::permission::{PermissionRules, PermissionTable, line_of, toml_error};
use crate::retry::{RetryPolicy, RetryTable};
use crate::scope::Scope;
use crate::timeout::{TimeoutPolicy, budget_problem};

#[derive(Deserialize)]
struct File {
    #[serde(default)]
    permissions: Option<PermissionTable>,
    #[serde(default)]
    timeout: Option<TimeoutTable>,
    #[serde(default)]
    retry: Option<RetryTable>,
    #[serde(default)]
    metrics: Option<MetricsTable>,
    #[serde(default)]
    approval: Option<ApprovalTable>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TimeoutTable {
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default)]
    tools: BTreeMap<String, toml::Spanned<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MetricsTable {
    #[serde(default = "yes")]
    enabled: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ApprovalTable {
    #[serde(default)]
    policy: Option<toml::Spanned<String>>,
}

fn yes() -> bool {
    true
}

/// The built-in policies a configuration asks for.
///
/// ```toml
/// [permissions]
/// allow = ["read_file", "bash(git status*)"]
/// ask = ["bash(git push*)"]
/// deny = ["bash(rm -rf *)"]
/// default = "ask"
///
/// [timeout]            # on by default; budgets come from the tools unless overridden here
/// tools = { bash = 30000 }
///
/// [retry]              # off unless present
/// attempts = 3
/// base_delay_ms = 100
/// max_delay_ms = 2000
///
/// [metrics]            # off unless present
///
/// [approval]
/// policy = "ask"       # or "never"
/// ```
#[derive(Clone, Debug)]
pub struct GuardConfig {
    permissions: Option<PermissionRules>,
    timeout: Option<Vec<(String, u64)>>,
    retry: Option<RetryPolicy>,
    metrics: bool,
    approval: ApprovalConfig,
}

impl Default for GuardConfig {
    /// No permission rules, the timeout policy on with the tools' own budgets, no retry, no
    /// metrics, approval policy `ask`.
    fn default() -> Self {
        GuardConfig {
            permissions: None,
            timeout: Some(Vec::new()),
            retry: None,
            metrics: false,
            approval: ApprovalConfig::default(),
        }
    }
}

/// What [`GuardConfig::install`] registered; dropping it removes every policy it installed.
#[derive(Default)]
pub struct Installed {
    /// The registration handles, in installation order.
    pub handles: Vec<HookHandle>,
    /// The metrics store, when `[metrics]` is on.
    pub metrics: Option<Metrics>,
}

impl std::fmt::Debug for Installed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Installed")
            .field("handles", &self.handles.len())
            .field("metrics", &self.metrics.is_some())
            .finish()
    }
}

impl GuardConfig {
    /// Loads and validates a configuration from TOML text.
    pub fn from_toml(text: &str) -> Result<GuardConfig, GuardError> {
        let file: File = toml::from_str(text).map_err(|e| toml_error(text, &e))?;
        let mut config = GuardConfig::default();
        if let Some(p) = file.permissions {
            config.permissions = Some(PermissionRules::from_table(p, text, ToolRegistry::new())?);
        }
        if let Some(t) = file.timeout {
            if t.enabled {
                let mut budgets = Vec::new();
                for (name, ms) in &t.tools {
                    let line = Some(line_of(text, ms.span().start));
                    let value = u64::try_from(*ms.get_ref()).map_err(|_| {
                        GuardError::config(
                            line,
                            format!(
                                "timeout.tools.{name} must be a positive number of milliseconds"
                            ),
                        )
                    })?;
                    if let Some(problem) = budget_problem(value) {
                        return Err(GuardError::config(
                            line,
                            format!("timeout.tools.{name} {problem}"),
                        ));
                    }
                    budgets.push((name.clone(), value));
                }
                config.timeout = Some(budgets);
            } else {
                config.timeout = None;
            }
        }
        if let Some(r) = file.retry {
            config.retry = Some(RetryPolicy::from_table(r)?);
        }
        if let Some(m) = file.metrics {
            config.metrics = m.enabled;
        }
        if let Some(policy) = file.approval.and_then(|a| a.policy) {
            let parsed: ApprovalPolicy = policy.get_ref().parse().map_err(|e: GuardError| {
                GuardError::config(
                    Some(line_of(text, policy.span().start)),
                    format!("approval.policy: {e}"),
                )
            })?;
            config.approval.policy = parsed;
        }
        Ok(config)
    }

    /// The permission rules, if `[permissions]` is present (bound to an empty registry until
    /// installed).
    pub fn permissions(&self) -> Option<&PermissionRules> {
        self.permissions.as_ref()
    }

    /// The approval configuration, for the host to build its [`crate::ApprovalService`] with.
    pub fn approval(&self) -> ApprovalConfig {
        self.approval
    }

    /// The retry policy, if `[retry]` is present.
    pub fn retry(&self) -> Option<RetryPolicy> {
        self.retry
    }

    /// Registers the configured policies on `hooks`, reading tools from `registry`:
    /// the permission rules as a global pre-execute listener (after existing ones), and the
    /// wrappers so that metrics is outermost, then retry, then the timeout policy (each retry
    /// attempt gets its own budget).
    pub fn install(&self, hooks: &Hooks, registry: &ToolRegistry) -> Result<Installed, GuardError> {
        let mut installed = Installed::default();
        if let Some(p) = &self.permissions {
            let rules = p.clone().bind(registry.clone());
            installed
                .handles
                .push(hooks.on_pre_execute(Scope::Global, rules));
        }
        if let Some(budgets) = &self.timeout {
            let policy = TimeoutPolicy::new(registry.clone())
                .with_overrides(budgets.iter().map(|(n, ms)| (n.as_str(), *ms)))?;
            installed
                .handles
                .push(hooks.prepend_execute(Scope::Global, policy));
        }
        if let Some(r) = self.retry {
            installed
                .handles
                .push(hooks.prepend_execute(Scope::Global, r));
        }
        if self.metrics {
            let m = Metrics::new();
            installed.handles.push(m.install(hooks));
            installed.metrics = Some(m);
        }
        Ok(installed)
    }
}
