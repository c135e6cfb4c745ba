//! Running every hook that matches a call at one point, in configuration order: each run logged
//! as `hook/invoked` + `hook/result`, its answer read by the protocol, its failure policy
//! applied, and the answers folded.
//!
//! Guarantees: each invocation gets a fresh handler id, and its `hook/invoked` is appended
//! before the process starts, its `hook/result` after it ended; a hook error is always visible
//! (a `hook/result` with `error` and a `tracing` warning) and decides the call only when the hook
//! fails closed (`"onFailure": "block"`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use dsh_core::{Arguments, ContextMessage, ExecutionToken, Json, ToolExecution};
use dsh_session::{Event, Session};
use parking_lot::Mutex;

use crate::events::{self, Invocation, Settled};
use crate::fold::{Answer, Folded, fold};
use crate::names::hook_tool_name;
use crate::protocol::{self, Exit, HookInput, Verdict};
use crate::runner::{self, RunSpec};
use crate::settings::{CommandHook, HookEvent, HookSettings, OnFailure};

/// The `source.plugin` of every context this crate adds.
pub const CONTEXT_PLUGIN: &str = "claude-code";

/// What the installed listeners share.
pub(crate) struct Bridge {
    pub(crate) settings: Arc<HookSettings>,
    pub(crate) cwd: PathBuf,
    pub(crate) session: Session,
    invocations: [AtomicU64; 2],
    /// PreToolUse contexts waiting for their call's post-execute, by execution.
    pending: Mutex<HashMap<ExecutionToken, Vec<ContextMessage>>>,
}

async fn append(session: &Session, event: Event) {
    if let Err(e) = session.append(event).await {
        tracing::warn!(error = %e, "could not log a hook event");
    }
}

impl Bridge {
    pub(crate) fn new(settings: Arc<HookSettings>, cwd: PathBuf, session: Session) -> Bridge {
        Bridge {
            settings,
            cwd,
            session,
            invocations: [AtomicU64::new(0), AtomicU64::new(0)],
            pending: Mutex::new(HashMap::new()),
        }
    }

    fn next_handler(&self, event: HookEvent) -> String {
        let slot = match event {
            HookEvent::PreToolUse => 0,
            HookEvent::PostToolUse => 1,
        };
        let n = self.invocations[slot].fetch_add(1, Ordering::Relaxed) + 1;
        events::handler_id(event, n)
    }

    /// Whether any hook of `event` applies to a call of `tool`.
    pub(crate) fn has_match(&self, event: HookEvent, tool: &str) -> bool {
        self.settings.matching(event, tool).next().is_some()
    }

    /// Runs the hooks of `event` matching `exec`, in order, and folds their answers.
    pub(crate) async fn run_point(
        &self,
        event: HookEvent,
        exec: &ToolExecution,
        tool_response: Option<&Json>,
    ) -> Folded {
        let raw;
        let tool_input = match exec.arguments() {
            Arguments::Json(j) => j,
            Arguments::Raw(r) => {
                raw = Json::string(r.to_string());
                &raw
            }
        };
        let cwd = protocol::path_text(&self.cwd);
        let transcript = self
            .session
            .path()
            .map(protocol::path_text)
            .unwrap_or_default();
        let stdin = HookInput {
            session_id: self.session.id(),
            transcript_path: &transcript,
            cwd: &cwd,
            hook_event_name: event.as_str(),
            tool_name: hook_tool_name(exec.name()),
            tool_input,
            tool_use_id: exec.call_id(),
            tool_response,
        }
        .to_bytes();
        let stdin: Arc<[u8]> = Arc::from(stdin);
        let mut answers = Vec::new();
        for (matcher, hook) in self.settings.matching(event, exec.name()) {
            answers.push(self.run_one(event, exec, matcher, hook, &stdin).await);
        }
        fold(&answers)
    }

    async fn run_one(
        &self,
        event: HookEvent,
        exec: &ToolExecution,
        matcher: &str,
        hook: &CommandHook,
        stdin: &Arc<[u8]>,
    ) -> Answer {
        let handler = self.next_handler(event);
        let invocation = Invocation {
            turn: self.session.open_turn(),
            event,
            handler_id: &handler,
            matcher,
            call_id: exec.call_id(),
            tool: exec.name(),
            command: &hook.command,
        };
        append(&self.session, events::invoked(&invocation)).await;
        let out = runner::run(RunSpec {
            command: &hook.command,
            cwd: &self.cwd,
            stdin: stdin.clone(),
            timeout: hook.timeout,
            signal: exec.signal(),
        })
        .await;
        let reading = protocol::interpret(event, &out.exit, &out.stdout, &out.stderr);
        let mut answer = Answer {
            verdict: reading.verdict,
            reason: reading.reason.clone(),
            contexts: reading.contexts.clone(),
        };
        let fail_closed = reading.error.is_some() && hook.on_failure == OnFailure::Block;
        if let Some(error) = &reading.error {
            tracing::warn!(
                point = event.as_str(),
                handler = %handler,
                call_id = exec.call_id(),
                tool = exec.name(),
                command = %hook.command,
                fail_closed,
                "hook error: {error}"
            );
            if fail_closed {
                answer.verdict = Some(Verdict::Deny);
                answer.reason = Some(format!(
                    "{} hook `{}` failed (it fails closed): {error}",
                    event.as_str(),
                    protocol::summary(&hook.command, 200)
                ));
            }
        }
        let decision = if reading.error.is_some() && !fail_closed {
            "error"
        } else {
            answer.verdict.unwrap_or(Verdict::Pass).word(event)
        };
        let stderr = protocol::summary(&out.stderr, 500);
        let settled = Settled {
            decision,
            exit_code: match out.exit {
                Exit::Code(c) => Some(c),
                Exit::Failed(_) => None,
            },
            stderr_summary: (!stderr.is_empty()).then_some(stderr.as_str()),
            error: reading.error.as_deref(),
            fail_closed,
            duration: out.duration,
        };
        append(
            &self.session,
            events::result(invocation.turn, event, &handler, &settled),
        )
        .await;
        answer
    }

    /// Keeps PreToolUse contexts until the call's post-execute delivers them.
    pub(crate) fn hold_contexts(&self, token: ExecutionToken, contexts: Vec<ContextMessage>) {
        if !contexts.is_empty() {
            self.pending
                .lock()
                .entry(token)
                .or_default()
                .extend(contexts);
        }
    }

    /// Takes the PreToolUse contexts held for a call.
    pub(crate) fn take_contexts(&self, token: ExecutionToken) -> Vec<ContextMessage> {
        self.pending.lock().remove(&token).unwrap_or_default()
    }

    /// How many calls have contexts waiting (for tests of the cleanup).
    pub(crate) fn pending_len(&self) -> usize {
        self.pending.lock().len()
    }
}

/// Contexts for the model from hook texts.
pub(crate) fn contexts_of(texts: &[String]) -> Vec<ContextMessage> {
    texts
        .iter()
        .map(|t| ContextMessage::plugin_text(CONTEXT_PLUGIN, t.as_str()))
        .collect()
}
