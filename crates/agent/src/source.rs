//! The model behind a turn: a [`StepSource`] that asks the provider for each step's message.
//!
//! Guarantees: a request is built from the log alone (the system prompt, the derived history,
//! the tools in configured order) and its header is logged as `request/header` whenever it
//! differs from the last one logged; the stream is logged chunk by chunk (`chunk_log.rs`)
//! before the message; tools can start only once the message is complete, because the driver
//! gets the message only then. A cancel mid-stream commits what streamed as an interrupted
//! message, with a half-streamed tool call dropped whole and no message at all when nothing
//! else streamed (LOOP-17..19, 22); a `max-tokens` finish drops every tool call of the message
//! and ends the turn as `max-tokens` (LOG-12/13); a failed request goes to the request-error
//! hook, which retries or ends the turn with the failure as it came and one `agent/error`
//! (LOOP-20/21, 64..66).

use std::sync::Arc;
use std::time::Instant;

use dsh_core::context::fresh_message_id;
use dsh_core::{ContextMessage, Json, Signal};
use dsh_model::{AssistantBlock, Chunk, FinishReason, Message, ModelError, Request};
use dsh_scheduler::{
    Next, PreStep, Runtime, SchedulerError, SourceContext, Sourced, StepInput, StepSource, TurnEnd,
};
use dsh_session::{Event, Session};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::agent::Agent;
use crate::chunk_log::ChunkLog;
use crate::config::AgentConfig;
use crate::history::{block_json, provider_messages};
use crate::hooks::{AgentHooks, PreStepDecision, RequestErrorAction};

/// The reference's failure object of a model error: `{message, code, status?, retryAfter?}`.
pub fn failure_json(error: &ModelError) -> Value {
    let code = match error {
        ModelError::Unauthorized { .. } => "AUTH",
        ModelError::ModelNotFound { .. } => "NOT_FOUND",
        ModelError::BadRequest { .. } => "BAD_REQUEST",
        ModelError::NotTheApi { .. } | ModelError::NotAStream { .. } => "NOT_THE_API",
        ModelError::RateLimited { .. } => "RATE_LIMIT",
        ModelError::Server { .. } => "SERVER",
        // A status no retry changes (501, 505, 402, 405, ...): the request or the server has
        // to change.
        ModelError::Status { .. } => "STATUS",
        ModelError::Connect { .. }
        | ModelError::Transport { .. }
        | ModelError::StreamCut { .. } => "NETWORK",
        ModelError::Idle { .. } | ModelError::Deadline { .. } => "TIMEOUT",
        ModelError::Cancelled { .. } => "ABORTED",
        _ => "UNKNOWN",
    };
    let mut m = serde_json::Map::new();
    m.insert("message".into(), error.to_string().into());
    m.insert("code".into(), code.into());
    if let Some(status) = error.status() {
        m.insert("status".into(), status.into());
    }
    if let ModelError::RateLimited {
        retry_after: Some(after),
        ..
    } = error
    {
        m.insert("retryAfter".into(), (after.as_millis() as u64).into());
    }
    Value::Object(m)
}

pub(crate) struct ModelSource {
    pub(crate) agent: Agent,
    pub(crate) runtime: Arc<Runtime>,
    pub(crate) config: Arc<AgentConfig>,
    pub(crate) hooks: Arc<dyn AgentHooks>,
    /// The prompt this turn claimed from the next-turn inbox (its removal is logged once the
    /// turn has started).
    pub(crate) claimed: bool,
    pub(crate) started: Instant,
    pub(crate) output_tokens: u64,
    /// The system prompt of the next request, as the hook assembled it.
    pub(crate) system: Option<String>,
    /// The last stream, finished, kept until the step it asked for has run (see `stream_once`).
    pub(crate) retired: parking_lot::Mutex<Option<dsh_model::ChunkStream>>,
}

/// Runs `hook` unless `signal` aborts first (`None` then).
async fn raced<T>(signal: &Signal, hook: impl std::future::Future<Output = T>) -> Option<T> {
    tokio::select! {
        biased;
        _ = signal.aborted() => None,
        out = hook => Some(out),
    }
}

enum Streamed {
    Done,
    Cut,
    WallTime,
    Failed(ModelError),
}

impl ModelSource {
    fn limit(&self, step: u32) -> Option<TurnEnd> {
        let limits = &self.config.limits;
        if limits.max_steps.is_some_and(|max| step > max) {
            return Some(TurnEnd::Limit(Arc::from("steps")));
        }
        if limits
            .max_output_tokens
            .is_some_and(|max| self.output_tokens >= max)
        {
            return Some(TurnEnd::Limit(Arc::from("tokens")));
        }
        if limits
            .wall_time
            .is_some_and(|max| self.started.elapsed() >= max)
        {
            return Some(TurnEnd::Limit(Arc::from("wall-time")));
        }
        None
    }

    async fn agent_error(
        &self,
        session: &Session,
        turn: u32,
        step: Option<u32>,
        error: Value,
    ) -> Result<(), SchedulerError> {
        let mut data = json!({"turn": turn, "error": error});
        if let (Some(step), Some(m)) = (step, data.as_object_mut()) {
            m.insert("step".into(), step.into());
        }
        session
            .append(Event::other("agent/error", Json::from_shallow(data)))
            .await?;
        Ok(())
    }

    async fn hook_failed(
        &self,
        session: &Session,
        turn: u32,
        step: Option<u32>,
        failure: crate::hooks::HookFailure,
    ) -> Result<PreStep, SchedulerError> {
        let error = json!({"message": failure.0, "code": "UNKNOWN"});
        self.agent_error(session, turn, step, error).await?;
        Ok(PreStep::End(TurnEnd::Error(failure.0)))
    }

    /// The request of the next step, built from the log; logs its header when it changed.
    async fn request(&self, session: &Session) -> Result<Result<Request, TurnEnd>, SchedulerError> {
        let tools = match self.config.order_tools(
            self.config
                .offered(self.runtime.registry(), self.agent.agent_id()),
        ) {
            Ok(tools) => tools,
            Err(e) => return Ok(Err(TurnEnd::Error(e.to_string()))),
        };
        let header = self.config.header(&tools, self.system.as_deref());
        let events = session.events();
        let last = events
            .iter()
            .rev()
            .find(|(_, e)| e.event_type() == "request/header")
            .and_then(|(_, e)| e.data().value().get("header").cloned());
        if last.as_ref() != Some(&header) {
            let reason = if last.is_none() { "initial" } else { "changed" };
            session
                .append(Event::other(
                    "request/header",
                    Json::from_shallow(json!({"header": header, "reason": reason})),
                ))
                .await?;
        }
        let mut messages = Vec::new();
        if let Some(system) = &self.system {
            messages.push(Message::system(system.as_str()));
        }
        messages.extend(provider_messages(events.pairs()));
        Ok(Ok(Request::new(self.config.model.clone(), messages)
            .with_tools(tools)
            .with_options(self.config.options.clone())))
    }

    /// What every message of this step carries besides its blocks: its `source` and a fresh
    /// `id`. Made before the request is sent, so none of it is built after the last chunk.
    fn message_identity(&self) -> (Value, Value) {
        let source = json!({
            "kind": "model",
            "provider": self.config.provider.name(),
            "model": self.config.model,
        });
        (source, Value::from(&*fresh_message_id()))
    }

    /// The message in the reference shape, from its blocks and its identity.
    fn message_json(
        blocks: &[AssistantBlock],
        interrupted: bool,
        (source, id): (Value, Value),
    ) -> Json {
        let content: Vec<Value> = blocks.iter().map(block_json).collect();
        let mut m = serde_json::Map::new();
        m.insert("role".into(), "assistant".into());
        m.insert("content".into(), Value::Array(content));
        m.insert("source".into(), source);
        m.insert("id".into(), id);
        if interrupted {
            m.insert("interrupted".into(), true.into());
        }
        Json::from_shallow(Value::Object(m))
    }

    async fn stream_once(
        &self,
        request: &Arc<Request>,
        signal: &Signal,
        log: &mut ChunkLog,
        assembler: &mut dsh_model::Assembler,
    ) -> Streamed {
        let wall = self
            .config
            .limits
            .wall_time
            .map(|max| tokio::time::Instant::from_std(self.started) + max);
        let until_wall = async {
            match wall {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(until_wall);
        // One waiter on the signal for the whole stream, not one per chunk.
        let aborted = signal.aborted();
        tokio::pin!(aborted);
        let opened = tokio::select! {
            biased;
            _ = &mut aborted => return Streamed::Cut,
            _ = &mut until_wall => return Streamed::WallTime,
            opened = self.config.provider.stream(request.clone()) => opened,
        };
        let mut stream = match opened {
            Ok(stream) => stream,
            Err(e) => return Streamed::Failed(e),
        };
        let streamed = loop {
            tokio::select! {
                biased;
                _ = &mut aborted => break Streamed::Cut,
                _ = &mut until_wall => break Streamed::WallTime,
                item = stream.next() => match item {
                    Some(Ok(chunk)) => {
                        assembler.push(&chunk);
                        let block = match &chunk {
                            Chunk::BlockEnd { index } => assembler.block(*index),
                            _ => None,
                        };
                        log.push(&chunk, block);
                        self.hooks.on_chunk(&self.agent, log.turn(), log.step(), &chunk);
                    }
                    Some(Err(e)) => break Streamed::Failed(e),
                    None => break Streamed::Done,
                },
            }
        };
        // Closing the connection wakes the connection's task, which costs tens of microseconds
        // on a loaded machine (measured: most of the time from a message's last byte to its
        // first tool starting): it happens after the step, not on the way to the tools.
        self.retired.lock().replace(stream);
        streamed
    }
}

#[async_trait::async_trait]
impl StepSource for ModelSource {
    async fn pre_step(
        &mut self,
        session: &Session,
        input: StepInput,
    ) -> Result<PreStep, SchedulerError> {
        if input.step == 1 && std::mem::take(&mut self.claimed) {
            session
                .append(Event::other(
                    "agent/inbox/spliced",
                    Json::from_shallow(json!({
                        "target": "next-turn", "start": 0, "removedCount": 1, "inserted": [],
                    })),
                ))
                .await?;
        }
        if let Some(end) = self.limit(input.step) {
            return Ok(PreStep::End(end));
        }
        if input.step == 1
            && let Err(e) = self.config.order_tools(
                self.config
                    .offered(self.runtime.registry(), self.agent.agent_id()),
            )
        {
            // REG-84: no request and no header, and no step opens.
            return Ok(PreStep::End(TurnEnd::Error(e.to_string())));
        }
        let configured = self.config.system.as_deref();
        let assembled = match raced(
            &input.signal,
            self.hooks.system_prompt(&self.agent, configured),
        )
        .await
        {
            // Cancelled while assembling: the driver ends the turn as aborted.
            None => return Ok(PreStep::Enter(Vec::new())),
            Some(Ok(system)) => system.or_else(|| configured.map(str::to_owned)),
            Some(Err(failure)) => {
                return self.hook_failed(session, input.turn, None, failure).await;
            }
        };
        self.system = assembled;
        match raced(&input.signal, self.hooks.pre_step(&self.agent, &input)).await {
            None => Ok(PreStep::Enter(Vec::new())),
            Some(Ok(PreStepDecision::Enter)) => Ok(PreStep::Enter(input.messages)),
            Some(Ok(PreStepDecision::Rewrite(messages))) => Ok(PreStep::Enter(messages)),
            Some(Ok(PreStepDecision::Reject)) => Ok(PreStep::End(TurnEnd::Blocked)),
            Some(Err(failure)) => {
                if input.signal.is_aborted() {
                    // LOOP-74: a hook that disposed and then failed: the disposal is the end.
                    return Ok(PreStep::Enter(Vec::new()));
                }
                self.hook_failed(session, input.turn, None, failure).await
            }
        }
    }

    async fn next_message(&mut self, cx: &SourceContext<'_>) -> Result<Next, SchedulerError> {
        let mut request = match self.request(cx.session).await? {
            Ok(request) => request,
            Err(end) => return Ok(Next::End(end)),
        };
        if let Err(failure) = self.hooks.request(&self.agent, &mut request).await {
            return Ok(
                match self
                    .hook_failed(cx.session, cx.turn, Some(cx.step), failure)
                    .await?
                {
                    PreStep::End(end) => Next::End(end),
                    PreStep::Enter(_) => Next::Stop,
                },
            );
        }
        if request.model.is_empty() {
            let message = format!(
                "the agent has no provider/model: set AgentConfig's model, or supply one from \
                 the agent/request hook (provider {})",
                self.config.provider.name()
            );
            let error = json!({"message": message, "code": "UNKNOWN"});
            self.agent_error(cx.session, cx.turn, Some(cx.step), error)
                .await?;
            return Ok(Next::End(TurnEnd::Error(message)));
        }
        let request = Arc::new(request);
        let identity = self.message_identity();
        let mut log = ChunkLog::new(cx.session.clone(), cx.turn, cx.step);
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let mut assembler = dsh_model::Assembler::new();
            let streamed = self
                .stream_once(&request, cx.signal, &mut log, &mut assembler)
                .await;
            let seqs = log.flush().await?;
            let (message, interrupted, end) = match streamed {
                Streamed::Done => {
                    let message = assembler.finish();
                    if message.finish == Some(FinishReason::Length) {
                        (message, false, Some(TurnEnd::MaxTokens))
                    } else {
                        (message, false, None)
                    }
                }
                Streamed::Cut => (assembler.interrupted(), true, None),
                Streamed::WallTime => (
                    assembler.interrupted(),
                    true,
                    Some(TurnEnd::Limit(Arc::from("wall-time"))),
                ),
                Streamed::Failed(error) => {
                    if cx.signal.is_aborted() {
                        return Ok(Next::Stop);
                    }
                    let action = self.hooks.request_error(&self.agent, &error, attempt).await;
                    if cx.signal.is_aborted() {
                        // LOOP-20: cancelled from the hook: no message, the turn ends aborted.
                        return Ok(Next::Stop);
                    }
                    if action == RequestErrorAction::Retry {
                        log.restart();
                        continue;
                    }
                    let failure = failure_json(&error);
                    self.agent_error(cx.session, cx.turn, Some(cx.step), failure.clone())
                        .await?;
                    return Ok(Next::End(TurnEnd::Failed(Json::from_shallow(failure))));
                }
            };
            let mut blocks = message.blocks;
            if end.is_some() {
                // LOG-12/13: tool calls of a message cut at its limit never run.
                blocks.retain(|b| !matches!(b, AssistantBlock::ToolCall(_)));
            }
            if interrupted && blocks.is_empty() && message.usage.is_none() {
                // LOOP-22: nothing but a partial tool call streamed: no message at all.
                return Ok(match end {
                    Some(end) => Next::End(end),
                    None => Next::Stop,
                });
            }
            if let Some(usage) = &message.usage {
                self.output_tokens += usage.output_tokens;
            }
            let usage = message
                .usage
                .as_ref()
                .and_then(|u| serde_json::to_value(u).ok())
                .map(Json::from_shallow);
            let message = Self::message_json(&blocks, interrupted, identity);
            return Ok(Next::Message(Sourced {
                message,
                usage,
                source_event_seqs: seqs,
                end,
            }));
        }
    }

    async fn stopping(
        &mut self,
        cx: &SourceContext<'_>,
    ) -> Result<Option<TurnEnd>, SchedulerError> {
        match self.hooks.stopping(&self.agent, cx.turn, cx.step).await {
            Ok(()) => Ok(None),
            Err(failure) => {
                let error = json!({"message": failure.0, "code": "UNKNOWN"});
                self.agent_error(cx.session, cx.turn, Some(cx.step), error)
                    .await?;
                Ok(Some(TurnEnd::Error(failure.0)))
            }
        }
    }
}

/// A user prompt as the inbox holds it (source `{kind: "user"}`).
pub fn user_prompt(text: &str) -> ContextMessage {
    ContextMessage {
        content: dsh_core::text_content(text),
        source: Json::from_shallow(json!({"kind": "user"})),
        role: Arc::from("user"),
        id: fresh_message_id(),
    }
}
