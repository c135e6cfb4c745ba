//! Integration tests of dsh-session (one binary; topics under `suite/`).

mod suite;
