//! Dispatch (spec D1-D5): the `tools/execute` around-chain ending in the body. The caller's signal
//! is fused back in right before the body runs, so a wrapper can add a signal but never drop the
//! caller's. Wrapper-authored successes are re-validated and re-rendered against the tool that
//! resolves now; the body's own successes carry a render stamp and are not rendered twice.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use dsh_core::{
    BodyEffects, Dispatch, ExecuteNext, Failure, Signal, Terminal, ToolContext, ToolDefinition,
    ToolExecution, ToolResult,
};
use futures::future::BoxFuture;

use crate::runtime::{Call, Candidate, Runtime};

struct BodyTerminal<'a> {
    runtime: &'a Runtime,
    call: &'a Call,
    invoked: AtomicBool,
}

impl Terminal for BodyTerminal<'_> {
    fn dispatch(&self, call: Dispatch) -> BoxFuture<'_, ToolResult> {
        Box::pin(self.run(call))
    }
}

impl BodyTerminal<'_> {
    /// The execution and its signal are moved, not cloned, into the body's context: every
    /// handle cloned here would be two atomic operations more a call.
    async fn run(&self, call: Dispatch) -> ToolResult {
        let (exec, given) = call.into_parts();
        let Some(def) = self.runtime.resolve_now(self.call, &exec) else {
            return ToolResult::failure(Failure::unknown_tool(exec.name()));
        };
        let signal = if Signal::same(&given, exec.signal()) {
            given
        } else {
            Signal::any(exec.signal(), &given)
        };
        if signal.is_aborted() {
            return ToolResult::failure(Failure::aborted_before_dispatch());
        }
        if let Err(f) = def.check_arguments(exec.arguments()) {
            return ToolResult::failure(f);
        }
        let (token, with_meta) = (exec.token(), exec.parent().is_none());
        let effects = Arc::new(BodyEffects::default());
        self.invoked.store(true, Ordering::Release);
        let outcome = match self.runtime.config.hard_backstop {
            None => {
                def.run_body(ToolContext::new(exec, signal, effects.clone()))
                    .await
            }
            Some(grace) => backstopped(&def, exec, signal, effects.clone(), grace).await,
        };
        let deferred = effects.take_deferred();
        let result = match outcome {
            Ok(value) => match def.render_success(token, value, with_meta) {
                Ok(r) => r.with_concludes_turn(effects.concluded()),
                Err(f) => ToolResult::failure(f),
            },
            Err(f) => ToolResult::failure(f),
        };
        result.prepend_contexts(&deferred)
    }
}

/// The body under the hard backstop of spec D4: once its signal fires, awaited `grace` longer,
/// then no longer.
async fn backstopped(
    def: &ToolDefinition,
    exec: Arc<ToolExecution>,
    signal: Signal,
    effects: Arc<BodyEffects>,
    grace: std::time::Duration,
) -> Result<dsh_core::Json, Failure> {
    let body = def.run_body(ToolContext::new(exec.clone(), signal.clone(), effects));
    tokio::pin!(body);
    tokio::select! {
        r = &mut body => r,
        _ = async { signal.aborted().await; tokio::time::sleep(grace).await } => {
            tracing::warn!(tool = exec.name(), call = exec.call_id(),
                "body ignored its signal past the backstop; no longer awaited");
            Err(match signal.reason() {
                Some(dsh_core::AbortReason::Timeout(t)) => Failure::tool_timeout(t.timeout_ms()),
                _ => Failure::aborted(),
            })
        }
    }
}

impl Runtime {
    /// Runs the around-chain and the body for an allowed call.
    pub(crate) async fn dispatch(&self, call: &Call) -> Candidate {
        crate::invariants::expect_ordered(
            call.stages
                .enter_in_turn(crate::invariants::Stage::Execute, &call.exec),
        );
        call.marks.set(crate::timing::Mark::Dispatch);
        let terminal = BodyTerminal {
            runtime: self,
            call,
            invoked: AtomicBool::new(false),
        };
        let chained = ExecuteNext::new(&call.hooks.wrappers, &terminal)
            .run(Dispatch::new(call.exec.clone()))
            .await;
        call.marks.set(crate::timing::Mark::Dispatched);
        let body_invoked = terminal.invoked.load(Ordering::Acquire);
        match chained {
            // A wrapper failure skips post-execute (D5).
            Err(f) => Candidate {
                result: ToolResult::failure(f),
                run_post: false,
                body_invoked,
            },
            Ok(result) => Candidate {
                result: self.revalidate(call, result),
                run_post: true,
                body_invoked,
            },
        }
    }

    /// A success not rendered by the registry for this very execution (authored by a wrapper,
    /// or minted for another call) is validated and rendered against the tool resolving now.
    pub(crate) fn revalidate(&self, call: &Call, result: ToolResult) -> ToolResult {
        let exec = &call.exec;
        if result.is_error() || result.rendered_for() == Some(exec.token()) {
            return result;
        }
        let Some(value) = result.value().cloned() else {
            return result;
        };
        let contexts = result.additional_contexts().clone();
        let concludes = result.concludes_turn();
        let Some(def) = self.resolve_now(call, exec) else {
            return ToolResult::failure(Failure::unknown_tool(exec.name())).with_contexts(contexts);
        };
        match def.render_success(exec.token(), value, exec.parent().is_none()) {
            Ok(r) => r.with_contexts(contexts).with_concludes_turn(concludes),
            Err(f) => ToolResult::failure(f).with_contexts(contexts),
        }
    }
}
