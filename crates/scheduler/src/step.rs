//! The step scheduler (spec S2-S5, C3, F5, F6, I1): runs one assistant message's tool calls.
//!
//! Guarantees:
//! - each call appends `tool/call` (raw arguments) when it starts, before any policy runs;
//! - prepare and finalize run one call at a time, in model order; only dispatch overlaps;
//! - a call is classified right before it starts; an exclusive call waits for everything before
//!   it to be committed, runs alone, and nothing after it starts until it is committed;
//! - parallel calls run in the admission pool (`pool.rs`) of at most `max_parallel` bodies; a
//!   body that has to wait runs as a task the pool owns, so a slow prepare of a later call never
//!   delays it. Its first poll happens in the driver, so a body that settles at once costs no
//!   task; a call that runs alone (exclusive, or the last call with nothing else in flight) is
//!   dispatched inline entirely: nothing else could run beside it. A body that blocks its thread
//!   in that first poll holds up the driver as it would hold up a worker; dropping the step's
//!   future drops every body still running;
//! - results are committed in model order with `sourceEventSeqs: [call seq]`;
//! - on abort, no new call starts; started calls finish and commit in order; every call that
//!   never started gets a `tool/call` + `tool/result` (`ABORTED_BEFORE_DISPATCH`) pair;
//! - if the scheduler itself fails, it stops starting calls, waits for every call in flight and
//!   reports the error; it never fabricates results.

use std::sync::Arc;

use dsh_core::codes::messages;
use dsh_core::{
    AgentId, Arguments, ContextMessage, ExecutionMode, Signal, ToolExecutionInput, ToolResult,
};
use dsh_session::{Event, Session, SessionError};

use crate::batch::ToolCallBlock;
use crate::error::SchedulerError;
use crate::pool::{Pool, Start};
use crate::runtime::Runtime;
use crate::timing::StepTiming;

/// The default pool size (spec S3).
pub const DEFAULT_MAX_PARALLEL: usize = 10;

/// Where a batch runs: its session, turn and step, agent and signal.
#[derive(Clone)]
pub struct StepContext {
    /// The session the events go to.
    pub session: Session,
    /// The turn number.
    pub turn: u32,
    /// The step number.
    pub step: u32,
    /// The calling agent.
    pub agent: Option<AgentId>,
    /// The turn's signal: each call's caller signal.
    pub signal: Signal,
    /// The pool size (validated positive).
    pub max_parallel: usize,
}

/// What a batch produced.
#[derive(Debug, Default)]
pub struct StepOutcome {
    /// The frozen results, in model order.
    pub results: Vec<Arc<ToolResult>>,
    /// The contexts for the next-step inbox, in model call order.
    pub contexts: Vec<ContextMessage>,
    /// Whether a successful call concluded the turn.
    pub concludes_turn: bool,
    /// Whether the batch was cut short by cancellation.
    pub aborted: bool,
}

/// Validates a pool size: zero is refused (`maxParallelToolCalls must be a positive integer`).
pub fn validate_max_parallel(n: usize) -> Result<usize, SchedulerError> {
    if n >= 1 {
        Ok(n)
    } else {
        Err(SchedulerError::MaxParallel(messages::MAX_PARALLEL_POSITIVE))
    }
}

/// A pool size given as a configuration number (JSON, TOML): a positive integer, written as an
/// integer or as a float with no fraction; anything else is refused with the message above.
pub fn max_parallel_from_config(n: &serde_json::Value) -> Result<usize, SchedulerError> {
    let whole = match n {
        serde_json::Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.is_finite() && f.fract() == 0.0 && *f >= 0.0 && *f <= u32::MAX as f64)
                .map(|f| f as u64)
        }),
        _ => None,
    };
    whole.and_then(|w| usize::try_from(w).ok()).map_or(
        Err(SchedulerError::MaxParallel(messages::MAX_PARALLEL_POSITIVE)),
        validate_max_parallel,
    )
}

impl Runtime {
    /// Runs one assistant message's tool calls and commits their results.
    pub async fn run_step(
        self: &Arc<Self>,
        cx: &StepContext,
        blocks: &[ToolCallBlock],
    ) -> Result<StepOutcome, SchedulerError> {
        let span =
            tracing::debug_span!("step", turn = cx.turn, step = cx.step, calls = blocks.len());
        match blocks {
            [block] => crate::trace::in_span!(span, self.run_one(cx, block)),
            _ => crate::trace::in_span!(span, self.run_step_in(cx, blocks)),
        }
    }

    pub(crate) async fn run_step_in(
        self: &Arc<Self>,
        cx: &StepContext,
        blocks: &[ToolCallBlock],
    ) -> Result<StepOutcome, SchedulerError> {
        // A pool size of 0 is refused, never silently raised (SCH-18).
        if cx.max_parallel == 0 {
            return Err(SchedulerError::MaxParallel(messages::MAX_PARALLEL_POSITIVE));
        }
        let n = blocks.len();
        // Each call in progress keeps its block and the seq of its `tool/call`.
        let mut pool: Pool<(ToolCallBlock, u64)> = Pool::new(self.clone(), cx.max_parallel);
        let mut next_start = 0usize;
        let mut committed = 0usize;
        let mut out = StepOutcome {
            results: Vec::with_capacity(n),
            ..StepOutcome::default()
        };
        let mut failure: Option<SchedulerError> = None;
        // The next call's parsed arguments and its last classification (with the registry
        // generation it was made under), so a waiting call is parsed once.
        let mut pending: Option<(usize, Arguments)> = None;
        let mut classified: Option<(usize, u64, ExecutionMode)> = None;
        // Durability is paid per group, not per call (a durable session only; in memory an
        // append costs nothing to wait for). Calls `[0, recorded)` have their `tool/call`;
        // `ahead` holds the seqs of those recorded before they start (calls that could start
        // beside the one being started are recorded with it, in one group). A `tool/result`
        // is not waited for on its own: the next group's record being durable means it is
        // (the log is written in order), and the step waits for the rest before it returns.
        let durable = cx.session.is_durable();
        let mut recorded = 0usize;
        let mut ahead: std::collections::VecDeque<u64> = std::collections::VecDeque::new();
        let mut unsynced = Vec::new();
        // With timing on: the step's clock, and when each recorded call's `tool/call` was
        // durable (index = model order).
        let mut timing = self
            .config
            .step_timing
            .then(|| StepTiming::start(cx.turn, cx.step));
        let mut recorded_at = crate::timing::Recorded::default();

        loop {
            pool.settle_ready();
            // Finalize and commit the front call once it is decided.
            if failure.is_none()
                && pool.front_decided()
                && let Some(done) = pool.commit_front().await
            {
                let ((block, call_seq), result) = (done.payload, done.result);
                if let Some(t) = timing.as_mut() {
                    t.add(
                        &block.call_id,
                        recorded_at.at(committed),
                        &done.call.marks.snapshot(),
                        self.sub_timings.take(&block.call_id),
                    );
                }
                let ack = cx
                    .session
                    .append(tool_result_event(cx, &block, call_seq, &result));
                let acked = if durable {
                    unsynced.push(ack);
                    Ok(0)
                } else {
                    ack.await
                };
                match acked {
                    Ok(_) => {
                        fold(&mut out, result);
                        committed += 1;
                    }
                    Err(e) => {
                        pool.halt();
                        failure = Some(e.into());
                    }
                }
                continue;
            }
            let aborted = cx.signal.is_aborted();
            if aborted {
                out.aborted = true;
            }
            // Start the next call when the rules allow it.
            if failure.is_none() && next_start < n {
                let block = &blocks[next_start];
                let in_progress = pool.in_progress();
                let synthetic = aborted && in_progress == 0;
                // Whether the call could start in either mode; only then is it classified, so a
                // waiting call is not re-classified on every wake-up.
                let could_start = synthetic || (!aborted && pool.may_start());
                if could_start {
                    if pending.as_ref().is_none_or(|(i, _)| *i != next_start) {
                        pending = Some((next_start, Arguments::from_raw(&block.arguments)));
                    }
                    let mode = match (&pending, synthetic) {
                        (_, true) | (None, _) => ExecutionMode::Exclusive,
                        (Some((_, args)), false) => {
                            let generation = self.registry.generation();
                            match classified {
                                Some((i, g, m)) if i == next_start && g == generation => m,
                                _ => {
                                    let m = self.registry.execution_mode(
                                        &block.name,
                                        cx.agent.as_ref(),
                                        args,
                                    );
                                    classified = Some((next_start, generation, m));
                                    m
                                }
                            }
                        }
                    };
                    if pool.admits(mode) {
                        next_start += 1;
                        // Nothing else can run beside this call: exclusive calls start with
                        // nothing in progress and block every later start; the last call with
                        // nothing in progress has nobody left to overlap with.
                        let alone = in_progress == 0
                            && (mode == ExecutionMode::Exclusive || next_start == n);
                        let args = pending
                            .take()
                            .map_or_else(|| Arguments::from_raw(&block.arguments), |(_, a)| a);
                        // Recorded (`tool/call`, before any policy runs), then started. Written
                        // here rather than in a helper `async fn`: the pool's start future is
                        // large, and each level of `async fn` around it copies it once more.
                        let i = next_start - 1;
                        if recorded <= i {
                            // This call and, when it may run beside others, the calls after
                            // it that could start beside it now: one group, one sync.
                            let mut upto = i + 1;
                            if durable && mode == ExecutionMode::Parallel {
                                let room = cx.max_parallel.saturating_sub(pool.running());
                                while upto < n
                                    && upto - i < room
                                    && self.classify(cx, &blocks[upto]) == ExecutionMode::Parallel
                                {
                                    upto += 1;
                                }
                            }
                            match self.record(cx, &blocks[i..upto], &mut ahead).await {
                                Ok(()) => {
                                    if timing.is_some() {
                                        recorded_at.push(upto, crate::timing::now());
                                    }
                                    recorded = upto;
                                    unsynced.clear();
                                }
                                Err(e) => {
                                    pool.halt();
                                    failure = Some(first_error(unsynced, e).await);
                                    unsynced = Vec::new();
                                    continue;
                                }
                            }
                        }
                        match ahead.pop_front().ok_or(SchedulerError::Internal(
                            "a started call has no recorded seq",
                        )) {
                            Ok(call_seq) => {
                                let input = call_input(cx, block, args);
                                let how = if alone { Start::RunAlone } else { Start::Run };
                                pool.start(input, mode, how, (block.clone(), call_seq))
                                    .await;
                            }
                            Err(e) => {
                                pool.halt();
                                failure = Some(e);
                            }
                        }
                        continue;
                    }
                }
            }
            if pool.running() == 0 && (failure.is_some() || committed == n) {
                break;
            }
            if pool.running() == 0 && pool.in_progress() == 0 {
                // Nothing runs, nothing waits to commit, and nothing can start: only possible
                // when every call is done.
                break;
            }
            if !pool.settle_next().await {
                break;
            }
        }
        // The step's timing, after its last result (dsh's own event; readers skip it).
        if let Some(event) = timing.and_then(StepTiming::event)
            && failure.is_none()
        {
            let ack = cx.session.append(event);
            if durable {
                unsynced.push(ack);
            } else if let Err(e) = ack.await {
                failure = Some(e.into());
            }
        }
        // The results not waited for yet: the step ends once they are durable.
        for ack in unsynced {
            if let Err(e) = ack.await
                && failure.is_none()
            {
                failure = Some(e.into());
            }
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// Appends the `tool/call`s of `blocks` as one group and queues their seqs in `ahead`;
    /// returns once all are durable.
    async fn record(
        &self,
        cx: &StepContext,
        blocks: &[ToolCallBlock],
        ahead: &mut std::collections::VecDeque<u64>,
    ) -> Result<(), SessionError> {
        if let [block] = blocks {
            ahead.push_back(cx.session.append(tool_call_event(cx, block)).await?);
            return Ok(());
        }
        let acks: Vec<_> = blocks
            .iter()
            .map(|b| cx.session.append(tool_call_event(cx, b)))
            .collect();
        for ack in acks {
            ahead.push_back(ack.await?);
        }
        Ok(())
    }

    /// How `block`'s call would run now, as its start will read it again.
    fn classify(&self, cx: &StepContext, block: &ToolCallBlock) -> ExecutionMode {
        let args = Arguments::from_raw(&block.arguments);
        self.registry
            .execution_mode(&block.name, cx.agent.as_ref(), &args)
    }
}

/// The error that stopped the step: a `tool/result` append that failed before `later` (whose
/// failure then only says the log was already broken), else `later`.
async fn first_error<F>(unsynced: Vec<F>, later: SessionError) -> SchedulerError
where
    F: std::future::Future<Output = Result<u64, SessionError>>,
{
    for ack in unsynced {
        if let Err(e) = ack.await {
            return e.into();
        }
    }
    later.into()
}

/// A block's `tool/call` event, over the block's shared strings.
pub(crate) fn tool_call_event(cx: &StepContext, block: &ToolCallBlock) -> Event {
    Event::tool_call(
        cx.turn,
        cx.step,
        block.call_id.clone(),
        block.name.clone(),
        block.arguments.clone(),
    )
}

/// The execution input of a block's call in this step.
pub(crate) fn call_input(
    cx: &StepContext,
    block: &ToolCallBlock,
    arguments: Arguments,
) -> ToolExecutionInput {
    let mut input = ToolExecutionInput::shared(
        block.call_id.clone(),
        block.name.clone(),
        arguments,
        cx.signal.clone(),
    );
    input.agent = cx.agent.clone();
    input
}

/// A committed call's `tool/result` event.
pub(crate) fn tool_result_event(
    cx: &StepContext,
    block: &ToolCallBlock,
    call_seq: u64,
    result: &ToolResult,
) -> Event {
    Event::tool_result(
        cx.turn,
        cx.step,
        block.call_id.clone(),
        call_seq,
        result.content().clone(),
        result.is_error(),
        result.error().and_then(|e| e.info()),
        result.meta(),
    )
}

/// Folds a recorded result into the step's outcome.
pub(crate) fn fold(out: &mut StepOutcome, result: Arc<ToolResult>) {
    out.contexts
        .extend(result.additional_contexts().iter().cloned());
    out.concludes_turn |= result.concludes_turn();
    out.results.push(result);
}
