//! A connected MCP server and its tools as dsh tools.

use std::collections::HashSet;
use std::sync::Arc;

use dsh_core::{Failure, Json, ToolDefinition, ToolOutput};
use rmcp::model::CallToolRequestParams;
use serde_json::Value;

use crate::config::ServerConfig;
use crate::content;
use crate::error::McpError;
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

/// A running MCP server. Dropping it (and the tools made from it) closes the connection and
/// ends the process.
pub struct McpServer {
    link: Arc<Link>,
    tools: Vec<rmcp::model::Tool>,
    config: ServerConfig,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("name", self.link.name())
            .field("tools", &self.tools.len())
            .finish()
    }
}

impl McpServer {
    /// Starts the server `config` describes, completes the MCP handshake and lists its tools,
    /// all within the start-up budget.
    pub async fn connect(name: &str, config: &ServerConfig) -> Result<McpServer, McpError> {
        let (link, tools) = Link::open(name, config).await?;
        Ok(McpServer {
            link: Arc::new(link),
            tools,
            config: config.clone(),
        })
    }

    /// The server's name (as configured).
    pub fn name(&self) -> &str {
        self.link.name()
    }

    /// The server's tools as dsh tools, `mcp__<server>__<tool>`, in the order it listed them.
    pub fn tools(&self) -> Result<Vec<ToolDefinition>, McpError> {
        let mut seen = HashSet::new();
        let mut out = Vec::with_capacity(self.tools.len());
        for tool in &self.tools {
            let server = self.link.name();
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
                tool: Arc::from(tool.name.as_ref()),
                link: self.link.clone(),
            };
            let def = ToolDefinition::builder(
                &name,
                tool.description.as_deref().unwrap_or("(no description)"),
            )
            .validated_parameters(schema)
            .output(ToolOutput::content_blocks())
            .concurrency_safe(read_only)
            .timeout(self.config.call_timeout())
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
}

/// One tool of one server, as its body calls it.
#[derive(Clone)]
struct Call {
    tool: Arc<str>,
    link: Arc<Link>,
}

impl Call {
    async fn run(&self, ctx: dsh_core::ToolContext) -> Result<Json, Failure> {
        let arguments = match ctx.arguments().value() {
            Value::Object(map) => map,
            Value::Null => serde_json::Map::new(),
            other => {
                return Err(Failure::new(format!(
                    "MCP tools take an object of arguments, not {other}"
                )));
            }
        };
        let service = self.link.service().await?;
        let params = CallToolRequestParams::new(self.tool.to_string()).with_arguments(arguments);
        // Dropping the request (the pipeline cancelled or timed the call out) sends the server
        // `notifications/cancelled`.
        let result = tokio::select! {
            r = service.peer().call_tool(params) => r,
            _ = ctx.signal().aborted() => return Err(Failure::aborted()),
        };
        match result {
            Ok(result) if result.is_error == Some(true) => {
                let text = content::text(&result.content);
                Err(Failure::new(if text.is_empty() {
                    format!("MCP server `{}` reported an error", self.link.name())
                } else {
                    text
                }))
            }
            Ok(result) => Ok(Json::from_shallow(content::blocks(
                &result.content,
                result.structured_content.as_ref(),
            ))),
            Err(e) => Err(Failure::new(self.link.why(&e).await)),
        }
    }
}
