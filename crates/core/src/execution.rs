//! One tool call's identity and input (spec S1): `ToolExecutionInput` from the loop, frozen into a
//! shared `ToolExecution` with an opaque token before any policy runs.
//!
//! Guarantees: every field is moved in once; arguments are frozen and can never be rewritten; the
//! same `Arc<ToolExecution>` is seen by every stage of one call.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

use crate::json::{Json, JsonError};
use crate::signal::Signal;
use crate::subject::PermissionSubject;

/// An opaque token naming one execution; sub-calls carry their parent's.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct ExecutionToken(u64);

static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);

impl ExecutionToken {
    /// A fresh token, unique within the process.
    pub fn fresh() -> ExecutionToken {
        ExecutionToken(NEXT_TOKEN.fetch_add(1, Ordering::Relaxed))
    }
}

/// An agent's id: the key of its scope for listeners, guards, tools and approval routing.
#[derive(Clone, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct AgentId(Arc<str>);

impl AgentId {
    /// An agent id.
    pub fn new(id: impl Into<Arc<str>>) -> AgentId {
        AgentId(id.into())
    }
    /// The id text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for AgentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for AgentId {
    fn from(s: &str) -> AgentId {
        AgentId::new(s)
    }
}

/// A call's arguments: parsed JSON, or the model's raw text when it was not JSON (spec S1: passed
/// on so the tool's own validation fails it).
#[derive(Clone, Debug, PartialEq)]
pub enum Arguments {
    /// Valid JSON.
    Json(Json),
    /// Text that did not parse as JSON, kept verbatim.
    Raw(Arc<str>),
}

impl Arguments {
    /// Interprets the model's raw argument string: empty means `{}`, JSON parses, anything else
    /// (including JSON nested beyond the depth limit) is kept raw.
    pub fn from_raw(raw: &str) -> Arguments {
        if raw.trim().is_empty() {
            return Arguments::Json(Json::empty_object());
        }
        match Json::parse(raw) {
            Ok(j) => Arguments::Json(j),
            Err(_) => Arguments::Raw(Arc::from(raw)),
        }
    }

    /// Arguments from a JSON value.
    pub fn from_value(v: Value) -> Result<Arguments, JsonError> {
        Json::new(v).map(Arguments::Json)
    }

    /// Why raw arguments are not JSON (a syntax error with its position, or nesting beyond the
    /// depth limit); `None` for parsed arguments. Re-reads the raw text, so it is meant for the
    /// error path.
    pub fn parse_error(&self) -> Option<JsonError> {
        match self {
            Arguments::Json(_) => None,
            Arguments::Raw(r) => Json::parse(r).err(),
        }
    }

    /// The JSON value, if the arguments parsed.
    pub fn json(&self) -> Option<&Json> {
        match self {
            Arguments::Json(j) => Some(j),
            Arguments::Raw(_) => None,
        }
    }

    /// A copy of the JSON value, or `Value::String(raw)` for raw arguments. Prefer
    /// [`json`](Self::json), which shares; a deep copy is made on a stack grown for its depth, and
    /// dropping it is the caller's to do (see [`crate::json::dismantle`]).
    pub fn value(&self) -> Value {
        match self {
            Arguments::Json(j) => j.to_value(),
            Arguments::Raw(r) => Value::String(r.to_string()),
        }
    }

    /// The arguments as text: compact JSON, or the raw text.
    pub fn to_text(&self) -> String {
        match self {
            Arguments::Json(j) => j.to_json_string(),
            Arguments::Raw(r) => r.to_string(),
        }
    }
}

/// What the loop hands the pipeline for one call.
#[derive(Clone, Debug)]
pub struct ToolExecutionInput {
    /// The model's call id.
    pub call_id: Arc<str>,
    /// The root call id (defaults to `call_id`).
    pub root_call_id: Option<Arc<str>>,
    /// The tool name the model used.
    pub name: Arc<str>,
    /// The arguments.
    pub arguments: Arguments,
    /// The calling agent, if any.
    pub agent: Option<AgentId>,
    /// The parent execution's token, for sub-calls.
    pub parent: Option<ExecutionToken>,
    /// The caller's cancellation signal.
    pub signal: Signal,
}

impl ToolExecutionInput {
    /// An input with no agent, no parent and a never-firing signal.
    pub fn new(call_id: &str, name: &str, arguments: Arguments) -> ToolExecutionInput {
        ToolExecutionInput {
            call_id: Arc::from(call_id),
            root_call_id: None,
            name: Arc::from(name),
            arguments,
            agent: None,
            parent: None,
            signal: Signal::never(),
        }
    }

    /// An input over ids the caller already holds shared (no copy), with the caller's signal;
    /// like [`ToolExecutionInput::new`] followed by [`ToolExecutionInput::with_signal`].
    pub fn shared(
        call_id: Arc<str>,
        name: Arc<str>,
        arguments: Arguments,
        signal: Signal,
    ) -> ToolExecutionInput {
        ToolExecutionInput {
            call_id,
            root_call_id: None,
            name,
            arguments,
            agent: None,
            parent: None,
            signal,
        }
    }

    /// Sets the agent.
    pub fn with_agent(mut self, agent: AgentId) -> Self {
        self.agent = Some(agent);
        self
    }

    /// Sets the signal.
    pub fn with_signal(mut self, signal: Signal) -> Self {
        self.signal = signal;
        self
    }

    /// Sets the parent token and root call id.
    pub fn with_parent(mut self, parent: ExecutionToken, root_call_id: Arc<str>) -> Self {
        self.parent = Some(parent);
        self.root_call_id = Some(root_call_id);
        self
    }
}

/// One call, frozen: shared by every stage behind an `Arc`.
#[derive(Debug)]
pub struct ToolExecution {
    token: ExecutionToken,
    call_id: Arc<str>,
    root_call_id: Arc<str>,
    name: Arc<str>,
    arguments: Arguments,
    agent: Option<AgentId>,
    parent: Option<ExecutionToken>,
    signal: Signal,
    /// The permission subject a person approved for this call (set once, by the approval
    /// stage), so a check the body repeats right before acting (a file swapped for a link in
    /// between) lets exactly that subject through and nothing else.
    approved: std::sync::OnceLock<PermissionSubject>,
}

impl ToolExecution {
    /// Freezes an input, minting a fresh token and resolving the root call id.
    pub fn new(input: ToolExecutionInput) -> Arc<ToolExecution> {
        let root = input.root_call_id.unwrap_or_else(|| input.call_id.clone());
        Arc::new(ToolExecution {
            token: ExecutionToken::fresh(),
            call_id: input.call_id,
            root_call_id: root,
            name: input.name,
            arguments: input.arguments,
            agent: input.agent,
            parent: input.parent,
            signal: input.signal,
            approved: std::sync::OnceLock::new(),
        })
    }
    /// The opaque token.
    pub fn token(&self) -> ExecutionToken {
        self.token
    }
    /// The model's call id.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }
    /// The shared call id.
    pub fn call_id_arc(&self) -> &Arc<str> {
        &self.call_id
    }
    /// The root call id (the call's own id for a root call).
    pub fn root_call_id(&self) -> &str {
        &self.root_call_id
    }
    /// The tool name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The frozen arguments.
    pub fn arguments(&self) -> &Arguments {
        &self.arguments
    }
    /// The calling agent.
    pub fn agent(&self) -> Option<&AgentId> {
        self.agent.as_ref()
    }
    /// The parent token, for sub-calls.
    pub fn parent(&self) -> Option<ExecutionToken> {
        self.parent
    }
    /// The caller's signal (never replaced on the execution itself).
    pub fn signal(&self) -> &Signal {
        &self.signal
    }
    /// Records the subject an `ask` was approved for (the first record stands).
    pub fn record_approval(&self, subject: PermissionSubject) {
        let _ = self.approved.set(subject);
    }
    /// The subject an `ask` was approved for, if one was.
    pub fn approved_subject(&self) -> Option<&PermissionSubject> {
        self.approved.get()
    }
}
