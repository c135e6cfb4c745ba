//! The turn driver (the loop the CLI, the tests and the agent loop use): takes assistant
//! messages one step at a time from a [`StepSource`] (a script, or a model behind the agent
//! loop) and writes the reference framing: `turn/start`, `step/start`, the turn's prompt and
//! the next-step inbox as `user/message`s, `assistant/message`, the batch, its contexts,
//! `step/end`, `turn/end {reason}`. A cancel of the turn stops it after the batch in flight.
//!
//! A step opens only when it has something to answer: the turn's prompt or inbox messages (as
//! the source's `pre_step` lets them through), or the results of the previous step's calls. When
//! the model answers without calls, the source's `stopping` runs and the turn goes on while the
//! inbox holds steering (which also outweighs a call that concludes the turn, LOG-11).
//!
//! Contexts of a batch are appended after all of its results, before `step/end` (spec F6); when
//! the turn was cancelled they stay in the inbox and open the next turn's first step (CAN-20).
//!
//! Durability: the framing and the messages are queued, not each waited for ([`Queued`]). What
//! the driver waits for is what someone outside acts on: `step/start` (its listeners may cancel
//! the turn before the request, LOOP-23/24, and see it as the log's last event, LOOP-67; the
//! previous step's end is written with it), the messages a model is sent (before its request),
//! everything before a turn-stopping hook, the model-visible messages before a pre-step hook,
//! the calls' `tool/call`s (the step waits for them before any policy runs, and the log is
//! written in order, so the assistant message is durable by then), the results (the step makes
//! them final only once durable) and `turn/end`. A tool step of one call in a log on disk syncs
//! three times (its start, its `tool/call`, its `tool/result`), not five.
//!
//! Call ids are unique per session (an exported history with two calls of one id is refused by
//! the providers): a message reusing an id the session already holds (or holding one twice) has
//! that call renamed before it is logged, to `<id>-<n>` with the smallest `n >= 2` not yet used,
//! and the block keeps the model's own id as `originalId`. A call the model gave no id (the key
//! missing, `null` or `""`: some OpenAI-compatible servers stream calls so) gets a fresh one,
//! `dsh-call-<n>` with the smallest free `n >= 1`, and `originalId: ""`; without it the call
//! could not be paired with its result, and providers refuse an empty `tool_call_id`. The
//! renaming is reversible from the log alone, and the model sees the unique id from then on.

use std::collections::HashSet;
use std::sync::Arc;

use dsh_core::{AgentId, CancelCause, ContextMessage, Json, Signal};
use dsh_session::{Event, Session};
use serde_json::{Value, json};
use tracing::Instrument;

use crate::batch::{ToolCallBlock, tool_calls_of};
use crate::error::SchedulerError;
use crate::inbox::Inbox;
use crate::queued::Queued;
use crate::runtime::Runtime;
use crate::source::{Next, PreStep, Script, SourceContext, StepInput, StepSource};
use crate::step::{DEFAULT_MAX_PARALLEL, StepContext, StepOutcome};

/// The prefix of the id given to a call the model sent without one (`dsh-call-1`, ...).
const GENERATED_ID_PREFIX: &str = "dsh-call-";

/// How a turn ended.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum TurnEnd {
    /// The model finished (or a call concluded the turn).
    Completed,
    /// The turn was cancelled.
    Aborted(CancelCause),
    /// The scheduler, a source or a hook failed (code `UNKNOWN`).
    Error(String),
    /// A failure reported as it came (a model request's `{message, code, status, ...}`).
    Failed(Json),
    /// The prompt was rejected before any step opened.
    Blocked,
    /// The model stopped at its output limit; tool calls of that message did not run.
    MaxTokens,
    /// A limit of the loop ended the turn (`steps`, `tokens`, `wall-time`).
    Limit(Arc<str>),
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
            TurnEnd::Failed(error) => json!({"kind": "error", "error": error.value()}),
            TurnEnd::Blocked => json!({"kind": "blocked"}),
            TurnEnd::MaxTokens => json!({"kind": "max-tokens"}),
            TurnEnd::Limit(limit) => json!({"kind": "limit", "limit": &**limit}),
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

/// Drives turns of one agent over one session.
pub struct TurnDriver {
    runtime: Arc<Runtime>,
    session: Session,
    agent: Option<AgentId>,
    max_parallel: usize,
    inbox: Inbox,
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
            inbox: Inbox::new(),
            last_turn,
            used_ids,
        }
    }

    /// The message with every call id unique in the session and non-empty (see the module
    /// docs), and its tool calls in model order; the ids are recorded as used. The calls are
    /// read from the message once: when no id needs renaming (the usual case), that one
    /// reading is both the check and the calls returned.
    fn unique_ids(&mut self, message: Json) -> (Json, Vec<ToolCallBlock>) {
        let calls = tool_calls_of(&message);
        if !self.needs_renaming(&calls) {
            for call in &calls {
                self.used_ids.insert(call.call_id.clone());
            }
            return (message, calls);
        }
        let mut value = message.to_value();
        if let Some(blocks) = value.get_mut("content").and_then(Value::as_array_mut) {
            for block in blocks {
                if block.get("type").and_then(Value::as_str) != Some("tool-call") {
                    continue;
                }
                let id = block
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                if !id.is_empty() && self.used_ids.insert(Arc::from(id.as_str())) {
                    continue;
                }
                let fresh = if id.is_empty() {
                    (1u64..)
                        .map(|n| format!("{GENERATED_ID_PREFIX}{n}"))
                        .find(|c| !self.used_ids.contains(c.as_str()))
                } else {
                    (2u64..)
                        .map(|n| format!("{id}-{n}"))
                        .find(|c| !self.used_ids.contains(c.as_str()))
                }
                .unwrap_or_else(|| format!("{id}-x"));
                self.used_ids.insert(Arc::from(fresh.as_str()));
                if let Some(obj) = block.as_object_mut() {
                    obj.insert("id".into(), Value::from(fresh));
                    obj.insert("originalId".into(), Value::from(id));
                }
            }
        }
        let message = Json::from_shallow(value);
        let calls = tool_calls_of(&message);
        (message, calls)
    }

    /// Whether a call id of `calls` is empty, repeated among them, or already in the session.
    fn needs_renaming(&self, calls: &[ToolCallBlock]) -> bool {
        // Few calls (the usual message) are compared pairwise; many go through a set.
        let repeated = if calls.len() <= 8 {
            calls
                .iter()
                .enumerate()
                .any(|(i, c)| calls[..i].iter().any(|p| p.call_id == c.call_id))
        } else {
            let mut seen = HashSet::with_capacity(calls.len());
            !calls.iter().all(|c| seen.insert(&*c.call_id))
        };
        repeated
            || calls
                .iter()
                .any(|c| c.call_id.is_empty() || self.used_ids.contains(&*c.call_id))
    }

    /// Sets the pool size (validate with [`crate::validate_max_parallel`]).
    pub fn with_max_parallel(mut self, n: usize) -> TurnDriver {
        self.max_parallel = n.max(1);
        self
    }

    /// Contexts and steering waiting for the next step (a shared handle: push to it while a
    /// turn runs to steer it).
    pub fn inbox(&self) -> &Inbox {
        &self.inbox
    }

    /// Shares `inbox` as this driver's next-step inbox (what it held is kept, in front).
    pub fn with_inbox(mut self, inbox: Inbox) -> TurnDriver {
        inbox.restore(self.inbox.take());
        self.inbox = inbox;
        self
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
        self.run_prompted(Vec::new(), source, signal).await
    }

    /// Runs one turn that opens with `prompt` (logged as the first step's first messages, before
    /// the inbox), asking `source` for each step's assistant message.
    pub async fn run_prompted(
        &mut self,
        prompt: Vec<ContextMessage>,
        source: &mut dyn StepSource,
        signal: Signal,
    ) -> Result<TurnReport, SchedulerError> {
        self.last_turn += 1;
        let turn = self.last_turn;
        let span = tracing::debug_span!("turn", turn, end = tracing::field::Empty);
        let report = self
            .run_turn_in(turn, prompt, source, signal)
            .instrument(span.clone())
            .await;
        if let Ok(r) = &report {
            span.record("end", tracing::field::debug(&r.end));
        }
        report
    }

    /// The number of the last turn started (0 before any).
    pub fn last_turn(&self) -> u32 {
        self.last_turn
    }

    async fn run_turn_in(
        &mut self,
        turn: u32,
        prompt: Vec<ContextMessage>,
        source: &mut dyn StepSource,
        signal: Signal,
    ) -> Result<TurnReport, SchedulerError> {
        let mut queued = Queued::default();
        queued.push(&self.session, Event::turn_start(turn))?;
        let mut report = TurnReport {
            turn,
            end: TurnEnd::Completed,
            steps: Vec::new(),
        };
        match self
            .run_steps(turn, prompt, source, &signal, &mut report, &mut queued)
            .await
        {
            Ok(()) => {}
            Err(e) => {
                report.end = TurnEnd::Error(e.to_string());
                // Best effort: the log may be what failed.
                let _ = queued.settle().await;
                if let Some((t, s)) = self.session.open_step() {
                    let _ = self.session.append(Event::step_end(t, s)).await;
                }
                let _ = self
                    .session
                    .append(Event::turn_end(
                        turn,
                        Json::from_shallow(report.end.reason_json()),
                    ))
                    .await;
                return Err(e);
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

    async fn run_steps(
        &mut self,
        turn: u32,
        mut prompt: Vec<ContextMessage>,
        source: &mut dyn StepSource,
        signal: &Signal,
        report: &mut TurnReport,
        queued: &mut Queued,
    ) -> Result<(), SchedulerError> {
        let mut step = 0u32;
        let mut continuation = false;
        loop {
            if source.exhausted() {
                return Ok(());
            }
            if let Some(reason) = signal.reason() {
                report.end = aborted_end(&reason);
                return Ok(());
            }
            let prompt_len = prompt.len();
            let mut offered = std::mem::take(&mut prompt);
            offered.extend(self.inbox.take());
            let input = StepInput {
                turn,
                step: step + 1,
                messages: offered.clone(),
                continuation,
                signal: signal.clone(),
            };
            // A pre-step hook may read the log: the model-visible messages queued (a step's
            // contexts) are durable first.
            queued.settle_visible().await?;
            let decided = source.pre_step(&self.session, input).await;
            // A cancel while the step was being decided wins over what was decided (LOOP-74).
            if let Some(reason) = signal.reason() {
                self.inbox.restore(offered.split_off(prompt_len));
                report.end = aborted_end(&reason);
                return Ok(());
            }
            let messages = match decided {
                Ok(PreStep::Enter(messages)) => messages,
                Ok(PreStep::End(end)) => {
                    self.inbox.restore(offered.split_off(prompt_len));
                    report.end = end;
                    return Ok(());
                }
                Err(e) => {
                    self.inbox.restore(offered.split_off(prompt_len));
                    return Err(e);
                }
            };
            // Nothing to answer: no message let through and no results to answer. (A turn with
            // no prompt at all, a script's, still opens its first step.)
            if messages.is_empty() && !continuation && (step > 0 || !offered.is_empty()) {
                return Ok(());
            }
            step += 1;
            // The step's model request and its calls see one tool list: a tool group replaced
            // meanwhile (an MCP server's new list) waits for the step's end.
            let _steady = self.runtime.registry().hold();
            // `step/start` is durable, and the last event of the log, when its listeners run
            // (LOOP-67), and before the model is asked: a listener that cancels the turn
            // there sends no request (LOOP-23/24). The previous step's end goes with it.
            queued.push(&self.session, Event::step_start(turn, step))?;
            queued.settle().await?;
            for ctx in &messages {
                queued.push_visible(&self.session, Event::user_message(ctx))?;
            }
            // The model is sent a history holding these messages: durable first.
            queued.settle_visible().await?;
            let cx = SourceContext {
                session: &self.session,
                turn,
                step,
                signal,
                inbox: &self.inbox,
            };
            let sourced = match source.next_message(&cx).await? {
                Next::Message(sourced) => sourced,
                Next::Stop => {
                    queued.push(&self.session, Event::step_end(turn, step))?;
                    if let Some(reason) = signal.reason() {
                        report.end = aborted_end(&reason);
                    }
                    return Ok(());
                }
                Next::End(end) => {
                    queued.push(&self.session, Event::step_end(turn, step))?;
                    report.end = end;
                    return Ok(());
                }
            };
            let (message, calls) = self.unique_ids(sourced.message);
            let mut event = Event::assistant_message_with_usage(
                turn,
                step,
                message.clone(),
                sourced.usage.as_ref(),
            );
            if !sourced.source_event_seqs.is_empty() {
                event = event.with_source_event_seqs(sourced.source_event_seqs);
            }
            // Its calls act on it only after their `tool/call`s, which the step waits for and
            // which follow it in the log: it is not waited for on its own.
            queued.push(&self.session, event)?;
            let blocks = match &sourced.end {
                Some(_) => Vec::new(),
                None => calls,
            };
            if blocks.is_empty() {
                queued.push(&self.session, Event::step_end(turn, step))?;
                // A message cut short by a cancel (a source stops streaming) ends the turn
                // as aborted, not completed (LOOP-17's order: message, step/end, turn/end).
                if let Some(reason) = signal.reason() {
                    report.end = aborted_end(&reason);
                    return Ok(());
                }
                if let Some(end) = sourced.end {
                    report.end = end;
                    return Ok(());
                }
                let cx = SourceContext {
                    session: &self.session,
                    turn,
                    step,
                    signal,
                    inbox: &self.inbox,
                };
                // The turn-stopping hook may read the log for the last message: all of it is
                // durable first.
                queued.settle().await?;
                if let Some(end) = source.stopping(&cx).await? {
                    report.end = end;
                    return Ok(());
                }
                // LOOP-25: a cancel from the stopping hook ends the turn as aborted.
                if let Some(reason) = signal.reason() {
                    report.end = aborted_end(&reason);
                    return Ok(());
                }
                if self.inbox.is_empty() {
                    return Ok(());
                }
                continuation = false;
                continue;
            }
            let cx = StepContext {
                session: self.session.clone(),
                turn,
                step,
                agent: self.agent.clone(),
                signal: signal.clone(),
                max_parallel: self.max_parallel,
            };
            let outcome = self.runtime.run_step(&cx, &blocks).await?;
            let cancelled = outcome.aborted || signal.is_aborted();
            if cancelled {
                // CAN-20: the batch's contexts open the next turn's first step.
                for ctx in &outcome.contexts {
                    self.inbox.push(ctx.clone());
                }
            } else {
                for ctx in &outcome.contexts {
                    queued.push_visible(&self.session, Event::user_message(ctx))?;
                }
            }
            queued.push(&self.session, Event::step_end(turn, step))?;
            let concludes = outcome.concludes_turn;
            report.steps.push(outcome);
            if cancelled {
                report.end = signal
                    .reason()
                    .map_or(TurnEnd::Aborted(CancelCause::User), |r| aborted_end(&r));
                return Ok(());
            }
            // LOG-11: pending steering outweighs a call that concludes the turn.
            if concludes && self.inbox.is_empty() {
                return Ok(());
            }
            continuation = true;
        }
    }
}

fn aborted_end(reason: &dsh_core::AbortReason) -> TurnEnd {
    match reason {
        dsh_core::AbortReason::Cancelled(c) => TurnEnd::Aborted(c.clone()),
        dsh_core::AbortReason::Timeout(t) => TurnEnd::Aborted(CancelCause::Other(t.code().into())),
    }
}

#[cfg(test)]
mod tests {
    use dsh_core::ToolRegistry;
    use dsh_guard::Hooks;
    use proptest::prelude::*;

    use super::*;

    fn driver(used: &[&str]) -> TurnDriver {
        let runtime = Arc::new(Runtime::new(ToolRegistry::new(), Hooks::new()));
        let mut driver = TurnDriver::new(runtime, Session::in_memory("ids"), None);
        driver.used_ids = used.iter().map(|id| Arc::from(*id)).collect();
        driver
    }

    proptest! {
        /// Both readings (pairwise for a few calls, a set for many) agree with the rule: an
        /// id is renamed when empty, repeated in the message, or already in the session.
        #[test]
        fn needs_renaming_follows_the_rule(
            ids in proptest::collection::vec("[abc]{0,1}[0-9]{0,2}", 0..20),
            used in proptest::collection::vec("[abc][0-9]{0,2}", 0..4),
        ) {
            let used: Vec<&str> = used.iter().map(String::as_str).collect();
            let driver = driver(&used);
            let calls: Vec<ToolCallBlock> =
                ids.iter().map(|id| ToolCallBlock::new(id, "t", "{}")).collect();
            let mut seen = HashSet::new();
            let expected = ids
                .iter()
                .any(|id| id.is_empty() || !seen.insert(id) || used.contains(&id.as_str()));
            prop_assert_eq!(driver.needs_renaming(&calls), expected);
        }
    }
}
