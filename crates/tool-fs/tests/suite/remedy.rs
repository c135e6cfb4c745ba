//! FS-73..76: the model-facing remedies.

use dsh_core::Failure;
use dsh_tool_fs::apply_remedy;
use dsh_tool_fs::codes::{FS_EDIT_NOT_FOUND, FS_NOT_OBSERVED, FS_STALE_VERSION};

#[test]
fn fs_73_stale_version_gets_the_reread_remedy() {
    let f = Failure::fs(FS_STALE_VERSION, "file changed since it was read");
    let r = apply_remedy(&f);
    assert_eq!(
        r.message(),
        "file changed since it was read — re-read the file, then retry"
    );
    assert_eq!(r.code(), Some(FS_STALE_VERSION));
    assert_eq!(r.info().map(|i| &*i.name), Some("FsError"));
    // Applying it twice does not repeat the suffix.
    assert_eq!(apply_remedy(&r), r);
}

#[test]
fn fs_74_not_observed_gets_the_read_remedy() {
    let r = apply_remedy(&Failure::fs(
        FS_NOT_OBSERVED,
        "edit requires reading \"/a\" first",
    ));
    assert_eq!(
        r.message(),
        "edit requires reading \"/a\" first — read the file, then retry"
    );
    assert_eq!(r.code(), Some(FS_NOT_OBSERVED));
}

#[test]
fn fs_75_other_filesystem_codes_are_returned_as_is() {
    let f = Failure::fs(FS_EDIT_NOT_FOUND, "old_string was not found");
    assert_eq!(apply_remedy(&f), f);
}

#[test]
fn fs_76_non_filesystem_errors_are_returned_as_is() {
    let plain = Failure::new("boom");
    assert_eq!(apply_remedy(&plain), plain);
    let other = Failure::harness(FS_STALE_VERSION, "same code, other error name");
    assert_eq!(apply_remedy(&other), other);
}
