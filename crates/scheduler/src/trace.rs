//! Tracing: one `debug` span per stage of every call (`prepare`, `approval`, `guards`,
//! `dispatch`, `post_execute`, `finalize`), per step and per turn, with the call id, the tool and
//! the outcome as fields. With no subscriber installed a span costs a callsite check.
//! `RUST_LOG=dsh=debug dsh run ...` (the binary's subscriber) shows them.

use dsh_core::{ToolExecution, ToolResult};

/// The span of one stage of one call.
pub(crate) fn stage(name: &'static str, exec: &ToolExecution) -> tracing::Span {
    match name {
        "prepare" => tracing::debug_span!("prepare", call_id = exec.call_id(), tool = exec.name()),
        "approval" => {
            tracing::debug_span!("approval", call_id = exec.call_id(), tool = exec.name())
        }
        "guards" => tracing::debug_span!("guards", call_id = exec.call_id(), tool = exec.name()),
        "dispatch" => {
            tracing::debug_span!("dispatch", call_id = exec.call_id(), tool = exec.name())
        }
        "post_execute" => {
            tracing::debug_span!("post_execute", call_id = exec.call_id(), tool = exec.name())
        }
        _ => tracing::debug_span!(
            "finalize",
            call_id = exec.call_id(),
            tool = exec.name(),
            outcome = tracing::field::Empty
        ),
    }
}

/// Records a call's outcome on its finalize span: `ok`, or the failure's code.
pub(crate) fn outcome(span: &tracing::Span, result: &ToolResult) {
    if span.is_disabled() {
        return;
    }
    match result.error() {
        None => span.record("outcome", "ok"),
        Some(f) => span.record("outcome", f.code().unwrap_or("error")),
    };
    let _entered = span.enter();
    tracing::debug!(is_error = result.is_error(), "result final");
}
