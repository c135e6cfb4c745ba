//! The agent's own hooks: where a program decides about a step's input, a turn that would stop,
//! and a model request that failed.
//!
//! Guarantees: each hook is awaited in the loop's order (pre-step before anything of the step is
//! logged; stopping after the step that answered without calls has closed; request-error after
//! the failed attempt's chunks are logged and before anything else is sent); a hook that fails
//! ends the turn with reason `error` and an `agent/error` event carrying its message, and the
//! agent goes on taking work (LOOP-47, LOOP-57). Hooks get the [`Agent`] so they can steer,
//! inject or cancel.

use dsh_core::ContextMessage;
use dsh_model::{ModelError, Request};
use dsh_scheduler::StepInput;

use crate::agent::Agent;

/// What a pre-step hook decides.
#[derive(Debug)]
pub enum PreStepDecision {
    /// Open the step with the messages offered.
    Enter,
    /// Open the step with these messages instead (an empty list on a step that answers no
    /// tool calls opens no step: the turn ends as completed, LOOP-39/55).
    Rewrite(Vec<ContextMessage>),
    /// Open no step: the turn ends with reason `blocked`; the prompt is dropped and the other
    /// offered messages stay in the next-step inbox (LOOP-40/42).
    Reject,
}

/// What to do after a model request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestErrorAction {
    /// End the turn with reason `error` carrying the failure (the default).
    Fail,
    /// Send the same request again; the failed attempt's chunks stay in the log but are not the
    /// new message's source (LOOP-21).
    Retry,
}

/// A hook's failure: its message ends the turn as `{kind: error, error: {message, code:
/// UNKNOWN}}`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct HookFailure(pub String);

/// The agent's hooks; every method has a default that changes nothing.
#[async_trait::async_trait]
pub trait AgentHooks: Send + Sync + 'static {
    /// Once, when the agent starts through [`Agent::start`] (`source` is `startup`, or
    /// `resume` on a session that already has turns): a preamble steered here opens the first
    /// request (LOOP-48..50).
    async fn session_start(&self, _agent: &Agent, _source: &str) -> Result<(), HookFailure> {
        Ok(())
    }

    /// Assembles the system prompt of the next request from the configured one, before the
    /// step opens; `Ok(None)` keeps the configured one. Raced against the turn's signal: a
    /// cancel or dispose while it is blocked ends the turn with no step (LOOP-79, 80, 83).
    async fn system_prompt(
        &self,
        _agent: &Agent,
        _configured: Option<&str>,
    ) -> Result<Option<String>, HookFailure> {
        Ok(None)
    }

    /// Before a step opens: sees the messages it would open with (the prompt and the inbox).
    /// Raced against the turn's signal: a cancel or dispose while it is blocked ends the turn
    /// with no step (LOOP-81, 82).
    async fn pre_step(
        &self,
        _agent: &Agent,
        _input: &StepInput,
    ) -> Result<PreStepDecision, HookFailure> {
        Ok(PreStepDecision::Enter)
    }

    /// Each chunk of a model's stream, as it arrives and after it is assembled and logged (a
    /// terminal shows streamed text from here). Runs on the loop's task: keep it short.
    fn on_chunk(&self, _agent: &Agent, _turn: u32, _step: u32, _chunk: &dsh_model::Chunk) {}

    /// The model answered without tool calls and the turn would end: steering queued here
    /// ([`Agent::steer`]) opens another step.
    async fn stopping(&self, _agent: &Agent, _turn: u32, _step: u32) -> Result<(), HookFailure> {
        Ok(())
    }

    /// The request about to be sent (after its header is logged): may set the model when the
    /// configuration names none, or adjust options. An agent with no model after this hook
    /// ends the turn in error (LOOP-61, 62).
    async fn request(&self, _agent: &Agent, _request: &mut Request) -> Result<(), HookFailure> {
        Ok(())
    }

    /// A model request failed (before or during its stream), on attempt `attempt` (1 first).
    async fn request_error(
        &self,
        _agent: &Agent,
        _error: &ModelError,
        _attempt: u32,
    ) -> RequestErrorAction {
        RequestErrorAction::Fail
    }
}

/// Hooks that change nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoHooks;

impl AgentHooks for NoHooks {}
