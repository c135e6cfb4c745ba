//! Failures of the scheduler itself (never a tool's failure, which is a result).

/// Failures of the scheduler itself (never a tool's failure, which is a result).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SchedulerError {
    /// The session log could not be written.
    #[error("session log: {0}")]
    Session(#[from] dsh_session::SessionError),
    /// A pool size that is not a positive integer (`maxParallelToolCalls must be a positive
    /// integer`).
    #[error("{0}")]
    MaxParallel(&'static str),
    /// A broken invariant of the scheduler itself: a bug, reported rather than hidden.
    #[error("scheduler invariant broken: {0}")]
    Internal(&'static str),
}
