//! Integration tests of dsh-tool-bash: one binary, one module per topic under `suite/`.

mod suite;
