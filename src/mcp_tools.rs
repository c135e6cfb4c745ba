//! The policy's `[mcp.servers.<name>]`: each server started, its tools registered as
//! `mcp__<name>__<tool>` before the rules are checked against the registry, and kept current
//! when a server's list changes (between steps: a step sees one list).
//!
//! Guarantees: the servers start together, each within its start-up budget; a server that
//! cannot start, or lists a tool dsh cannot offer, is a warning naming it and why, and the run
//! goes on without its tools (as Claude Code does), so a call to one of them is
//! `UNKNOWN_TOOL`; a server left out with `enabled = false` is not started. A call to a tool a
//! server no longer lists is `UNKNOWN_TOOL` saying so, before any rule asks about it.

use dsh_core::{Failure, PreNext, PreToolDecision, ToolExecution, ToolRegistry, codes};
use dsh_guard::{Hooks, Scope};
use dsh_mcp::McpServer;

use crate::harness::HarnessError;
use crate::policy::Policy;

/// Starts the policy's servers and registers their tools; returns the running servers and the
/// warnings for those that failed.
pub(crate) async fn connect(
    policy: &Policy,
    registry: &ToolRegistry,
    hooks: &Hooks,
) -> Result<(Vec<McpServer>, Vec<String>), HarnessError> {
    let enabled: Vec<_> = policy
        .mcp_servers
        .iter()
        .filter(|(_, config)| config.enabled)
        .collect();
    let started = futures::future::join_all(
        enabled
            .iter()
            .map(|(name, config)| McpServer::connect(name, config)),
    )
    .await;
    let mut servers = Vec::new();
    let mut warnings = Vec::new();
    for result in started {
        let server = match result {
            Ok(server) => server,
            Err(e) => {
                warnings.push(format!("{}; its tools are not available", chain(&e)));
                continue;
            }
        };
        match server.register(registry) {
            Ok(()) => servers.push(server),
            Err(e) => warnings.push(format!("{}; its tools are not available", chain(&e))),
        }
    }
    if !servers.is_empty() {
        hooks
            .on_pre_execute(
                Scope::Global,
                Withdrawn {
                    servers: servers.clone(),
                    registry: registry.clone(),
                },
            )
            .keep();
    }
    Ok((servers, warnings))
}

/// Fails a call to a tool its server no longer lists, saying so.
struct Withdrawn {
    servers: Vec<McpServer>,
    registry: ToolRegistry,
}

#[async_trait::async_trait]
impl dsh_core::PreExecuteHook for Withdrawn {
    async fn pre_execute(
        &self,
        exec: &ToolExecution,
        next: PreNext<'_>,
    ) -> Result<PreToolDecision, Failure> {
        let name = exec.name();
        if name.starts_with("mcp__")
            && self.registry.get(name, exec.agent()).is_none()
            && let Some(server) = self.servers.iter().find(|s| s.withdrew(name))
        {
            return Err(Failure::typed(
                codes::TOOL_NOT_FOUND_ERROR,
                codes::UNKNOWN_TOOL,
                format!(
                    "{}: MCP server `{}` no longer lists it (its tool list changed)",
                    codes::messages::unknown_tool(name),
                    server.name()
                ),
            ));
        }
        next.run(exec).await
    }
}

/// An error with its causes, on one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}
