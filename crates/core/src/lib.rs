//! # dsh-core
//!
//! The shared vocabulary of the dsh tool pipeline. Every other crate speaks it; it changes rarely.
//!
//! It holds: frozen lossless JSON values ([`Json`]) shared behind `Arc`; content blocks and
//! context messages in the reference shapes; [`ToolDefinition`] with its output contract and a
//! typed helper; [`ToolExecutionInput`] / [`ToolExecution`] with opaque tokens; [`ToolResult`] and
//! [`Failure`] with the error codes and exact messages ([`codes`]); the decisions hooks return;
//! the small hook traits ([`PreExecuteHook`], [`Guard`], [`ExecuteWrapper`], ...); the cancellation [`Signal`] with [`deadline()`] and
//! [`timeout_of`]; argument validation; and the [`ToolRegistry`].
//!
//! It deliberately does NOT: do I/O, spawn tasks (except the one timer a [`deadline()`] arms),
//! know about sessions, logs, scheduling, approval or the filesystem.
//!
//! Spec rules owned here: S1 (argument snapshot, raw arguments), S2 (classification, fail-closed),
//! D3 (output validation and render), section 9 (error codes and messages), the deadline
//! utilities of D4, and the registry lines of the conformance checklist (REG, SCH-01..10).
//!
//! ## Example
//!
//! A tool with a typed input, registered for good, and what a model would be offered:
//!
//! ```
//! use dsh_core::{ToolDefinition, ToolOutput, ToolRegistry};
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Input {
//!     /// The text to shout.
//!     text: String,
//! }
//!
//! let shout = ToolDefinition::builder("shout", "Upper-cases the text.")
//!     .output(ToolOutput::string())
//!     .execute_typed(|input: Input, _ctx| async move { Ok(input.text.to_uppercase()) })
//!     .build()?;
//! let registry = ToolRegistry::new();
//! registry.add(shout)?;
//! let schemas = registry.schemas(None);
//! assert_eq!(&*schemas[0].name, "shout");
//! assert_eq!(schemas[0].parameters.value()["required"], serde_json::json!(["text"]));
//! # Ok::<(), dsh_core::CoreError>(())
//! ```
//!
//! Running a call is the scheduler's job (`dsh-scheduler`'s `Runtime::execute`).

// The public modules are namespaces a user names (`codes::TOOL_ERROR`, `json::MAX_DEPTH`); every
// other module is private and its public items are re-exported below, chosen one by one.
pub mod codes;
pub mod contained;
mod content;
pub mod context;
mod deadline;
mod decision;
mod error;
mod execution;
mod failure;
mod hook_fn;
mod hooks;
pub mod json;
mod lossless;
mod name_hash;
pub mod names;
mod registry;
mod result;
mod signal;
mod subject;
mod tool;
pub mod typed;
pub mod validate;

pub use content::{Content, ContentBlock, summarize, text_content};
pub use context::ContextMessage;
pub use deadline::{
    Deadline, DeadlineError, MAX_TIMEOUT_MS, TimeoutReason, clamp_timeout, deadline,
    reason_timeout, timeout_of,
};
pub use decision::{PostToolDecision, PreToolDecision, Replacement};
pub use error::CoreError;
pub use execution::{AgentId, Arguments, ExecutionToken, ToolExecution, ToolExecutionInput};
pub use failure::{ErrorInfo, Failure};
pub use hook_fn::{PreExecuteObserver, post_execute_fn, pre_execute_fn};
pub use hooks::{
    Dispatch, ExecuteNext, ExecuteWrapper, Guard, PostExecuteHook, PostNext, PreExecuteHook,
    PreNext, ResultObserver, Terminal,
};
pub use json::{Json, JsonError};
pub use registry::{
    ExecutionMode, RUN_CODE, Registration, RegistryHold, ToolFilter, ToolRegistry, ToolSchema,
};
pub use result::ToolResult;
pub use signal::{AbortController, AbortReason, CancelCause, Signal};
pub use subject::PermissionSubject;
pub use tool::{
    BodyEffects, PRETTY_MAX_DEPTH, ToolBody, ToolBuilder, ToolContext, ToolDefinition, ToolOutput,
    render_value_text,
};
