//! The crate's error type: configuration and mounting errors that stop the host. A failed
//! program is never one of these; it is a [`crate::CodeOutcome`] with an error field, and the
//! model sees it as a `CODE_RUN_FAILED` result.

/// Errors of Code Mode configuration, mounting and presentation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CodeModeError {
    /// A bad setting: `maxParallelSubCalls must be a positive integer`, `memoryBytes must be at
    /// least 1 MiB`...
    #[error("{setting} must be {requirement}")]
    InvalidSetting {
        /// The setting's name, as the configuration spells it.
        setting: &'static str,
        /// What it must be.
        requirement: &'static str,
    },
    /// Code Mode bound to a second runtime.
    #[error("Code Mode is already bound to a runtime")]
    AlreadyBound,
    /// A mode that needs a runtime, without one (`mode "code" requires a code runtime`).
    #[error("mode \"{0}\" requires a code runtime")]
    NoRuntime(&'static str),
    /// No SDK renderer for the runtime's language.
    #[error("no SDK renderer registered for runtime language \"{0}\"")]
    NoSdkRenderer(String),
    /// No `run_code` schema flavor for the runtime's language.
    #[error(
        "no run_code schema flavor registered for runtime language \"{language}\" (known: {known})"
    )]
    NoFlavor {
        /// The language asked for.
        language: String,
        /// The registered languages, quoted and comma-separated.
        known: String,
    },
    /// A presentation mode declared outside any agent scope.
    #[error("declaring a presentation mode requires a scoped context")]
    NeedsScope,
    /// A second presentation mode for the same agent.
    #[error(
        "presentation mode \"{new}\" for agent \"{agent}\" conflicts with \"{existing}\" already declared"
    )]
    ModeConflict {
        /// The agent.
        agent: String,
        /// The mode already declared.
        existing: &'static str,
        /// The mode that was refused.
        new: &'static str,
    },
    /// The configured tool order names a tool that is not presented.
    #[error("toolOrder lists unregistered tool \"{0}\"")]
    OrderUnknown(String),
    /// The registry refused the registration.
    #[error(transparent)]
    Registry(#[from] dsh_core::CoreError),
}
