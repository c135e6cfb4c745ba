//! Integration tests of the `dsh` program: they drive the real binary (`CARGO_BIN_EXE_dsh`) and
//! read back what it printed and the logs it wrote.

// Tests state their expectations with `unwrap`: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
