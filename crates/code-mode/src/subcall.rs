//! Sub-dispatch (spec CM1-CM4): each `tools.<name>(args)` of one run becomes a call
//! `<parent>:code:<n>` through the SAME staged runtime as a native call, scheduled by one
//! coordinator task per run.
//!
//! Guarantees, mirroring the step scheduler:
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

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use dsh_core::codes::messages;
use dsh_core::{
    AbortController, AbortReason, AgentId, Arguments, CancelCause, ContentBlock, ContextMessage,
    ExecutionMode, Failure, Json, Signal, ToolExecution, ToolExecutionInput, ToolResult,
};
use dsh_scheduler::{Call, Candidate, Prepared, Runtime};
use dsh_session::{Event, Session};
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use tokio::sync::{mpsc, oneshot};

use crate::bindings::Host;
use crate::dispatch_log::{DispatchLog, DispatchRecord};
use crate::outcome::ToolCallError;

/// The plugin name on contexts Code Mode defers (images returned by sub-calls).
pub const CODE_MODE_PLUGIN: &str = "tools-code-mode";

/// The rejection of a call still queued when the run ended.
pub fn abandoned_message(name: &str) -> String {
    format!("run_code run is over (run_code settled); {name} tool call abandoned")
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
    pub runtime: Runtime,
    pub outer: Arc<ToolExecution>,
    /// The signal of the outer body (the caller's, fused with any wrapper's).
    pub outer_signal: Signal,
    pub max_parallel: usize,
    pub session: Option<Session>,
    pub log: DispatchLog,
}

enum Msg {
    Submit {
        name: String,
        args: Json,
        reply: oneshot::Sender<Result<Json, ToolCallError>>,
    },
    Close,
}

/// The host side of one run's bindings, and the handle that ends the run.
pub(crate) struct SubCalls {
    tx: mpsc::UnboundedSender<Msg>,
    run_end: AbortController,
    task: tokio::task::JoinHandle<RunEffects>,
}

struct SubHost {
    tx: mpsc::UnboundedSender<Msg>,
}

impl Host for SubHost {
    fn call(&self, name: &str, args: Json) -> BoxFuture<'static, Result<Json, ToolCallError>> {
        let (reply, rx) = oneshot::channel();
        let owned = name.to_owned();
        let _ = self.tx.send(Msg::Submit {
            name: owned.clone(),
            args,
            reply,
        });
        async move {
            rx.await
                .unwrap_or_else(|_| Err(ToolCallError::new(&owned, abandoned_message(&owned))))
        }
        .boxed()
    }
}

impl SubCalls {
    /// Starts the coordinator of one run.
    pub fn start(cx: RunContext) -> SubCalls {
        let (tx, rx) = mpsc::unbounded_channel();
        let run_end = AbortController::new();
        let coordinator = Coordinator::new(Arc::new(cx), run_end.signal());
        let task = tokio::spawn(coordinator.run(rx));
        SubCalls { tx, run_end, task }
    }

    /// The host the run's bindings call.
    pub fn host(&self) -> Arc<dyn Host> {
        Arc::new(SubHost {
            tx: self.tx.clone(),
        })
    }

    /// Ends the run: queued calls are abandoned, started ones see their signal fire and are
    /// awaited until committed. Returns what they leave for the outer result.
    pub async fn close(self) -> RunEffects {
        self.run_end
            .abort(AbortReason::Cancelled(CancelCause::Other(Arc::from(
                "run_code settled",
            ))));
        let _ = self.tx.send(Msg::Close);
        match self.task.await {
            Ok(effects) => effects,
            Err(e) => {
                tracing::error!("the run_code sub-call coordinator failed: {e}");
                RunEffects::default()
            }
        }
    }
}

struct Pending {
    n: u64,
    name: String,
    args: Json,
    reply: oneshot::Sender<Result<Json, ToolCallError>>,
}

struct Live {
    name: String,
    args: Json,
    exclusive: bool,
    call: Arc<Call>,
    reply: oneshot::Sender<Result<Json, ToolCallError>>,
    decided: Option<Result<Candidate, Failure>>,
}

struct Coordinator {
    cx: Arc<RunContext>,
    run_end: Signal,
    queue: VecDeque<Pending>,
    live: BTreeMap<u64, Live>,
    submitted: u64,
    running: usize,
    exclusive_open: bool,
    closed: bool,
    effects: RunEffects,
}

type Dispatched = BoxFuture<'static, (u64, Result<Candidate, Failure>)>;

impl Coordinator {
    fn new(cx: Arc<RunContext>, run_end: Signal) -> Coordinator {
        Coordinator {
            cx,
            run_end,
            queue: VecDeque::new(),
            live: BTreeMap::new(),
            submitted: 0,
            running: 0,
            exclusive_open: false,
            closed: false,
            effects: RunEffects::default(),
        }
    }

    fn agent(&self) -> Option<&AgentId> {
        self.cx.outer.agent()
    }

    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Msg>) -> RunEffects {
        let mut dispatches: FuturesUnordered<Dispatched> = FuturesUnordered::new();
        loop {
            // Commit the front call once it is decided (finalize runs in submission order).
            if self
                .live
                .first_key_value()
                .is_some_and(|(_, l)| l.decided.is_some())
            {
                if let Some((_, live)) = self.live.pop_first() {
                    self.commit(live).await;
                }
                continue;
            }
            self.refuse_unstartable();
            if let Some(front) = self.queue.front() {
                let args = Arguments::Json(front.args.clone());
                let mode =
                    self.cx
                        .runtime
                        .registry()
                        .execution_mode(&front.name, self.agent(), &args);
                let exclusive = mode == ExecutionMode::Exclusive;
                let can_start = !self.exclusive_open
                    && if exclusive {
                        self.live.is_empty()
                    } else {
                        self.running < self.cx.max_parallel
                    };
                if can_start && let Some(p) = self.queue.pop_front() {
                    if let Some(d) = self.start(p, exclusive).await {
                        dispatches.push(d);
                    }
                    continue;
                }
            }
            if self.closed && self.queue.is_empty() && self.live.is_empty() {
                break;
            }
            tokio::select! {
                msg = rx.recv(), if !self.closed => match msg {
                    Some(Msg::Submit { name, args, reply }) => {
                        self.submitted += 1;
                        self.queue.push_back(Pending { n: self.submitted, name, args, reply });
                    }
                    Some(Msg::Close) | None => self.closed = true,
                },
                Some((n, decided)) = dispatches.next(), if !dispatches.is_empty() => {
                    self.running = self.running.saturating_sub(1);
                    if let Some(l) = self.live.get_mut(&n) {
                        l.decided = Some(decided);
                    }
                }
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
            let _ = p
                .reply
                .send(Err(ToolCallError::new(&p.name, message(&p.name))));
        }
    }

    /// Starts one call: its start record, then prepare; returns its dispatch when allowed.
    async fn start(&mut self, p: Pending, exclusive: bool) -> Option<Dispatched> {
        let outer = &self.cx.outer;
        let sub_id = format!("{}:code:{}", outer.call_id(), p.n);
        if let Some(session) = &self.cx.session {
            let event = Event::code_dispatch_start(
                outer.root_call_id(),
                outer.call_id(),
                &sub_id,
                &p.name,
                &p.args,
            );
            if let Err(e) = session.append(event).await {
                let _ = p.reply.send(Err(ToolCallError::new(
                    &p.name,
                    format!("the call could not be recorded: {e}"),
                )));
                return None;
            }
        }
        let input = ToolExecutionInput {
            call_id: Arc::from(sub_id.as_str()),
            root_call_id: Some(Arc::from(outer.root_call_id())),
            name: Arc::from(p.name.as_str()),
            arguments: Arguments::Json(p.args.clone()),
            agent: outer.agent().cloned(),
            parent: Some(outer.token()),
            signal: Signal::any(&self.cx.outer_signal, &self.run_end),
        };
        let call = Arc::new(self.cx.runtime.call(input));
        if exclusive {
            self.exclusive_open = true;
        }
        // A tool unregistered since the bindings were built is a final result: no policy,
        // no body, no post-execute (CODE-28).
        if self
            .cx
            .runtime
            .registry()
            .get(&p.name, outer.agent())
            .is_none()
        {
            self.live.insert(
                p.n,
                Live {
                    decided: Some(Err(Failure::unknown_tool(&p.name))),
                    name: p.name,
                    args: p.args,
                    exclusive,
                    call,
                    reply: p.reply,
                },
            );
            return None;
        }
        let prepared = self.cx.runtime.prepare(&call).await;
        let (decided, dispatch) = match prepared {
            Prepared::Decided(c) => (Some(Ok(c)), None),
            Prepared::Ready => {
                self.running += 1;
                let runtime = self.cx.runtime.clone();
                let running = call.clone();
                let n = p.n;
                let task = tokio::spawn(async move { runtime.dispatch(&running).await });
                let d: Dispatched = async move {
                    let outcome = task
                        .await
                        .map_err(|e| Failure::new(format!("dispatch failed: {e}")));
                    (n, outcome)
                }
                .boxed();
                (None, Some(d))
            }
        };
        self.live.insert(
            p.n,
            Live {
                name: p.name,
                args: p.args,
                exclusive,
                call,
                reply: p.reply,
                decided,
            },
        );
        dispatch
    }

    /// Finalizes one call, records its settlement and settles its binding.
    async fn commit(&mut self, live: Live) {
        let Live {
            name,
            args,
            exclusive,
            call,
            reply,
            decided,
        } = live;
        let result = match decided {
            Some(Ok(candidate)) => self.cx.runtime.finalize(&call, candidate).await,
            Some(Err(f)) => Arc::new(ToolResult::failure(f)),
            None => Arc::new(ToolResult::failure(Failure::new(
                "the call was never decided",
            ))),
        };
        if exclusive {
            self.exclusive_open = false;
        }
        let exec = call.exec().clone();
        if let Some(session) = &self.cx.session {
            let record = DispatchRecord {
                exec: exec.clone(),
                result: result.clone(),
            };
            let content = self
                .cx
                .log
                .decide(&record, &|r: &DispatchRecord| r.result.content().clone());
            let outer = &self.cx.outer;
            let event = Event::code_dispatch(
                outer.root_call_id(),
                outer.call_id(),
                exec.call_id(),
                &name,
                &args,
                result.is_error(),
                &content,
            );
            if let Err(e) = session.append(event).await {
                tracing::error!(
                    call = exec.call_id(),
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
            Some(f) => Err(ToolCallError::new(&name, f.message())),
        };
        let _ = reply.send(answer);
    }
}
