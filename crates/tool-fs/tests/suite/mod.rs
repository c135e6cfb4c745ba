//! Topics of the dsh-tool-fs suite, named for the conformance groups they cover.
//!
//! Not covered here: FS-26 (a tool plugin with no provider stays pending: impossible, `FsTools`
//! needs a `Workspace`), FS-28 (TS-only; its Rust analogue is in `tools_unit`), FS-36..39
//! (escalation asks through the pipeline's approval: tested end to end in the facade's
//! `tests/suite/fs_escalation.rs`). `through_scheduler` runs the tools end to end through the step
//! scheduler and a session log (issue 5, item 4); elsewhere every tool is run the way the registry
//! runs it (argument check, body, render and meta) with the real seam and policy.

mod atomic;
mod bad_input;
mod common;
mod concurrency;
mod escape;
mod image_read;
mod local;
mod permission_subjects;
mod policy;
mod props;
mod read_format;
mod remedy;
mod replay;
mod search;
mod stream_read;
mod through_scheduler;
mod tools_unit;
