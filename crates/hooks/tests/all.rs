//! Integration tests of dsh-hooks: real bash and python hooks written into temporary
//! workspaces, run through the staged runtime and the turn driver.

// Test helpers outside `#[test]` functions may panic on setup failures.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
