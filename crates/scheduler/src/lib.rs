//! # dsh-scheduler
//!
//! The heart of the pipeline: the staged runtime for one call ([`Runtime`]: prepare → dispatch →
//! finalize) and the step scheduler for one assistant message's calls ([`Runtime::run_step`]),
//! plus a minimal [`TurnDriver`] for scripted models and [`SharedTurn`] for calls that arrive one
//! at a time from outside and may overlap (an MCP client's).
//!
//! One call's journey, and the file that owns each stage:
//! `runtime.rs` freezes the input into a call (token, arguments, hooks snapshot, definition) →
//! `prepare.rs` runs pre-execute, approval (`approval.rs`), guards and the cancellation check →
//! `dispatch.rs` runs the around-chain and the body with the fused signal, validating and
//! rendering the value → `finalize.rs` runs post-execute, cancellation replacement,
//! `finalize_content` and the `tools/result` observers → `step.rs` commits `tool/result`.
//!
//! It deliberately does NOT: decide policy (dsh-guard), store events (dsh-session), or know any
//! particular tool.
//!
//! Spec rules owned here: S2-S5, P1-P5 orchestration, D1-D3, D5, F1-F6, C1-C3, I1-I2; the
//! pipeline invariant checker of conformance LOG-18..20 (`invariants.rs`).
//!
//! ## Example
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use dsh_core::{Arguments, Json, ToolDefinition, ToolExecutionInput, ToolOutput, ToolRegistry};
//! use dsh_guard::Hooks;
//! use dsh_scheduler::Runtime;
//!
//! let registry = ToolRegistry::new();
//! registry.add(
//!     ToolDefinition::builder("ping", "Answers pong.")
//!         .output(ToolOutput::string())
//!         .execute(|_ctx| async { Ok(Json::string("pong")) })
//!         .build()?,
//! )?;
//! let runtime = Arc::new(Runtime::new(registry, Hooks::new()));
//! // One call through prepare, dispatch and finalize (a step: `runtime.run_step(&cx, &blocks)`).
//! let result = runtime
//!     .execute(ToolExecutionInput::new("c1", "ping", Arguments::from_raw("{}")))
//!     .await;
//! assert_eq!(result.first_text(), Some("pong"));
//! # Ok(()) }
//! ```

mod approval;
mod audit;
mod batch;
mod dispatch;
mod error;
mod finalize;
mod inbox;
pub mod invariants;
mod one_call;
#[cfg(test)]
mod one_call_tests;
mod pool;
mod prepare;
mod queued;
mod runtime;
mod shared_turn;
mod source;
mod step;
mod timing;
mod trace;
mod turn;

pub use approval::Approver;
pub use audit::{SessionAudit, audit_session};
pub use batch::{ToolCallBlock, tool_calls_of};
pub use error::SchedulerError;
pub use inbox::Inbox;
pub use invariants::{InvariantViolation, PipelineChecker, Stage, StageLog};
pub use pool::{Committed, Pool, Start};
pub use runtime::{Admission, Lookup, Runtime, RuntimeConfig};
pub use shared_turn::{SharedCall, SharedTurn};
pub use source::{Next, PreStep, Script, SourceContext, Sourced, StepInput, StepSource};
pub use step::{
    DEFAULT_MAX_PARALLEL, StepContext, StepOutcome, max_parallel_from_config, validate_max_parallel,
};
pub use timing::STEP_TIMING;
pub use turn::{TurnDriver, TurnEnd, TurnReport};
