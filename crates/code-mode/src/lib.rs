//! # dsh-code-mode
//!
//! Code Mode: the reserved `run_code` tool, which runs a model-written program against one
//! global, `tools`, whose functions send each call back through the same staged pipeline as a
//! native call.
//!
//! It deliberately does NOT: schedule the model's own calls, decide policy, or store events
//! itself (the session does); and it gives programs no ambient authority at all.
//!
//! Spec rules owned here: CM1-CM6.

mod bindings;
mod engine;
mod error;
mod limits;
mod outcome;
mod runtime;

pub use bindings::{ARGS_NOT_LOSSLESS, Bindings, Host, MISSING_ARGS};
pub use engine::{QuickJs, run_quickjs};
pub use error::CodeModeError;
pub use limits::Limits;
pub use outcome::{CodeError, CodeErrorKind, CodeOutcome, CodeRun, ToolCallError};
pub use runtime::CodeRuntime;
