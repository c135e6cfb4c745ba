//! The step scheduler (spec S2-S5, C3, F5, F6, I1): runs one assistant message's tool calls.
//!
//! Guarantees:
//! - each call appends `tool/call` (raw arguments) when it starts, before any policy runs;
//! - prepare and finalize run one call at a time, in model order; only dispatch overlaps;
//! - a call is classified right before it starts; an exclusive call waits for everything before
//!   it to be committed, runs alone, and nothing after it starts until it is committed;
//! - parallel calls run in a rolling pool of at most `max_parallel` bodies; a body that has to
//!   wait runs as a spawned task, so a slow prepare of a later call never delays it. Its first
//!   poll happens in the driver, so a body that settles at once costs no task; a call that runs
//!   alone (exclusive, or the last call with nothing else in flight) is dispatched inline
//!   entirely: nothing else could run beside it. A body that blocks its thread in that first
//!   poll holds up the driver as it would hold up a worker; dropping the step's future drops
//!   the bodies running inline, while those that became tasks run on;
//! - results are committed in model order with `sourceEventSeqs: [call seq]`;
//! - on abort, no new call starts; started calls finish and commit in order; every call that
//!   never started gets a `tool/call` + `tool/result` (`ABORTED_BEFORE_DISPATCH`) pair;
//! - if the scheduler itself fails, it stops starting calls, waits for every call in flight and
//!   reports the error; it never fabricates results.

use std::collections::VecDeque;
use std::sync::Arc;

use dsh_core::codes::messages;
use dsh_core::{
    AgentId, Arguments, ContextMessage, ExecutionMode, Signal, ToolExecutionInput, ToolResult,
};
use dsh_session::{Event, Session};
use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::sync::mpsc;

use crate::SchedulerError;
use crate::batch::ToolCallBlock;
use crate::prepare::Prepared;
use crate::runtime::{Call, Candidate, Runtime};

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

/// Validates a pool size (`maxParallelToolCalls must be a positive integer`).
pub fn validate_max_parallel(n: f64) -> Result<usize, SchedulerError> {
    if n.is_finite() && n >= 1.0 && n.fract() == 0.0 {
        Ok(n as usize)
    } else {
        Err(SchedulerError::Config(
            messages::MAX_PARALLEL_POSITIVE.into(),
        ))
    }
}

enum Slot {
    Running {
        exclusive: bool,
    },
    Done {
        candidate: Candidate,
        exclusive: bool,
    },
}

/// Where spawned bodies report back: the call's index and its candidate.
type Channel = (
    mpsc::UnboundedSender<(usize, Candidate)>,
    mpsc::UnboundedReceiver<(usize, Candidate)>,
);

/// Marks a running call as decided.
/// Marks running call `i` as decided; `window` holds the calls from `first` on.
fn settle(window: &mut VecDeque<(Started, Slot)>, first: usize, i: usize, candidate: Candidate) {
    if let Some((_, slot)) = i.checked_sub(first).and_then(|k| window.get_mut(k))
        && let Slot::Running { exclusive } = *slot
    {
        *slot = Slot::Done {
            candidate,
            exclusive,
        };
    }
}

struct Started {
    call: Call,
    call_seq: u64,
    block: ToolCallBlock,
}

impl Runtime {
    /// Runs one assistant message's tool calls and commits their results.
    pub async fn run_step(
        self: &Arc<Self>,
        cx: &StepContext,
        blocks: &[ToolCallBlock],
    ) -> Result<StepOutcome, SchedulerError> {
        // A pool size of 0 is refused, never silently raised (SCH-18).
        if cx.max_parallel == 0 {
            return Err(SchedulerError::Config(
                messages::MAX_PARALLEL_POSITIVE.into(),
            ));
        }
        let cap = cx.max_parallel;
        let n = blocks.len();
        // Created with the first spawned body: a step whose calls all run inline needs none.
        let mut channel: Option<Channel> = None;
        // The calls started and not yet committed, in model order (at most the pool plus one),
        // each with what started it and where its outcome stands: entry k is call
        // `next_commit + k`.
        let mut window: VecDeque<(Started, Slot)> = VecDeque::with_capacity(n.min(cap + 1));
        let mut next_start = 0usize;
        let mut next_commit = 0usize;
        let mut running = 0usize;
        let mut exclusive_open = false;
        let mut out = StepOutcome {
            results: Vec::with_capacity(n),
            ..StepOutcome::default()
        };
        let mut failure: Option<SchedulerError> = None;
        // The next call's parsed arguments and its last classification (with the registry
        // generation it was made under), so a waiting call is parsed once.
        let mut pending: Option<(usize, Arguments)> = None;
        let mut classified: Option<(usize, u64, ExecutionMode)> = None;

        loop {
            if let Some((_, rx)) = &mut channel {
                while let Ok((i, c)) = rx.try_recv() {
                    running -= 1;
                    settle(&mut window, next_commit, i, c);
                }
            }
            // Finalize and commit the front call once it is decided.
            if failure.is_none()
                && next_commit < next_start
                && matches!(window.front(), Some((_, Slot::Done { .. })))
                && let Some((
                    s,
                    Slot::Done {
                        candidate,
                        exclusive,
                    },
                )) = window.pop_front()
            {
                match self.commit(cx, s, candidate, &mut out).await {
                    Ok(()) => {
                        if exclusive {
                            exclusive_open = false;
                        }
                        next_commit += 1;
                    }
                    Err(e) => failure = Some(e),
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
                let in_progress = next_start - next_commit;
                let synthetic = aborted && in_progress == 0;
                // Whether the call could start in either mode; only then is it classified, so a
                // waiting call is not re-classified on every wake-up.
                let could_start = synthetic
                    || (!aborted && !exclusive_open && (in_progress == 0 || running < cap));
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
                    let exclusive = mode == ExecutionMode::Exclusive;
                    let can_start = synthetic
                        || if exclusive {
                            in_progress == 0
                        } else {
                            running < cap
                        };
                    if can_start {
                        let i = next_start;
                        next_start += 1;
                        // Nothing else can run beside this call: exclusive calls start with
                        // nothing in progress and block every later start; the last call with
                        // nothing in progress has nobody left to overlap with.
                        let alone = in_progress == 0 && (exclusive || next_start == n);
                        let args = pending
                            .take()
                            .map_or_else(|| Arguments::from_raw(&block.arguments), |(_, a)| a);
                        match self.start(cx, block, args).await {
                            Err(e) => failure = Some(e),
                            Ok((s, prepared)) => {
                                if exclusive {
                                    exclusive_open = true;
                                }
                                let done = |candidate| Slot::Done {
                                    candidate,
                                    exclusive,
                                };
                                let slot = match prepared {
                                    Prepared::Decided(candidate) => done(candidate),
                                    Prepared::Ready if alone => {
                                        done(self.dispatch_contained(&s.call).await)
                                    }
                                    Prepared::Ready => {
                                        // The body's first poll runs here; only a body that
                                        // has to wait becomes a task (a no-op needs no task).
                                        let mut body = self.owned_dispatch(&s.call);
                                        match futures::poll!(body.as_mut()) {
                                            std::task::Poll::Ready(candidate) => done(candidate),
                                            std::task::Poll::Pending => {
                                                running += 1;
                                                let (tx, _) = channel
                                                    .get_or_insert_with(mpsc::unbounded_channel);
                                                let tx = tx.clone();
                                                tokio::spawn(async move {
                                                    let _ = tx.send((i, body.await));
                                                });
                                                Slot::Running { exclusive }
                                            }
                                        }
                                    }
                                };
                                window.push_back((s, slot));
                            }
                        }
                        continue;
                    }
                }
            }
            if running == 0 && (failure.is_some() || next_commit == n) {
                break;
            }
            if running == 0 && next_commit == next_start {
                // Nothing runs, nothing waits to commit, and nothing can start: only possible
                // when every call is done.
                break;
            }
            let Some((_, rx)) = &mut channel else {
                // Something runs, so a body was spawned and the channel exists.
                break;
            };
            match rx.recv().await {
                Some((i, c)) => {
                    running -= 1;
                    settle(&mut window, next_commit, i, c);
                }
                None => break,
            }
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    async fn start(
        &self,
        cx: &StepContext,
        block: &ToolCallBlock,
        arguments: Arguments,
    ) -> Result<(Started, Prepared), SchedulerError> {
        let call_seq = cx
            .session
            .append(Event::tool_call_shared(
                cx.turn,
                cx.step,
                block.call_id.clone(),
                block.name.clone(),
                block.arguments.clone(),
            ))
            .await?;
        let mut input = ToolExecutionInput::shared(
            block.call_id.clone(),
            block.name.clone(),
            arguments,
            cx.signal.clone(),
        );
        input.agent = cx.agent.clone();
        let call = self.call(input);
        let prepared = self.prepare(&call).await;
        Ok((
            Started {
                call,
                call_seq,
                block: block.clone(),
            },
            prepared,
        ))
    }

    /// The dispatch of a started call as an owned future, ready to move into a task.
    fn owned_dispatch(self: &Arc<Self>, call: &Call) -> BoxFuture<'static, Candidate> {
        let rt = self.clone();
        let call = Call {
            exec: call.exec.clone(),
            def: call.def.clone(),
            generation: call.generation,
            hooks: call.hooks.clone(),
            chain: call.chain.clone(),
            stages: call.stages.clone(),
        };
        async move { rt.dispatch_contained(&call).await }.boxed()
    }

    /// Dispatch with a panic anywhere in the chain or the body turned into the call's failure.
    async fn dispatch_contained(&self, call: &Call) -> Candidate {
        std::panic::AssertUnwindSafe(self.dispatch(call))
            .catch_unwind()
            .await
            .unwrap_or_else(|p| {
                Candidate::final_failure(ToolResult::failure(dsh_core::Failure::from_panic(
                    "dispatch", &*p,
                )))
            })
    }

    async fn commit(
        &self,
        cx: &StepContext,
        s: Started,
        candidate: Candidate,
        out: &mut StepOutcome,
    ) -> Result<(), SchedulerError> {
        let result = self.finalize(&s.call, candidate).await;
        cx.session
            .append(Event::tool_result_shared(
                cx.turn,
                cx.step,
                s.block.call_id.clone(),
                s.call_seq,
                result.content().clone(),
                result.is_error(),
                result.error().and_then(|e| e.info()),
                result.meta(),
            ))
            .await?;
        out.contexts
            .extend(result.additional_contexts().iter().cloned());
        out.concludes_turn |= result.concludes_turn();
        out.results.push(result);
        Ok(())
    }
}
