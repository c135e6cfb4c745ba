//! A connected MCP server and its tools as dsh tools.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use dsh_core::{Failure, Json, ToolDefinition, ToolOutput};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransport, StreamableHttpClientTransportConfig,
};
use serde_json::Value;
use tokio::io::AsyncBufReadExt;

use crate::config::ServerConfig;
use crate::content;
use crate::error::McpError;

/// At most this many of a server's last stderr lines are kept, to say why it failed.
const STDERR_LINES: usize = 20;

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

/// A running MCP server. Dropping it closes the connection and ends the process.
pub struct McpServer {
    name: Arc<str>,
    service: Arc<RunningService<RoleClient, ()>>,
    tools: Vec<rmcp::model::Tool>,
    config: ServerConfig,
    stderr: Arc<Mutex<VecDeque<String>>>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("name", &self.name)
            .field("tools", &self.tools.len())
            .finish()
    }
}

impl McpServer {
    /// Starts the server `config` describes, completes the MCP handshake and lists its tools,
    /// all within the start-up budget.
    pub async fn connect(name: &str, config: &ServerConfig) -> Result<McpServer, McpError> {
        config.check(name)?;
        let lines = Arc::new(Mutex::new(VecDeque::new()));
        let transport = match (&config.command, &config.url) {
            (Some(command), _) => Transport::Stdio(spawn(name, command, config, &lines)?),
            (None, Some(url)) => Transport::Http(http(name, url, config)?),
            (None, None) => {
                return Err(McpError::Config {
                    server: name.to_owned(),
                    problem: "no `command` and no `url`".to_owned(),
                });
            }
        };
        let budget = config.startup_timeout();
        let started = tokio::time::timeout(budget, async {
            let handshake = |e: &dyn std::fmt::Display| McpError::Handshake {
                server: name.to_owned(),
                detail: e.to_string(),
            };
            let service = match transport {
                Transport::Stdio(t) => ().serve(t).await.map_err(|e| handshake(&e))?,
                Transport::Http(t) => ().serve(t).await.map_err(|e| handshake(&e))?,
            };
            let tools = service
                .peer()
                .list_all_tools()
                .await
                .map_err(|source| McpError::List {
                    server: name.to_owned(),
                    source: Box::new(source),
                })?;
            Ok::<_, McpError>((service, tools))
        })
        .await;
        let (service, tools) = match started {
            Ok(Ok(ok)) => ok,
            Ok(Err(McpError::Handshake { server, detail })) => {
                // The server's own last words say more than the protocol error.
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                let said = last_lines(&lines);
                return Err(McpError::Handshake {
                    server,
                    detail: if said.is_empty() {
                        detail
                    } else {
                        format!("{detail}; it said: {said}")
                    },
                });
            }
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                return Err(McpError::Timeout {
                    server: name.to_owned(),
                    after: budget,
                });
            }
        };
        Ok(McpServer {
            name: Arc::from(name),
            service: Arc::new(service),
            tools,
            config: config.clone(),
            stderr: lines,
        })
    }

    /// The server's name (as configured).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The server's tools as dsh tools, `mcp__<server>__<tool>`, in the order it listed them.
    pub fn tools(&self) -> Result<Vec<ToolDefinition>, McpError> {
        let mut seen = HashSet::new();
        let mut out = Vec::with_capacity(self.tools.len());
        for tool in &self.tools {
            let name = tool_name(&self.name, &tool.name)?;
            if !seen.insert(name.clone()) {
                return Err(McpError::ToolName {
                    server: self.name.to_string(),
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
                server: self.name.clone(),
                tool: Arc::from(tool.name.as_ref()),
                service: self.service.clone(),
                stderr: self.stderr.clone(),
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
                server: self.name.to_string(),
                tool: tool.name.to_string(),
                source,
            })?;
            out.push(def);
        }
        Ok(out)
    }
}

/// How the client reaches a server.
enum Transport {
    Stdio(TokioChildProcess),
    Http(StreamableHttpClientTransport<reqwest::Client>),
}

/// Starts `command`, its stderr's last lines kept in `lines`.
fn spawn(
    name: &str,
    command: &str,
    config: &ServerConfig,
    lines: &Arc<Mutex<VecDeque<String>>>,
) -> Result<TokioChildProcess, McpError> {
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(&config.args).envs(&config.env);
    if let Some(cwd) = &config.cwd {
        cmd.current_dir(cwd);
    }
    let (transport, stderr) = TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|source| McpError::Spawn {
            server: name.to_owned(),
            command: command.to_owned(),
            source,
        })?;
    if let Some(stderr) = stderr {
        let keep = lines.clone();
        let server = name.to_owned();
        tokio::spawn(async move {
            let mut reader = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                tracing::debug!(server = %server, "MCP server stderr: {line}");
                if let Ok(mut kept) = keep.lock() {
                    if kept.len() == STDERR_LINES {
                        kept.pop_front();
                    }
                    kept.push_back(line);
                }
            }
        });
    }
    Ok(transport)
}

/// The streamable HTTP transport to `url`, with the table's headers and bearer token.
fn http(
    name: &str,
    url: &str,
    config: &ServerConfig,
) -> Result<StreamableHttpClientTransport<reqwest::Client>, McpError> {
    let bad = |problem: String| McpError::Config {
        server: name.to_owned(),
        problem,
    };
    let mut headers = std::collections::HashMap::new();
    for (k, v) in &config.headers {
        let key = reqwest::header::HeaderName::try_from(k.as_str())
            .map_err(|e| bad(format!("header `{k}`: {e}")))?;
        let value = reqwest::header::HeaderValue::try_from(v.as_str())
            .map_err(|e| bad(format!("header `{k}`: {e}")))?;
        headers.insert(key, value);
    }
    let mut transport = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers);
    if let Some(env) = &config.bearer_token_env {
        let token = std::env::var(env)
            .ok()
            .filter(|t| !t.trim().is_empty())
            .ok_or_else(|| bad(format!("`bearer_token_env` names {env}, which is not set")))?;
        transport = transport.auth_header(token);
    }
    Ok(StreamableHttpClientTransport::from_config(transport))
}

/// One tool of one server, as its body calls it.
#[derive(Clone)]
struct Call {
    server: Arc<str>,
    tool: Arc<str>,
    service: Arc<RunningService<RoleClient, ()>>,
    stderr: Arc<Mutex<VecDeque<String>>>,
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
        let params = CallToolRequestParams::new(self.tool.to_string()).with_arguments(arguments);
        // Dropping the request (the pipeline cancelled or timed the call out) sends the server
        // `notifications/cancelled`.
        let result = tokio::select! {
            r = self.service.peer().call_tool(params) => r,
            _ = ctx.signal().aborted() => return Err(Failure::aborted()),
        };
        match result {
            Ok(result) if result.is_error == Some(true) => {
                let text = content::text(&result.content);
                Err(Failure::new(if text.is_empty() {
                    format!("MCP server `{}` reported an error", self.server)
                } else {
                    text
                }))
            }
            Ok(result) => Ok(Json::from_shallow(content::blocks(
                &result.content,
                result.structured_content.as_ref(),
            ))),
            Err(e) => {
                let said = last_lines(&self.stderr);
                let tail = if said.is_empty() {
                    String::new()
                } else {
                    format!("; it said: {said}")
                };
                Err(Failure::new(format!(
                    "MCP server `{}` failed the call: {e}{tail}",
                    self.server
                )))
            }
        }
    }
}

fn last_lines(lines: &Mutex<VecDeque<String>>) -> String {
    lines
        .lock()
        .map(|l| {
            l.iter()
                .rev()
                .take(3)
                .rev()
                .cloned()
                .collect::<Vec<_>>()
                .join(" | ")
        })
        .unwrap_or_default()
}
