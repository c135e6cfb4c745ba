//! Errors that stop the caller (the log cannot be read, written or trusted) and the checker's
//! problems. None of these is ever shown to the model as a tool result.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// One problem the checker found, with its 1-based file line (spec L4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line of the file (the header is line 1).
    pub line: usize,
    /// What is wrong.
    pub message: String,
    /// Whether the problem is a call left unanswered at the end of the log: what a crash leaves
    /// (`dsh repair` closes it), and what a session still being written shows while its calls
    /// run.
    pub in_flight: bool,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// A line that is not an event: not JSON, not an object with a string `type`, nested too
/// deep; the message says which.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LineError(pub String);

/// An append rejected by the append-time invariant checks (approval audit, code dispatch).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvariantViolation(pub String);

/// Errors of the session log.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// A file operation failed.
    #[error("cannot {op} session log {path}: {source}")]
    Io {
        /// What was being done (`open`, `read`, `lock`, `write`, `sync`, `repair`).
        op: &'static str,
        /// The log file.
        path: PathBuf,
        /// The cause.
        source: Arc<std::io::Error>,
    },
    /// Another session (in this or another process) has the file open for writing.
    #[error("session log {path} is already open for writing by another session (its lock is held)")]
    Locked {
        /// The log file.
        path: PathBuf,
    },
    /// A line that cannot be read; the log is not changed.
    #[error("session log line {line}: {message}")]
    Corrupt {
        /// 1-based file line.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The header names a format version this crate does not know.
    #[error(
        "session log line 1: unknown session log version {version} (this reader knows version 0)"
    )]
    UnknownVersion {
        /// The version as written.
        version: String,
    },
    /// The log reads, but breaks the pairing rules (spec I1, L4); it is not changed.
    #[error("session log is not well formed ({} problem(s)); first: {}", .problems.len(), first(.problems))]
    Invalid {
        /// Every problem, with its line.
        problems: Vec<Problem>,
    },
    /// An event the log cannot hold (a chunk run without entries, data nested too deep).
    #[error("invalid event: {0}")]
    InvalidEvent(String),
    /// Rejected by the append-time invariant checks; nothing was appended.
    #[error(transparent)]
    Invariant(#[from] InvariantViolation),
    /// Writing or syncing a group of appends failed; none of that group was acknowledged.
    #[error("session log write failed, the append was not acknowledged: {0}")]
    Write(Arc<std::io::Error>),
    /// An earlier write failed, so the session accepts no more appends (acknowledged events stay
    /// on disk; reopen the file to continue).
    #[error("session log is unusable after an earlier write failure: {0}")]
    Poisoned(String),
    /// The session was closed.
    #[error("session is closed")]
    Closed,
}

fn first(problems: &[Problem]) -> String {
    problems
        .first()
        .map(ToString::to_string)
        .unwrap_or_default()
}

impl SessionError {
    pub(crate) fn io(op: &'static str, path: &std::path::Path, source: std::io::Error) -> Self {
        SessionError::Io {
            op,
            path: path.to_path_buf(),
            source: Arc::new(source),
        }
    }

    /// Whether the error is the lock held by another session.
    pub fn is_locked(&self) -> bool {
        matches!(self, SessionError::Locked { .. })
    }

    /// The 1-based line the error is about, when it is about one.
    pub fn line(&self) -> Option<usize> {
        match self {
            SessionError::Corrupt { line, .. } => Some(*line),
            SessionError::UnknownVersion { .. } => Some(1),
            SessionError::Invalid { problems } => problems.first().map(|p| p.line),
            _ => None,
        }
    }
}
