//! `BashError`: configuration errors of this crate (a bad mode or preset name, a missing helper,
//! a workspace problem). These stop the caller; what the model sees is a `dsh_core::Failure`.

/// A configuration error of the `bash` tool, its sandbox or its presets.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BashError {
    /// A sandbox mode outside the vocabulary.
    #[error(
        "sandbox mode must be one of \"read-only\", \"workspace-write\" or \"danger-full-access\", not \"{0}\""
    )]
    UnknownMode(String),
    /// A permission preset outside the vocabulary.
    #[error(
        "permission preset must be one of \"read-only\", \"workspace-write\" or \"danger-full-access\", not \"{0}\""
    )]
    UnknownPreset(String),
    /// A bad sandbox helper command line.
    #[error("sandbox helper: {0}")]
    HelperArgs(String),
    /// The tool definition could not be built or registered.
    #[error(transparent)]
    Core(#[from] dsh_core::CoreError),
    /// An I/O failure while preparing the tool (output directory, temp dir).
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// Announcing a preset to the session log failed.
    #[error(transparent)]
    Audit(#[from] dsh_guard::GuardError),
}
