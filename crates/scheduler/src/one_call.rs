//! A step of one call: the step scheduler's rules (`step.rs`) where they reduce to a straight
//! line. Most assistant messages call one tool, and for them the admission pool has nothing to
//! decide: the call runs alone (nothing before it, nothing after it), so it is recorded,
//! prepared, dispatched inline and finalized in order, with no pool, no window of calls in
//! progress and no queue of recorded seqs to allocate.
//!
//! Guarantees (the same as a step of many, spec S2-S5, C3, I1):
//! - the call's `tool/call` is appended (and, in a durable session, durable) before any policy
//!   runs; its `tool/result` carries `sourceEventSeqs: [call seq]`;
//! - a step whose signal was aborted before the call started still records the call and
//!   answers it `ABORTED_BEFORE_DISPATCH` through the same stages, and the outcome says aborted
//!   when the signal was aborted at the start or once the call was committed, as for any step;
//! - the call is not classified (its mode decides only what may run beside it);
//! - the stages are the pool's own ([`run_alone`], [`finalize_call`]): one mechanism, two
//!   drivers; a property test holds this path's log equal to the general one's.

use std::sync::Arc;

use dsh_core::Arguments;
use dsh_core::codes::messages;

use crate::batch::ToolCallBlock;
use crate::error::SchedulerError;
use crate::pool::{finalize_call, run_alone};
use crate::runtime::Runtime;
use crate::step::{StepContext, StepOutcome, call_input, fold, tool_call_event, tool_result_event};
use crate::timing::StepTiming;

impl Runtime {
    /// Runs a step of exactly one call (see the module docs).
    pub(crate) async fn run_one(
        self: &Arc<Self>,
        cx: &StepContext,
        block: &ToolCallBlock,
    ) -> Result<StepOutcome, SchedulerError> {
        if cx.max_parallel == 0 {
            return Err(SchedulerError::MaxParallel(messages::MAX_PARALLEL_POSITIVE));
        }
        let mut out = StepOutcome {
            results: Vec::with_capacity(1),
            ..StepOutcome::default()
        };
        let mut timing = self
            .config
            .step_timing
            .then(|| StepTiming::start(cx.turn, cx.step));
        out.aborted = cx.signal.is_aborted();
        // Not classified: alone in its step, it runs alone whatever its mode (spec S2's
        // classification decides only what may run beside a call).
        let args = Arguments::from_raw(&block.arguments);
        // Recorded before any policy runs.
        let call_seq = cx.session.append(tool_call_event(cx, block)).await?;
        let recorded = timing.is_some().then(crate::timing::now);
        // Held here, not shared: the call is driven to its end in this future.
        let call = self.call(call_input(cx, block, args));
        // Its prepare begins as it is recorded: only the call's making (its tool's lookup and
        // its hooks' snapshot, part of preparing it) runs between, on this path.
        if let Some(at) = recorded {
            call.marks.set_at(crate::timing::Mark::Prepare, at);
        }
        let candidate = run_alone(self, &call).await;
        // Finalize begins as the body's chain returns: nothing runs between on this path.
        call.marks.same_instant(
            crate::timing::Mark::Dispatched,
            crate::timing::Mark::Finalize,
        );
        let result = finalize_call(self, &call, candidate).await;
        if let Some(t) = timing.as_mut() {
            t.add(
                &block.call_id,
                recorded,
                &call.marks.snapshot(),
                self.sub_timings.take(&block.call_id),
            );
        }
        let ack = cx
            .session
            .append(tool_result_event(cx, block, call_seq, &result));
        if cx.session.is_durable() {
            // The timing event goes behind the result before either is waited for: one sync
            // covers both (the log is written in order).
            let timing_ack = timing
                .and_then(StepTiming::event)
                .map(|event| cx.session.append(event));
            ack.await?;
            fold(&mut out, result);
            out.aborted |= cx.signal.is_aborted();
            if let Some(ack) = timing_ack {
                ack.await?;
            }
        } else {
            ack.await?;
            fold(&mut out, result);
            out.aborted |= cx.signal.is_aborted();
            if let Some(event) = timing.and_then(StepTiming::event) {
                cx.session.append(event).await?;
            }
        }
        Ok(out)
    }
}
