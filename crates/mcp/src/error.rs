//! What can go wrong before a server's tools are registered.

/// Starting a server or listing its tools failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The server's table cannot work as written.
    #[error("MCP server `{server}`: {problem}")]
    Config {
        /// The server's name.
        server: String,
        /// What is wrong.
        problem: String,
    },
    /// The program could not be started.
    #[error("MCP server `{server}`: cannot start `{command}`")]
    Spawn {
        /// The server's name.
        server: String,
        /// The program.
        command: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The server started but the MCP handshake failed (it exited, or spoke something else).
    #[error("MCP server `{server}` did not complete the MCP handshake: {detail}")]
    Handshake {
        /// The server's name.
        server: String,
        /// What the client saw.
        detail: String,
    },
    /// The server did not answer in time.
    #[error("MCP server `{server}` did not start within {after:?}{}", said_suffix(.said))]
    Timeout {
        /// The server's name.
        server: String,
        /// The budget.
        after: std::time::Duration,
        /// Its last lines on stderr, on one line (empty when it said nothing).
        said: String,
    },
    /// Listing its tools failed.
    #[error("MCP server `{server}`: listing its tools failed")]
    List {
        /// The server's name.
        server: String,
        /// Why.
        #[source]
        source: Box<rmcp::ServiceError>,
    },
    /// A tool's name, made into `mcp__<server>__<tool>`, is not one a model API takes, or two
    /// tools end up with the same name.
    #[error("MCP server `{server}`: tool `{tool}`: {problem}")]
    ToolName {
        /// The server's name.
        server: String,
        /// The tool's own name.
        tool: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A tool definition was refused by the registry's checks.
    #[error("MCP server `{server}`: tool `{tool}`")]
    Definition {
        /// The server's name.
        server: String,
        /// The tool's name.
        tool: String,
        /// Why.
        #[source]
        source: dsh_core::CoreError,
    },
    /// The registry refused the server's tools (a name another tool already has).
    #[error("MCP server `{server}`: its tools cannot be registered")]
    Register {
        /// The server's name.
        server: String,
        /// Why.
        #[source]
        source: dsh_core::CoreError,
    },
}

/// `; it said: ...`, or nothing when the server said nothing.
fn said_suffix(said: &str) -> String {
    if said.is_empty() {
        String::new()
    } else {
        format!("; it said: {said}")
    }
}
