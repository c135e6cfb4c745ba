//! The agent: one session, one model, a queue of prompts, and a driver that runs them one turn
//! at a time through the step scheduler.
//!
//! Guarantees:
//! - Work is logged before it is queued: a prompt's `agent/inbox/spliced` event is durable
//!   before [`Agent::send`] returns, and a send whose append fails queues nothing (LOOP-45).
//! - One turn at a time, one prompt per turn, in the order sent. The driver is started by the
//!   first send while idle and stops, going idle, when the queue is empty; the decision to stop
//!   and the status change happen under one lock, so a send never finds a driver that is about
//!   to stop without waking it.
//! - Cancel ends the running turn (its first cause wins, LOOP-31) and never leaves a marker
//!   behind when idle (LOOP-01). Without `keep_inbox` it also empties both inboxes. With it,
//!   queued prompts stay queued but do not run until the next send; a prompt sent after the
//!   cancel, while the turn is still winding down, is latched and runs (LOOP-04, 07). Any
//!   cancel clears the latch (LOOP-05).
//! - Dispose cancels with cause `disposed`, empties the inboxes, and refuses later sends
//!   (LOOP-08, 58).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use dsh_core::{AbortController, AbortReason, AgentId, CancelCause, ContextMessage, Json};
use dsh_scheduler::{Inbox, Runtime, TurnDriver, TurnEnd};
use dsh_session::{Event, Session};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::config::AgentConfig;
use crate::error::AgentError;
use crate::hooks::{AgentHooks, NoHooks};
use crate::source::{ModelSource, user_prompt};

/// Whether the agent is running a turn (or about to).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Nothing runs.
    Idle,
    /// The driver runs (a turn, or between turns).
    Running,
}

/// How a cancel treats queued work.
#[derive(Clone, Debug)]
pub struct Cancel {
    /// Keep queued prompts and steering (they run after the next send).
    pub keep_inbox: bool,
    /// The cause logged in `turn/end`.
    pub cause: CancelCause,
}

impl Cancel {
    /// A user's cancel that drops queued work.
    pub fn user() -> Cancel {
        Cancel {
            keep_inbox: false,
            cause: CancelCause::User,
        }
    }

    /// A user's cancel that keeps queued work.
    pub fn keeping_inbox() -> Cancel {
        Cancel {
            keep_inbox: true,
            cause: CancelCause::User,
        }
    }
}

/// How a turn ended, as [`Agent::prompt`] reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct TurnOutcome {
    /// The turn number.
    pub turn: u32,
    /// Its end.
    pub end: TurnEnd,
    /// The text of the turn's last assistant message (what a one-shot run prints).
    pub text: String,
}

struct State {
    status: Status,
    next_turn: VecDeque<ContextMessage>,
    turn: Option<AbortController>,
    cancelled: bool,
    latched: bool,
    disposed: bool,
    last: Option<TurnOutcome>,
}

struct Inner {
    runtime: Arc<Runtime>,
    session: Session,
    agent_id: Option<AgentId>,
    config: Arc<AgentConfig>,
    hooks: Mutex<Arc<dyn AgentHooks>>,
    next_step: Inbox,
    state: Mutex<State>,
    status: watch::Sender<Status>,
    listeners: Mutex<Vec<StatusListener>>,
    driver: tokio::sync::Mutex<TurnDriver>,
}

type StatusListener = Arc<dyn Fn(&Agent, Status) + Send + Sync>;

/// An agent loop over one session (see the module docs). Cheap to clone: clones share the
/// agent.
#[derive(Clone)]
pub struct Agent {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("session", &self.inner.session.id())
            .field("status", &self.status())
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// An agent running `runtime`'s tools over `session`, asking the model `config` names.
    /// Turn numbers continue after the session's last turn.
    pub fn new(runtime: Arc<Runtime>, session: Session, config: AgentConfig) -> Agent {
        Agent::with_agent_id(runtime, session, config, None)
    }

    /// [`Agent::new`] for a sub-agent `agent_id` (the tools it sees, the id its calls carry).
    pub fn with_agent_id(
        runtime: Arc<Runtime>,
        session: Session,
        config: AgentConfig,
        agent_id: Option<AgentId>,
    ) -> Agent {
        let next_step = Inbox::new();
        let mut driver = TurnDriver::new(runtime.clone(), session.clone(), agent_id.clone())
            .with_inbox(next_step.clone());
        if let Some(n) = config.max_parallel {
            driver = driver.with_max_parallel(n);
        }
        let (status, _) = watch::channel(Status::Idle);
        Agent {
            inner: Arc::new(Inner {
                runtime,
                session,
                agent_id,
                config: Arc::new(config),
                hooks: Mutex::new(Arc::new(NoHooks)),
                next_step,
                state: Mutex::new(State {
                    status: Status::Idle,
                    next_turn: VecDeque::new(),
                    turn: None,
                    cancelled: false,
                    latched: false,
                    disposed: false,
                    last: None,
                }),
                status,
                listeners: Mutex::new(Vec::new()),
                driver: tokio::sync::Mutex::new(driver),
            }),
        }
    }

    /// An agent with `hooks` installed; their `session_start` runs once, before anything else
    /// (source `startup` on a session without turns, `resume` otherwise). A failing
    /// `session_start` is logged as a warning and the agent still starts (LOOP-50).
    pub async fn start(
        runtime: Arc<Runtime>,
        session: Session,
        config: AgentConfig,
        hooks: impl AgentHooks,
    ) -> Agent {
        let agent = Agent::new(runtime, session, config);
        agent.set_hooks(hooks);
        let resumed = agent
            .inner
            .session
            .events()
            .iter()
            .any(|(_, e)| e.event_type() == "turn/start");
        let hooks = agent.inner.hooks.lock().clone();
        let source = if resumed { "resume" } else { "startup" };
        if let Err(failure) = hooks.session_start(&agent, source).await {
            tracing::warn!(error = %failure, "session-start hook failed");
        }
        agent
    }

    /// Installs the agent's hooks (they apply from the next step on).
    pub fn set_hooks(&self, hooks: impl AgentHooks) {
        *self.inner.hooks.lock() = Arc::new(hooks);
    }

    /// Calls `f` on every status change, synchronously, before the change has any effect: a
    /// listener that cancels or disposes on `Running` stops the turn before it starts
    /// (LOOP-10, 26). A listener that panics is caught and logged (LOOP-59).
    pub fn on_status(&self, f: impl Fn(&Agent, Status) + Send + Sync + 'static) {
        self.inner.listeners.lock().push(Arc::new(f));
    }

    fn notify(&self, status: Status) {
        self.inner.status.send_replace(status);
        let listeners: Vec<StatusListener> = self.inner.listeners.lock().clone();
        for listener in listeners {
            if dsh_core::contained::call(|| listener(self, status)).is_err() {
                tracing::warn!(?status, "a status listener panicked");
            }
        }
    }

    /// The session.
    pub fn session(&self) -> &Session {
        &self.inner.session
    }

    /// The sub-agent id, if any.
    pub fn agent_id(&self) -> Option<&AgentId> {
        self.inner.agent_id.as_ref()
    }

    /// Whether a turn runs.
    pub fn status(&self) -> Status {
        self.inner.state.lock().status
    }

    /// Watches the status (every change is sent).
    pub fn watch_status(&self) -> watch::Receiver<Status> {
        self.inner.status.subscribe()
    }

    /// The next-step inbox (contexts and steering waiting for the next step).
    pub fn next_step_inbox(&self) -> Vec<ContextMessage> {
        self.inner.next_step.snapshot()
    }

    /// The prompts waiting for a turn.
    pub fn next_turn_inbox(&self) -> Vec<ContextMessage> {
        self.inner.state.lock().next_turn.iter().cloned().collect()
    }

    /// How the last turn ended, if one did.
    pub fn last_turn(&self) -> Option<TurnOutcome> {
        self.inner.state.lock().last.clone()
    }

    async fn log_splice(
        &self,
        target: &str,
        start: usize,
        message: &ContextMessage,
    ) -> Result<(), AgentError> {
        let inserted = json!([{
            "content": &*message.content,
            "id": &*message.id,
            "role": &*message.role,
            "source": message.source.value(),
        }]);
        self.inner
            .session
            .append(Event::other(
                "agent/inbox/spliced",
                Json::from_shallow(json!({"target": target, "start": start, "inserted": inserted})),
            ))
            .await?;
        Ok(())
    }

    /// Queues a user prompt for its own turn, starting the driver if it is idle.
    pub async fn send(&self, text: &str) -> Result<(), AgentError> {
        self.send_message(user_prompt(text)).await
    }

    /// Queues a prompt message for its own turn, starting the driver if it is idle.
    pub async fn send_message(&self, message: ContextMessage) -> Result<(), AgentError> {
        let start = {
            let state = self.inner.state.lock();
            if state.disposed {
                return Err(AgentError::Disposed);
            }
            state.next_turn.len()
        };
        self.log_splice("next-turn", start, &message).await?;
        let wake = {
            let mut state = self.inner.state.lock();
            if state.disposed {
                return Err(AgentError::Disposed);
            }
            state.next_turn.push_back(message);
            if state.status == Status::Running {
                if state.cancelled {
                    state.latched = true;
                }
                false
            } else {
                state.status = Status::Running;
                true
            }
        };
        if wake {
            self.notify(Status::Running);
            // The driver claims the prompt now, as the send returns: a cancel right after it
            // ends this turn (LOOP-02, 09); one from a `Running` listener stops it first.
            let claimed = next_or_idle(&mut self.inner.state.lock());
            match claimed {
                Some(claimed) => {
                    let agent = self.clone();
                    tokio::spawn(async move { agent.drive(claimed).await });
                }
                None => self.notify(Status::Idle),
            }
        }
        Ok(())
    }

    /// Queues steering for the next step of the running turn (or the first step of the next
    /// turn when none runs).
    pub async fn steer(&self, message: ContextMessage) -> Result<(), AgentError> {
        if self.inner.state.lock().disposed {
            return Err(AgentError::Disposed);
        }
        self.log_splice("next-step", self.inner.next_step.len(), &message)
            .await?;
        self.inner.next_step.push(message);
        Ok(())
    }

    /// Queues a context from `plugin` for the next step (steering by another name).
    pub async fn inject(&self, plugin: &str, text: &str) -> Result<(), AgentError> {
        self.steer(ContextMessage::plugin_text(plugin, text)).await
    }

    /// Takes back a queued prompt or steering message by id before it is used; the removal is
    /// logged as a splice. Returns whether it was still queued (LOOP-06).
    pub async fn withdraw(&self, id: &str) -> Result<bool, AgentError> {
        let removed = {
            let mut state = self.inner.state.lock();
            match state.next_turn.iter().position(|m| &*m.id == id) {
                Some(at) => {
                    state.next_turn.remove(at);
                    Some(("next-turn", at))
                }
                None => self
                    .inner
                    .next_step
                    .remove(id)
                    .map(|(at, _)| ("next-step", at)),
            }
        };
        let Some((target, at)) = removed else {
            return Ok(false);
        };
        self.inner
            .session
            .append(Event::other(
                "agent/inbox/spliced",
                Json::from_shallow(json!({
                    "target": target, "start": at, "removedCount": 1, "inserted": [],
                })),
            ))
            .await?;
        Ok(true)
    }

    /// Cancels the running turn (see the module docs for what happens to queued work).
    pub fn cancel(&self, cancel: Cancel) {
        let mut state = self.inner.state.lock();
        if !cancel.keep_inbox {
            state.next_turn.clear();
            self.inner.next_step.clear();
        }
        state.latched = false;
        if state.status == Status::Running {
            state.cancelled = true;
            if let Some(turn) = &state.turn {
                turn.abort(AbortReason::Cancelled(cancel.cause));
            }
        }
    }

    /// Disposes the agent: the running turn ends with cause `disposed`, queued work is dropped
    /// and later sends fail with [`AgentError::Disposed`].
    pub fn dispose(&self) {
        let mut state = self.inner.state.lock();
        state.disposed = true;
        state.next_turn.clear();
        state.latched = false;
        self.inner.next_step.clear();
        if let Some(turn) = &state.turn {
            turn.abort(AbortReason::Cancelled(CancelCause::Disposed));
        }
    }

    /// Waits until the agent is idle.
    pub async fn idle(&self) {
        let mut rx = self.inner.status.subscribe();
        loop {
            if self.status() == Status::Idle {
                return;
            }
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// Sends `text` and waits until the agent is idle; returns how the last turn ended.
    pub async fn prompt(&self, text: &str) -> Result<Option<TurnOutcome>, AgentError> {
        self.send(text).await?;
        self.idle().await;
        Ok(self.last_turn())
    }

    async fn drive(self, first: (ContextMessage, AbortController)) {
        let mut driver = self.inner.driver.lock().await;
        let mut next = Some(first);
        while let Some((prompt, controller)) = next.take() {
            let mut source = ModelSource {
                agent: self.clone(),
                runtime: self.inner.runtime.clone(),
                config: self.inner.config.clone(),
                hooks: self.inner.hooks.lock().clone(),
                claimed: true,
                started: Instant::now(),
                output_tokens: 0,
                system: self.inner.config.system.clone(),
                retired: parking_lot::Mutex::new(None),
            };
            let result = driver
                .run_prompted(vec![prompt], &mut source, controller.signal())
                .await;
            let end = match result {
                Ok(report) => report.end,
                Err(e) => {
                    tracing::warn!(error = %e, "turn failed");
                    let _ = self
                        .inner
                        .session
                        .append(Event::other(
                            "agent/error",
                            Json::from_shallow(json!({
                                "turn": driver.last_turn(),
                                "error": {"message": e.to_string(), "code": "UNKNOWN"},
                            })),
                        ))
                        .await;
                    TurnEnd::Error(e.to_string())
                }
            };
            let outcome = TurnOutcome {
                turn: driver.last_turn(),
                end,
                text: last_text(&self.inner.session),
            };
            let settled = !matches!(
                outcome.end,
                TurnEnd::Blocked | TurnEnd::Error(_) | TurnEnd::Failed(_)
            );
            let mut state = self.inner.state.lock();
            state.last = Some(outcome);
            if !settled {
                // A blocked or failed turn leaves the queue for the next send (LOOP-46, 47).
                state.cancelled = true;
                state.latched = false;
            }
            next = next_or_idle(&mut state);
        }
        drop(driver);
        self.notify(Status::Idle);
    }
}

/// Under the state lock: the next prompt with a fresh controller for its turn, or `None` with
/// the status set to idle (disposed, cancelled without a latched send, or nothing queued).
fn next_or_idle(state: &mut State) -> Option<(ContextMessage, AbortController)> {
    let stop = state.disposed || (state.cancelled && !state.latched);
    state.cancelled = false;
    state.latched = false;
    let prompt = if stop {
        None
    } else {
        state.next_turn.pop_front()
    };
    let Some(prompt) = prompt else {
        state.status = Status::Idle;
        state.turn = None;
        return None;
    };
    let controller = AbortController::new();
    state.turn = Some(controller.clone());
    Some((prompt, controller))
}

/// The text of the last assistant message of the session's last turn: empty when that turn
/// has none (a request that failed must not hand back an earlier turn's answer).
fn last_text(session: &Session) -> String {
    let events = session.events();
    events
        .iter()
        .rev()
        .take_while(|(_, e)| e.event_type() != dsh_session::types::TURN_START)
        .find(|(_, e)| e.event_type() == dsh_session::types::ASSISTANT_MESSAGE)
        .and_then(|(_, e)| {
            let message = e.data().value().get("message")?;
            let blocks = message.get("content")?.as_array()?;
            Some(
                blocks
                    .iter()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(|b| b.get("text").and_then(Value::as_str))
                    .collect::<String>(),
            )
        })
        .unwrap_or_default()
}
