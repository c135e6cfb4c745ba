//! Tests: interleavings.
