//! `HooksError`: why a settings file could not be loaded. These stop the host at startup; the
//! model never sees them (a hook that fails while a call runs is a hook error, see `outcome.rs`).

use std::path::PathBuf;

/// A settings file that could not be read or does not describe valid hooks.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HooksError {
    /// The file could not be read (for the explicit file, including "not found").
    #[error("cannot read hook settings {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not JSON.
    #[error("hook settings {path} is not valid JSON: {message}")]
    Json {
        /// The file.
        path: PathBuf,
        /// The parser's description, with its position.
        message: String,
    },
    /// The JSON does not have the settings shape (the message names the offending key).
    #[error("hook settings {path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong and where, e.g. `hooks.PreToolUse[0].matcher: ...`.
        message: String,
    },
}

impl HooksError {
    pub(crate) fn invalid(path: &std::path::Path, message: impl Into<String>) -> HooksError {
        HooksError::Invalid {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }

    /// The file the error is about.
    pub fn path(&self) -> &std::path::Path {
        match self {
            HooksError::Read { path, .. }
            | HooksError::Json { path, .. }
            | HooksError::Invalid { path, .. } => path,
        }
    }
}
