//! `GuardError`: the errors of this crate's own API (configuration, audit, approval plumbing).
//! They stop the caller; the model never sees them directly (denials are `dsh_core::Failure`s).

use dsh_core::{AgentId, DeadlineError};

/// An error of the hook and guard service.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GuardError {
    /// An approval was requested while the session has no open turn (APR-09, APR-10).
    #[error(
        "approval.request() outside an open turn: the approval/asked + approval/decided audit pair must be turn-enclosed; ask from inside the turn that needs the decision"
    )]
    OutsideOpenTurn,
    /// The audit log could not be written; the event was not committed (APR-16).
    #[error("{message}")]
    Audit {
        /// What failed.
        message: String,
        /// The store's own error, when the sink gave one.
        #[source]
        cause: Option<AuditCause>,
    },
    /// No session is attached for the agent that asked.
    #[error("no approval audit session is attached for agent \"{0}\"")]
    NoSession(AgentId),
    /// An approval policy outside the vocabulary (APR-30).
    #[error("approval policy must be one of \"ask\" or \"never\"")]
    InvalidPolicy(String),
    /// An approval outcome outside the vocabulary, decoded from external input.
    #[error(
        "unreachable approval outcome \"{0}\": must be one of allowed-once, rejected, cancelled, unavailable"
    )]
    UnknownOutcome(String),
    /// A permission action outside the vocabulary (`allow`, `ask`, `deny`).
    #[error("\"{0}\" is not a permission action; use \"allow\", \"ask\" or \"deny\"")]
    UnknownAction(String),
    /// An answerer failed; the question fails closed as `unavailable`.
    #[error("approval answerer failed: {0}")]
    Answerer(String),
    /// A permission rule that does not parse.
    #[error("invalid permission rule \"{rule}\" in {origin}: {reason}")]
    PermissionRule {
        /// The rule text.
        rule: String,
        /// Where it came from, e.g. `permissions.deny (line 4)` or `deny`.
        origin: String,
        /// What is wrong.
        reason: String,
    },
    /// A configuration file that does not parse or holds a bad value.
    #[error("invalid guard configuration{}: {message}", line.map(|l| format!(" at line {l}")).unwrap_or_default())]
    Config {
        /// The 1-based line, when known.
        line: Option<usize>,
        /// What is wrong, naming the key.
        message: String,
    },
    /// A bad time budget.
    #[error(transparent)]
    Deadline(#[from] DeadlineError),
}

/// The error an audit sink's store reported, kept as the source of [`GuardError::Audit`]
/// (errors are compared by their text).
#[derive(Debug, Clone)]
pub struct AuditCause(pub std::sync::Arc<dyn std::error::Error + Send + Sync>);

impl std::fmt::Display for AuditCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for AuditCause {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl PartialEq for AuditCause {
    fn eq(&self, other: &AuditCause) -> bool {
        self.0.to_string() == other.0.to_string()
    }
}

impl Eq for AuditCause {}

impl GuardError {
    /// An audit failure with a message (what an [`crate::AuditSink`] returns when it could not
    /// commit an event).
    pub fn audit(message: impl std::fmt::Display) -> GuardError {
        GuardError::Audit {
            message: message.to_string(),
            cause: None,
        }
    }
    /// An audit failure caused by the store's own error, kept as the source.
    pub fn audit_caused(cause: impl std::error::Error + Send + Sync + 'static) -> GuardError {
        GuardError::Audit {
            message: cause.to_string(),
            cause: Some(AuditCause(std::sync::Arc::new(cause))),
        }
    }
    /// An answerer failure with a message.
    pub fn answerer(message: impl std::fmt::Display) -> GuardError {
        GuardError::Answerer(message.to_string())
    }
    /// A configuration error, optionally at a 1-based line.
    pub fn config(line: Option<usize>, message: impl std::fmt::Display) -> GuardError {
        GuardError::Config {
            line,
            message: message.to_string(),
        }
    }
}
