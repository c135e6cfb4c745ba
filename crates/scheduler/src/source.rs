//! Where a turn's assistant messages come from: the [`StepSource`] seam (a script for `dsh run`
//! and the tests, a model behind the agent loop) and what crosses it.
//!
//! Guarantees of the seam, held by the driver in `turn.rs`: a source is asked for at most one
//! message per step, only after `step/start` and the step's messages are logged; its
//! [`StepSource::pre_step`] sees the messages a step would open with before anything of the
//! step is logged, and may rewrite them or end the turn; its [`StepSource::stopping`] runs
//! when the turn would end because the model stopped calling tools, and anything it puts in
//! the inbox opens another step.

use dsh_core::{ContextMessage, Json, Signal};
use dsh_session::Session;

use crate::error::SchedulerError;
use crate::inbox::Inbox;
use crate::turn::TurnEnd;

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
    /// The next-step inbox: steering put here opens another step.
    pub inbox: &'a Inbox,
}

/// One step's assistant message, as its source made it.
#[derive(Debug)]
pub struct Sourced {
    /// The message in the reference shape (`{role: "assistant", content: [...]}`), with each
    /// tool call's arguments as the raw text the model produced.
    pub message: Json,
    /// Token usage, logged with the message.
    pub usage: Option<Json>,
    /// The seqs of the events the message was assembled from (stream chunks), logged as its
    /// `sourceEventSeqs`.
    pub source_event_seqs: Vec<u64>,
    /// Set when the turn ends with this message whatever it holds (a `max-tokens` finish): its
    /// tool calls, if any were left in, do not run.
    pub end: Option<TurnEnd>,
}

impl Sourced {
    /// A message with no usage, no source events and no end of its own.
    pub fn new(message: Json) -> Sourced {
        Sourced {
            message,
            usage: None,
            source_event_seqs: Vec::new(),
            end: None,
        }
    }
}

/// What a source answers when asked for a step's message.
#[derive(Debug)]
pub enum Next {
    /// The step's message.
    Message(Sourced),
    /// Nothing more (a script that ran out): the step closes and the turn ends as completed
    /// (or aborted, when its signal was).
    Stop,
    /// The step produced no message and the turn ends with this reason (a model request that
    /// failed: reason `error` with the failure as it came).
    End(TurnEnd),
}

impl From<Option<Sourced>> for Next {
    fn from(sourced: Option<Sourced>) -> Next {
        sourced.map_or(Next::Stop, Next::Message)
    }
}

/// What a source decides about the messages a step would open with.
#[derive(Debug)]
pub enum PreStep {
    /// Open the step with these messages (the ones offered, or rewritten). A step after the
    /// first that has no messages and follows no tool calls does not open: the turn ends.
    Enter(Vec<ContextMessage>),
    /// Open no step; the turn ends with this reason (`blocked` for a rejected prompt). The
    /// offered messages other than the turn's prompt go back to the inbox.
    End(TurnEnd),
}

/// What the driver offers [`StepSource::pre_step`].
#[derive(Debug)]
pub struct StepInput {
    /// The turn number.
    pub turn: u32,
    /// The number the step will have.
    pub step: u32,
    /// The messages the step would open with: the turn's prompt (first step only), then the
    /// inbox in order.
    pub messages: Vec<ContextMessage>,
    /// Whether the step continues after tool calls (the model answers their results).
    pub continuation: bool,
    /// The turn's signal (a hook that waits should stop waiting once it is aborted).
    pub signal: Signal,
}

/// Where a turn's assistant messages come from: a script (`dsh run`, tests) or a model.
///
/// The driver asks for one message per step, after `step/start` and the step's messages are
/// logged, and logs what it gets as the step's `assistant/message`.
#[async_trait::async_trait]
pub trait StepSource: Send {
    /// Whether the source knows, before a step opens, that it has no message left (a script
    /// that ran out): the turn then ends without opening another step. A model never knows.
    fn exhausted(&mut self) -> bool {
        false
    }

    /// Decides what a step opens with, before anything of it is logged. By default the step
    /// opens with what is offered.
    async fn pre_step(
        &mut self,
        _session: &Session,
        input: StepInput,
    ) -> Result<PreStep, SchedulerError> {
        Ok(PreStep::Enter(input.messages))
    }

    /// The next step's message.
    async fn next_message(&mut self, cx: &SourceContext<'_>) -> Result<Next, SchedulerError>;

    /// Runs when the turn would end because the model answered without tool calls; a message
    /// put in `cx.inbox` here opens another step, and `Some(end)` ends the turn with that
    /// reason instead (a hook that failed: reason `error`).
    async fn stopping(
        &mut self,
        _cx: &SourceContext<'_>,
    ) -> Result<Option<TurnEnd>, SchedulerError> {
        Ok(None)
    }
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

    async fn next_message(&mut self, _cx: &SourceContext<'_>) -> Result<Next, SchedulerError> {
        Ok(self.0.next().map(Sourced::new).into())
    }
}
