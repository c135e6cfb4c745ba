//! Failures of the agent loop itself (a model's failure ends a turn with reason `error`; it is
//! not one of these).

/// Failures of the agent loop itself.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The agent was disposed: it takes no more work.
    #[error("the agent was disposed")]
    Disposed,
    /// The session log could not be written; the work was not queued.
    #[error("session log: {0}")]
    Session(#[from] dsh_session::SessionError),
    /// The turn driver failed (the turn ended with reason `error`).
    #[error(transparent)]
    Scheduler(#[from] dsh_scheduler::SchedulerError),
    /// The configured tool order names a tool that is not registered (REG-84).
    #[error("the configured tool order names `{0}`, which is not registered")]
    UnknownToolInOrder(String),
}
