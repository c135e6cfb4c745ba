//! One module per checklist group.

mod backstop;
mod can_loop;
mod can_registry;
mod commit_overlap;
mod dsp_results;
mod dsp_wrappers;
mod fin_contexts;
mod fin_decisions;
mod grd;
mod group_durability;
mod interleavings;
mod invariants;
mod log;
mod loop_tool;
mod placement;
mod props;
mod reg_prepare;
mod sch_barriers;
mod sch_pool;
mod sch_stages;
mod session_audit;
mod step_source;
mod step_timing;
mod support;
mod tmo_runtime;
mod tracing_spans;
