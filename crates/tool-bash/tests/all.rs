//! Integration tests of dsh-tool-bash: one binary, one module per topic under `suite/`. The
//! sandbox helper they run is this crate's own `dsh-tool-bash-helper`.

// Tests state their expectations with `unwrap`: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
