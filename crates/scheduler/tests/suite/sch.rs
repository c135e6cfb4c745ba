//! Tests: sch.
