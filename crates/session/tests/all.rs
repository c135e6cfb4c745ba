//! Integration tests of dsh-session (one binary; topics under `suite/`), each conformance test
//! named with its id.

// Tests state their expectations with `expect`: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
