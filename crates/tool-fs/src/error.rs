//! `FsError`, the one error type of the filesystem seam: every variant names the path it is about
//! and maps to a typed model-facing [`Failure`] (`FsError` / `FS_*`) with the reference's remedy.

use std::sync::Arc;

use dsh_core::Failure;

use crate::codes;
use crate::remedy::apply_remedy;

/// A failure of the filesystem seam. Every variant carries the (display) path it concerns; the
/// message is what the model reads, [`FsError::to_failure`] adds the code and the remedy.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FsError {
    /// The path resolves outside every workspace root.
    #[error("path \"{path}\" is outside the workspace roots ({roots}): {reason}")]
    Outside {
        /// The path as given.
        path: Arc<str>,
        /// The roots, comma-separated.
        roots: Arc<str>,
        /// What led out (`..`, an absolute path, a symlink to ...).
        reason: Arc<str>,
    },
    /// The path is malformed (empty, contains NUL, loops).
    #[error("invalid path \"{path}\": {reason}")]
    InvalidPath {
        /// The path as given (NUL bytes shown escaped).
        path: Arc<str>,
        /// Why.
        reason: Arc<str>,
    },
    /// The file does not exist.
    #[error("cannot {op} \"{path}\": not found")]
    NotFound {
        /// The operation (`read`, `edit`, ...).
        op: &'static str,
        /// The resolved path.
        path: Arc<str>,
    },
    /// A directory or special file where a regular file is expected.
    #[error("cannot {op} \"{path}\": {what}")]
    NotAFile {
        /// The operation.
        op: &'static str,
        /// The resolved path.
        path: Arc<str>,
        /// What it is instead (`it is a directory`, ...).
        what: Arc<str>,
    },
    /// Binary or non-UTF-8 content.
    #[error("cannot {op} \"{path}\": it is not a UTF-8 text file ({why})")]
    NotText {
        /// The operation.
        op: &'static str,
        /// The resolved path.
        path: Arc<str>,
        /// Why (`it contains NUL bytes`, `invalid UTF-8 at byte 12`).
        why: Arc<str>,
    },
    /// Too large to read into memory.
    #[error("cannot {op} \"{path}\": the file is {size} bytes, more than the {limit}-byte limit")]
    TooLarge {
        /// The operation.
        op: &'static str,
        /// The resolved path.
        path: Arc<str>,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The compare-and-set basis no longer holds (`FS_STALE_VERSION`).
    #[error("cannot {op} \"{path}\": file changed since it was read{detail}")]
    Stale {
        /// The operation.
        op: &'static str,
        /// The resolved path.
        path: Arc<str>,
        /// Extra detail (` (it no longer exists)`), possibly empty.
        detail: Arc<str>,
    },
    /// A create-if-absent write found an existing file (`FS_NOT_OBSERVED`).
    #[error("refusing to overwrite \"{path}\" without reading it first")]
    NotObserved {
        /// The resolved path.
        path: Arc<str>,
    },
    /// `old_string` does not occur.
    #[error(
        "old_string was not found in \"{path}\"; it must match the file exactly, including whitespace and indentation"
    )]
    EditNotFound {
        /// The resolved path.
        path: Arc<str>,
    },
    /// `old_string` occurs more than once.
    #[error(
        "old_string occurs {count} times in \"{path}\"; include more surrounding text to make it unique, or set replace_all to true"
    )]
    AmbiguousEdit {
        /// The resolved path.
        path: Arc<str>,
        /// How many times.
        count: usize,
    },
    /// An edit that cannot be applied as asked.
    #[error("cannot edit \"{path}\": {reason}")]
    EditInvalid {
        /// The resolved path.
        path: Arc<str>,
        /// Why.
        reason: Arc<str>,
    },
    /// A `read` offset past the end.
    #[error("offset {offset} is past the end of \"{path}\" ({total} lines)")]
    InvalidRange {
        /// The resolved path.
        path: Arc<str>,
        /// The requested 1-based offset.
        offset: u64,
        /// The file's line count.
        total: usize,
    },
    /// A glob or regex that does not compile.
    #[error("invalid {kind} \"{pattern}\": {reason}")]
    InvalidPattern {
        /// `glob` or `regular expression`.
        kind: &'static str,
        /// The pattern.
        pattern: Arc<str>,
        /// The compiler's message.
        reason: Arc<str>,
    },
    /// Any other I/O failure.
    #[error("cannot {op} \"{path}\": {message}")]
    Io {
        /// The operation.
        op: &'static str,
        /// The resolved path.
        path: Arc<str>,
        /// The system's message.
        message: Arc<str>,
    },
    /// The operation was cancelled.
    #[error("tool call aborted")]
    Aborted,
    /// A workspace built with no root.
    #[error("workspace configuration: at least one root is required")]
    NoRoots,
    /// A workspace root that cannot be opened (missing, unreadable).
    #[error("workspace configuration: root \"{root}\": {message}")]
    RootUnreadable {
        /// The root as given.
        root: Arc<str>,
        /// The system's message.
        message: Arc<str>,
    },
    /// A workspace root that is not a directory.
    #[error("workspace configuration: root \"{root}\" is not a directory")]
    RootNotADirectory {
        /// The root as given.
        root: Arc<str>,
    },
}

impl FsError {
    /// The machine-readable code of this error.
    pub fn code(&self) -> &'static str {
        match self {
            FsError::Outside { .. } => codes::FS_OUTSIDE_WORKSPACE,
            FsError::InvalidPath { .. } => codes::FS_INVALID_PATH,
            FsError::NotFound { .. } => codes::FS_NOT_FOUND,
            FsError::NotAFile { .. } => codes::FS_NOT_A_FILE,
            FsError::NotText { .. } => codes::FS_NOT_TEXT,
            FsError::TooLarge { .. } => codes::FS_TOO_LARGE,
            FsError::Stale { .. } => codes::FS_STALE_VERSION,
            FsError::NotObserved { .. } => codes::FS_NOT_OBSERVED,
            FsError::EditNotFound { .. } => codes::FS_EDIT_NOT_FOUND,
            FsError::AmbiguousEdit { .. } => codes::FS_AMBIGUOUS_EDIT,
            FsError::EditInvalid { .. } => codes::FS_EDIT_INVALID,
            FsError::InvalidRange { .. } => codes::FS_INVALID_RANGE,
            FsError::InvalidPattern { .. } => codes::FS_INVALID_PATTERN,
            FsError::Io { .. }
            | FsError::NoRoots
            | FsError::RootUnreadable { .. }
            | FsError::RootNotADirectory { .. } => codes::FS_IO,
            FsError::Aborted => dsh_core::codes::ABORTED,
        }
    }

    /// Whether this is a stale compare-and-set basis.
    pub fn is_stale(&self) -> bool {
        matches!(self, FsError::Stale { .. })
    }

    /// Whether the path was refused for leaving the workspace.
    pub fn is_outside(&self) -> bool {
        matches!(self, FsError::Outside { .. })
    }

    /// The model-facing failure: `FsError` with this error's code and the reference's remedy
    /// (a cancellation becomes the registry's `ABORTED`).
    pub fn to_failure(&self) -> Failure {
        if matches!(self, FsError::Aborted) {
            return Failure::aborted();
        }
        apply_remedy(&Failure::fs(self.code(), self.to_string()))
    }

    pub(crate) fn io(op: &'static str, path: &str, e: &std::io::Error) -> FsError {
        if e.kind() == std::io::ErrorKind::NotFound {
            return FsError::NotFound {
                op,
                path: Arc::from(path),
            };
        }
        FsError::Io {
            op,
            path: Arc::from(path),
            message: Arc::from(e.to_string()),
        }
    }
}

impl From<FsError> for Failure {
    fn from(e: FsError) -> Failure {
        e.to_failure()
    }
}
