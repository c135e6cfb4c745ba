//! Tests: can_loop.
