//! Shared set-up: a mock provider, a registry with an `echo` tool that counts its runs, an
//! agent over an in-memory session, and readers of what was logged.

// Tests state their expectations with `unwrap`/`expect`: a panic is the failure report.
#![allow(clippy::expect_used, clippy::unwrap_used, dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use dsh_agent::{Agent, AgentConfig};
use dsh_core::{Json, ToolDefinition, ToolOutput, ToolRegistry};
use dsh_guard::Hooks;
use dsh_model::{OpenAiConfig, OpenAiProvider};
use dsh_scheduler::Runtime;
use dsh_session::Session;
use dsh_test_support::mock_provider::openai;
use dsh_test_support::mock_provider::{Frame, MockProvider, Reply};
use serde_json::{Value, json};

pub(super) use dsh_test_support::mock_provider::openai as oa;

pub(super) struct Rig {
    pub server: MockProvider,
    pub agent: Agent,
    pub session: Session,
    pub runs: Arc<AtomicUsize>,
    pub runtime: Arc<Runtime>,
}

impl Rig {
    pub fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }

    /// Event types in log order.
    pub fn types(&self) -> Vec<String> {
        types(&self.session)
    }

    pub fn count(&self, event_type: &str) -> usize {
        self.types().iter().filter(|t| *t == event_type).count()
    }

    /// The data of every event of `event_type`, in order.
    pub fn data(&self, event_type: &str) -> Vec<Value> {
        data(&self.session, event_type)
    }

    /// The texts of the user-sourced `user/message`s.
    pub fn user_texts(&self) -> Vec<String> {
        self.data("user/message")
            .iter()
            .filter(|d| d["source"]["kind"] == "user")
            .map(|d| {
                d["content"][0]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect()
    }

    /// The `reason` of every `turn/end`.
    pub fn reasons(&self) -> Vec<Value> {
        self.data("turn/end")
            .into_iter()
            .map(|d| d["reason"].clone())
            .collect()
    }

    /// The request bodies the server received.
    pub fn bodies(&self) -> Vec<Value> {
        self.server.bodies()
    }

    /// Whether any request body holds `text` anywhere.
    pub fn request_holds(&self, index: usize, text: &str) -> bool {
        self.bodies()
            .get(index)
            .is_some_and(|b| b.to_string().contains(text))
    }
}

pub(super) fn types(session: &Session) -> Vec<String> {
    session
        .events()
        .iter()
        .map(|(_, e)| e.event_type().to_owned())
        .collect()
}

pub(super) fn data(session: &Session, event_type: &str) -> Vec<Value> {
    session
        .events()
        .iter()
        .filter(|(_, e)| e.event_type() == event_type)
        .map(|(_, e)| e.data().value().clone())
        .collect()
}

/// A registry with `echo` (answers `echoed`, counting its runs) and, by name, more no-op tools.
pub(super) fn registry(runs: &Arc<AtomicUsize>, extra: &[&str]) -> ToolRegistry {
    let registry = ToolRegistry::new();
    let counter = runs.clone();
    registry
        .add(
            ToolDefinition::builder("echo", "Echoes.")
                .output(ToolOutput::string())
                .execute(move |_ctx| {
                    let counter = counter.clone();
                    async move {
                        counter.fetch_add(1, Ordering::SeqCst);
                        Ok(Json::string("echoed"))
                    }
                })
                .build()
                .unwrap(),
        )
        .unwrap();
    for name in extra {
        registry
            .add(
                ToolDefinition::builder(name, "A tool.")
                    .output(ToolOutput::string())
                    .execute(|_ctx| async { Ok(Json::string("ok")) })
                    .build()
                    .unwrap(),
            )
            .unwrap();
    }
    registry
}

pub(super) fn openai_provider(server: &MockProvider) -> Arc<OpenAiProvider> {
    let config = OpenAiConfig::deepseek()
        .with_base_url(&server.openai_base_url())
        .with_api_key("sk-test");
    Arc::new(OpenAiProvider::new(config).unwrap())
}

pub(super) async fn rig() -> Rig {
    rig_with(|c| c, &[]).await
}

pub(super) async fn rig_with(
    configure: impl FnOnce(AgentConfig) -> AgentConfig,
    extra_tools: &[&str],
) -> Rig {
    rig_custom(configure, extra_tools, |_, _| {}).await
}

/// A rig whose registry `add` extends; tools reach the agent through the cell.
pub(super) async fn rig_custom(
    configure: impl FnOnce(AgentConfig) -> AgentConfig,
    extra_tools: &[&str],
    add: impl FnOnce(&ToolRegistry, Arc<OnceLock<Agent>>),
) -> Rig {
    rig_over(
        Session::in_memory("agent-test"),
        configure,
        extra_tools,
        add,
    )
    .await
}

/// [`rig_custom`] over `session` (a log on disk, say).
pub(super) async fn rig_over(
    session: Session,
    configure: impl FnOnce(AgentConfig) -> AgentConfig,
    extra_tools: &[&str],
    add: impl FnOnce(&ToolRegistry, Arc<OnceLock<Agent>>),
) -> Rig {
    let server = MockProvider::start().await.unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let registry = registry(&runs, extra_tools);
    let cell = Arc::new(OnceLock::new());
    add(&registry, cell.clone());
    let runtime = Arc::new(Runtime::new(registry, Hooks::new()));
    let config = configure(AgentConfig::new(openai_provider(&server), "deepseek-chat"));
    let agent = Agent::new(runtime.clone(), session.clone(), config);
    let _ = cell.set(agent.clone());
    Rig {
        server,
        agent,
        session,
        runs,
        runtime,
    }
}

/// A reply calling `echo` once with id `id`, its arguments cut in small pieces.
pub(super) fn echo_call(id: &str) -> Reply {
    let mut frames = vec![openai::role()];
    frames.extend(openai::tool_call(
        0,
        id,
        "echo",
        &["{\"te", "xt\":", " \"hi\"}"],
    ));
    frames.extend(openai::finish("tool_calls", 20, 5));
    Reply::Stream(frames)
}

/// A text reply.
pub(super) fn say(text: &str) -> Reply {
    openai::text_reply(&[text])
}

/// A reply that streams `frames` and then never ends.
pub(super) fn stalled(mut frames: Vec<Frame>) -> Reply {
    frames.insert(0, openai::role());
    frames.push(Frame::Stall);
    Reply::Stream(frames)
}

pub(super) fn user_data_keys(value: &Value) -> Vec<String> {
    let mut keys: Vec<String> = value
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    keys.sort();
    keys
}

pub(super) fn j(v: Value) -> Value {
    v
}

pub(super) fn aborted(kind: &str) -> Value {
    json!({"kind": "aborted", "reason": {"kind": kind}})
}

pub(super) fn completed() -> Value {
    json!({"kind": "completed"})
}

/// Waits (polling, up to 10 s) until `cond` holds; panics naming `what` otherwise.
pub(super) async fn wait_until(what: &str, cond: impl Fn() -> bool) {
    for _ in 0..2000 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("timed out waiting until {what}");
}

/// A reply that opens its stream and sends nothing, ever (a model request that is stuck).
pub(super) fn stuck() -> Reply {
    Reply::Stream(vec![Frame::Stall])
}

impl Rig {
    /// Waits until the server has received `n` requests.
    pub async fn requested(&self, n: usize) {
        wait_until(&format!("{n} requests"), || {
            self.server.requests().len() >= n
        })
        .await;
    }
}
