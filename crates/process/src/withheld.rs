//! The environment variables of dsh itself that no process it starts for a model or a
//! configuration (a `bash` command, a hook, an MCP server) inherits: `DSH_STORE` names the
//! session store and may hold its password, which a command's output would otherwise carry into
//! the log and to the model.

/// Variables removed from the environment of every process dsh starts for a tool, a hook or an
/// MCP server. A configuration that sets one explicitly for a server (`env` of an MCP server)
/// still gets it: the removal is of what is inherited.
pub const WITHHELD_ENV: &[&str] = &["DSH_STORE"];
