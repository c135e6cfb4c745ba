//! # dsh-core
//!
//! The shared vocabulary of the dsh tool pipeline. Every other crate speaks it; it changes rarely.
//!
//! It holds: frozen lossless JSON values ([`Json`]) shared behind `Arc`; content blocks and
//! context messages in the reference shapes; [`ToolDefinition`] with its output contract and a
//! typed helper; [`ToolExecutionInput`] / [`ToolExecution`] with opaque tokens; [`ToolResult`] and
//! [`Failure`] with the error codes and exact messages ([`codes`]); the decisions hooks return;
//! the small hook traits ([`hooks`]); the cancellation [`Signal`] with [`deadline`] and
//! [`timeout_of`]; argument validation; and the [`ToolRegistry`].
//!
//! It deliberately does NOT: do I/O, spawn tasks (except the one timer a [`deadline`] arms),
//! know about sessions, logs, scheduling, approval or the filesystem.
//!
//! Spec rules owned here: S1 (argument snapshot, raw arguments), S2 (classification, fail-closed),
//! D3 (output validation and render), section 9 (error codes and messages), the deadline
//! utilities of D4, and the registry lines of the conformance checklist (REG, SCH-01..10).

pub mod codes;
pub mod content;
pub mod context;
pub mod deadline;
pub mod decision;
pub mod execution;
pub mod failure;
pub mod hooks;
pub mod json;
mod lossless;
mod name_hash;
pub mod names;
pub mod registry;
pub mod result;
pub mod signal;
pub mod subject;
pub mod tool;
pub mod typed;
pub mod validate;

pub use content::{Content, ContentBlock, text_content};
pub use context::ContextMessage;
pub use deadline::{Deadline, DeadlineError, TimeoutReason, clamp_timeout, deadline, timeout_of};
pub use decision::{PostToolDecision, PreToolDecision, Replacement};
pub use execution::{AgentId, Arguments, ExecutionToken, ToolExecution, ToolExecutionInput};
pub use failure::{ErrorInfo, Failure};
pub use hooks::{
    Dispatch, ExecuteNext, ExecuteWrapper, Guard, PostExecuteHook, PostNext, PreExecuteHook,
    PreNext, ResultObserver, Terminal,
};
pub use json::{Json, JsonError};
pub use registry::{ExecutionMode, Registration, ToolFilter, ToolRegistry, ToolSchema};
pub use result::ToolResult;
pub use signal::{AbortController, AbortReason, CancelCause, Signal};
pub use subject::PermissionSubject;
pub use tool::{BodyEffects, ToolBody, ToolContext, ToolDefinition, ToolOutput};

/// Errors of the core API (registration, restriction, configuration). These stop the caller;
/// they are never shown to the model as a tool result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoreError {
    /// A definition without an output contract.
    #[error("tool must declare output {{ schema, render, presentationMeta? }}")]
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
    /// A pool size that is not a positive integer.
    #[error("{0}")]
    Config(String),
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
