//! The integration tests of `dsh-model`, one binary: every adapter path against the mock
//! provider server over real HTTP on 127.0.0.1 (no network), the watchdog on tokio's paused
//! clock, and property tests of assembly.

// Tests state their expectations with `unwrap`/`expect`: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
