//! The turn driver (the loop the CLI, the tests and the agent loop use): takes assistant
//! messages one step at a time from a [`StepSource`] (a script, or a model behind the agent
//! loop) and writes the reference framing: `turn/start`, `step/start`, the
//! next-step inbox as `user/message`s, `assistant/message`, the batch, its contexts, `step/end`,
//! `turn/end {reason}`. A cancel of the turn stops it after the batch in flight.
//!
//! Contexts of a batch are appended after all of its results, before `step/end` (spec F6); when
//! the turn was cancelled they stay in the inbox and open the next turn's first step (CAN-20).
//!
//! Call ids are unique per session (an exported history with two calls of one id is refused by
//! the providers): a message reusing an id the session already holds (or holding one twice) has
//! that call renamed before it is logged, to `<id>-<n>` with the smallest `n >= 2` not yet used,
//! and the block keeps the model's own id as `originalId`. The renaming is reversible from the
//! log alone, and the model sees the unique id from then on.

use std::collections::HashSet;
use std::sync::Arc;

use dsh_core::{AgentId, CancelCause, ContextMessage, Json, Signal};
use dsh_session::{Event, Session};
use serde_json::{Value, json};
use tracing::Instrument;

use crate::batch::tool_calls_of;
use crate::error::SchedulerError;
use crate::runtime::Runtime;
use crate::step::{DEFAULT_MAX_PARALLEL, StepContext, StepOutcome};

/// How a turn ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TurnEnd {
    /// The model finished (or a call concluded the turn).
    Completed,
    /// The turn was cancelled.
    Aborted(CancelCause),
    /// The scheduler failed.
    Error(String),
}

impl TurnEnd {
    /// The `turn/end` reason in the reference shape.
    pub fn reason_json(&self) -> serde_json::Value {
        match self {
            TurnEnd::Completed => json!({"kind": "completed"}),
            TurnEnd::Aborted(c) => json!({"kind": "aborted", "reason": {"kind": c.kind()}}),
            TurnEnd::Error(m) => {
                json!({"kind": "error", "error": {"message": m, "code": "UNKNOWN"}})
            }
        }
    }
}

/// What one turn did.
#[derive(Debug)]
pub struct TurnReport {
    /// The turn number.
    pub turn: u32,
    /// How it ended.
    pub end: TurnEnd,
    /// Each step's batch outcome.
    pub steps: Vec<StepOutcome>,
}

/// What a [`StepSource`] sees when asked for the next step's message.
pub struct SourceContext<'a> {
    /// The session, holding everything logged so far (a model source derives the history it
    /// sends from it, and logs its own stream events there).
    pub session: &'a Session,
    /// The turn number.
    pub turn: u32,
    /// The step number the message will have.
    pub step: u32,
    /// The turn's signal: a source stops streaming once it is aborted and returns what it has
    /// (the driver then ends the turn as aborted).
    pub signal: &'a Signal,
}

/// One step's assistant message, as its source made it.
pub struct Sourced {
    /// The message in the reference shape (`{role: "assistant", content: [...]}`), with each
    /// tool call's arguments as the raw text the model produced.
    pub message: Json,
    /// Token usage, logged with the message.
    pub usage: Option<Json>,
    /// The seqs of the events the message was assembled from (stream chunks), logged as its
    /// `sourceEventSeqs`.
    pub source_event_seqs: Vec<u64>,
}

/// Where a turn's assistant messages come from: a script (`dsh run`, tests) or a model.
///
/// The driver asks for one message per step, after `step/start` and the step's inbox are
/// logged, and logs what it gets as the step's `assistant/message`. A source that gets no
/// message (a script that ran out) returns `None` and the turn ends. A source that failed (a
/// model request) returns an error: the turn ends with reason `error` and the error is
/// returned.
#[async_trait::async_trait]
pub trait StepSource: Send {
    /// Whether the source knows, before a step opens, that it has no message left (a script
    /// that ran out): the turn then ends without opening another step. A model never knows.
    fn exhausted(&mut self) -> bool {
        false
    }

    /// The next step's message.
    async fn next_message(
        &mut self,
        cx: &SourceContext<'_>,
    ) -> Result<Option<Sourced>, SchedulerError>;
}

/// A scripted model: one message per step, in order.
pub struct Script<I: Iterator>(std::iter::Peekable<I>);

impl<I: Iterator<Item = Json>> Script<I> {
    /// A script of the given messages.
    pub fn new(messages: impl IntoIterator<IntoIter = I>) -> Script<I> {
        Script(messages.into_iter().peekable())
    }
}

#[async_trait::async_trait]
impl<I> StepSource for Script<I>
where
    I: Iterator<Item = Json> + Send,
{
    fn exhausted(&mut self) -> bool {
        self.0.peek().is_none()
    }

    async fn next_message(
        &mut self,
        _cx: &SourceContext<'_>,
    ) -> Result<Option<Sourced>, SchedulerError> {
        Ok(self.0.next().map(|message| Sourced {
            message,
            usage: None,
            source_event_seqs: Vec::new(),
        }))
    }
}

/// Drives turns of one agent over one session.
pub struct TurnDriver {
    runtime: Arc<Runtime>,
    session: Session,
    agent: Option<AgentId>,
    max_parallel: usize,
    inbox: Vec<ContextMessage>,
    last_turn: u32,
    /// Every call id the session holds.
    used_ids: HashSet<Arc<str>>,
}

impl TurnDriver {
    /// A driver; turn numbers continue after the last `turn/start` already in the session.
    pub fn new(runtime: Arc<Runtime>, session: Session, agent: Option<AgentId>) -> TurnDriver {
        let last_turn = session
            .events()
            .iter()
            .filter(|(_, e)| e.event_type() == "turn/start")
            .filter_map(|(_, e)| e.data().value().get("turn").and_then(|t| t.as_u64()))
            .max()
            .unwrap_or(0) as u32;
        let used_ids = session
            .events()
            .iter()
            .filter_map(|(_, e)| e.as_tool_call().map(|c| Arc::from(c.call_id)))
            .collect();
        TurnDriver {
            runtime,
            session,
            agent,
            max_parallel: DEFAULT_MAX_PARALLEL,
            inbox: Vec::new(),
            last_turn,
            used_ids,
        }
    }

    /// The message with every call id unique in the session (see the module docs); the ids are
    /// recorded as used.
    fn unique_ids(&mut self, message: Json) -> Json {
        let clashes = message
            .value()
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool-call"))
            .filter_map(|b| b.get("id").and_then(Value::as_str))
            .scan(HashSet::new(), |seen, id| {
                Some(!seen.insert(id) || self.used_ids.contains(id))
            })
            .any(|clash| clash);
        if !clashes {
            for block in tool_calls_of(&message) {
                self.used_ids.insert(block.call_id.clone());
            }
            return message;
        }
        let mut value = message.to_value();
        if let Some(blocks) = value.get_mut("content").and_then(Value::as_array_mut) {
            for block in blocks {
                if block.get("type").and_then(Value::as_str) != Some("tool-call") {
                    continue;
                }
                let Some(id) = block.get("id").and_then(Value::as_str).map(str::to_owned) else {
                    continue;
                };
                if self.used_ids.insert(Arc::from(id.as_str())) {
                    continue;
                }
                let fresh = (2u64..)
                    .map(|n| format!("{id}-{n}"))
                    .find(|c| !self.used_ids.contains(c.as_str()))
                    .unwrap_or_else(|| format!("{id}-x"));
                self.used_ids.insert(Arc::from(fresh.as_str()));
                if let Some(obj) = block.as_object_mut() {
                    obj.insert("id".into(), Value::from(fresh));
                    obj.insert("originalId".into(), Value::from(id));
                }
            }
        }
        Json::from_shallow(value)
    }

    /// Sets the pool size (validate with [`crate::validate_max_parallel`]).
    pub fn with_max_parallel(mut self, n: usize) -> TurnDriver {
        self.max_parallel = n.max(1);
        self
    }

    /// Contexts waiting for the next step.
    pub fn inbox(&self) -> &[ContextMessage] {
        &self.inbox
    }

    /// The session.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Runs one turn over the given assistant messages (one per step).
    pub async fn run_turn<I>(
        &mut self,
        steps: I,
        signal: Signal,
    ) -> Result<TurnReport, SchedulerError>
    where
        I: IntoIterator<Item = Json>,
        I::IntoIter: Send,
    {
        self.run_turn_from(&mut Script::new(steps), signal).await
    }

    /// Runs one turn, asking `source` for each step's assistant message.
    pub async fn run_turn_from(
        &mut self,
        source: &mut dyn StepSource,
        signal: Signal,
    ) -> Result<TurnReport, SchedulerError> {
        self.last_turn += 1;
        let turn = self.last_turn;
        let span = tracing::debug_span!("turn", turn, end = tracing::field::Empty);
        let report = self
            .run_turn_in(turn, source, signal)
            .instrument(span.clone())
            .await;
        if let Ok(r) = &report {
            span.record("end", tracing::field::debug(&r.end));
        }
        report
    }

    async fn run_turn_in(
        &mut self,
        turn: u32,
        source: &mut dyn StepSource,
        signal: Signal,
    ) -> Result<TurnReport, SchedulerError> {
        self.session.append(Event::turn_start(turn)).await?;
        let mut report = TurnReport {
            turn,
            end: TurnEnd::Completed,
            steps: Vec::new(),
        };
        let mut step = 0u32;
        loop {
            if source.exhausted() {
                break;
            }
            if let Some(reason) = signal.reason() {
                report.end = aborted_end(&reason);
                break;
            }
            step += 1;
            self.session.append(Event::step_start(turn, step)).await?;
            for ctx in std::mem::take(&mut self.inbox) {
                self.session.append(Event::user_message(&ctx)).await?;
            }
            let asked = SourceContext {
                session: &self.session,
                turn,
                step,
                signal: &signal,
            };
            let sourced = match source.next_message(&asked).await {
                Ok(Some(sourced)) => sourced,
                Ok(None) => {
                    self.session.append(Event::step_end(turn, step)).await?;
                    break;
                }
                Err(e) => {
                    report.end = TurnEnd::Error(e.to_string());
                    let _ = self.session.append(Event::step_end(turn, step)).await;
                    let _ = self
                        .session
                        .append(Event::turn_end(
                            turn,
                            Json::from_shallow(report.end.reason_json()),
                        ))
                        .await;
                    return Err(e);
                }
            };
            let message = self.unique_ids(sourced.message);
            let mut event = Event::assistant_message_with_usage(
                turn,
                step,
                message.clone(),
                sourced.usage.as_ref(),
            );
            if !sourced.source_event_seqs.is_empty() {
                event = event.with_source_event_seqs(sourced.source_event_seqs);
            }
            self.session.append(event).await?;
            let blocks = tool_calls_of(&message);
            if blocks.is_empty() {
                self.session.append(Event::step_end(turn, step)).await?;
                // A message cut short by a cancel (a source stops streaming) ends the turn
                // as aborted, not completed (LOOP-17's order: message, step/end, turn/end).
                if let Some(reason) = signal.reason() {
                    report.end = aborted_end(&reason);
                }
                break;
            }
            let cx = StepContext {
                session: self.session.clone(),
                turn,
                step,
                agent: self.agent.clone(),
                signal: signal.clone(),
                max_parallel: self.max_parallel,
            };
            let outcome = match self.runtime.run_step(&cx, &blocks).await {
                Ok(o) => o,
                Err(e) => {
                    report.end = TurnEnd::Error(e.to_string());
                    // Best effort: the log may be what failed.
                    let _ = self.session.append(Event::step_end(turn, step)).await;
                    let _ = self
                        .session
                        .append(Event::turn_end(
                            turn,
                            Json::from_shallow(report.end.reason_json()),
                        ))
                        .await;
                    return Err(e);
                }
            };
            let cancelled = outcome.aborted || signal.is_aborted();
            if cancelled {
                self.inbox.extend(outcome.contexts.iter().cloned());
            } else {
                for ctx in &outcome.contexts {
                    self.session.append(Event::user_message(ctx)).await?;
                }
            }
            self.session.append(Event::step_end(turn, step)).await?;
            let concludes = outcome.concludes_turn;
            report.steps.push(outcome);
            if cancelled {
                report.end = signal
                    .reason()
                    .map_or(TurnEnd::Aborted(CancelCause::User), |r| aborted_end(&r));
                break;
            }
            if concludes {
                break;
            }
        }
        self.session
            .append(Event::turn_end(
                turn,
                Json::from_shallow(report.end.reason_json()),
            ))
            .await?;
        Ok(report)
    }
}

fn aborted_end(reason: &dsh_core::AbortReason) -> TurnEnd {
    match reason {
        dsh_core::AbortReason::Cancelled(c) => TurnEnd::Aborted(c.clone()),
        dsh_core::AbortReason::Timeout(t) => TurnEnd::Aborted(CancelCause::Other(t.code().into())),
    }
}
