//! Topics: the tool's basics, containment under each mode, process control, the sandbox policy
//! and escalation, presets, the helper's command line, and rendering properties.

mod basics;
mod containment;
mod processes;
mod support;
