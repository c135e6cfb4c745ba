//! `CoreError`: the errors of the core API.

use crate::deadline::DeadlineError;
use crate::json::JsonError;
use crate::validate;

/// Errors of the core API (registration, restriction, configuration). These stop the caller;
/// they are never shown to the model as a tool result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CoreError {
    /// A definition without an output contract.
    #[error(
        "tool must declare output {{ schema, render, presentationMeta? }}: call `.output(ToolOutput::string())` (or `ToolOutput::json()`, or your own `ToolOutput`) on the `ToolDefinition::builder` before `.build()`"
    )]
    MissingOutput,
    /// A definition without a body.
    #[error("tool must declare an execute body")]
    MissingBody,
    /// A non-positive or non-finite budget.
    #[error("timeoutMs must be a positive finite number")]
    Timeout,
    /// An empty tool name.
    #[error("tool name must be non-empty")]
    EmptyName,
    /// A global duplicate.
    #[error(
        "tool \"{0}\" is already registered; register per-agent variants through agent.ctx (register_scoped)"
    )]
    AlreadyRegistered(String),
    /// A duplicate within one scope.
    #[error("tool \"{0}\" is already registered in this scope")]
    AlreadyRegisteredInScope(String),
    /// The reserved `run_code` name.
    #[error("tool name \"{0}\" is reserved for the Code Mode presentation transport")]
    Reserved(String),
    /// `restrict` without an agent.
    #[error("restrict requires a scoped context")]
    RestrictNeedsScope,
    /// An empty filter.
    #[error("restriction is a no-op: it names no tools")]
    RestrictNoOp,
    /// A filter naming `run_code`.
    #[error("restriction cannot name reserved Code Mode presentation transport \"{0}\"")]
    RestrictReserved(String),
    /// A filter naming tools the scope does not inherit.
    #[error("{0}")]
    RestrictUnknown(String),
    /// Invalid JSON.
    #[error(transparent)]
    Json(#[from] JsonError),
    /// A bad budget.
    #[error(transparent)]
    Deadline(#[from] DeadlineError),
    /// Parameters that are not lossless JSON (a NaN or infinite number), naming the tool.
    #[error("tool \"{0}\" parameters must be lossless JSON before schema projection")]
    LossyParameters(String),
    /// A validated parameter schema or an output schema with an authoring error.
    #[error("tool \"{tool}\" {part} schema is invalid: {error}")]
    InvalidSchema {
        /// The tool's name.
        tool: String,
        /// `parameters` or `output`.
        part: &'static str,
        /// The authoring error.
        error: validate::SchemaError,
    },
}
