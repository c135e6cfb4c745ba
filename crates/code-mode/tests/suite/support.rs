//! Shared helpers of the Code Mode suite: small hosts and a one-call runner.

use std::sync::Arc;
use std::time::Duration;

use dsh_code_mode::{Bindings, CodeOutcome, CodeRun, Host, Limits, ToolCallError, run_quickjs};
use dsh_core::{Json, Signal};
use futures::FutureExt;
use futures::future::BoxFuture;
use parking_lot::Mutex;

/// A host answering with a closure; records every call.
pub struct FnHost<F> {
    pub f: F,
    pub calls: Mutex<Vec<(String, Json)>>,
}

impl<F> Host for FnHost<F>
where
    F: Fn(&str, &Json) -> Result<Json, ToolCallError> + Send + Sync + 'static,
{
    fn call(&self, name: &str, args: Json) -> BoxFuture<'static, Result<Json, ToolCallError>> {
        let r = (self.f)(name, &args);
        self.calls.lock().push((name.to_owned(), args));
        async move { r }.boxed()
    }
}

pub fn fn_host<F>(f: F) -> Arc<FnHost<F>>
where
    F: Fn(&str, &Json) -> Result<Json, ToolCallError> + Send + Sync + 'static,
{
    Arc::new(FnHost {
        f,
        calls: Mutex::new(Vec::new()),
    })
}

/// A host answering from a plain function.
pub type PlainHost = FnHost<fn(&str, &Json) -> Result<Json, ToolCallError>>;

fn echo_answer(name: &str, args: &Json) -> Result<Json, ToolCallError> {
    let v = args
        .value()
        .get("value")
        .map(|v| match v.as_str() {
            Some(s) => s.to_owned(),
            None => v.to_string(),
        })
        .unwrap_or_default();
    Ok(Json::string(format!("{name}:{v}")))
}

/// `echo({value})` answers `echo:<value>`.
pub fn echo_host() -> Arc<PlainHost> {
    fn_host(echo_answer as fn(&str, &Json) -> Result<Json, ToolCallError>)
}

/// Small limits that keep failing tests fast.
pub fn fast_limits() -> Limits {
    Limits {
        wall_time: Duration::from_millis(1500),
        ..Limits::default()
    }
}

pub async fn run_with(
    program: &str,
    names: &[&str],
    host: Arc<dyn Host>,
    limits: Limits,
) -> CodeOutcome {
    let bindings = Bindings::new(names.iter().map(|n| Arc::from(*n)), host);
    run_quickjs(CodeRun {
        program: program.to_owned(),
        bindings,
        signal: Signal::never(),
        limits,
    })
    .await
}

/// A successful run's value (`"<none>"` when it returned nothing); fails on an error.
pub fn value(o: &CodeOutcome) -> serde_json::Value {
    assert_eq!(o.error, None, "{o:?}");
    o.value
        .as_ref()
        .map(|v| v.value().clone())
        .unwrap_or(serde_json::json!("<none>"))
}

pub async fn run_plain(program: &str) -> CodeOutcome {
    run_with(program, &[], echo_host(), fast_limits()).await
}

// ---------------------------------------------------------------------------------------------
// Pipeline harness: a registry, hooks, the staged runtime with Code Mode mounted, and a session.
// ---------------------------------------------------------------------------------------------

use dsh_code_mode::{AgentSessions, CodeMode, CodeModeConfig, CodeRuntime, PresentationMode};
use dsh_core::{
    AgentId, Failure, Registration, ToolDefinition, ToolExecutionInput, ToolOutput, ToolResult,
};
use dsh_guard::Hooks;
use dsh_scheduler::Runtime;
use dsh_session::{Event, Session};
use serde_json::{Value, json};

/// A runtime whose behaviour is a closure over the run (it may call the bindings).
pub struct Scripted<F> {
    pub language: &'static str,
    pub f: F,
}

#[async_trait::async_trait]
impl<F> CodeRuntime for Scripted<F>
where
    F: Fn(CodeRun) -> BoxFuture<'static, CodeOutcome> + Send + Sync + 'static,
{
    fn language(&self) -> &str {
        self.language
    }
    async fn run(&self, run: CodeRun) -> CodeOutcome {
        (self.f)(run).await
    }
}

/// A scripted runtime speaking TypeScript.
pub fn scripted<F>(f: F) -> Arc<dyn CodeRuntime>
where
    F: Fn(CodeRun) -> BoxFuture<'static, CodeOutcome> + Send + Sync + 'static,
{
    Arc::new(Scripted {
        language: "typescript",
        f,
    })
}

/// A program that submits `calls` (tool name, JSON arguments) together, as `Promise.all` would,
/// and waits for all of them. Unlike the engine, which runs on a thread of its own, it runs on
/// the test's runtime: with the clock paused, [`quiescent`] then sees the whole run.
pub fn submits_together(calls: &[(&str, &str)]) -> Arc<dyn CodeRuntime> {
    let calls: Vec<(String, String)> = calls
        .iter()
        .map(|(n, a)| ((*n).to_owned(), (*a).to_owned()))
        .collect();
    scripted(move |run| {
        let pending: Vec<_> = calls
            .iter()
            .map(|(n, a)| run.bindings.call(n, Some(a)))
            .collect();
        async move {
            futures::future::join_all(pending).await;
            CodeOutcome::default()
        }
        .boxed()
    })
}

/// A runtime that returns a fixed outcome without calling anything.
pub fn fixed(outcome: CodeOutcome) -> Arc<dyn CodeRuntime> {
    scripted(move |_run| {
        let o = outcome.clone();
        async move { o }.boxed()
    })
}

/// `echo({value})` returns `echo:<value>`; parallel-safe.
pub fn echo_tool() -> ToolDefinition {
    echo_tool_named("echo")
}

/// The echo tool under another name (answers `<name>:<value>`).
pub fn echo_tool_named(name: &str) -> ToolDefinition {
    let n = name.to_owned();
    ToolDefinition::builder(name, "Echo the value back")
        .parameters(Json::from_shallow(json!({
            "type": "object",
            "properties": {"value": {"type": "string", "description": "What to echo"}},
            "required": ["value"],
        })))
        .output(ToolOutput::string())
        .concurrency_safe(true)
        .execute(move |ctx| {
            let n = n.clone();
            async move {
                let v = ctx
                    .arguments()
                    .json()
                    .and_then(|j| j.value().get("value").cloned())
                    .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                    .unwrap_or_default();
                Ok(Json::string(format!("{n}:{v}")))
            }
        })
        .build()
        .expect("echo tool")
}

/// A tool from a body closure, string output.
pub fn tool_fn<F, Fut>(name: &str, parallel: bool, f: F) -> ToolDefinition
where
    F: Fn(dsh_core::ToolContext) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Json, Failure>> + Send + 'static,
{
    ToolDefinition::builder(name, "A test tool")
        .output(ToolOutput::string())
        .concurrency_safe(parallel)
        .execute(f)
        .build()
        .expect("test tool")
}

pub struct Harness {
    pub registry: dsh_core::ToolRegistry,
    pub hooks: Hooks,
    pub runtime: Runtime,
    pub code: CodeMode,
    pub session: Session,
    pub sessions: AgentSessions,
    /// The registrations of the tools (dropping them would unregister the tools).
    _keep: Vec<Registration>,
}

impl Harness {
    /// A pipeline with Code Mode (mode `code` unless `configure` says otherwise), the given
    /// tools registered globally, and a session (with an open turn, invariants checked) that
    /// receives the records of calls without an agent and of agent `a`.
    pub async fn new(
        tools: Vec<ToolDefinition>,
        configure: impl FnOnce(&mut CodeModeConfig),
    ) -> Harness {
        let registry = dsh_core::ToolRegistry::new();
        let keep: Vec<Registration> = tools
            .into_iter()
            .map(|t| registry.register(t).expect("register"))
            .collect();
        let sessions = AgentSessions::new();
        let mut config = CodeModeConfig {
            mode: PresentationMode::Code,
            runtime: Some(Arc::new(dsh_code_mode::QuickJs::new())),
            limits: fast_limits(),
            sessions: Some(Arc::new(sessions.clone())),
            ..CodeModeConfig::default()
        };
        configure(&mut config);
        let code = CodeMode::new(&registry, config).expect("code mode");
        let hooks = Hooks::new();
        let runtime =
            Runtime::new(registry.clone(), hooks.clone()).with_admission(code.admission());
        code.bind(&runtime).expect("bind");
        let session = Session::in_memory("code-mode-test");
        session.enable_invariants().expect("invariants");
        session.append(Event::turn_start(1)).await.expect("turn");
        sessions.insert(None, session.clone());
        sessions.insert(Some(AgentId::from("a")), session.clone());
        Harness {
            registry,
            hooks,
            runtime,
            code,
            session,
            sessions,
            _keep: keep,
        }
    }

    /// Runs `run_code` as call `call-1` with this program.
    pub async fn run_code(&self, program: &str) -> Arc<ToolResult> {
        self.run_code_as("call-1", program).await
    }

    /// Runs `run_code` as call `call_id` with this program.
    pub async fn run_code_as(&self, call_id: &str, program: &str) -> Arc<ToolResult> {
        self.runtime
            .execute(input(
                call_id,
                "run_code",
                json!({"code": program, "description": "test"}),
            ))
            .await
    }

    /// `(type, data)` of every `tool/code-dispatch*` record, in log order.
    pub fn dispatch_records(&self) -> Vec<(String, Value)> {
        self.session
            .events()
            .pairs()
            .filter(|(_, e)| e.event_type().starts_with("tool/code-dispatch"))
            .map(|(_, e)| (e.event_type().to_owned(), e.data().value().clone()))
            .collect()
    }

    /// Sub-call ids of the start records.
    pub fn starts(&self) -> Vec<String> {
        self.ids("tool/code-dispatch-start")
    }

    /// Sub-call ids of the settle records.
    pub fn settles(&self) -> Vec<String> {
        self.ids("tool/code-dispatch")
    }

    fn ids(&self, ty: &str) -> Vec<String> {
        self.dispatch_records()
            .into_iter()
            .filter(|(t, _)| t == ty)
            .map(|(_, d)| d["subCallId"].as_str().unwrap_or_default().to_owned())
            .collect()
    }
}

/// An input for `name` with JSON `args`.
pub fn input(call_id: &str, name: &str, args: Value) -> ToolExecutionInput {
    dsh_test_support::input(call_id, name, args)
}

/// The first text of a result.
pub fn text(result: &ToolResult) -> String {
    result.first_text().unwrap_or_default().to_owned()
}

/// The `{logs, result?}` value of a result.
pub fn value_of(result: &ToolResult) -> Value {
    result
        .value()
        .map(|v| v.value().clone())
        .unwrap_or(Value::Null)
}

// ---------------------------------------------------------------------------------------------
// Board: tools whose bodies are held until released, recording what ran when.
// ---------------------------------------------------------------------------------------------

use std::collections::HashSet;
use tokio::sync::Notify;

/// Proving that a sub-call has not started: see `dsh_test_support::quiescent`.
pub use dsh_test_support::quiescent;

/// Held tools: each body records `start:<label>`, waits until its label is released (or, for
/// tools built with `ends_on_abort`, until its signal fires), then records `end:<label>` and
/// returns `<name>:<label>`. The label is the `id` argument.
#[derive(Clone, Default)]
pub struct Board {
    state: Arc<Mutex<BoardState>>,
    notify: Arc<Notify>,
}

#[derive(Default)]
struct BoardState {
    events: Vec<String>,
    released: HashSet<String>,
    all: bool,
    live: usize,
    peak: usize,
    aborted: Vec<String>,
}

impl Board {
    pub fn new() -> Board {
        Board::default()
    }
    pub fn release(&self, label: &str) {
        self.state.lock().released.insert(label.to_owned());
        self.notify.notify_waiters();
    }
    pub fn release_all(&self) {
        self.state.lock().all = true;
        self.notify.notify_waiters();
    }
    pub fn events(&self) -> Vec<String> {
        self.state.lock().events.clone()
    }
    pub fn started(&self) -> Vec<String> {
        self.events()
            .iter()
            .filter_map(|e| e.strip_prefix("start:").map(str::to_owned))
            .collect()
    }
    pub fn is_started(&self, label: &str) -> bool {
        self.started().iter().any(|s| s == label)
    }
    pub fn peak(&self) -> usize {
        self.state.lock().peak
    }
    pub fn live(&self) -> usize {
        self.state.lock().live
    }
    /// Labels whose body saw its signal fire.
    pub fn aborted(&self) -> Vec<String> {
        self.state.lock().aborted.clone()
    }
    /// Waits until `label` started (up to 3 s); panics otherwise.
    pub async fn wait_started(&self, label: &str) {
        self.wait_for(|b| b.is_started(label), &format!("{label} to start"))
            .await;
    }
    /// Waits until `cond` holds (up to 3 s).
    pub async fn wait_for(&self, cond: impl Fn(&Board) -> bool, what: &str) {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(3);
        while !cond(self) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {what}: {:?}",
                self.events()
            );
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    }

    /// A held tool.
    pub fn tool(&self, name: &str, parallel: bool) -> ToolDefinition {
        self.build(name, parallel, false)
    }

    /// A held tool whose body also ends when its signal fires.
    pub fn tool_ending_on_abort(&self, name: &str, parallel: bool) -> ToolDefinition {
        self.build(name, parallel, true)
    }

    fn build(&self, name: &str, parallel: bool, ends_on_abort: bool) -> ToolDefinition {
        let board = self.clone();
        let n = name.to_owned();
        tool_fn(name, parallel, move |ctx| {
            let board = board.clone();
            let n = n.clone();
            async move {
                let label = ctx
                    .arguments()
                    .json()
                    .and_then(|j| {
                        j.value()
                            .get("id")
                            .and_then(|v| v.as_str())
                            .map(str::to_owned)
                    })
                    .unwrap_or_default();
                {
                    let mut st = board.state.lock();
                    st.events.push(format!("start:{label}"));
                    st.live += 1;
                    st.peak = st.peak.max(st.live);
                }
                loop {
                    let notified = board.notify.notified();
                    tokio::pin!(notified);
                    notified.as_mut().enable();
                    {
                        let st = board.state.lock();
                        if st.all || st.released.contains(&label) {
                            break;
                        }
                    }
                    if ends_on_abort && ctx.signal().is_aborted() {
                        board.state.lock().aborted.push(label.clone());
                        break;
                    }
                    tokio::select! {
                        _ = &mut notified => {}
                        _ = ctx.signal().aborted(), if ends_on_abort => {}
                    }
                }
                let mut st = board.state.lock();
                st.live -= 1;
                st.events.push(format!("end:{label}"));
                Ok(Json::string(format!("{n}:{label}")))
            }
        })
    }
}

/// Checks the dispatch records are paired: every start has exactly one settle after it, and no
/// settle lacks a start.
pub fn assert_paired(records: &[(String, Value)]) {
    let mut open: Vec<String> = Vec::new();
    let mut settled: HashSet<String> = HashSet::new();
    for (ty, data) in records {
        let id = data["subCallId"].as_str().unwrap_or_default().to_owned();
        if ty == "tool/code-dispatch-start" {
            assert!(
                !open.contains(&id) && !settled.contains(&id),
                "{id} started twice"
            );
            open.push(id);
        } else {
            let at = open.iter().position(|o| *o == id);
            assert!(at.is_some(), "{id} settled without a start");
            open.retain(|o| *o != id);
            assert!(settled.insert(id.clone()), "{id} settled twice");
        }
    }
    assert!(open.is_empty(), "unsettled: {open:?}");
}

/// Runs `program` through `run_code` on a task of its own.
pub fn spawn_run(h: &Arc<Harness>, program: &str) -> tokio::task::JoinHandle<Arc<ToolResult>> {
    let h = h.clone();
    let program = program.to_owned();
    tokio::spawn(async move { h.run_code(&program).await })
}

/// The result of a run started by [`spawn_run`] (panics after 5 s).
pub async fn finished(j: tokio::task::JoinHandle<Arc<ToolResult>>) -> Arc<ToolResult> {
    tokio::time::timeout(Duration::from_secs(5), j)
        .await
        .expect("run_code finishes")
        .expect("joins")
}
