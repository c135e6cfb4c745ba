//! Tests: grd.
