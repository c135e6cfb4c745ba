//! Tests: tmo_runtime.
