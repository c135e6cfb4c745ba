//! Tests: loop_tool.
