//! The tool's contract: output shape, exit codes, workdir confinement, no state between calls,
//! the tail cap with the full output saved, and its definition.

use super::support::*;
use serde_json::json;

#[tokio::test]
async fn stdout_is_returned_as_is() {
    let f = fixture();
    let r = f.sh("echo hello").await;
    assert!(!r.is_error(), "{r:?}");
    assert_eq!(text(&r), "hello\n");
}
