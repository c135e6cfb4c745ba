//! A connected MCP server and its tools as dsh tools.

use std::collections::HashSet;
use std::sync::Arc;

use dsh_core::{Json, ToolDefinition, ToolOutput, ToolRegistry};
use serde_json::Value;

use crate::call::Call;
use crate::config::ServerConfig;
use crate::error::McpError;
use crate::hub::Progress;
use crate::link::Link;

/// The longest tool name the model APIs take.
const MAX_NAME: usize = 64;

/// `mcp__<server>__<tool>`, or why a model API would refuse it (a name outside
/// `[A-Za-z0-9_-]`, or longer than 64 characters): [`McpError::ToolName`].
pub fn tool_name(server: &str, tool: &str) -> Result<String, McpError> {
    let name = format!("mcp__{server}__{tool}");
    let refuse = |problem: String| McpError::ToolName {
        server: server.to_owned(),
        tool: tool.to_owned(),
        problem,
    };
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        return Err(refuse(format!(
            "`{name}` has {c:?}: tool names may hold only letters, digits, `_` and `-`"
        )));
    }
    if name.len() > MAX_NAME {
        return Err(refuse(format!(
            "`{name}` is {} characters long; model APIs take at most {MAX_NAME}",
            name.len()
        )));
    }
    Ok(name)
}

/// A running MCP server. Dropping it (every clone, and the tools made from it) closes the
/// connection and ends the process.
#[derive(Clone)]
pub struct McpServer {
    link: Arc<Link>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("name", self.link.name())
            .field("tools", &self.link.tools().len())
            .finish()
    }
}

impl McpServer {
    /// Starts the server `config` describes, completes the MCP handshake and lists its tools,
    /// all within the start-up budget.
    pub async fn connect(name: &str, config: &ServerConfig) -> Result<McpServer, McpError> {
        Ok(McpServer {
            link: Link::open(name, config).await?,
        })
    }

    /// Closes the connection as the MCP stdio transport asks a client to: the server's input
    /// is closed, so it reads everything sent before it (a `notifications/cancelled` for a
    /// call dsh abandoned included) and exits on its own; a server still running after
    /// `within` is ended (`SIGTERM`, then `SIGKILL`). Returns once it has ended. Its tools
    /// fail from then on; the server is not started again.
    pub async fn close(&self, within: std::time::Duration) {
        self.link.close(within).await;
    }

    /// The server's name (as configured).
    pub fn name(&self) -> &str {
        self.link.name()
    }

    /// The server's tools as dsh tools, `mcp__<server>__<tool>`, in the order it listed them
    /// last.
    pub fn tools(&self) -> Result<Vec<ToolDefinition>, McpError> {
        definitions(&self.link, &self.link.tools())
    }

    /// Registers the server's tools in `registry` as one group named after the server
    /// ([`ToolRegistry::replace_group`]), and keeps them current there: when the server's list
    /// changes (`tools/list_changed`, or a restart), its tools are replaced by the new ones,
    /// after the step that holds the registry, so a tool it no longer lists is unknown to
    /// the next step (`UNKNOWN_TOOL`).
    pub fn register(&self, registry: &ToolRegistry) -> Result<(), McpError> {
        self.link.register(registry)
    }

    /// Whether `name` (`mcp__<server>__<tool>`) is a tool of this server that it listed once
    /// and no longer lists (to say so when a call names it).
    pub fn withdrew(&self, name: &str) -> bool {
        name.strip_prefix("mcp__")
            .and_then(|rest| rest.strip_prefix(self.name()))
            .and_then(|rest| rest.strip_prefix("__"))
            .is_some_and(|tool| self.link.withdrew(tool))
    }

    /// Gives each `notifications/progress` the server sends for a running call to `observer`
    /// (replacing the one set before). Progress also restarts the call's timeout.
    pub fn on_progress(&self, observer: impl Fn(&Progress) + Send + Sync + 'static) {
        self.link.hub.set_observer(Arc::new(observer));
    }

    /// Saves the whole text of a result longer than [`crate::MAX_RESULT_TEXT_BYTES`] in `dir`
    /// (created when missing; one new file per call, readable by its owner only), and names
    /// the file in the result's note. Without it the rest of such a result is dropped, said so.
    pub fn save_long_results_in(&self, dir: impl Into<std::path::PathBuf>) {
        self.link.set_spool_dir(dir.into());
    }

    /// Calls `observer` with the server's name each time its new tool list (after
    /// `tools/list_changed` or a restart) is installed in the registry its tools were
    /// registered in (at once, or once the step holding the registry ends); it replaces the
    /// observer set before.
    pub fn on_tools_changed(&self, observer: impl Fn(&str) + Send + Sync + 'static) {
        self.link.hub.set_change_observer(Arc::new(observer));
    }
}

/// `tools` as dsh tools calling them through `link`.
pub(crate) fn definitions(
    link: &Arc<Link>,
    tools: &[rmcp::model::Tool],
) -> Result<Vec<ToolDefinition>, McpError> {
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(tools.len());
    let server = link.name();
    for tool in tools {
        let name = tool_name(server, &tool.name)?;
        if !seen.insert(name.clone()) {
            return Err(McpError::ToolName {
                server: server.to_string(),
                tool: tool.name.to_string(),
                problem: format!("listed twice as `{name}`"),
            });
        }
        let read_only = tool
            .annotations
            .as_ref()
            .and_then(|a| a.read_only_hint)
            .unwrap_or(false);
        let schema = Json::from_shallow(Value::Object((*tool.input_schema).clone()));
        let call = Call {
            name: Arc::from(name.as_str()),
            tool: Arc::from(tool.name.as_ref()),
            output_schema: tool.output_schema.clone(),
            link: link.clone(),
        };
        // No pipeline timeout: the call's own budget restarts with each progress notification.
        let def = ToolDefinition::builder(
            &name,
            tool.description.as_deref().unwrap_or("(no description)"),
        )
        .validated_parameters(schema)
        .output(ToolOutput::content_blocks())
        .concurrency_safe(read_only)
        .execute(move |ctx| {
            let call = call.clone();
            async move { call.run(ctx).await }
        })
        .build()
        .map_err(|source| McpError::Definition {
            server: server.to_string(),
            tool: tool.name.to_string(),
            source,
        })?;
        out.push(def);
    }
    Ok(out)
}
