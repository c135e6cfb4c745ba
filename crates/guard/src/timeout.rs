//! The timeout policy (spec D4; conformance TMO-01..12): a `tools/execute` wrapper that arms the
//! tool's budget as a deadline on the body's signal and reports `TOOL_TIMEOUT` when that deadline
//! is what fired.
//!
//! Guarantees: a tool without a budget is delegated to untouched (the body sees the caller's own
//! signal); the body is always awaited, never abandoned; the first abort cause wins (a timeout
//! is never reported when the caller's abort came first, and a timeout is never replaced by a
//! later caller abort).

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use dsh_core::MAX_TIMEOUT_MS;
use dsh_core::codes;
use dsh_core::{
    AgentId, Dispatch, ExecuteNext, ExecuteWrapper, Failure, ToolRegistry, ToolResult, deadline,
    timeout_of,
};

use crate::error::GuardError;
use crate::hookset::{HookHandle, Hooks};
use crate::scope::Scope;

/// What a built-in wrapper is, for loaders and diagnostics: its name and the services it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PluginDescriptor {
    /// The plugin name, e.g. `timeout-policy`.
    pub name: &'static str,
    /// The services it depends on, e.g. `tools` (the tool registry).
    pub requires: &'static [&'static str],
}

/// The timeout policy wrapper.
///
/// For each call it takes the budget from the per-tool override if configured, else the tool's
/// declared `timeout_ms` (looked up by name for the calling agent). With no budget it calls
/// `next` with the dispatch unchanged. Otherwise it derives
/// `deadline(Some(installed signal), ms, "TOOL_TIMEOUT")`, installs it for the body with
/// [`Dispatch::with_signal`], awaits `next`, and if that deadline fired (classified with
/// `timeout_of(.., Some("TOOL_TIMEOUT"))`, so an outer deadline reads as upstream cancellation)
/// it returns `TOOL_TIMEOUT` whatever the body returned. If the caller's abort came first it
/// returns what `next` returned; the runtime turns a success into `ABORTED`. A failure of a
/// wrapper further in is passed on unchanged.
#[derive(Clone)]
pub struct TimeoutPolicy {
    registry: ToolRegistry,
    overrides: Arc<HashMap<Arc<str>, u64>>,
}

impl std::fmt::Debug for TimeoutPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimeoutPolicy")
            .field("overrides", &self.overrides)
            .finish_non_exhaustive()
    }
}

impl TimeoutPolicy {
    /// The plugin name.
    pub const NAME: &'static str = "timeout-policy";
    /// The code this policy owns, both as the deadline's classification code and as the error
    /// code of the result it substitutes.
    pub const CODE: &'static str = codes::TOOL_TIMEOUT;
    /// The plugin descriptor: `timeout-policy`, depending on the tool registry (`tools`).
    pub const DESCRIPTOR: PluginDescriptor = PluginDescriptor {
        name: TimeoutPolicy::NAME,
        requires: &["tools"],
    };

    /// A policy reading budgets from `registry`, with no overrides.
    pub fn new(registry: ToolRegistry) -> TimeoutPolicy {
        TimeoutPolicy {
            registry,
            overrides: Arc::new(HashMap::new()),
        }
    }

    /// Overrides the budget of the tool `name` (whether or not it declares one). The budget must
    /// be positive and at most [`MAX_TIMEOUT_MS`].
    pub fn with_override(mut self, name: &str, ms: u64) -> Result<Self, GuardError> {
        check_budget(name, ms)?;
        Arc::make_mut(&mut self.overrides).insert(Arc::from(name), ms);
        Ok(self)
    }

    /// Overrides several budgets at once (a configuration map name -> ms).
    pub fn with_overrides<'a>(
        mut self,
        overrides: impl IntoIterator<Item = (&'a str, u64)>,
    ) -> Result<Self, GuardError> {
        for (name, ms) in overrides {
            self = self.with_override(name, ms)?;
        }
        Ok(self)
    }

    /// The budget a call of `name` by `agent` runs under, if any.
    pub fn budget_for(&self, name: &str, agent: Option<&AgentId>) -> Option<u64> {
        if let Some(ms) = self.overrides.get(name) {
            return Some(*ms);
        }
        self.registry.get(name, agent)?.timeout_ms()
    }

    /// Registers the policy as a global `tools/execute` wrapper, inside the existing ones.
    pub fn install(self, hooks: &Hooks) -> HookHandle {
        hooks.on_execute(Scope::Global, self)
    }
}

pub(crate) fn check_budget(name: &str, ms: u64) -> Result<(), GuardError> {
    match budget_problem(ms) {
        None => Ok(()),
        Some(p) => Err(GuardError::config(
            None,
            format!("timeout for tool \"{name}\" {p}"),
        )),
    }
}

/// What is wrong with a budget, if anything.
pub(crate) fn budget_problem(ms: u64) -> Option<String> {
    (ms == 0 || ms > MAX_TIMEOUT_MS).then(|| {
        format!("must be a positive number of milliseconds no greater than {MAX_TIMEOUT_MS}")
    })
}

#[async_trait]
impl ExecuteWrapper for TimeoutPolicy {
    async fn around(&self, call: Dispatch, next: ExecuteNext<'_>) -> Result<ToolResult, Failure> {
        let exec = call.exec().clone();
        let Some(ms) = self.budget_for(exec.name(), exec.agent()) else {
            return next.run(call).await;
        };
        let timer = match deadline(Some(call.signal()), ms as i64, TimeoutPolicy::CODE) {
            Ok(d) => d,
            Err(e) => {
                // Budgets are checked on the way in; a missing runtime is the only way here.
                tracing::warn!(tool = exec.name(), error = %e, "timeout policy could not arm its deadline");
                return next.run(call).await;
            }
        };
        let inner = call.with_signal(timer.signal().clone());
        let result = next.run(inner).await?;
        if timeout_of(timer.signal(), Some(TimeoutPolicy::CODE)).is_some() {
            tracing::debug!(
                tool = exec.name(),
                call_id = exec.call_id(),
                timeout_ms = ms,
                "tool call timed out"
            );
            return Ok(ToolResult::failure(Failure::tool_timeout(ms)));
        }
        Ok(result)
    }
}
