//! The dsh-tool-fs integration suite: one binary, one module per topic under `suite/`, each
//! conformance test named with its FS id.

// Tests state their expectations with `unwrap`/`expect`: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
