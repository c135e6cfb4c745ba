//! The dsh-code-mode integration tests: one binary, one module per topic under `suite/`, each
//! conformance test named with its CODE id.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
