//! The filesystem error codes this crate adds to spec section 9's (`FS_NOT_OBSERVED`,
//! `FS_NOT_FOUND`, `FS_STALE_VERSION` live in `dsh_core::codes`) and the reference's remedies.

pub use dsh_core::codes::{FS_ERROR, FS_NOT_FOUND, FS_NOT_OBSERVED, FS_STALE_VERSION};

/// The file is not UTF-8 text (binary bytes, NUL bytes or invalid UTF-8).
pub const FS_NOT_TEXT: &str = "FS_NOT_TEXT";
/// `old_string` does not occur in the file.
pub const FS_EDIT_NOT_FOUND: &str = "FS_EDIT_NOT_FOUND";
/// `old_string` occurs more than once and `replace_all` is not set.
pub const FS_AMBIGUOUS_EDIT: &str = "FS_AMBIGUOUS_EDIT";
/// An edit that cannot be applied as asked (empty `old_string`, or no change).
pub const FS_EDIT_INVALID: &str = "FS_EDIT_INVALID";
/// The path resolves outside every workspace root.
pub const FS_OUTSIDE_WORKSPACE: &str = "FS_OUTSIDE_WORKSPACE";
/// The path is malformed (empty, NUL bytes, a symlink loop).
pub const FS_INVALID_PATH: &str = "FS_INVALID_PATH";
/// A directory (or other non-regular file) where a regular file is expected, or the reverse.
pub const FS_NOT_A_FILE: &str = "FS_NOT_A_FILE";
/// The file is larger than this crate reads into memory.
pub const FS_TOO_LARGE: &str = "FS_TOO_LARGE";
/// A `read` offset past the end of the file.
pub const FS_INVALID_RANGE: &str = "FS_INVALID_RANGE";
/// A glob or regular expression that does not compile.
pub const FS_INVALID_PATTERN: &str = "FS_INVALID_PATTERN";
/// Any other I/O failure (permission denied, disk full, ...), with the system's message.
pub const FS_IO: &str = "FS_IO";

/// Appended to `FS_STALE_VERSION` messages (the separator is an em dash).
pub const STALE_REMEDY: &str = " — re-read the file, then retry";
/// Appended to `FS_NOT_OBSERVED` messages (the separator is an em dash).
pub const NOT_OBSERVED_REMEDY: &str = " — read the file, then retry";
