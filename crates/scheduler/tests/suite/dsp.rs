//! Tests: dsp.
