//! One module per checklist group.

mod backstop;
mod can_loop;
mod can_registry;
mod dsp;
mod fin;
mod grd;
mod interleavings;
mod invariants;
mod log;
mod loop_tool;
mod placement;
mod props;
mod reg_prepare;
mod sch;
mod session_audit;
mod tmo_runtime;
mod tracing_spans;
