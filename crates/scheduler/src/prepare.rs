//! Prepare (spec P1-P5): pre-execute waterfall, approval for `ask`, monotonic guards, then the
//! cancellation check. A denial reached here is kept even if cancellation arrives meanwhile.

use dsh_core::{Failure, PreNext, PreToolDecision, ToolResult};
use tracing::Instrument;

use crate::approval::no_approver;
use crate::invariants::Stage;
use crate::runtime::{Call, Candidate, Prepared, Runtime};
use crate::timing::Mark;

impl Runtime {
    /// Runs the prepare stage for a call.
    pub(crate) async fn prepare(&self, call: &Call) -> Prepared {
        let exec = &call.exec;
        // A call whose caller already gave up runs no policy at all (CAN-16).
        if exec.signal().is_aborted() {
            return Prepared::Decided(Candidate::final_failure(ToolResult::failure(
                Failure::aborted_before_dispatch(),
            )));
        }
        // The host's admission check comes before any policy; its refusal is final.
        if let Some(admit) = &self.admission {
            let refused = dsh_core::contained::call(|| admit(exec))
                .unwrap_or_else(|p| Some(Failure::from_panic("admission check", &*p)));
            if let Some(f) = refused {
                return Prepared::Decided(Candidate::final_failure(ToolResult::failure(f)));
            }
        }
        crate::invariants::expect_ordered(call.stages.enter_in_turn(Stage::PreExecute, exec));
        call.marks.set(Mark::Prepare);
        let decision = PreNext::new(&call.hooks.pre).run(exec).await;
        let denial = match decision {
            Err(f) => {
                // A failing listener skips post-execute (P5).
                return Prepared::Decided(Candidate::final_failure(ToolResult::failure(f)));
            }
            Ok(PreToolDecision::Allow) => None,
            Ok(PreToolDecision::Deny { reason }) => Some(Failure::new(reason)),
            Ok(PreToolDecision::Ask { reason }) => {
                let reason = reason.as_deref();
                match &self.approver {
                    None => Some(no_approver(exec, reason)),
                    Some(a) => {
                        call.marks.set(Mark::ApprovalAsked);
                        let answer = a
                            .approve(exec, reason)
                            .instrument(crate::trace::stage("approval", call))
                            .await;
                        call.marks.set(Mark::ApprovalAnswered);
                        answer.err()
                    }
                }
            }
        };
        let denial = denial.or_else(|| {
            let _guards = crate::trace::stage("guards", call).entered();
            self.hooks.check_guards(exec, &call.chain).map(Failure::new)
        });
        if let Some(f) = denial {
            return Prepared::Decided(Candidate {
                result: ToolResult::failure(f),
                run_post: true,
                body_invoked: false,
            });
        }
        if exec.signal().is_aborted() {
            return Prepared::Decided(Candidate::final_failure(ToolResult::failure(
                Failure::aborted_before_dispatch(),
            )));
        }
        Prepared::Ready
    }
}
