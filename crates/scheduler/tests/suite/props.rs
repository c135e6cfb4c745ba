//! Tests: props.
