//! Tests: fin.
