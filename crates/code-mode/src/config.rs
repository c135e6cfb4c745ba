//! Code Mode's configuration, with safe defaults: native presentation, no runtime, the default
//! [`Limits`], a pool of 10 sub-calls, no session, 30,000 bytes of output shown.

use std::fmt;
use std::sync::Arc;

use crate::dispatch_log::{DispatchLog, SessionFor};
use crate::error::CodeModeError;
use crate::limits::Limits;
use crate::presentation::PresentationMode;
use crate::runtime::CodeRuntime;
use crate::shown::ShownOutput;

/// The default pool of concurrent sub-calls per run (spec CM1).
pub const DEFAULT_MAX_PARALLEL_SUB_CALLS: usize = 10;

/// How Code Mode is set up for one pipeline.
#[derive(Clone)]
pub struct CodeModeConfig {
    /// The deployment's presentation mode; agents may declare their own.
    pub mode: PresentationMode,
    /// The interpreter; `None` leaves `run_code` failing with *requires a code runtime*.
    pub runtime: Option<Arc<dyn CodeRuntime>>,
    /// The bounds of every run.
    pub limits: Limits,
    /// Sub-calls of one run whose bodies may run at once (`maxParallelSubCalls`, default 10).
    pub max_parallel_sub_calls: usize,
    /// The session each run's `tool/code-dispatch*` records go to.
    pub sessions: Option<Arc<dyn SessionFor>>,
    /// The `tools/code-dispatch-log` waterfall (register listeners on it at any time).
    pub dispatch_log: DispatchLog,
    /// The order tools are presented in: names, and `<unlisted-tools>` for every tool the list
    /// does not name, in registration order. `None`: registration order, `run_code` last.
    pub tool_order: Option<Vec<String>>,
    /// How much of a run's output the model sees (30,000 bytes by default, the tail kept) and
    /// where the whole output is saved when it is longer.
    pub shown: ShownOutput,
}

impl fmt::Debug for CodeModeConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CodeModeConfig")
            .field("mode", &self.mode)
            .field(
                "language",
                &self.runtime.as_ref().map(|r| r.language().to_owned()),
            )
            .field("limits", &self.limits)
            .field("max_parallel_sub_calls", &self.max_parallel_sub_calls)
            .field("tool_order", &self.tool_order)
            .field("shown", &self.shown)
            .finish_non_exhaustive()
    }
}

impl Default for CodeModeConfig {
    fn default() -> Self {
        CodeModeConfig {
            mode: PresentationMode::Native,
            runtime: None,
            limits: Limits::default(),
            max_parallel_sub_calls: DEFAULT_MAX_PARALLEL_SUB_CALLS,
            sessions: None,
            dispatch_log: DispatchLog::new(),
            tool_order: None,
            shown: ShownOutput::default(),
        }
    }
}

impl CodeModeConfig {
    /// Checks every setting (`maxParallelSubCalls must be a positive integer`, the limits).
    pub fn validate(&self) -> Result<(), CodeModeError> {
        validate_max_parallel_sub_calls(self.max_parallel_sub_calls)?;
        if self.shown.max_bytes == 0 {
            return Err(CodeModeError::InvalidSetting {
                setting: "maxShownBytes",
                requirement: "a positive integer",
            });
        }
        self.limits.validate()
    }
}

/// Validates a pool size: zero is refused (`maxParallelSubCalls must be a positive integer`).
pub fn validate_max_parallel_sub_calls(n: usize) -> Result<usize, CodeModeError> {
    if n >= 1 {
        Ok(n)
    } else {
        Err(CodeModeError::InvalidSetting {
            setting: "maxParallelSubCalls",
            requirement: "a positive integer",
        })
    }
}
