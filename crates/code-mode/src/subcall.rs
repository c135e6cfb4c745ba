//! Sub-dispatch (spec CM1-CM4): each `tools.<name>(args)` of one run becomes a call
//! `<parent>:code:<n>` through the SAME staged runtime as a native call, scheduled by one
//! coordinator per run.
//!
//! The calls run in the step scheduler's admission pool (`dsh_scheduler::Pool`), so they follow
//! the same rules as a native step, and every outcome (a panicking body, an unknown tool, an
//! abort) goes through the same finalize as a native call. Guarantees:
//! - ids are numbered in submission order; a call is classified right before it starts;
//! - prepare and finalize run one call at a time, in submission order; only dispatch overlaps,
//!   in a pool of `max_parallel_sub_calls`;
//! - an exclusive call waits for every earlier call to be committed, runs alone, and nothing
//!   after it starts until it is committed;
//! - `tool/code-dispatch-start` is appended when a call starts, `tool/code-dispatch` when it is
//!   committed (content shaped by `tools/code-dispatch-log`); the binding settles after both;
//! - once the outer call is cancelled, calls not yet started are refused without events; once
//!   the run is over, they are abandoned without events, every started call's signal fires,
//!   and [`SubCalls::close`] returns only after each of them is committed (quiescence).
//!
//! Where the coordinator runs ([`Drive`]): a code runtime that executes on a thread of its own
//! may claim it ([`SubCalls::host`]'s bindings hand out a [`LocalDriver`]) and poll it on that
//! thread right where the program calls a tool, so a sub-call whose policy and body complete at
//! once settles with no hand-off between threads. Otherwise it runs as a task of its own,
//! spawned at the first call. A body that does not complete on its first poll continues as a
//! task either way, so a slow prepare or commit never starves it.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll};

use dsh_core::codes::messages;
use dsh_core::{
    AbortController, AbortReason, AgentId, Arguments, CancelCause, ContentBlock, ContextMessage,
    ExecutionMode, Failure, Json, Signal, ToolExecution, ToolExecutionInput,
};
use dsh_scheduler::{Committed, Lookup, Pool, Runtime, Start};
use dsh_session::{Event, Session};
use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::runtime::Handle;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::bindings::Host;
use crate::dispatch_log::{DispatchLog, DispatchRecord};
use crate::outcome::ToolCallError;

/// The plugin name on contexts Code Mode defers (images returned by sub-calls).
pub const CODE_MODE_PLUGIN: &str = "tools-code-mode";

/// The rejection of a call still queued when the run ended.
pub fn abandoned_message(name: &str) -> String {
    format!("run_code run is over (run_code settled); {name} tool call abandoned")
}

/// `<parent>:code:<n>`, written in `buf` (reused from call to call) and shared from there.
fn sub_call_id(buf: &mut String, parent: &str, n: u64) -> Arc<str> {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = n;
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    buf.clear();
    buf.push_str(parent);
    buf.push_str(":code:");
    // ASCII digits: always UTF-8, written in one copy.
    buf.push_str(std::str::from_utf8(&digits[at..]).unwrap_or_default());
    Arc::from(buf.as_str())
}

/// What one run's sub-calls leave for the outer result.
#[derive(Default)]
pub(crate) struct RunEffects {
    /// Contexts to defer onto the outer result, in commit order.
    pub contexts: Vec<ContextMessage>,
    /// Whether a successful sub-call concluded the turn.
    pub concludes_turn: bool,
}

/// Everything a run's coordinator needs; immutable for the run.
pub(crate) struct RunContext {
    pub runtime: Arc<Runtime>,
    pub outer: Arc<ToolExecution>,
    /// The signal of the outer body (the caller's, fused with any wrapper's).
    pub outer_signal: Signal,
    pub max_parallel: usize,
    pub session: Option<Session>,
    pub log: DispatchLog,
}

enum Msg {
    Submit {
        name: Arc<str>,
        args: Json,
        reply: Reply,
    },
    Close,
}

/// An answer of one sub-call, as the claiming thread reads it: `(id, answer)`.
pub(crate) type Answer = (u32, Result<Json, ToolCallError>);

/// Where a sub-call's answer goes: the channel behind the bindings' future, or the queue of
/// the thread that claimed the coordinator (read there without polling a future).
pub(crate) enum Reply {
    Channel(oneshot::Sender<Result<Json, ToolCallError>>),
    Local(LocalReply),
}

impl Reply {
    fn send(self, answer: Result<Json, ToolCallError>) {
        match self {
            Reply::Channel(tx) => {
                let _ = tx.send(answer);
            }
            Reply::Local(mut local) => local.send(answer),
        }
    }
}

/// A queued sub-call's place in its claiming thread's answers. Dropped unanswered (the
/// coordinator gave the call up), it answers that the call was abandoned, as a dropped
/// channel does.
pub(crate) struct LocalReply {
    id: u32,
    name: Arc<str>,
    answers: Arc<parking_lot::Mutex<VecDeque<Answer>>>,
    sent: bool,
}

impl LocalReply {
    fn send(&mut self, answer: Result<Json, ToolCallError>) {
        self.sent = true;
        self.answers.lock().push_back((self.id, answer));
    }
}

impl Drop for LocalReply {
    fn drop(&mut self) {
        if !self.sent {
            let e = ToolCallError::new(&*self.name, abandoned_message(&self.name));
            self.send(Err(e));
        }
    }
}

/// The host side of one run's bindings, and the handle that ends the run.
pub(crate) struct SubCalls {
    tx: mpsc::UnboundedSender<Msg>,
    run_end: AbortController,
    drive: Arc<Drive>,
}

/// The coordinator has not been claimed nor spawned yet.
const IDLE: u8 = 0;
/// The coordinator runs as a task of its own.
const TASK: u8 = 1;
/// The coordinator is polled by the thread that claimed it.
const LOCAL: u8 = 2;
/// The run is ending: only [`SubCalls::close`] (or the drop of [`SubCalls`]) runs it now.
const CLOSING: u8 = 3;

/// The coordinator future of one run.
type CoordinatorFuture = BoxFuture<'static, RunEffects>;

/// The coordinator while no task owns it, or what it left once it finished in a local poll.
enum Slot {
    Running(CoordinatorFuture),
    Finished(RunEffects),
}

/// Where one run's coordinator is driven: exactly one of a task of its own, the thread that
/// claimed it, or the run's end, chosen by `mode` and changed only under `task`'s lock.
pub(crate) struct Drive {
    mode: AtomicU8,
    /// The coordinator unless it was spawned. Locked only for a poll, never across an await
    /// of anything else.
    slot: futures::lock::Mutex<Option<Slot>>,
    /// The coordinator's task, once spawned.
    task: parking_lot::Mutex<Option<JoinHandle<RunEffects>>>,
    runtime: Handle,
    /// The submission side handed to the claiming thread (taken by the claim, or dropped at
    /// the run's end so the coordinator can see its last sender go).
    local_tx: parking_lot::Mutex<Option<mpsc::UnboundedSender<Msg>>>,
}

impl Drive {
    /// Spawns the coordinator as a task if nobody claimed it yet.
    fn spawn_if_idle(&self) {
        if self.mode.load(Ordering::Acquire) != IDLE {
            return;
        }
        let mut task = self.task.lock();
        if self.mode.load(Ordering::Acquire) != IDLE {
            return;
        }
        // Nobody polls an idle coordinator, so its slot is free.
        let Some(mut slot) = self.slot.try_lock() else {
            return;
        };
        if let Some(Slot::Running(fut)) = slot.take() {
            *task = Some(self.runtime.spawn(fut));
            self.mode.store(TASK, Ordering::Release);
        }
    }

    /// Hands the coordinator to the calling thread, if nobody claimed or spawned it yet.
    pub fn claim(self: &Arc<Self>) -> Option<LocalDriver> {
        let _task = self.task.lock();
        if self.mode.load(Ordering::Acquire) != IDLE {
            return None;
        }
        let tx = self.local_tx.lock().take()?;
        self.mode.store(LOCAL, Ordering::Release);
        Some(LocalDriver {
            drive: self.clone(),
            tx,
            answers: Arc::new(parking_lot::Mutex::new(VecDeque::new())),
        })
    }

    /// Takes the coordinator over for the run's end: its task if it has one, else the future
    /// itself (once no local poll holds it). The claiming thread polls it no more.
    fn take_over(&self) -> Owned {
        drop(self.local_tx.lock().take());
        let mut task = self.task.lock();
        let previous = self.mode.swap(CLOSING, Ordering::AcqRel);
        match (previous, task.take()) {
            (TASK, Some(handle)) => Owned::Task(handle),
            _ => Owned::Slot,
        }
    }

    /// Runs the coordinator to its end from wherever it is.
    async fn finish(&self, owned: Owned) -> RunEffects {
        match owned {
            Owned::Task(handle) => match handle.await {
                Ok(effects) => effects,
                Err(e) => {
                    tracing::error!("the run_code sub-call coordinator failed: {e}");
                    RunEffects::default()
                }
            },
            Owned::Slot => {
                let taken = self.slot.lock().await.take();
                match taken {
                    Some(Slot::Running(fut)) => {
                        match dsh_core::contained::future(std::pin::pin!(fut)).await {
                            Ok(effects) => effects,
                            Err(p) => {
                                let f =
                                    Failure::from_panic("the run_code sub-call coordinator", &*p);
                                tracing::error!("{}", f.message());
                                RunEffects::default()
                            }
                        }
                    }
                    Some(Slot::Finished(effects)) => effects,
                    None => RunEffects::default(),
                }
            }
        }
    }
}

/// What [`Drive::take_over`] found.
enum Owned {
    Task(JoinHandle<RunEffects>),
    Slot,
}

/// The coordinator of one run, claimed by the thread that polls it (the interpreter's). Each
/// [`LocalDriver::poll`] advances it as far as it goes without waiting; whatever it waits on
/// wakes the given context.
pub(crate) struct LocalDriver {
    drive: Arc<Drive>,
    tx: mpsc::UnboundedSender<Msg>,
    answers: Arc<parking_lot::Mutex<VecDeque<Answer>>>,
}

impl LocalDriver {
    /// Submits call `id` of `name` (already checked by the bindings); its answer comes out of
    /// [`LocalDriver::take_answers`].
    pub fn submit(&self, id: u32, name: Arc<str>, args: Json) {
        let reply = Reply::Local(LocalReply {
            id,
            name: name.clone(),
            answers: self.answers.clone(),
            sent: false,
        });
        // A coordinator already gone drops the message, which answers "abandoned".
        let _ = self.tx.send(Msg::Submit { name, args, reply });
    }

    /// Moves the answers the coordinator gave, in the order it gave them, to the end of `into`.
    pub fn take_answers(&self, into: &mut VecDeque<Answer>) {
        let mut answers = self.answers.lock();
        if into.is_empty() {
            std::mem::swap(into, &mut *answers);
        } else {
            into.extend(answers.drain(..));
        }
    }

    /// Advances the coordinator once. Does nothing once the run is ending or while another
    /// poll holds it.
    pub fn poll(&self, cx: &mut Context<'_>) {
        if self.drive.mode.load(Ordering::Acquire) != LOCAL {
            return;
        }
        let Some(mut slot) = self.drive.slot.try_lock() else {
            return;
        };
        let Some(Slot::Running(fut)) = slot.as_mut() else {
            return;
        };
        match dsh_core::contained::call(|| fut.as_mut().poll(cx)) {
            Ok(Poll::Pending) => {}
            Ok(Poll::Ready(effects)) => *slot = Some(Slot::Finished(effects)),
            Err(p) => {
                let f = Failure::from_panic("the run_code sub-call coordinator", &*p);
                tracing::error!("{}", f.message());
                // Dropping it settles every waiting binding as abandoned.
                *slot = Some(Slot::Finished(RunEffects::default()));
            }
        }
    }
}

struct SubHost {
    tx: mpsc::UnboundedSender<Msg>,
    drive: Arc<Drive>,
}

impl Host for SubHost {
    fn call(&self, name: &str, args: Json) -> BoxFuture<'static, Result<Json, ToolCallError>> {
        let (reply, rx) = oneshot::channel();
        let owned = name.to_owned();
        let _ = self.tx.send(Msg::Submit {
            name: Arc::from(name),
            args,
            reply: Reply::Channel(reply),
        });
        self.drive.spawn_if_idle();
        async move {
            rx.await
                .unwrap_or_else(|_| Err(ToolCallError::new(&owned, abandoned_message(&owned))))
        }
        .boxed()
    }
}

impl SubCalls {
    /// Starts the coordinator of one run (from within a tokio runtime). It first runs when a
    /// thread claims it or at the first call.
    pub fn start(cx: RunContext) -> SubCalls {
        let (tx, rx) = mpsc::unbounded_channel();
        let run_end = AbortController::new();
        let coordinator = Coordinator::new(Arc::new(cx), run_end.signal());
        let drive = Arc::new(Drive {
            mode: AtomicU8::new(IDLE),
            slot: futures::lock::Mutex::new(Some(Slot::Running(coordinator.run(rx).boxed()))),
            task: parking_lot::Mutex::new(None),
            runtime: Handle::current(),
            local_tx: parking_lot::Mutex::new(Some(tx.clone())),
        });
        SubCalls { tx, run_end, drive }
    }

    /// The host the run's bindings call.
    pub fn host(&self) -> Arc<dyn Host> {
        Arc::new(SubHost {
            tx: self.tx.clone(),
            drive: self.drive.clone(),
        })
    }

    /// Where the coordinator runs; the bindings carry it so a runtime can claim it.
    pub fn drive(&self) -> Arc<Drive> {
        self.drive.clone()
    }

    /// Ends the run: queued calls are abandoned, started ones see their signal fire and are
    /// awaited until committed. Returns what they leave for the outer result.
    pub async fn close(self) -> RunEffects {
        self.run_end
            .abort(AbortReason::Cancelled(CancelCause::Other(Arc::from(
                "run_code settled",
            ))));
        let _ = self.tx.send(Msg::Close);
        let owned = self.drive.take_over();
        self.drive.finish(owned).await
    }
}

impl Drop for SubCalls {
    /// A run dropped without [`SubCalls::close`] (its body was abandoned) still has its started
    /// calls run to their commit, on a task of their own, as if the coordinator had always had
    /// one.
    fn drop(&mut self) {
        if self.drive.mode.load(Ordering::Acquire) == CLOSING {
            return;
        }
        let owned = self.drive.take_over();
        let drive = self.drive.clone();
        drop(self.drive.runtime.spawn(async move {
            drive.finish(owned).await;
        }));
    }
}

struct Pending {
    n: u64,
    name: Arc<str>,
    args: Json,
    /// The same arguments as the call's input takes them (classified before it starts).
    arguments: Arguments,
    reply: Reply,
}

/// What the pool keeps of a started sub-call until it is committed.
struct Sub {
    name: Arc<str>,
    args: Json,
    reply: Reply,
}

struct Coordinator {
    cx: Arc<RunContext>,
    run_end: Signal,
    /// What every sub-call's signal is: the outer body's fused with the run's end (one
    /// signal for the whole run, since it is the same for each call).
    sub_signal: Signal,
    /// The root and parent call ids every record of the run carries.
    root_id: Arc<str>,
    parent_id: Arc<str>,
    queue: VecDeque<Pending>,
    submitted: u64,
    closed: bool,
    effects: RunEffects,
    /// Where each sub-call's id is written before it is shared.
    id_buf: String,
}

impl Coordinator {
    fn new(cx: Arc<RunContext>, run_end: Signal) -> Coordinator {
        Coordinator {
            sub_signal: Signal::any(&cx.outer_signal, &run_end),
            root_id: Arc::from(cx.outer.root_call_id()),
            parent_id: cx.outer.call_id_arc().clone(),
            cx,
            run_end,
            queue: VecDeque::new(),
            submitted: 0,
            closed: false,
            effects: RunEffects::default(),
            id_buf: String::new(),
        }
    }

    fn agent(&self) -> Option<&AgentId> {
        self.cx.outer.agent()
    }

    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Msg>) -> RunEffects {
        // The step scheduler's admission pool: the same start, overlap and commit rules.
        let mut pool: Pool<Sub> = Pool::new(self.cx.runtime.clone(), self.cx.max_parallel);
        loop {
            pool.settle_ready();
            // Commit the front call once it is decided (finalize runs in submission order).
            if pool.front_decided() {
                if let Some(done) = pool.commit_front().await {
                    self.commit(done).await;
                }
                continue;
            }
            self.refuse_unstartable();
            if pool.may_start()
                && let Some(front) = self.queue.front()
            {
                let found = self.cx.runtime.registry().get_at(&front.name, self.agent());
                let mode = match &found.0 {
                    Some(def) if def.is_concurrency_safe(&front.arguments) => {
                        ExecutionMode::Parallel
                    }
                    _ => ExecutionMode::Exclusive,
                };
                if pool.admits(mode)
                    && let Some(p) = self.queue.pop_front()
                {
                    self.start(&mut pool, p, mode, found).await;
                    continue;
                }
            }
            if self.closed && self.queue.is_empty() && pool.in_progress() == 0 {
                break;
            }
            let running = pool.running() > 0;
            if !running && !self.closed && self.queue.is_empty() {
                // Idle (the common case between a program's calls): only a message can wake
                // it, so it waits for one alone, without setting up the other branches.
                let msg = rx.recv().await;
                self.receive(msg);
                continue;
            }
            tokio::select! {
                msg = rx.recv(), if !self.closed => self.receive(msg),
                _ = pool.settle_next(), if running => {}
                _ = self.cx.outer_signal.aborted(), if !self.queue.is_empty() => {}
                _ = self.run_end.aborted(), if !self.queue.is_empty() => {}
                else => {
                    // Nothing can wake the coordinator: give every remaining call up.
                    tracing::error!("run_code sub-call coordinator stalled; calls abandoned");
                    break;
                }
            }
        }
        self.effects
    }

    /// Queues a submitted call, or notes that no more will come.
    fn receive(&mut self, msg: Option<Msg>) {
        match msg {
            Some(Msg::Submit { name, args, reply }) => {
                self.submitted += 1;
                let arguments = Arguments::Json(args.clone());
                self.queue.push_back(Pending {
                    n: self.submitted,
                    name,
                    args,
                    arguments,
                    reply,
                });
            }
            Some(Msg::Close) | None => self.closed = true,
        }
    }

    /// Refuses, without events, every queued call that may no longer start.
    fn refuse_unstartable(&mut self) {
        let message: fn(&str) -> String = if self.cx.outer_signal.is_aborted() {
            |_| messages::ABORTED_BEFORE_DISPATCH.to_owned()
        } else if self.closed || self.run_end.is_aborted() {
            abandoned_message
        } else {
            return;
        };
        for p in self.queue.drain(..) {
            p.reply
                .send(Err(ToolCallError::new(&*p.name, message(&p.name))));
        }
    }

    /// Starts one call: its start record, then the pool (prepare, and its body when allowed).
    /// `found`: the lookup of the tool made when its mode was decided (made again only if the
    /// registry changed since).
    async fn start(
        &mut self,
        pool: &mut Pool<Sub>,
        p: Pending,
        mode: ExecutionMode,
        found: Lookup,
    ) {
        let outer = &self.cx.outer;
        let sub_id = sub_call_id(&mut self.id_buf, outer.call_id(), p.n);
        let name = p.name.clone();
        if let Some(session) = &self.cx.session {
            let event = Event::code_dispatch_start(
                self.root_id.clone(),
                self.parent_id.clone(),
                sub_id.clone(),
                name.clone(),
                p.args.clone(),
            );
            if let Err(e) = session.append(event).await {
                p.reply.send(Err(ToolCallError::new(
                    &*p.name,
                    format!("the call could not be recorded: {e}"),
                )));
                return;
            }
        }
        let input = ToolExecutionInput {
            call_id: sub_id,
            root_call_id: Some(self.root_id.clone()),
            name: name.clone(),
            arguments: p.arguments,
            agent: outer.agent().cloned(),
            parent: Some(outer.token()),
            signal: self.sub_signal.clone(),
        };
        // A tool unregistered since the bindings were built is a final result: no policy,
        // no body, no post-execute (CODE-28); finalize and the observers still run.
        let registry = self.cx.runtime.registry();
        let registered = if registry.generation() == found.1 {
            found.0.is_some()
        } else {
            registry.get(&p.name, outer.agent()).is_some()
        };
        let how = if !registered {
            Start::Refused(Failure::unknown_tool(&p.name))
        } else {
            Start::Run
        };
        let sub = Sub {
            name,
            args: p.args,
            reply: p.reply,
        };
        pool.start_found(input, Some(found), mode, how, sub).await;
    }

    /// Records a committed call's settlement and settles its binding.
    async fn commit(&mut self, done: Committed<Sub>) {
        // The record a listener would see is built only when there is one.
        let content = match &self.cx.session {
            Some(_) if self.cx.log.is_empty() => Some(done.result.content().clone()),
            Some(_) => {
                let record = DispatchRecord {
                    exec: done.exec().clone(),
                    result: done.result.clone(),
                };
                Some(
                    self.cx
                        .log
                        .decide(&record, &|r: &DispatchRecord| r.result.content().clone()),
                )
            }
            None => None,
        };
        let call_id = done.exec().call_id_arc().clone();
        let Committed {
            payload: Sub { name, args, reply },
            result,
            ..
        } = done;
        if let (Some(session), Some(content)) = (&self.cx.session, content) {
            let event = Event::code_dispatch(
                self.root_id.clone(),
                self.parent_id.clone(),
                call_id,
                name.clone(),
                args,
                result.is_error(),
                content,
            );
            if let Err(e) = session.append(event).await {
                tracing::error!(
                    parent = &*self.parent_id,
                    tool = &*name,
                    "tool/code-dispatch not recorded: {e}"
                );
            }
        }
        self.effects
            .contexts
            .extend(result.additional_contexts().iter().cloned());
        if result
            .content()
            .iter()
            .any(|b| matches!(b, ContentBlock::Image { .. }))
        {
            self.effects.contexts.push(ContextMessage::from_plugin(
                CODE_MODE_PLUGIN,
                result.content().clone(),
            ));
        }
        self.effects.concludes_turn |= result.concludes_turn();
        let answer = match result.error() {
            None => Ok(result.value().cloned().unwrap_or_else(Json::null)),
            Some(f) => Err(ToolCallError::new(&*name, f.message())),
        };
        reply.send(answer);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::Arc;

    use dsh_core::Json;
    use proptest::prelude::*;

    use super::{LocalReply, Reply};

    /// A queued answer given up without a word reads as abandoned, like a dropped channel; one
    /// answered is queued once, in order.
    #[test]
    fn an_unanswered_local_reply_answers_abandoned() {
        let answers = Arc::new(parking_lot::Mutex::new(VecDeque::new()));
        let reply = |id| {
            Reply::Local(LocalReply {
                id,
                name: Arc::from("probe"),
                answers: answers.clone(),
                sent: false,
            })
        };
        reply(1).send(Ok(Json::string("ok")));
        drop(reply(2));
        let got: Vec<_> = answers.lock().drain(..).collect();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].0, 1);
        assert_eq!(got[0].1.as_ref().ok(), Some(&Json::string("ok")));
        assert_eq!(got[1].0, 2);
        let e = got[1].1.as_ref().err().map(|e| e.message.clone());
        assert_eq!(e, Some(super::abandoned_message("probe")));
    }

    proptest! {
        /// The id built by hand reads exactly as `format!` would write it.
        #[test]
        fn sub_call_ids_read_as_formatted(parent in "\\PC{0,12}", n in any::<u64>()) {
            prop_assert_eq!(&*super::sub_call_id(&mut String::from("stale"), &parent, n), format!("{parent}:code:{n}"));
        }
    }
}
