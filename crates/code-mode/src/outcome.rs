//! What one program run is given and what it gives back: [`CodeRun`] in, [`CodeOutcome`] out.
//! A failure is a field of the outcome ([`CodeError`]), never a panic and never a Rust `Err`.

use std::fmt;

use dsh_core::{Json, Signal};

use crate::bindings::Bindings;
use crate::limits::Limits;

/// One program to run: its source, the `tools` bindings it may call, the signal that cancels it,
/// and the limits it runs under.
pub struct CodeRun {
    /// The program: the body of an async function (top-level `await` and `return`).
    pub program: String,
    /// The `tools` global: one async function per name, each answered by the host.
    pub bindings: Bindings,
    /// Fires when the run must stop (the outer call was cancelled or timed out).
    pub signal: Signal,
    /// Resource limits.
    pub limits: Limits,
}

/// Why a run failed. The wire names (`exception`, `timeout`, ...) appear in the model-facing
/// message `code run failed (<kind>): ...`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CodeErrorKind {
    /// The program threw (or could not be compiled, or broke a non-resource limit).
    Exception,
    /// The wall-clock budget ran out (CPU-bound or waiting on tools).
    Timeout,
    /// The run's signal fired.
    Abort,
    /// The returned value is not lossless JSON.
    InvalidOutput,
    /// Logs and result together exceeded the output cap.
    OutputLimit,
    /// The program exhausted its memory limit.
    Memory,
}

impl CodeErrorKind {
    /// The reference's kind string: `exception`, `timeout`, `abort`, `invalid-output`,
    /// `output-limit` or `memory`.
    pub fn as_str(&self) -> &'static str {
        match self {
            CodeErrorKind::Exception => "exception",
            CodeErrorKind::Timeout => "timeout",
            CodeErrorKind::Abort => "abort",
            CodeErrorKind::InvalidOutput => "invalid-output",
            CodeErrorKind::OutputLimit => "output-limit",
            CodeErrorKind::Memory => "memory",
        }
    }
}

impl fmt::Display for CodeErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed run: its kind and a message for the model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeError {
    /// What went wrong.
    pub kind: CodeErrorKind,
    /// A message for the model (names the limit when a limit was hit).
    pub message: String,
}

impl CodeError {
    /// A failure of `kind` with `message`.
    pub fn new(kind: CodeErrorKind, message: impl Into<String>) -> CodeError {
        CodeError {
            kind,
            message: message.into(),
        }
    }
}

/// What a run gave back: the returned value (absent for `undefined`), the captured console
/// output (one entry per console call), and the failure, if any.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CodeOutcome {
    /// The returned value as lossless JSON; `None` when the program returned `undefined` or
    /// failed.
    pub value: Option<Json>,
    /// Console output captured before the run ended, in order.
    pub logs: Vec<String>,
    /// The failure, if the run failed.
    pub error: Option<CodeError>,
}

impl CodeOutcome {
    /// A successful outcome.
    pub fn success(value: Option<Json>, logs: Vec<String>) -> CodeOutcome {
        CodeOutcome {
            value,
            logs,
            error: None,
        }
    }

    /// A failed outcome keeping the logs captured so far.
    pub fn failure(kind: CodeErrorKind, message: impl Into<String>, logs: Vec<String>) -> Self {
        CodeOutcome {
            value: None,
            logs,
            error: Some(CodeError::new(kind, message)),
        }
    }
}

/// A binding call's rejection, as the program sees it: a `ToolCallError` whose `toolName` is the
/// tool and whose `message` is the reason (no `Error:` prefix).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolCallError {
    /// The tool the program called.
    pub tool_name: String,
    /// Why the call failed.
    pub message: String,
}

impl ToolCallError {
    /// A rejection of a call to `tool_name`.
    pub fn new(tool_name: impl Into<String>, message: impl Into<String>) -> ToolCallError {
        ToolCallError {
            tool_name: tool_name.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ToolCallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}
