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
mod config;
mod dispatch_log;
mod engine;
mod error;
mod flavor;
mod limits;
mod outcome;
mod presentation;
mod render;
mod run_code;
mod runtime;
mod sdk;
mod subcall;

pub use bindings::{ARGS_NOT_LOSSLESS, Bindings, Host, MISSING_ARGS};
pub use config::{CodeModeConfig, DEFAULT_MAX_PARALLEL_SUB_CALLS, validate_max_parallel_sub_calls};
pub use dispatch_log::{
    AgentSessions, DISPATCH_LOG_POINT, DispatchLog, DispatchRecord, SessionFor,
};
pub use engine::{QuickJs, run_quickjs};
pub use error::CodeModeError;
pub use flavor::{DEFAULT_LANGUAGE, Flavor, KNOWN_LANGUAGES, flavor};
pub use limits::Limits;
pub use outcome::{CodeError, CodeErrorKind, CodeOutcome, CodeRun, ToolCallError};
pub use presentation::{
    Assembly, CODE_ONLY_SECTION, CodeMode, ModeDeclaration, PresentationMode, SDK_SECTION, Section,
    UNLISTED_TOOLS,
};
pub use render::{PRETTY_DEPTH, render_failure, render_output, render_result};
pub use run_code::{CallCard, NO_OUTPUT, NO_RUNTIME, code_run_failed, present_call, render_value};
pub use runtime::CodeRuntime;
pub use sdk::{MAX_TYPE_DEPTH, render_sdk};
pub use subcall::{CODE_MODE_PLUGIN, abandoned_message};
