//! Integration tests of dsh-store-postgres against a real PostgreSQL (a throwaway cluster started
//! by `dsh_test_support::postgres`; the tests fail, naming what is missing, without one).

// Tests state their expectations with `expect`: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
