//! # dsh-guard
//!
//! The policy half of the pipeline: the hook points with their ordering rules, deny-only guards,
//! the approval seam, permission rules, and the built-in dispatch wrappers (timeout, retry,
//! metrics).
//!
//! It deliberately does NOT: schedule calls, run tool bodies, write tool events, or know about
//! the filesystem tools or Code Mode (they use its generic waterfalls).
//!
//! Spec rules owned here: P1 (pre-execute waterfall ordering and scoping), P2 (approval, fail
//! closed), P3 (guards), D1 (around-chain registration), D4 (timeout policy), F1/F4 registration of
//! post-execute listeners and result observers, FS1's intent waterfalls as generic
//! [`waterfall::Waterfall`]s.

mod guards;
pub mod hookset;
pub mod scope;
pub mod waterfall;

pub use hookset::{CallHooks, HookHandle, Hooks};
pub use scope::Scope;
pub use waterfall::{DecideNext, Waterfall, WaterfallHandle};
