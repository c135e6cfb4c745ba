//! Tests: can_registry.
