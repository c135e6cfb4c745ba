//! One-call steps side by side in a shared turn: the adapter for a host whose calls arrive one
//! at a time from outside and may overlap (`dsh mcp serve`: each `tools/call` of a client).
//!
//! Each call is a step of its own (`step/start`, an `assistant/message` holding that one call,
//! the call through [`Runtime::run_step`], its contexts, `step/end`). A turn opens when a call
//! arrives while none is open and ends (`turn/end`) when its last call's step has ended, so a
//! client that calls one tool at a time gets one turn per call (as [`crate::TurnDriver`] would
//! write it), and calls that overlap are steps of one turn, their events interleaved in the log.
//!
//! Guarantees:
//! - every call is recorded (`tool/call`, durable) before any policy runs, and gets exactly one
//!   `tool/result` in its own step; a call cancelled before it could start still gets its pair
//!   (`ABORTED_BEFORE_DISPATCH`);
//! - a call that must wait for admission (behind an exclusive one, or an exclusive one behind
//!   calls in progress) waits only once its step's `assistant/message` holding it is durable,
//!   so a process killed while it waits leaves it for repair to answer as never started;
//! - each call has its own signal: cancelling one never touches another;
//! - a call the registry classifies as exclusive runs with no other call of this adapter in
//!   progress, and none starts until its step has ended; parallel-safe calls overlap (each step
//!   still caps its own bodies at `max_parallel`);
//! - `turn/start` is written before any step of its turn and `turn/end` after the last
//!   `step/end` of it (both under one lock), so the turn is open whenever a call runs (the
//!   approval audit and the hook records need one), and the log pairs and checks as any other;
//! - call ids are unique in the session: an id the session already holds is renamed as
//!   [`crate::TurnDriver`] renames it (`<id>-<n>`, the given id kept as `originalId`).
//!
//! A turn's end reason is `aborted` when every call of it was cancelled, else `completed`.
//! Unlike a model's turn, the registry is not held for the step: a call sees the tool list as it
//! is when it starts (its definition is frozen then), so a server's changed list is not kept
//! waiting behind calls that keep overlapping.

use std::collections::HashSet;
use std::sync::Arc;

use dsh_core::{AgentId, Arguments, CancelCause, ExecutionMode, Json, Signal};
use dsh_session::{Event, Session};
use serde_json::json;

use crate::batch::ToolCallBlock;
use crate::error::SchedulerError;
use crate::queued::{Ack, Queued};
use crate::runtime::Runtime;
use crate::step::{DEFAULT_MAX_PARALLEL, StepContext, StepOutcome};

/// Runs calls that arrive one at a time, each as a step, overlapping steps sharing a turn.
pub struct SharedTurn {
    runtime: Arc<Runtime>,
    session: Session,
    agent: Option<AgentId>,
    max_parallel: usize,
    state: tokio::sync::Mutex<State>,
    /// Read-held by each parallel-safe call, write-held by an exclusive one, through its step.
    admission: tokio::sync::RwLock<()>,
}

struct State {
    last_turn: u32,
    open: Option<OpenTurn>,
    /// Every call id the session holds.
    used_ids: HashSet<Arc<str>>,
}

struct OpenTurn {
    turn: u32,
    steps: u32,
    /// Steps started and not yet ended.
    active: usize,
    /// Whether a call of the turn ran to its end without being cancelled.
    any_completed: bool,
}

/// What one call did: its step's outcome, with the id it was logged under.
#[derive(Debug)]
#[non_exhaustive]
pub struct SharedCall {
    /// The call id in the log (the given one, or its renamed form when the session held it).
    pub call_id: Arc<str>,
    /// The turn and step it ran in.
    pub turn: u32,
    /// The step it ran in.
    pub step: u32,
    /// The step's outcome: its one result (none only if the step failed before it).
    pub outcome: StepOutcome,
}

impl SharedTurn {
    /// An adapter over `session`; turn numbers continue after the last `turn/start` already in
    /// it, and the ids it holds count as used.
    pub fn new(runtime: Arc<Runtime>, session: Session, agent: Option<AgentId>) -> SharedTurn {
        let mut last_turn = 0u32;
        let mut used_ids = HashSet::new();
        for (_, event) in session.events().iter() {
            if event.event_type() == "turn/start"
                && let Some(t) = event.data().value().get("turn").and_then(|t| t.as_u64())
            {
                last_turn = last_turn.max(u32::try_from(t).unwrap_or(u32::MAX));
            }
            if let Some(call) = event.as_tool_call() {
                used_ids.insert(Arc::from(call.call_id));
            }
        }
        SharedTurn {
            runtime,
            session,
            agent,
            max_parallel: DEFAULT_MAX_PARALLEL,
            state: tokio::sync::Mutex::new(State {
                last_turn,
                open: None,
                used_ids,
            }),
            admission: tokio::sync::RwLock::new(()),
        }
    }

    /// Sets each step's pool size (validate with [`crate::validate_max_parallel`]).
    pub fn with_max_parallel(mut self, n: usize) -> SharedTurn {
        self.max_parallel = n.max(1);
        self
    }

    /// The session.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Runs one call (`name` with the raw `arguments` text) under `signal`, as a step of the
    /// open turn or of a new one; returns once its result (and its contexts) are durable. The
    /// step's end, and the turn's when it was the last step, are written after them in order
    /// and not waited for: a caller that replies at once does not wait for one more sync.
    pub async fn call(
        &self,
        call_id: &str,
        name: &str,
        arguments: &str,
        signal: Signal,
    ) -> Result<SharedCall, SchedulerError> {
        let mode = self.runtime.registry().execution_mode(
            name,
            self.agent.as_ref(),
            &Arguments::from_raw(arguments),
        );
        // Admission: an exclusive call waits for every call in progress, and holds off the
        // rest. A call admitted at once goes straight on; one that must wait is recorded first
        // (below), then waits.
        let (mut _alone, mut _beside) = (None, None);
        let admitted = match mode {
            ExecutionMode::Exclusive => self.admission.try_write().map(|g| _alone = Some(g)),
            _ => self.admission.try_read().map(|g| _beside = Some(g)),
        }
        .is_ok();
        let mut pending = Queued::default();
        let (block, message, turn, step) = {
            let mut st = self.state.lock().await;
            let (id, original) = unique_id(&mut st.used_ids, call_id);
            let turn = match &mut st.open {
                Some(open) => open.turn,
                None => {
                    st.last_turn += 1;
                    let turn = st.last_turn;
                    st.open = Some(OpenTurn {
                        turn,
                        steps: 0,
                        active: 0,
                        any_completed: false,
                    });
                    pending.push(&self.session, Event::turn_start(turn))?;
                    turn
                }
            };
            let open = st.open.as_mut().ok_or(SchedulerError::Internal(
                "the shared turn closed while a call was being opened",
            ))?;
            open.steps += 1;
            open.active += 1;
            let step = open.steps;
            let mut block_json = json!({
                "type": "tool-call", "id": &*id, "name": name, "arguments": arguments,
            });
            if let Some(original) = original {
                block_json["originalId"] = json!(original);
            }
            let message = Json::from_shallow(json!({"role": "assistant", "content": [block_json]}));
            let block = ToolCallBlock {
                call_id: id,
                name: Arc::from(name),
                arguments: Arc::from(arguments),
            };
            (block, message, turn, step)
        };
        // Written in order after the turn's start; the step's `tool/call` being durable means
        // these are (the log is written in order), so they are not waited for on their own.
        let opened = pending
            .push(&self.session, Event::step_start(turn, step))
            .and_then(|()| {
                pending.push(&self.session, Event::assistant_message(turn, step, message))
            });
        // A call that must wait is durable before it waits: its step's `assistant/message`
        // holds it, so a process killed meanwhile leaves it in the log, and repair answers it
        // as never started (spec I4). A call cancelled while it waits goes on without
        // admission: its step records it and answers it as aborted before dispatch, running
        // nothing.
        let opened = match opened {
            Ok(()) if !admitted => {
                let durable = pending.settle().await;
                if durable.is_ok() {
                    match mode {
                        ExecutionMode::Exclusive => tokio::select! {
                            guard = self.admission.write() => _alone = Some(guard),
                            _ = signal.aborted() => {}
                        },
                        _ => tokio::select! {
                            guard = self.admission.read() => _beside = Some(guard),
                            _ = signal.aborted() => {}
                        },
                    }
                }
                durable
            }
            other => other,
        };
        let ran = match opened {
            Ok(()) => {
                let cx = StepContext {
                    session: self.session.clone(),
                    turn,
                    step,
                    agent: self.agent.clone(),
                    signal: signal.clone(),
                    max_parallel: self.max_parallel,
                };
                self.runtime
                    .run_step(&cx, std::slice::from_ref(&block))
                    .await
            }
            Err(e) => Err(e),
        };
        let mut ran = ran;
        if let Err(e) = pending.settle().await
            && ran.is_ok()
        {
            ran = Err(e);
        }
        match ran {
            Ok(outcome) => {
                let cancelled = outcome.aborted || signal.is_aborted();
                // The contexts a hook added reach the log before the step ends (spec F6); a
                // cancelled call's are dropped with it (there is no next step to open).
                let contexts = if cancelled {
                    Vec::new()
                } else {
                    outcome
                        .contexts
                        .iter()
                        .map(|ctx| Box::pin(self.session.append(Event::user_message(ctx))) as Ack)
                        .collect()
                };
                self.close(turn, step, !cancelled, contexts, Wait::ResultOnly)
                    .await?;
                Ok(SharedCall {
                    call_id: block.call_id,
                    turn,
                    step,
                    outcome,
                })
            }
            Err(e) => {
                // Best effort: the log may be what failed.
                let _ = self.close(turn, step, false, Vec::new(), Wait::All).await;
                Err(e)
            }
        }
    }

    /// Ends `step` (after `before`, its contexts), and its turn when it was the last step in
    /// progress; returns once all of it is durable, or, with [`Wait::ResultOnly`], once the
    /// contexts are (the step's and turn's ends are written after them, in order; a failure
    /// to write them is logged and fails the next append).
    async fn close(
        &self,
        turn: u32,
        step: u32,
        completed: bool,
        before: Vec<Ack>,
        wait: Wait,
    ) -> Result<(), SchedulerError> {
        let waited = before.len();
        let mut acks = before;
        {
            let mut st = self.state.lock().await;
            acks.push(Box::pin(self.session.append(Event::step_end(turn, step))));
            if let Some(open) = st.open.as_mut().filter(|o| o.turn == turn) {
                open.active = open.active.saturating_sub(1);
                open.any_completed |= completed;
                if open.active == 0 {
                    let reason = if open.any_completed {
                        json!({"kind": "completed"})
                    } else {
                        json!({"kind": "aborted", "reason": {"kind": CancelCause::User.kind()}})
                    };
                    acks.push(Box::pin(
                        self.session
                            .append(Event::turn_end(turn, Json::from_shallow(reason))),
                    ));
                    st.open = None;
                }
            }
        }
        let later = match wait {
            Wait::All => Vec::new(),
            Wait::ResultOnly => acks.split_off(waited),
        };
        // Not waited for: they are written with the next call's `tool/call` (or shortly after,
        // if none comes), and a failure to write them is logged by the session and fails the
        // next append. Waiting here, even in a task of its own, would sync them alone.
        drop(later);
        wait_all(&mut acks).await
    }
}

/// What [`SharedTurn::close`] waits for.
#[derive(Clone, Copy)]
enum Wait {
    /// Everything it wrote.
    All,
    /// The step's contexts: the reply need not wait for the step's and turn's ends.
    ResultOnly,
}

/// Waits for every acknowledgement in `pending` (all of them, even after a failure); the
/// first failure is the error.
async fn wait_all(pending: &mut Vec<Ack>) -> Result<(), SchedulerError> {
    let mut first = None;
    for ack in pending.drain(..) {
        if let Err(e) = ack.await
            && first.is_none()
        {
            first = Some(e);
        }
    }
    match first {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

/// `id` when the session does not hold it yet, else `<id>-<n>` with the smallest free `n >= 2`
/// (and the given id, to keep as `originalId`); the id returned is recorded as used.
fn unique_id(used: &mut HashSet<Arc<str>>, id: &str) -> (Arc<str>, Option<String>) {
    if !used.contains(id) {
        let id: Arc<str> = Arc::from(id);
        used.insert(id.clone());
        return (id, None);
    }
    let fresh = (2u64..)
        .map(|n| format!("{id}-{n}"))
        .find(|c| !used.contains(c.as_str()))
        .unwrap_or_else(|| format!("{id}-x"));
    let fresh: Arc<str> = Arc::from(fresh.as_str());
    used.insert(fresh.clone());
    (fresh, Some(id.to_owned()))
}
