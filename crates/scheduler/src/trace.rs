//! Tracing: one `debug` span per call (`execute_tool`, with the OpenTelemetry GenAI attributes:
//! `gen_ai.operation.name`, `gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.tool.type`, and
//! `error.type` with an error status when the call failed), one per stage of every call, inside
//! its call's span (`prepare`, `approval`, `guards`, `dispatch`, `post_execute`, `finalize`),
//! and per step and per turn, with the call id, the tool and the outcome as fields. With no
//! subscriber installed a span costs a callsite check. `RUST_LOG=dsh=debug dsh run ...` (the
//! binary's subscriber) shows them; the binary's OpenTelemetry layer exports them.

use dsh_core::{ToolExecution, ToolResult};

/// Awaits a future inside `span`: instrumented when the span is enabled, awaited as it is
/// otherwise (no subscriber, or none that wants it), so that the hot path does not move each
/// stage's future into a wrapper it would not use. Evaluates the future expression once.
macro_rules! in_span {
    ($span:expr, $future:expr) => {{
        let span: tracing::Span = $span;
        if span.is_disabled() {
            $future.await
        } else {
            tracing::Instrument::instrument($future, span).await
        }
    }};
}
pub(crate) use in_span;

/// Boxes a future to run inside `span` (a body that may move to a task): instrumented only when
/// the span is enabled, like [`in_span!`].
pub(crate) fn boxed_in_span<F>(
    span: tracing::Span,
    future: F,
) -> futures::future::BoxFuture<'static, F::Output>
where
    F: std::future::Future + Send + 'static,
{
    if span.is_disabled() {
        Box::pin(future)
    } else {
        Box::pin(tracing::Instrument::instrument(future, span))
    }
}

use crate::runtime::Call;

/// The span of one call, from its creation to its commit: `execute_tool <tool>`, as the
/// OpenTelemetry GenAI conventions name it (its `otel.name`).
pub(crate) fn call(exec: &ToolExecution) -> tracing::Span {
    tracing::debug_span!(
        "execute_tool",
        otel.name = %format_args!("execute_tool {}", exec.name()),
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = exec.name(),
        gen_ai.tool.call.id = exec.call_id(),
        gen_ai.tool.type = "function",
        error.type = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    )
}

/// The span of one stage of one call, inside the call's span.
pub(crate) fn stage(name: &'static str, call: &Call) -> tracing::Span {
    let exec = &call.exec;
    let parent = &call.span;
    match name {
        "prepare" => tracing::debug_span!(
            parent: parent, "prepare", call_id = exec.call_id(), tool = exec.name()
        ),
        "approval" => tracing::debug_span!(
            parent: parent, "approval", call_id = exec.call_id(), tool = exec.name()
        ),
        "guards" => tracing::debug_span!(
            parent: parent, "guards", call_id = exec.call_id(), tool = exec.name()
        ),
        "dispatch" => tracing::debug_span!(
            parent: parent, "dispatch", call_id = exec.call_id(), tool = exec.name()
        ),
        "post_execute" => tracing::debug_span!(
            parent: parent, "post_execute", call_id = exec.call_id(), tool = exec.name()
        ),
        _ => tracing::debug_span!(
            parent: parent,
            "finalize",
            call_id = exec.call_id(),
            tool = exec.name(),
            outcome = tracing::field::Empty
        ),
    }
}

/// Records a call's outcome on its finalize span (`ok`, or the failure's code) and, for a
/// failure, on its call's span (`error.type`, error status).
pub(crate) fn outcome(span: &tracing::Span, call: &Call, result: &ToolResult) {
    if span.is_disabled() {
        return;
    }
    match result.error() {
        None => span.record("outcome", "ok"),
        Some(f) => {
            // `_OTHER` is the conventions' value when an error has no type of its own (a tool's
            // own failure carries no code).
            call.span.record("error.type", f.code().unwrap_or("_OTHER"));
            call.span.record("otel.status_code", "ERROR");
            span.record("outcome", f.code().unwrap_or("error"))
        }
    };
    let _entered = span.enter();
    tracing::debug!(is_error = result.is_error(), "result final");
}
