//! # dsh
//!
//! The facade of the dsh tool execution pipeline: it re-exports each layer and (with the `cli`
//! feature) ships the `dsh` command-line program.
//!
//! ## Feature flags
//!
//! - `cli` (default): the `dsh` program.

pub use dsh_core as core;
pub use dsh_session as session;
