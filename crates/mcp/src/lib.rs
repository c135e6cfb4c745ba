//! # dsh-mcp
//!
//! The tools of MCP servers as dsh tools. [`McpServer::connect`] starts a server as a child
//! process (stdio), lists its tools, and [`McpServer::tools`] gives one [`ToolDefinition`](dsh_core::ToolDefinition) per
//! tool, named `mcp__<server>__<tool>` as Claude Code names them, so permission rules (`deny =
//! ["mcp__github__*"]`), hooks, approval, guards, timeouts and the session log apply to them as
//! to any tool.
//!
//! It holds: the server table of a policy file ([`ServerConfig`]), the connection, the name
//! mapping ([`tool_name`]) and the mapping of MCP results to dsh content (text and images as
//! they are; audio and resources as text saying what they are).
//!
//! It deliberately does NOT: decide anything (the pipeline decides), retry a call (a call may
//! have had effects), or know about sessions.
//!
//! Guarantees: a tool's input schema is the tool's parameters, validated by the pipeline
//! before the server sees the call; `readOnlyHint: true` lets calls run beside others, any
//! other tool runs alone; `isError: true` is a failure with the server's text; a server that
//! dies mid-call fails the call naming the server, its exit status and its last words, and is
//! started again (with backoff, at most [`MAX_RESTARTS`] times) for the next call; a call the
//! pipeline cancels is abandoned
//! (the request is dropped, which sends `notifications/cancelled`); each call has a timeout
//! (60 s unless the server's table says otherwise).
//!
//! ## Examples
//!
//! Names, and a server that cannot start (an error naming it, nothing registered):
//!
//! ```
//! use dsh_mcp::{McpError, McpServer, ServerConfig, tool_name};
//!
//! assert_eq!(tool_name("github", "create_issue")?, "mcp__github__create_issue");
//! assert!(tool_name("my server", "x").is_err());
//!
//! let config = ServerConfig::command("/nonexistent/mcp-server", ["--stdio"]);
//! let rt = tokio::runtime::Runtime::new()?;
//! let refused = rt.block_on(McpServer::connect("gone", &config)).unwrap_err();
//! assert!(matches!(refused, McpError::Spawn { .. }), "{refused}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A real server's tools in a registry (the agent loop and the `dsh` facade do the same):
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use dsh_core::ToolRegistry;
//! use dsh_mcp::{McpServer, ServerConfig};
//!
//! let config = ServerConfig::command("npx", ["-y", "@modelcontextprotocol/server-everything"]);
//! let server = McpServer::connect("everything", &config).await?;
//! let registry = ToolRegistry::new();
//! for tool in server.tools()? {
//!     registry.add(tool)?;
//! }
//! # Ok(()) }
//! ```

mod call;
mod config;
mod content;
mod error;
mod guarded;
mod hub;
mod in_order;
mod link;
mod long;
mod server;

pub use config::ServerConfig;
pub use error::McpError;
pub use guarded::MAX_MESSAGE_BYTES;
pub use hub::Progress;
pub use link::MAX_RESTARTS;
pub use long::MAX_RESULT_TEXT_BYTES;
pub use server::{McpServer, tool_name};
