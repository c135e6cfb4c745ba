//! Tests: reg_prepare.
