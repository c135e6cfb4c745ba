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
//! - prepare ([`Pool::start`]) runs one call at a time and finalize ([`Pool::commit_front`]) one
//!   call at a time, each in submission order, in the adapter's own task; only bodies overlap, at
//!   most `cap` of them. A prepare that has to wait while earlier calls are in progress (an
//!   approval, a slow hook) is parked in the pool: nothing else starts, but the calls before it
//!   are finalized and committed meanwhile, so a finished call's result is final (observers,
//!   durable log) without waiting for the next call's approval;
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
use futures::future::BoxFuture;
use tokio::task::JoinSet;

use crate::runtime::{Call, Candidate, Lookup, Prepared, Runtime};
use crate::trace::in_span;

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
    /// The frozen result, after finalize.
    pub result: Arc<ToolResult>,
    /// The call itself (its stage marks, for the step's timing).
    pub(crate) call: Arc<Call>,
}

impl<P> Committed<P> {
    /// The call's execution.
    pub fn exec(&self) -> &Arc<ToolExecution> {
        self.call.exec()
    }
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
    /// The call whose prepare is waiting (an approval, a slow hook) while earlier calls are
    /// still in progress: parked here so that they can finish and be committed meanwhile.
    preparing: Option<Parked>,
    /// Set by [`Pool::halt`]: a parked prepare that finishes dispatches nothing.
    halted: bool,
}

/// A prepare that has to wait, with what its call needs to be dispatched once it is done.
struct Parked {
    n: u64,
    call: Arc<Call>,
    prepare: BoxFuture<'static, Prepared>,
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
            preparing: None,
            halted: false,
        }
    }

    /// The adapter failed (spec S5): no body is dispatched from now on. A parked prepare is
    /// still waited for, and its call is left without an outcome (nothing is fabricated).
    pub fn halt(&mut self) {
        self.halted = true;
    }

    /// The runtime the calls go through.
    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    /// Calls started and not yet committed.
    pub fn in_progress(&self) -> usize {
        self.window.len()
    }

    /// Bodies running as tasks, and the prepare waiting in the pool: what
    /// [`Pool::settle_next`] can wait for.
    pub fn running(&self) -> usize {
        self.running + usize::from(self.preparing.is_some())
    }

    /// Whether some call could start now, in either mode.
    pub fn may_start(&self) -> bool {
        self.preparing.is_none()
            && !self.exclusive_open
            && (self.window.is_empty() || self.running < self.cap)
    }

    /// Whether a call of `mode` may start now.
    pub fn admits(&self, mode: ExecutionMode) -> bool {
        self.preparing.is_none()
            && !self.exclusive_open
            && match mode {
                ExecutionMode::Exclusive => self.window.is_empty(),
                _ => self.running < self.cap,
            }
    }

    /// Starts a call the adapter admitted (and recorded): freezes it, runs prepare, then its
    /// body's first poll (or the whole body when it runs alone).
    ///
    /// With earlier calls still in progress, a prepare that has to wait (an approval, a slow
    /// hook) is parked in the pool instead of holding the adapter: the adapter goes on
    /// committing the calls before it, and [`Pool::settle_next`] dispatches this one once its
    /// prepare is done. No other call starts meanwhile (prepare runs one call at a time).
    pub async fn start(
        &mut self,
        input: ToolExecutionInput,
        mode: ExecutionMode,
        how: Start,
        payload: P,
    ) {
        self.start_found(input, None, mode, how, payload).await;
    }

    /// [`Pool::start`] with the adapter's own lookup of the call's tool (made to classify it),
    /// used instead of a second one while the registry has not changed since.
    pub async fn start_found(
        &mut self,
        input: ToolExecutionInput,
        found: Option<Lookup>,
        mode: ExecutionMode,
        how: Start,
        payload: P,
    ) {
        let exclusive = mode == ExecutionMode::Exclusive;
        if exclusive {
            self.exclusive_open = true;
        }
        let call = Arc::new(self.runtime.call_found(input, found));
        let n = self.first + self.window.len() as u64;
        let outcome = match how {
            Start::Refused(f) => Some(Candidate::final_failure(ToolResult::failure(f))),
            Start::Run if !self.window.is_empty() => {
                let runtime = self.runtime.clone();
                let preparing = call.clone();
                let mut prepare: BoxFuture<'static, Prepared> = crate::trace::boxed_in_span(
                    crate::trace::stage("prepare", &call),
                    async move { runtime.prepare(&preparing).await },
                );
                match futures::poll!(prepare.as_mut()) {
                    std::task::Poll::Ready(prepared) => self.dispatch(&call, prepared, n).await,
                    std::task::Poll::Pending => {
                        self.preparing = Some(Parked {
                            n,
                            call: call.clone(),
                            prepare,
                        });
                        None
                    }
                }
            }
            // Boxed: the stages' futures are large, and left inline they would make every
            // future that awaits this one (the adapters' loops) as large, copied whole at each
            // level on every call.
            Start::RunAlone => Some(Box::pin(run_alone(&self.runtime, &call)).await),
            Start::Run => {
                let prepared = in_span!(
                    crate::trace::stage("prepare", &call),
                    self.runtime.prepare(&call)
                );
                self.dispatch(&call, prepared, n).await
            }
        };
        self.window.push_back(Entry {
            payload,
            call,
            exclusive,
            outcome,
        });
    }

    /// Dispatches a prepared call: its body's first poll here, then a task of the pool if it
    /// has to wait. Returns its outcome when it is already decided.
    async fn dispatch(
        &mut self,
        call: &Arc<Call>,
        prepared: Prepared,
        n: u64,
    ) -> Option<Candidate> {
        if let Prepared::Decided(candidate) = prepared {
            return Some(candidate);
        }
        let runtime = self.runtime.clone();
        let running = call.clone();
        let mut body: BoxFuture<'static, Candidate> = crate::trace::boxed_in_span(
            crate::trace::stage("dispatch", call),
            contained(async move { runtime.dispatch(&running).await }),
        );
        match futures::poll!(body.as_mut()) {
            std::task::Poll::Ready(candidate) => Some(candidate),
            std::task::Poll::Pending => {
                self.running += 1;
                let task = self.bodies.get_or_insert_with(JoinSet::new).spawn(body);
                self.numbers.insert(task.id(), n);
                // A task spawned from a worker waits in that worker's own slot, which no other
                // worker may take: should the adapter now block its thread (a listener calling
                // `std::thread::sleep` by mistake), the body would wait with it. One yield lets
                // this worker poll the body first; from then on its wake-ups go to any worker.
                tokio::task::yield_now().await;
                None
            }
        }
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
        let result = finalize_call(&self.runtime, &entry.call, candidate).await;
        if entry.exclusive {
            self.exclusive_open = false;
        }
        Some(Committed {
            payload: entry.payload,
            result,
            call: entry.call,
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

    /// Waits for one running body to finish, or for the parked prepare to be done (then
    /// dispatches its call), and records the outcome; `false` when nothing runs.
    pub async fn settle_next(&mut self) -> bool {
        if self.running() == 0 {
            return false;
        }
        let (bodies, preparing) = (&mut self.bodies, &mut self.preparing);
        let body = async {
            match bodies.as_mut() {
                Some(bodies) if !bodies.is_empty() => bodies.join_next_with_id().await,
                _ => std::future::pending().await,
            }
        };
        let prepare = async {
            match preparing.as_mut() {
                Some(parked) => parked.prepare.as_mut().await,
                None => std::future::pending().await,
            }
        };
        let woke = tokio::select! {
            biased;
            joined = body => Woke::Body(joined),
            prepared = prepare => Woke::Prepared(prepared),
        };
        match woke {
            Woke::Body(Some(joined)) => self.settle(joined),
            Woke::Body(None) => return false,
            Woke::Prepared(prepared) => {
                if let Some(parked) = self.preparing.take().filter(|_| !self.halted) {
                    let outcome = self.dispatch(&parked.call, prepared, parked.n).await;
                    let at = parked
                        .n
                        .checked_sub(self.first)
                        .and_then(|k| usize::try_from(k).ok());
                    if let Some(entry) = at.and_then(|k| self.window.get_mut(k)) {
                        entry.outcome = outcome;
                    }
                }
            }
        }
        true
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

/// What [`Pool::settle_next`] woke up for.
enum Woke {
    Body(Option<Result<(tokio::task::Id, Candidate), tokio::task::JoinError>>),
    Prepared(Prepared),
}

/// Prepares a call and, when it is allowed, dispatches it inline to the end: the path of a call
/// nothing else can run beside (an exclusive call, the last one with nothing in flight, the one
/// call of a step).
pub(crate) async fn run_alone(runtime: &Runtime, call: &Call) -> Candidate {
    let prepared = in_span!(crate::trace::stage("prepare", call), runtime.prepare(call));
    match prepared {
        Prepared::Ready => in_span!(
            crate::trace::stage("dispatch", call),
            contained(runtime.dispatch(call))
        ),
        Prepared::Decided(candidate) => candidate,
    }
}

/// Finalizes a decided call (spec F1-F6): its result frozen, its observers told, its marks set;
/// a sub-call's marks are kept for its root's step timing.
pub(crate) async fn finalize_call(
    runtime: &Runtime,
    call: &Call,
    candidate: Candidate,
) -> Arc<ToolResult> {
    let span = crate::trace::stage("finalize", call);
    call.marks.set(crate::timing::Mark::Finalize);
    let result = in_span!(span.clone(), runtime.finalize(call, candidate));
    crate::trace::outcome(&span, call, &result);
    call.marks.set(crate::timing::Mark::Done);
    // A sub-call (its root another call): its marks wait for the root's step.
    let exec = call.exec();
    if runtime.config.step_timing && exec.root_call_id() != exec.call_id() {
        runtime.sub_timings.push(
            exec.root_call_id(),
            exec.call_id_arc().clone(),
            call.marks.snapshot(),
        );
    }
    result
}

/// A dispatch with a panic anywhere in the chain or the body turned into the call's failure.
async fn contained(dispatch: impl std::future::Future<Output = Candidate>) -> Candidate {
    dsh_core::contained::future(std::pin::pin!(dispatch))
        .await
        .unwrap_or_else(|p| {
            Candidate::final_failure(ToolResult::failure(Failure::from_panic("dispatch", &*p)))
        })
}
