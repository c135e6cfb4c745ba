//! # dsh-code-mode
//!
//! Code Mode: the reserved `run_code` tool. The model writes a small program; the program calls
//! tools through one global, `tools`; every such call is sent back through the SAME staged
//! pipeline as a native call (policy, approval, guards, wrappers, post-execute, observers), as
//! a sub-call `<parent>:code:<n>` recorded in the session as `tool/code-dispatch-start` and
//! `tool/code-dispatch`.
//!
//! What it holds:
//! - the code runtime seam ([`CodeRuntime`], [`CodeRun`] → [`CodeOutcome`]; a failure is a
//!   field, never a panic) and its embedded implementation [`QuickJs`]: one QuickJS interpreter
//!   per run on its own thread, with memory, stack, wall-time (waiting on tools included),
//!   output, tool-call and program-size [`Limits`], and no ambient authority;
//! - the [`Bindings`] a program sees and the [`Host`] that answers them;
//! - sub-dispatch: a per-run coordinator (polled by the interpreter's thread itself, so a
//!   sub-call that completes at once never changes threads) that classifies each call right
//!   before it starts,
//!   runs prepare and finalize one call at a time in submission order, overlaps only bodies in
//!   a pool of `max_parallel_sub_calls`, treats exclusive calls as barriers held through
//!   commit, records each sub-call, defers its contexts and images onto the outer result, and
//!   at the run's end abandons queued calls and awaits started ones;
//! - presentation ([`CodeMode`], [`PresentationMode`]): `native`, `code` or `both` per agent
//!   scope, the generated SDK ([`render_sdk`]), and the admission check that refuses hidden
//!   direct calls before any policy;
//! - rendering of `{logs, result?}` and of `CODE_RUN_FAILED` failures, capped like `bash`
//!   output (30,000 bytes shown, the whole text saved in a private file the note names).
//!
//! It deliberately does NOT: schedule the model's own calls (dsh-scheduler does, and knows
//! nothing about Code Mode beyond an opaque admission check), decide policy (dsh-guard), store
//! events (dsh-session stores what it is given), or assemble the system prompt (it returns the
//! tools and sections; the host places them). Programs get no filesystem, network, clock,
//! environment, process, timers or modules: only `tools`, `console` and `ToolCallError`.
//!
//! Spec rules owned here: CM1-CM6. Conformance: CODE-01..82 (except the prompt-assembly hooks
//! of CODE-06/07, which belong to a prompt builder), SCH-27.
//!
//! ## Example
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use dsh_code_mode::{CodeMode, CodeModeConfig, PresentationMode, QuickJs};
//! use dsh_core::ToolRegistry;
//!
//! let registry = ToolRegistry::new();
//! let code = CodeMode::new(&registry, CodeModeConfig {
//!     mode: PresentationMode::Code,
//!     runtime: Some(Arc::new(QuickJs::new())),
//!     ..CodeModeConfig::default()
//! })?;
//! // The model is offered `run_code` alone.
//! assert_eq!(code.assemble(None)?.tool_names(), ["run_code"]);
//! # Ok(()) }
//! ```
//!
//! ## Mounting with a runtime
//!
//! ```ignore
//! use std::sync::Arc;
//! use dsh_code_mode::{AgentSessions, CodeMode, CodeModeConfig, PresentationMode, QuickJs};
//!
//! let sessions = AgentSessions::new();            // agent -> the session its turn writes to
//! let code = CodeMode::new(&registry, CodeModeConfig {
//!     mode: PresentationMode::Code,
//!     runtime: Some(Arc::new(QuickJs::new())),
//!     sessions: Some(Arc::new(sessions.clone())),
//!     ..CodeModeConfig::default()
//! })?;                                            // registers the reserved run_code
//! let runtime = Runtime::new(registry, hooks)     // dsh_scheduler::Runtime
//!     .with_admission(code.admission());          // hidden direct calls: UNKNOWN_TOOL
//! code.bind(&runtime)?;                           // sub-calls run through this runtime
//! sessions.insert(agent.clone(), session.clone());
//! let assembly = code.assemble(agent.as_ref())?;  // tools + `tools:code-only` / `tools:sdk`
//! ```
//!
//! Dropping the last [`CodeMode`] handle (or [`CodeMode::unmount`]) removes `run_code`.

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
mod shown;
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
pub use run_code::{
    CallCard, NO_OUTPUT, NO_RUNTIME, code_run_failed, present_call, render_value,
    render_value_shown,
};
pub use runtime::CodeRuntime;
pub use sdk::{MAX_TYPE_DEPTH, render_sdk};
pub use shown::{DEFAULT_MAX_SHOWN_BYTES, ShownOutput, shown_failure, shown_success};
pub use subcall::{CODE_MODE_PLUGIN, abandoned_message};
