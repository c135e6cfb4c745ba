//! The dsh-code-mode integration tests: one binary, one module per topic under `suite/`.

mod suite;
