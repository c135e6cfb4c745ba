//! Tests: log.
