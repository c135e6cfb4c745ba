//! Failures the model sees: a message and, for typed failures, `info {name, code}` (spec section 9).
//!
//! A [`Failure`] is what a tool body, hook, wrapper or guard "throws". It is never a Rust panic and
//! never an error that stops the loop: those are each crate's own error enum.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::codes::{self, messages};

/// The typed part of a failure: `{name, code}`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ErrorInfo {
    /// The error class, e.g. `AbortError`.
    pub name: Arc<str>,
    /// The machine-readable code, e.g. `ABORTED`.
    pub code: Arc<str>,
}

/// A failure: a message, optional typed info, and whether a retry may help.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    message: Arc<str>,
    info: Option<ErrorInfo>,
    retryable: bool,
    violations: Option<Arc<[String]>>,
}

impl Failure {
    /// A plain failure (no `info`), like a thrown plain error.
    pub fn new(message: impl Into<Arc<str>>) -> Failure {
        Failure {
            message: message.into(),
            info: None,
            retryable: false,
            violations: None,
        }
    }

    /// A typed failure with an explicit error name.
    pub fn typed(name: &str, code: &str, message: impl Into<Arc<str>>) -> Failure {
        Failure {
            message: message.into(),
            info: Some(ErrorInfo {
                name: Arc::from(name),
                code: Arc::from(code),
            }),
            retryable: false,
            violations: None,
        }
    }

    /// A coded failure raised by a hook, wrapper or tool (name `HarnessError`).
    pub fn harness(code: &str, message: impl Into<Arc<str>>) -> Failure {
        Failure::typed(codes::HARNESS_ERROR, code, message)
    }

    /// Marks the failure as transient: the retry wrapper may try the call again.
    pub fn retryable(mut self) -> Failure {
        self.retryable = true;
        self
    }

    /// `unknown tool "<name>"` (`ToolNotFoundError`, `UNKNOWN_TOOL`).
    pub fn unknown_tool(name: &str) -> Failure {
        Failure::typed(
            codes::TOOL_NOT_FOUND_ERROR,
            codes::UNKNOWN_TOOL,
            messages::unknown_tool(name),
        )
    }

    /// Cancelled before the body was invoked.
    pub fn aborted_before_dispatch() -> Failure {
        Failure::typed(
            codes::ABORT_ERROR,
            codes::ABORTED_BEFORE_DISPATCH,
            messages::ABORTED_BEFORE_DISPATCH,
        )
    }

    /// Cancelled after the body was invoked.
    pub fn aborted() -> Failure {
        Failure::typed(codes::ABORT_ERROR, codes::ABORTED, messages::ABORTED)
    }

    /// The tool's deadline fired first.
    pub fn tool_timeout(ms: u64) -> Failure {
        Failure::typed(
            codes::TOOL_TIMEOUT_ERROR,
            codes::TOOL_TIMEOUT,
            messages::timed_out(ms),
        )
    }

    /// `invalid arguments: <v1>; <v2>` (`ToolArgsError`, `INVALID_ARGS`); the list is kept
    /// ([`violations`](Self::violations)).
    pub fn invalid_args(violations: &[String]) -> Failure {
        let mut f = Failure::typed(
            codes::TOOL_ARGS_ERROR,
            codes::INVALID_ARGS,
            format!("invalid arguments: {}", violations.join("; ")),
        );
        f.violations = Some(Arc::from(violations));
        f
    }

    /// The individual violations of an argument failure, in order.
    pub fn violations(&self) -> Option<&[String]> {
        self.violations.as_deref()
    }

    /// An output-contract failure for tool `name` (`ToolOutputError`, `INVALID_TOOL_OUTPUT`).
    pub fn invalid_output(name: &str, detail: impl fmt::Display) -> Failure {
        Failure::typed(
            codes::TOOL_OUTPUT_ERROR,
            codes::INVALID_TOOL_OUTPUT,
            format!("tool \"{name}\" {detail}"),
        )
    }

    /// A filesystem failure (`FsError`).
    pub fn fs(code: &str, message: impl Into<Arc<str>>) -> Failure {
        Failure::typed(codes::FS_ERROR, code, message)
    }

    /// A failure from a caught panic payload: its text if it has one, else the placeholder.
    pub fn from_panic(context: &str, payload: &(dyn std::any::Any + Send)) -> Failure {
        let text = if let Some(s) = payload.downcast_ref::<&str>() {
            Some((*s).to_owned())
        } else {
            payload.downcast_ref::<String>().cloned()
        };
        match text {
            Some(t) => Failure::new(format!("{context} panicked: {t}")),
            None => Failure::new(format!("{context} panicked: {}", messages::UNPRINTABLE)),
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The shared message.
    pub fn message_arc(&self) -> &Arc<str> {
        &self.message
    }

    /// The typed info, if any.
    pub fn info(&self) -> Option<&ErrorInfo> {
        self.info.as_ref()
    }

    /// The code, if typed.
    pub fn code(&self) -> Option<&str> {
        self.info.as_ref().map(|i| &*i.code)
    }

    /// Whether a retry may help.
    pub fn is_retryable(&self) -> bool {
        self.retryable
    }

    /// Whether this is a cancellation (`ABORTED` or `ABORTED_BEFORE_DISPATCH`).
    pub fn is_abort(&self) -> bool {
        matches!(
            self.code(),
            Some(codes::ABORTED | codes::ABORTED_BEFORE_DISPATCH)
        )
    }

    /// Appends text to the message, keeping the info (used for remedies).
    pub fn with_suffix(&self, suffix: &str) -> Failure {
        Failure {
            message: Arc::from(format!("{}{suffix}", self.message)),
            info: self.info.clone(),
            retryable: self.retryable,
            violations: self.violations.clone(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

impl Serialize for Failure {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("message", &*self.message)?;
        if let Some(info) = &self.info {
            m.serialize_entry("info", info)?;
        }
        m.end()
    }
}
