//! The dsh-guard integration suite: one binary, one module per topic under `suite/`.

// Tests state their expectations with `unwrap`/`expect`: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
