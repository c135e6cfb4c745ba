//! Finalize (spec F1-F4, C2): post-execute waterfall, cancellation replacement of successes,
//! `finalize_content` exactly once, then the frozen result to the `tools/result` observers.
//! Context order on a result: deferred by the tool, then the wrappers', then post-execute's; a
//! block keeps only its own.

use std::sync::Arc;

use dsh_core::codes::messages;
use dsh_core::summarize;
use dsh_core::{Failure, PostNext, PostToolDecision, Replacement, ToolResult, text_content};

use crate::trace::in_span;

use crate::invariants::{Stage, expect_ordered};
use crate::runtime::{Call, Candidate, Runtime};

impl Runtime {
    /// Runs the finalize stage and returns the frozen, authoritative result.
    pub(crate) async fn finalize(&self, call: &Call, candidate: Candidate) -> Arc<ToolResult> {
        let exec = &call.exec;
        let mut result = candidate.result;
        if candidate.run_post {
            expect_ordered(call.stages.enter_in_turn(Stage::PostExecute, exec));
            result = in_span!(
                crate::trace::stage("post_execute", call),
                self.post_execute(call, result)
            );
        }
        // Only successful outcomes are replaced by cancellation (C1, C2).
        if !result.is_error() && exec.signal().is_aborted() {
            let f = if candidate.body_invoked {
                Failure::aborted()
            } else {
                Failure::aborted_before_dispatch()
            };
            let contexts = result.additional_contexts().clone();
            result = ToolResult::failure(f).with_contexts(contexts);
        }
        if let Some(fin) = call.def.as_ref().and_then(|d| d.finalize_content()) {
            let outcome = dsh_core::contained::call(|| fin(exec, &result));
            match outcome {
                Ok(Ok(Some(content))) => result = result.with_content(content),
                Ok(Ok(None)) => {}
                Ok(Err(f)) => result = ToolResult::failure(f),
                Err(p) => result = ToolResult::failure(Failure::from_panic("finalizeContent", &*p)),
            }
        }
        expect_ordered(call.stages.enter_in_turn(Stage::Result, exec));
        let result = Arc::new(result);
        for observer in call.hooks.observers.iter() {
            let r = dsh_core::contained::call(|| observer.on_result(exec, &result));
            if let Err(p) = r {
                let f = Failure::from_panic("tools/result observer", &*p);
                tracing::warn!(call = exec.call_id(), "{}", f.message());
            }
        }
        result
    }

    async fn post_execute(&self, call: &Call, result: ToolResult) -> ToolResult {
        let exec = &call.exec;
        let decision = PostNext::new(&call.hooks.post).run(exec, &result).await;
        match decision {
            Err(f) => ToolResult::failure(f),
            Ok(PostToolDecision::Accept { replace, contexts }) => match replace {
                None => result.append_contexts(&contexts),
                Some(Replacement::Content(content)) => {
                    result.with_content(content).append_contexts(&contexts)
                }
                Some(Replacement::Value(value)) => {
                    if result.is_error() {
                        return ToolResult::failure(Failure::new(
                            messages::POST_REPLACE_FAILED_VALUE,
                        ));
                    }
                    let kept = result.additional_contexts().clone();
                    let concludes = result.concludes_turn();
                    let Some(def) = self.registry.get(exec.name(), exec.agent()) else {
                        return ToolResult::failure(Failure::unknown_tool(exec.name()));
                    };
                    match def.render_success(exec.token(), value, exec.parent().is_none()) {
                        Ok(r) => r
                            .with_contexts(kept)
                            .with_concludes_turn(concludes)
                            .append_contexts(&contexts),
                        Err(f) => ToolResult::failure(f),
                    }
                }
            },
            Ok(PostToolDecision::Block { feedback, contexts }) => {
                let summary = summarize(&feedback);
                let message = if summary.is_empty() {
                    messages::POST_BLOCK_EMPTY.to_owned()
                } else {
                    summary
                };
                let content = if feedback.is_empty() {
                    text_content(message.clone())
                } else {
                    feedback
                };
                ToolResult::failure_with_content(Failure::new(message), content)
                    .with_contexts(Arc::from(contexts))
            }
        }
    }
}
