//! Fakes shared by the suite: an in-memory audit sink with an open-turn tracker and failure
//! switches, a `tracing` capture subscriber, a scripted dispatch terminal, and tool fixtures.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use dsh_core::{
    AgentId, Arguments, Dispatch, Json, PreNext, PreToolDecision, Signal, Terminal, ToolDefinition,
    ToolExecution, ToolExecutionInput, ToolOutput, ToolRegistry, ToolResult,
};
use dsh_guard::{AuditSink, GuardError, Hooks};
use futures::future::BoxFuture;
use parking_lot::Mutex;
use serde_json::Value;

/// An in-memory session log: records events, tracks the open turn, can refuse appends, and can
/// run an "observer" after each commit that panics for one event type (contained, warned).
#[derive(Default)]
pub struct FakeSink {
    events: Mutex<Vec<(String, Json)>>,
    turn: Mutex<Option<u32>>,
    turns: AtomicU64,
    fail: Mutex<Option<String>>,
    fail_on: Mutex<Option<String>>,
    throw_on_observe: Mutex<Option<String>>,
    pub warnings: Mutex<Vec<String>>,
}

impl FakeSink {
    pub fn new() -> Arc<FakeSink> {
        Arc::new(FakeSink::default())
    }
    /// A sink with an open turn.
    pub fn in_turn() -> Arc<FakeSink> {
        let s = FakeSink::new();
        s.start_turn();
        s
    }
    pub fn start_turn(&self) {
        let n = self.turns.fetch_add(1, Ordering::SeqCst) as u32;
        *self.turn.lock() = Some(n);
        self.events.lock().push((
            "turn/start".into(),
            Json::from_shallow(serde_json::json!({"turn": n})),
        ));
    }
    pub fn end_turn(&self) {
        let n = self.turn.lock().take();
        self.events.lock().push((
            "turn/end".into(),
            Json::from_shallow(serde_json::json!({"turn": n, "reason": "done"})),
        ));
    }
    /// Every append fails with `message` (nothing is recorded) until cleared.
    pub fn fail_appends(&self, message: Option<&str>) {
        *self.fail.lock() = message.map(str::to_owned);
    }
    /// Appends of `ty` fail with `message`.
    pub fn fail_on(&self, ty: &str) {
        *self.fail_on.lock() = Some(ty.to_owned());
    }
    pub fn throw_on_observe(&self, ty: &str) {
        *self.throw_on_observe.lock() = Some(ty.to_owned());
    }
    pub fn events(&self) -> Vec<(String, Json)> {
        self.events.lock().clone()
    }
    /// The events the approval service wrote (turn framing excluded).
    pub fn audit(&self) -> Vec<(String, Value)> {
        self.events
            .lock()
            .iter()
            .filter(|(t, _)| t.starts_with("approval/"))
            .map(|(t, d)| (t.clone(), d.value().clone()))
            .collect()
    }
}

impl AuditSink for FakeSink {
    fn append<'a>(
        &'a self,
        event_type: &'a str,
        data: Json,
    ) -> BoxFuture<'a, Result<(), GuardError>> {
        Box::pin(async move {
            if let Some(m) = self.fail.lock().clone() {
                return Err(GuardError::audit(m));
            }
            if self.fail_on.lock().as_deref() == Some(event_type) {
                return Err(GuardError::audit(format!("cannot write {event_type}")));
            }
            self.events.lock().push((event_type.to_owned(), data));
            // Post-commit observers: a failure is contained and logged, as a session does.
            let throw = self.throw_on_observe.lock().as_deref() == Some(event_type);
            let observed = std::panic::catch_unwind(|| {
                if throw {
                    panic!("observer exploded on {event_type}");
                }
            });
            if observed.is_err() {
                let w = format!("session observer failed on {event_type}");
                tracing::warn!("{w}");
                self.warnings.lock().push(w);
            }
            Ok(())
        })
    }
    fn open_turn(&self) -> Option<u32> {
        *self.turn.lock()
    }
}

/// A captured span or event.
#[derive(Clone, Debug, Default)]
pub struct Captured {
    pub name: String,
    pub level: String,
    pub fields: HashMap<String, String>,
}

#[derive(Default)]
struct CaptureInner {
    spans: Mutex<HashMap<u64, Captured>>,
    events: Mutex<Vec<Captured>>,
    next: AtomicU64,
}

/// A minimal `tracing` subscriber that keeps spans (with later-recorded fields) and events.
#[derive(Clone, Default)]
pub struct Capture(Arc<CaptureInner>);

struct Visitor<'a>(&'a mut HashMap<String, String>);

impl tracing::field::Visit for Visitor<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, attrs: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        let id = self.0.next.fetch_add(1, Ordering::SeqCst) + 1;
        let mut c = Captured {
            name: attrs.metadata().name().to_owned(),
            level: attrs.metadata().level().to_string(),
            fields: HashMap::new(),
        };
        attrs.record(&mut Visitor(&mut c.fields));
        self.0.spans.lock().insert(id, c);
        tracing::span::Id::from_u64(id)
    }
    fn record(&self, span: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        if let Some(c) = self.0.spans.lock().get_mut(&span.into_u64()) {
            values.record(&mut Visitor(&mut c.fields));
        }
    }
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut c = Captured {
            name: event.metadata().name().to_owned(),
            level: event.metadata().level().to_string(),
            fields: HashMap::new(),
        };
        event.record(&mut Visitor(&mut c.fields));
        self.0.events.lock().push(c);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

impl Capture {
    pub fn spans_named(&self, name: &str) -> Vec<Captured> {
        let spans = self.0.spans.lock();
        let mut ids: Vec<&u64> = spans.keys().collect();
        ids.sort();
        ids.into_iter()
            .filter_map(|id| spans.get(id))
            .filter(|c| c.name == name)
            .cloned()
            .collect()
    }
    pub fn warnings(&self) -> Vec<String> {
        self.0
            .events
            .lock()
            .iter()
            .filter(|e| e.level == "WARN")
            .map(|e| e.fields.get("message").cloned().unwrap_or_default())
            .collect()
    }
}

/// A dispatch terminal driven by a closure; records the signal each dispatch saw.
pub struct FakeTerminal {
    body: Box<dyn Fn(Dispatch) -> BoxFuture<'static, ToolResult> + Send + Sync>,
    pub seen: Mutex<Vec<Signal>>,
    pub calls: AtomicU64,
}

impl FakeTerminal {
    pub fn new(
        body: impl Fn(Dispatch) -> BoxFuture<'static, ToolResult> + Send + Sync + 'static,
    ) -> FakeTerminal {
        FakeTerminal {
            body: Box::new(body),
            seen: Mutex::new(Vec::new()),
            calls: AtomicU64::new(0),
        }
    }
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }
    pub fn last_signal(&self) -> Signal {
        self.seen.lock().last().cloned().expect("dispatched")
    }
}

impl Terminal for FakeTerminal {
    fn dispatch(&self, call: Dispatch) -> BoxFuture<'_, ToolResult> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.seen.lock().push(call.signal().clone());
        (self.body)(call)
    }
}

/// `{content: [text], isError: false, value: [text block]}` (the content fixture).
pub fn ok_result(exec: &ToolExecution, text: &str) -> ToolResult {
    let block = serde_json::json!([{"type": "text", "text": text}]);
    ToolResult::rendered(
        exec.token(),
        Json::from_shallow(block),
        Arc::from(vec![dsh_core::ContentBlock::text(text)]),
        None,
    )
}

/// A tool definition with an optional budget and an optional permission subject field.
pub fn tool(
    name: &str,
    timeout_ms: Option<f64>,
    subject_field: Option<&'static str>,
) -> ToolDefinition {
    let mut b = ToolDefinition::builder(name, "test tool")
        .output(ToolOutput::string())
        .execute(|_| async { Ok(Json::string("")) });
    if let Some(ms) = timeout_ms {
        b = b.timeout_ms_from_config(ms);
    }
    if let Some(field) = subject_field {
        b = b.permission_subject(move |v| v.get(field)?.as_str().map(str::to_owned));
    }
    b.build().expect("valid tool")
}

/// A registry holding `defs` for good.
pub fn registry(defs: Vec<ToolDefinition>) -> ToolRegistry {
    let r = ToolRegistry::new();
    for d in defs {
        r.register(d).expect("registered").keep();
    }
    r
}

/// A frozen execution.
pub fn exec_with(
    call_id: &str,
    name: &str,
    args: Value,
    agent: Option<&str>,
    signal: Signal,
) -> Arc<ToolExecution> {
    let mut input =
        ToolExecutionInput::new(call_id, name, Arguments::from_value(args).expect("json"))
            .with_signal(signal);
    if let Some(a) = agent {
        input = input.with_agent(AgentId::new(a));
    }
    ToolExecution::new(input)
}

/// A frozen execution with `{}` arguments and a never-firing signal.
pub fn exec(name: &str, agent: Option<&str>) -> Arc<ToolExecution> {
    exec_with("c1", name, serde_json::json!({}), agent, Signal::never())
}

/// The gate the staged runtime applies in prepare, without approval: the pre-execute
/// waterfall, then (for an allowed call) the guards. `Err` carries the denial text.
pub async fn gate(hooks: &Hooks, exec: &ToolExecution, chain: &[AgentId]) -> Result<(), String> {
    let snap = hooks.snapshot(chain);
    match PreNext::new(&snap.pre).run(exec).await {
        Err(f) => Err(f.message().to_owned()),
        Ok(PreToolDecision::Deny { reason }) => Err(reason.to_string()),
        Ok(PreToolDecision::Ask { .. }) => Err("ask".into()),
        Ok(PreToolDecision::Allow) => match hooks.check_guards(exec, chain) {
            Some(reason) => Err(reason),
            None => Ok(()),
        },
    }
}

pub fn agent(a: &str) -> AgentId {
    AgentId::new(a)
}
