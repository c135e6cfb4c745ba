//! The admission pool (spec S2-S5, CM2): the one mechanism that decides when a call starts, runs
//! its body beside others, and hands its result back for commit. The step scheduler
//! (`step.rs`) and Code Mode's sub-dispatch are thin adapters over it: they say which calls come
//! and in which order, and record what the pool hands back.
//!
//! Guarantees:
//! - a call is classified by its adapter right before it starts; [`Pool::may_start`] says whether
//!   any call could start now (so a waiting call is not classified on every wake-up) and
//!   [`Pool::admits`] whether one of the given mode may;
//! - an exclusive call starts only with nothing in progress, and nothing starts after it until
//!   it is committed ([`Pool::commit_front`] releases it after finalize);
//! - prepare ([`Pool::start`]) and finalize ([`Pool::commit_front`]) run one call at a time, in
//!   submission order, in the adapter's own task; only bodies overlap, at most `cap` of them;
//! - a body's first poll happens in [`Pool::start`], so a body that settles at once costs no
//!   task; a call that runs alone is dispatched inline entirely; any other body that has to wait
//!   becomes a task of the pool's `JoinSet`, owned by the pool and never detached (dropping the
//!   pool aborts the bodies still running);
//! - every outcome, a panicking body or wrapper included, becomes a [`Candidate`] and goes
//!   through `finalize` exactly once, so `finalize_content` and the `tools/result` observers run
//!   once for every started call.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use dsh_core::{ExecutionMode, Failure, ToolExecution, ToolExecutionInput, ToolResult};
use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::task::JoinSet;
use tracing::Instrument;

use crate::runtime::{Call, Candidate, Prepared, Runtime};

/// One started call, in submission order.
struct Entry<P> {
    payload: P,
    call: Arc<Call>,
    exclusive: bool,
    /// `None` while its body runs as a task.
    outcome: Option<Candidate>,
}

/// A committed call: what its adapter records.
pub struct Committed<P> {
    /// What the adapter gave [`Pool::start`].
    pub payload: P,
    /// The call's execution.
    pub exec: Arc<ToolExecution>,
    /// The frozen result, after finalize.
    pub result: Arc<ToolResult>,
}

/// How a call enters the pool.
pub enum Start {
    /// Prepare, then dispatch: the first poll inline, then a task if the body has to wait.
    Run,
    /// Prepare, then dispatch inline to the end: nothing else could run beside this call.
    RunAlone,
    /// Already decided before any stage (the call cannot run): no policy, no body, no
    /// post-execute; finalize and the observers still run.
    Refused(Failure),
}

/// The admission pool of one step, or of one `run_code` run. `P` is what the adapter keeps per
/// call (its log position, its reply channel).
pub struct Pool<P> {
    runtime: Arc<Runtime>,
    cap: usize,
    /// Started, not yet committed calls; entry `k` is call number `first + k`.
    window: VecDeque<Entry<P>>,
    first: u64,
    /// Bodies running as tasks, with their call numbers; created with the first body that has
    /// to wait (a step whose bodies all settle at once needs none).
    bodies: Option<JoinSet<Candidate>>,
    numbers: HashMap<tokio::task::Id, u64>,
    running: usize,
    exclusive_open: bool,
}

impl<P> Pool<P> {
    /// A pool of at most `cap` (at least 1) overlapping bodies over `runtime`.
    pub fn new(runtime: Arc<Runtime>, cap: usize) -> Pool<P> {
        Pool {
            runtime,
            cap: cap.max(1),
            window: VecDeque::new(),
            first: 0,
            bodies: None,
            numbers: HashMap::new(),
            running: 0,
            exclusive_open: false,
        }
    }

    /// The runtime the calls go through.
    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    /// Calls started and not yet committed.
    pub fn in_progress(&self) -> usize {
        self.window.len()
    }

    /// Bodies running as tasks.
    pub fn running(&self) -> usize {
        self.running
    }

    /// Whether some call could start now, in either mode.
    pub fn may_start(&self) -> bool {
        !self.exclusive_open && (self.window.is_empty() || self.running < self.cap)
    }

    /// Whether a call of `mode` may start now.
    pub fn admits(&self, mode: ExecutionMode) -> bool {
        !self.exclusive_open
            && match mode {
                ExecutionMode::Exclusive => self.window.is_empty(),
                _ => self.running < self.cap,
            }
    }

    /// Starts a call the adapter admitted (and recorded): freezes it, runs prepare, then its
    /// body's first poll (or the whole body when it runs alone). Returns its execution.
    pub async fn start(
        &mut self,
        input: ToolExecutionInput,
        mode: ExecutionMode,
        how: Start,
        payload: P,
    ) -> Arc<ToolExecution> {
        let exclusive = mode == ExecutionMode::Exclusive;
        if exclusive {
            self.exclusive_open = true;
        }
        let call = Arc::new(self.runtime.call(input));
        let exec = call.exec().clone();
        let n = self.first + self.window.len() as u64;
        let outcome = match how {
            Start::Refused(f) => Some(Candidate::final_failure(ToolResult::failure(f))),
            Start::Run | Start::RunAlone => match self
                .runtime
                .prepare(&call)
                .instrument(crate::trace::stage("prepare", &exec))
                .await
            {
                Prepared::Decided(candidate) => Some(candidate),
                // Boxed: the dispatch future is large, and left inline it would make every
                // future that awaits this one (the adapters' loops) as large, copied whole at
                // each level on every call.
                Prepared::Ready if matches!(how, Start::RunAlone) => Some(
                    Box::pin(
                        contained(self.runtime.dispatch(&call))
                            .instrument(crate::trace::stage("dispatch", &exec)),
                    )
                    .await,
                ),
                Prepared::Ready => {
                    let runtime = self.runtime.clone();
                    let running = call.clone();
                    let span = crate::trace::stage("dispatch", &exec);
                    let mut body: BoxFuture<'static, Candidate> =
                        contained(async move { runtime.dispatch(&running).await })
                            .instrument(span)
                            .boxed();
                    match futures::poll!(body.as_mut()) {
                        std::task::Poll::Ready(candidate) => Some(candidate),
                        std::task::Poll::Pending => {
                            self.running += 1;
                            let task = self.bodies.get_or_insert_with(JoinSet::new).spawn(body);
                            self.numbers.insert(task.id(), n);
                            None
                        }
                    }
                }
            },
        };
        self.window.push_back(Entry {
            payload,
            call,
            exclusive,
            outcome,
        });
        exec
    }

    /// Whether the oldest call in progress is decided, so [`Pool::commit_front`] will not wait.
    pub fn front_decided(&self) -> bool {
        self.window.front().is_some_and(|e| e.outcome.is_some())
    }

    /// Finalizes the oldest call in progress once it is decided, and releases the exclusive
    /// barrier it held. `None` when it is not decided yet (or nothing is in progress).
    pub async fn commit_front(&mut self) -> Option<Committed<P>> {
        if !self.front_decided() {
            return None;
        }
        let entry = self.window.pop_front()?;
        self.first += 1;
        let candidate = entry.outcome?;
        let span = crate::trace::stage("finalize", entry.call.exec());
        let result = self
            .runtime
            .finalize(&entry.call, candidate)
            .instrument(span.clone())
            .await;
        crate::trace::outcome(&span, &result);
        if entry.exclusive {
            self.exclusive_open = false;
        }
        Some(Committed {
            payload: entry.payload,
            exec: entry.call.exec().clone(),
            result,
        })
    }

    /// Records every body that has finished, without waiting.
    pub fn settle_ready(&mut self) {
        if self.running == 0 {
            return;
        }
        while let Some(joined) = self
            .bodies
            .as_mut()
            .and_then(JoinSet::try_join_next_with_id)
        {
            self.settle(joined);
        }
    }

    /// Waits for one running body to finish and records its outcome; `false` when none runs.
    pub async fn settle_next(&mut self) -> bool {
        let Some(bodies) = self.bodies.as_mut() else {
            return false;
        };
        match bodies.join_next_with_id().await {
            Some(joined) => {
                self.settle(joined);
                true
            }
            None => false,
        }
    }

    fn settle(&mut self, joined: Result<(tokio::task::Id, Candidate), tokio::task::JoinError>) {
        self.running = self.running.saturating_sub(1);
        let (id, candidate) = match joined {
            Ok(done) => done,
            // Bodies are contained (a panic is their failure) and only the pool's drop aborts
            // them; should a task still end without an outcome, it is its call's failure.
            Err(e) => (
                e.id(),
                Candidate::final_failure(ToolResult::failure(if e.is_panic() {
                    Failure::from_panic("dispatch", &*e.into_panic())
                } else {
                    Failure::new(format!(
                        "the tool body's task ended without an outcome: {e}"
                    ))
                })),
            ),
        };
        let Some(n) = self.numbers.remove(&id) else {
            return;
        };
        let at = n
            .checked_sub(self.first)
            .and_then(|k| usize::try_from(k).ok());
        if let Some(entry) = at.and_then(|k| self.window.get_mut(k)) {
            entry.outcome = Some(candidate);
        }
    }
}

/// A dispatch with a panic anywhere in the chain or the body turned into the call's failure.
async fn contained(dispatch: impl std::future::Future<Output = Candidate>) -> Candidate {
    std::panic::AssertUnwindSafe(dispatch)
        .catch_unwind()
        .await
        .unwrap_or_else(|p| {
            Candidate::final_failure(ToolResult::failure(Failure::from_panic("dispatch", &*p)))
        })
}
