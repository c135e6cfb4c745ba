//! Topics: the tool's basics, containment under each mode, process control, the sandbox policy
//! and escalation, presets, the helper's command line.

mod basics;
mod containment;
mod helper_args;
mod policy;
mod presets;
mod processes;
mod supervisor;
mod support;
mod unavailable;
