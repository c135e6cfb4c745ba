//! The model-facing remedies (conformance FS-73..76): a stale-version or not-observed filesystem
//! failure gets the reference's suffix; every other failure is returned as it is.

use dsh_core::Failure;

use crate::codes::{
    FS_ERROR, FS_NOT_OBSERVED, FS_STALE_VERSION, NOT_OBSERVED_REMEDY, STALE_REMEDY,
};

/// Appends the remedy a filesystem failure calls for: ` — re-read the file, then retry` to
/// `FS_STALE_VERSION`, ` — read the file, then retry` to `FS_NOT_OBSERVED`. The code is kept.
/// Other filesystem codes and failures that are not filesystem failures come back unchanged, and
/// a message that already ends with its remedy is not suffixed twice.
pub fn apply_remedy(failure: &Failure) -> Failure {
    let Some(info) = failure.info() else {
        return failure.clone();
    };
    if &*info.name != FS_ERROR {
        return failure.clone();
    }
    let suffix = match &*info.code {
        FS_STALE_VERSION => STALE_REMEDY,
        FS_NOT_OBSERVED => NOT_OBSERVED_REMEDY,
        _ => return failure.clone(),
    };
    if failure.message().ends_with(suffix) {
        return failure.clone();
    }
    failure.with_suffix(suffix)
}
