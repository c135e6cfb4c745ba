//! Shared test fakes for the dsh crates: the conformance checklist's fixture tools (echo, content,
//! gated), sync hook adapters, a recorder of what ran in which order, and checks that an exported
//! history would be accepted by the providers' APIs ([`api_history`]), [`quiescent`] for
//! asserting that something has not happened, and, with the feature `mock-provider`, a mock
//! model-provider server on 127.0.0.1 (module `mock_provider`), and with the feature `postgres` a
//! throwaway PostgreSQL cluster (module `postgres`). Dev-dependency only.
//!
//! It owns no pipeline behaviour and is never a dependency of a library crate.
//!
//! ```
//! let echo = dsh_test_support::echo_tool();
//! let registry = dsh_core::ToolRegistry::new();
//! registry.add(echo)?;
//! assert_eq!(registry.names(None), ["echo"]);
//! # Ok::<(), dsh_core::CoreError>(())
//! ```

pub mod api_history;
#[cfg(feature = "mock-provider")]
pub mod mock_provider;
#[cfg(feature = "postgres")]
pub mod postgres;
mod procs;
mod quiet;

pub use procs::processes_with;
pub use quiet::{quiescent, yield_until};

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use dsh_core::{
    ContextMessage, Failure, Json, PostExecuteHook, PostNext, PostToolDecision, PreExecuteHook,
    PreNext, PreToolDecision, ToolDefinition, ToolExecution, ToolOutput, ToolResult,
};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::Notify;

/// The echo fixture: optional string `text`, string output, returns `text` or `''`.
pub fn echo_tool() -> ToolDefinition {
    echo_named("echo")
}

/// The echo fixture under another name.
pub fn echo_named(name: &str) -> ToolDefinition {
    ToolDefinition::builder(name, "Echo the text back")
        .validated_parameters(Json::from_shallow(
            json!({"type": "object", "properties": {"text": {"type": "string"}}}),
        ))
        .output(ToolOutput::string())
        .concurrency_safe(true)
        .execute(|ctx| async move {
            let text = ctx
                .arguments()
                .json()
                .and_then(|j| {
                    j.value()
                        .get("text")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .unwrap_or_default();
            Ok(Json::string(text))
        })
        .build()
        .unwrap_or_else(|e| panic!("echo fixture: {e}"))
}

/// A tool that replies `ran:<name>`.
pub fn reply_tool(name: &str) -> ToolDefinition {
    let reply = format!("ran:{name}");
    ToolDefinition::builder(name, "Reply with its own name")
        .output(ToolOutput::string())
        .execute(move |_ctx| {
            let r = reply.clone();
            async move { Ok(Json::string(r)) }
        })
        .build()
        .unwrap_or_else(|e| panic!("reply fixture: {e}"))
}

/// The content fixture: its value is its own content-block array.
pub fn content_tool() -> ToolDefinition {
    ToolDefinition::builder("content", "Return content blocks")
        .output(ToolOutput::content_blocks())
        .execute(|ctx| async move {
            let text = ctx
                .arguments()
                .json()
                .and_then(|j| {
                    j.value()
                        .get("text")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .unwrap_or_default();
            Json::new(json!([{"type": "text", "text": text}]))
                .map_err(|e| Failure::new(e.to_string()))
        })
        .build()
        .unwrap_or_else(|e| panic!("content fixture: {e}"))
}

/// An ordered log of what happened, shared by hooks and tools in a test.
#[derive(Clone, Default)]
pub struct Recorder(Arc<Mutex<Vec<String>>>);

impl Recorder {
    /// A new, empty recorder.
    pub fn new() -> Recorder {
        Recorder::default()
    }
    /// Records an entry.
    pub fn push(&self, s: impl Into<String>) {
        self.0.lock().push(s.into());
    }
    /// Everything recorded, in order.
    pub fn entries(&self) -> Vec<String> {
        self.0.lock().clone()
    }
    /// How many entries equal `s`.
    pub fn count(&self, s: &str) -> usize {
        self.0.lock().iter().filter(|e| *e == s).count()
    }
}

/// A gate for bodies: each call id blocks until released; starts and ends are recorded.
#[derive(Clone, Default)]
pub struct Gate {
    state: Arc<Mutex<GateState>>,
    notify: Arc<Notify>,
}

#[derive(Default)]
struct GateState {
    released: HashMap<String, bool>,
    release_all: bool,
    events: Vec<String>,
    live: usize,
    peak: usize,
}

impl Gate {
    /// A closed gate.
    pub fn new() -> Gate {
        Gate::default()
    }
    /// Releases one call.
    pub fn release(&self, call_id: &str) {
        self.state.lock().released.insert(call_id.to_owned(), true);
        self.notify.notify_waiters();
    }
    /// Releases every call, now and later.
    pub fn release_all(&self) {
        self.state.lock().release_all = true;
        self.notify.notify_waiters();
    }
    /// `start:<id>` / `end:<id>` entries in order.
    pub fn events(&self) -> Vec<String> {
        self.state.lock().events.clone()
    }
    /// Call ids started so far, in order.
    pub fn started(&self) -> Vec<String> {
        self.state
            .lock()
            .events
            .iter()
            .filter_map(|e| e.strip_prefix("start:").map(str::to_owned))
            .collect()
    }
    /// The most bodies that were live at once.
    pub fn peak(&self) -> usize {
        self.state.lock().peak
    }
    /// Waits (yielding to the runtime) until `n` bodies have started, up to `ms` milliseconds.
    pub async fn wait_started(&self, n: usize, ms: u64) -> bool {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_millis(ms);
        loop {
            if self.started().len() >= n {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }

    async fn pass(&self, id: &str, signal: &dsh_core::Signal) {
        {
            let mut st = self.state.lock();
            st.events.push(format!("start:{id}"));
            st.live += 1;
            st.peak = st.peak.max(st.live);
        }
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let st = self.state.lock();
                if st.release_all || st.released.get(id).copied().unwrap_or(false) {
                    break;
                }
            }
            // A gated body finishes only when released, whatever its signal says (a started body
            // is never abandoned); the signal only wakes it to look again.
            if signal.is_aborted() {
                notified.await;
            } else {
                tokio::select! {
                    _ = &mut notified => {}
                    _ = signal.aborted() => {}
                }
            }
        }
        let mut st = self.state.lock();
        st.live -= 1;
        st.events.push(format!("end:{id}"));
    }

    /// A tool named `name` whose body waits at this gate, then returns `<name>:<call id>`.
    pub fn tool(&self, name: &str, parallel: bool) -> ToolDefinition {
        self.build(name, |b| b.concurrency_safe(parallel))
    }

    /// The gated tool of [`Gate::tool`], with `classify` deciding per call (from its arguments)
    /// whether it may run in parallel.
    pub fn tool_classified(
        &self,
        name: &str,
        classify: impl Fn(&Value) -> bool + Send + Sync + 'static,
    ) -> ToolDefinition {
        self.build(name, |b| b.classify(classify))
    }

    fn build(
        &self,
        name: &str,
        mode: impl FnOnce(dsh_core::ToolBuilder) -> dsh_core::ToolBuilder,
    ) -> ToolDefinition {
        let gate = self.clone();
        let n = name.to_owned();
        mode(ToolDefinition::builder(name, "A gated test tool"))
            .output(ToolOutput::string())
            .execute(move |ctx| {
                let gate = gate.clone();
                let n = n.clone();
                async move {
                    let id = ctx.exec().call_id().to_owned();
                    gate.pass(&id, ctx.signal()).await;
                    Ok(Json::string(format!("{n}:{id}")))
                }
            })
            .build()
            .unwrap_or_else(|e| panic!("gated fixture: {e}"))
    }
}

/// A pre-execute listener from a sync function: `Some(decision)` decides, `None` delegates.
pub struct PreFn<F>(pub F);

#[async_trait]
impl<F> PreExecuteHook for PreFn<F>
where
    F: Fn(&ToolExecution) -> Result<Option<PreToolDecision>, Failure> + Send + Sync + 'static,
{
    async fn pre_execute(
        &self,
        exec: &ToolExecution,
        next: PreNext<'_>,
    ) -> Result<PreToolDecision, Failure> {
        match (self.0)(exec)? {
            Some(d) => Ok(d),
            None => next.run(exec).await,
        }
    }
}

/// A post-execute listener from a sync function over the candidate and the downstream decision.
pub struct PostFn<F>(pub F);

#[async_trait]
impl<F> PostExecuteHook for PostFn<F>
where
    F: Fn(&ToolExecution, &ToolResult, PostToolDecision) -> Result<PostToolDecision, Failure>
        + Send
        + Sync
        + 'static,
{
    async fn post_execute(
        &self,
        exec: &ToolExecution,
        result: &ToolResult,
        next: PostNext<'_>,
    ) -> Result<PostToolDecision, Failure> {
        let downstream = next.run(exec, result).await?;
        (self.0)(exec, result, downstream)
    }
}

/// A plugin-sourced one-text context.
pub fn ctx(plugin: &str, text: &str) -> ContextMessage {
    ContextMessage::plugin_text(plugin, text)
}

/// The texts of a result's contexts, in order.
pub fn context_texts(result: &ToolResult) -> Vec<String> {
    result
        .additional_contexts()
        .iter()
        .filter_map(|c| c.first_text().map(str::to_owned))
        .collect()
}

/// An input for `name` with JSON `args`, no agent, no parent and a never-firing signal.
pub fn input(call_id: &str, name: &str, args: Value) -> dsh_core::ToolExecutionInput {
    let args = dsh_core::Arguments::from_value(args)
        .unwrap_or_else(|e| panic!("test arguments must be JSON: {e}"));
    dsh_core::ToolExecutionInput::new(call_id, name, args)
}

/// A result in its serialized reference shape, for exact comparisons with `json!`.
pub fn shape(result: &ToolResult) -> Value {
    serde_json::to_value(result).unwrap_or_else(|e| panic!("result serializes: {e}"))
}

/// A one-shot pause point for hooks and bodies: `hold()` records that it was reached and waits
/// until `release()`; the test waits for the point with `reached()`.
#[derive(Clone, Default)]
pub struct Latch {
    state: Arc<Mutex<(bool, bool)>>,
    notify: Arc<Notify>,
}

impl Latch {
    /// A closed latch nobody has reached.
    pub fn new() -> Latch {
        Latch::default()
    }

    /// Marks the latch reached, then waits until it is released (at once if it already was).
    pub async fn hold(&self) {
        self.state.lock().0 = true;
        self.notify.notify_waiters();
        self.wait_for(|s| s.1).await;
    }

    /// Opens the latch, now and for every later `hold`.
    pub fn release(&self) {
        self.state.lock().1 = true;
        self.notify.notify_waiters();
    }

    /// Whether some `hold` has been reached.
    pub fn is_reached(&self) -> bool {
        self.state.lock().0
    }

    /// Waits until some `hold` has been reached.
    pub async fn reached(&self) {
        self.wait_for(|s| s.0).await;
    }

    async fn wait_for(&self, done: impl Fn(&(bool, bool)) -> bool) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if done(&self.state.lock()) {
                return;
            }
            notified.await;
        }
    }
}

impl Latch {
    /// Marks the latch reached without waiting (a body announcing that it started).
    pub fn reach(&self) {
        self.state.lock().0 = true;
        self.notify.notify_waiters();
    }
}

/// A string tool named `name` (exclusive) whose body adds one to `runs` and returns `ran`: the
/// "did the body run?" probe of many checklist lines.
pub fn counting_tool(name: &str, runs: &Arc<std::sync::atomic::AtomicUsize>) -> ToolDefinition {
    let runs = runs.clone();
    ToolDefinition::builder(name, "counts its runs")
        .output(ToolOutput::string())
        .execute(move |_ctx| {
            runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async { Ok(Json::string("ran")) }
        })
        .build()
        .unwrap_or_else(|e| panic!("counting fixture: {e}"))
}
