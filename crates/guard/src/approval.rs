//! The approval seam (spec P2; conformance APR-01..40): a one-shot question answered
//! `allowed-once | rejected | cancelled | unavailable`, audited to the asking agent's session.
//!
//! Guarantees: fail closed (no answerer, an answerer that errors, panics or only delegates, an
//! outcome outside the vocabulary: `unavailable`); the `never` policy rejects inside the service,
//! before any answerer; an aborted signal answers `cancelled` at once and drops a late answer;
//! every answered question is one `approval/asked` + `approval/decided` pair with one id.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use async_trait::async_trait;
use dsh_core::codes::messages;
use dsh_core::context::fresh_message_id;
use dsh_core::{AgentId, ContextMessage, Failure, Json, Signal, ToolExecution, ToolRegistry};
use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::audit::{APPROVAL_ASKED, APPROVAL_DECIDED, APPROVAL_POLICY, AuditSink};
use crate::error::GuardError;
use crate::handle::ListenerHandle;
use crate::scope::Scope;

/// The answer to one approval question. Only [`ApprovalOutcome::AllowedOnce`] grants, and only
/// for the one call it was asked about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalOutcome {
    /// `allowed-once`: the call may run, this once.
    AllowedOnce,
    /// `rejected`: a human (or the `never` policy) said no.
    Rejected,
    /// `cancelled`: the question was withdrawn (the call's signal fired).
    Cancelled,
    /// `unavailable`: nobody could answer (fail closed).
    Unavailable,
}

impl ApprovalOutcome {
    /// Every outcome, in the vocabulary's order.
    pub const ALL: [ApprovalOutcome; 4] = [
        ApprovalOutcome::AllowedOnce,
        ApprovalOutcome::Rejected,
        ApprovalOutcome::Cancelled,
        ApprovalOutcome::Unavailable,
    ];

    /// The wire name, e.g. `allowed-once`.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalOutcome::AllowedOnce => "allowed-once",
            ApprovalOutcome::Rejected => "rejected",
            ApprovalOutcome::Cancelled => "cancelled",
            ApprovalOutcome::Unavailable => "unavailable",
        }
    }

    /// Whether this outcome lets the call run.
    pub fn is_grant(self) -> bool {
        self == ApprovalOutcome::AllowedOnce
    }

    /// Decodes an outcome from outside (a UI, another process), normalizing anything outside
    /// the vocabulary to `unavailable` (APR-22): a rogue answer never grants.
    pub fn normalize(raw: &str) -> ApprovalOutcome {
        raw.parse().unwrap_or(ApprovalOutcome::Unavailable)
    }
}

impl FromStr for ApprovalOutcome {
    type Err = GuardError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ApprovalOutcome::ALL
            .into_iter()
            .find(|o| o.as_str() == s)
            .ok_or_else(|| GuardError::UnknownOutcome(s.to_owned()))
    }
}

impl fmt::Display for ApprovalOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A session's approval policy: what happens to a question before any answerer sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalPolicy {
    /// Ask the answerers (the default); with none, fail closed as `unavailable`.
    #[default]
    Ask,
    /// Never prompt: every question is `rejected` without consulting anyone.
    Never,
}

impl ApprovalPolicy {
    /// The wire name: `ask` or `never`.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalPolicy::Ask => "ask",
            ApprovalPolicy::Never => "never",
        }
    }
}

impl FromStr for ApprovalPolicy {
    type Err = GuardError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "ask" => Ok(ApprovalPolicy::Ask),
            "never" => Ok(ApprovalPolicy::Never),
            other => Err(GuardError::InvalidPolicy(other.to_owned())),
        }
    }
}

impl fmt::Display for ApprovalPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The policy override a session's events hold: the policy of the last valid
/// `approval/policy` event, or `None` if the session never switched (APR-29). Replaying the log
/// is the state: a host resuming a session folds its events with this and passes the result to
/// [`AuditSession::resumed`].
pub fn effective_approval_policy<'a>(
    events: impl IntoIterator<Item = (&'a str, &'a Json)>,
) -> Option<ApprovalPolicy> {
    events
        .into_iter()
        .filter(|(ty, _)| *ty == APPROVAL_POLICY)
        .filter_map(|(_, data)| data.value().get("policy")?.as_str()?.parse().ok())
        .last()
}

/// One approval question. Cheap to clone (shared fields); answerers borrow it.
#[derive(Clone, Debug)]
pub struct ApprovalRequest {
    /// The agent the question is asked for: routes it to answerers and to a session.
    pub agent: AgentId,
    /// The tool the question is about.
    pub tool_name: Arc<str>,
    /// The call being decided, when there is one.
    pub call_id: Option<Arc<str>>,
    /// Why the asker asks.
    pub reason: Option<Arc<str>>,
    /// The call's arguments, as the model sent them (for an answerer that shows what it is
    /// asked: the command, the path, the content).
    pub arguments: Option<dsh_core::Arguments>,
    /// What the call acts on, as the tool declares it (the path of a file tool, the command of
    /// a shell tool): what a person is shown beside the tool's name.
    pub subject: Option<dsh_core::PermissionSubject>,
    /// Aborting it withdraws the question (`cancelled`).
    pub signal: Signal,
    /// What the person said with a `rejected` answer, for the model (see [`Feedback`]).
    pub feedback: Feedback,
}

/// Words a person adds to a refusal ("no: use the test database instead"): an answerer leaves
/// them here, and the refused call's result carries them to the model after the usual
/// refusal text. Shared by the clones of one request; the first words given stay.
#[derive(Clone, Debug, Default)]
pub struct Feedback(Arc<std::sync::OnceLock<Arc<str>>>);

impl Feedback {
    /// Leaves `text` for the model (ignored when empty or when words were already left).
    pub fn give(&self, text: &str) {
        let text = text.trim();
        if !text.is_empty() {
            let _ = self.0.set(Arc::from(text));
        }
    }

    /// The words left, if any.
    pub fn get(&self) -> Option<&Arc<str>> {
        self.0.get()
    }
}

impl ApprovalRequest {
    /// A question about `tool_name` for `agent`, with no call id, no reason and a signal that
    /// never fires.
    pub fn new(agent: AgentId, tool_name: impl Into<Arc<str>>) -> ApprovalRequest {
        ApprovalRequest {
            agent,
            tool_name: tool_name.into(),
            call_id: None,
            reason: None,
            arguments: None,
            subject: None,
            signal: Signal::never(),
            feedback: Feedback::default(),
        }
    }
    /// Sets the call id.
    pub fn with_call_id(mut self, call_id: impl Into<Arc<str>>) -> Self {
        self.call_id = Some(call_id.into());
        self
    }
    /// Sets the reason.
    pub fn with_reason(mut self, reason: impl Into<Arc<str>>) -> Self {
        self.reason = Some(reason.into());
        self
    }
    /// Sets the call's arguments.
    pub fn with_arguments(mut self, arguments: dsh_core::Arguments) -> Self {
        self.arguments = Some(arguments);
        self
    }
    /// Sets the call's permission subject.
    pub fn with_subject(mut self, subject: dsh_core::PermissionSubject) -> Self {
        self.subject = Some(subject);
        self
    }
    /// Sets the signal.
    pub fn with_signal(mut self, signal: Signal) -> Self {
        self.signal = signal;
        self
    }
}

/// An answerer in the approval chain: answers, or delegates with `next.run(req).await`.
///
/// Answerers are chained like every waterfall here: the first registered is asked first,
/// `prepend` goes in front; a scoped answerer hears only its agent's questions. An `Err` or a
/// panic fails the question closed (`unavailable`); a hung answerer is bounded by the request's
/// signal. Reaching the end of the chain answers `unavailable`.
#[async_trait]
pub trait Answerer: Send + Sync + 'static {
    /// Answers `req` or delegates.
    async fn answer(
        &self,
        req: &ApprovalRequest,
        next: AnswerNext<'_>,
    ) -> Result<ApprovalOutcome, GuardError>;
}

/// The rest of the answerer chain.
#[derive(Clone, Copy)]
pub struct AnswerNext<'a> {
    rest: &'a [Arc<dyn Answerer>],
}

impl<'a> AnswerNext<'a> {
    /// A chain over `answerers`, first asked first.
    pub fn new(answerers: &'a [Arc<dyn Answerer>]) -> AnswerNext<'a> {
        AnswerNext { rest: answerers }
    }
    /// Asks the rest of the chain; its end answers `unavailable` (fail closed).
    pub async fn run(self, req: &ApprovalRequest) -> Result<ApprovalOutcome, GuardError> {
        match self.rest.split_first() {
            None => Ok(ApprovalOutcome::Unavailable),
            Some((a, tail)) => dsh_core::contained::future(std::pin::pin!(
                a.answer(req, AnswerNext { rest: tail })
            ))
            .await
            .unwrap_or_else(|p| {
                Err(GuardError::answerer(Failure::from_panic(
                    "approval answerer",
                    &*p,
                )))
            }),
        }
    }
}

struct FnAnswerer<F>(F);

#[async_trait]
impl<F, Fut> Answerer for FnAnswerer<F>
where
    F: Fn(ApprovalRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Option<ApprovalOutcome>, GuardError>> + Send + 'static,
{
    async fn answer(
        &self,
        req: &ApprovalRequest,
        next: AnswerNext<'_>,
    ) -> Result<ApprovalOutcome, GuardError> {
        match (self.0)(req.clone()).await? {
            Some(outcome) => Ok(outcome),
            None => next.run(req).await,
        }
    }
}

/// An answerer from an async closure: `Some(outcome)` answers, `None` delegates.
pub fn answer_fn<F, Fut>(f: F) -> impl Answerer
where
    F: Fn(ApprovalRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Option<ApprovalOutcome>, GuardError>> + Send + 'static,
{
    FnAnswerer(f)
}

/// One session as the approval service sees it: where its audit events go, and its policy
/// override (the last `approval/policy` it holds).
pub struct AuditSession {
    sink: Arc<dyn AuditSink>,
    policy: Mutex<Option<ApprovalPolicy>>,
    /// Serializes policy switches so the log order and the in-memory override agree.
    switching: tokio::sync::Mutex<()>,
}

impl AuditSession {
    /// A session with no policy override.
    pub fn new(sink: Arc<dyn AuditSink>) -> Arc<AuditSession> {
        AuditSession::resumed(sink, None)
    }

    /// A session resumed with the override its log holds (see [`effective_approval_policy`]).
    pub fn resumed(sink: Arc<dyn AuditSink>, policy: Option<ApprovalPolicy>) -> Arc<AuditSession> {
        Arc::new(AuditSession {
            sink,
            policy: Mutex::new(policy),
            switching: tokio::sync::Mutex::new(()),
        })
    }

    /// The sink.
    pub fn sink(&self) -> &Arc<dyn AuditSink> {
        &self.sink
    }

    /// The session's policy override, without any configured default.
    pub fn override_policy(&self) -> Option<ApprovalPolicy> {
        *self.policy.lock()
    }

    /// Appends `approval/policy {policy}` and makes it the override once committed. Nothing
    /// changes if the append fails.
    pub async fn write_policy(&self, policy: ApprovalPolicy) -> Result<(), GuardError> {
        let _lane = self.switching.lock().await;
        self.write_policy_locked(policy).await
    }

    async fn write_policy_locked(&self, policy: ApprovalPolicy) -> Result<(), GuardError> {
        let mut data = Map::new();
        data.insert("policy".into(), Value::String(policy.as_str().into()));
        self.append(APPROVAL_POLICY, Json::from_shallow(Value::Object(data)))
            .await?;
        *self.policy.lock() = Some(policy);
        Ok(())
    }

    /// Appends through the sink; a panicking sink is an audit error, never a crash.
    async fn append(&self, ty: &str, data: Json) -> Result<(), GuardError> {
        dsh_core::contained::future(std::pin::pin!(self.sink.append(ty, data)))
            .await
            .unwrap_or_else(|p| {
                Err(GuardError::audit(Failure::from_panic(
                    "approval audit sink",
                    &*p,
                )))
            })
    }
}

impl fmt::Debug for AuditSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuditSession")
            .field("policy", &self.override_policy())
            .finish_non_exhaustive()
    }
}

/// Configuration of an [`ApprovalService`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalConfig {
    /// The deployment's default policy for sessions without an override (default `ask`).
    #[serde(default)]
    pub policy: ApprovalPolicy,
}

struct Slot<T: ?Sized> {
    id: u64,
    scope: Scope,
    item: Arc<T>,
}

impl<T: ?Sized> Clone for Slot<T> {
    fn clone(&self) -> Self {
        Slot {
            id: self.id,
            scope: self.scope.clone(),
            item: self.item.clone(),
        }
    }
}

/// The sessions attached to one scope, latest last.
type Attached = Vec<(u64, Arc<AuditSession>)>;

struct ServiceInner {
    default_policy: RwLock<ApprovalPolicy>,
    answerers: RwLock<Arc<[Slot<dyn Answerer>]>>,
    sessions: RwLock<HashMap<Scope, Attached>>,
    registry: Option<ToolRegistry>,
    next_id: AtomicU64,
}

/// The approval service. Cloning gives another handle to the same service.
///
/// Questions are routed by agent: to the answerers that reach it (global ones and those scoped
/// to the agent or, with a registry, to a scope it is nested under), and to the session attached
/// nearest to it (its own, a parent scope's, else the global one).
#[derive(Clone)]
pub struct ApprovalService {
    inner: Arc<ServiceInner>,
}

/// The model-facing sentence for the `ask` policy.
pub const ASK_POLICY_TEXT: &str = "Approval policy: ask. Actions that require approval may ask the user through the configured approval channel; when no channel can answer, the request fails closed and the action is not performed.";
/// The model-facing sentence for the `never` policy.
pub const NEVER_POLICY_TEXT: &str = "Approval policy: never. Approval prompts are disabled in this session: actions that require approval are rejected automatically. Do not request sandbox escalation.";
/// The plugin name on policy-change notices (`source: {kind: "plugin", plugin}`).
pub const APPROVAL_PLUGIN: &str = "user-approval";

impl ApprovalService {
    /// A service whose answerers and sessions are scoped to single agents.
    pub fn new(config: ApprovalConfig) -> ApprovalService {
        ApprovalService::build(config, None)
    }

    /// A service that resolves nested agent scopes through `registry`
    /// ([`ToolRegistry::scope_chain`]): an answerer or session attached to a parent scope also
    /// serves the agents nested under it.
    pub fn with_registry(config: ApprovalConfig, registry: ToolRegistry) -> ApprovalService {
        ApprovalService::build(config, Some(registry))
    }

    fn build(config: ApprovalConfig, registry: Option<ToolRegistry>) -> ApprovalService {
        ApprovalService {
            inner: Arc::new(ServiceInner {
                default_policy: RwLock::new(config.policy),
                answerers: RwLock::new(Arc::from(Vec::new())),
                sessions: RwLock::new(HashMap::new()),
                registry,
                next_id: AtomicU64::new(1),
            }),
        }
    }

    fn chain(&self, agent: &AgentId) -> Vec<AgentId> {
        match &self.inner.registry {
            Some(r) => r.scope_chain(Some(agent)),
            None => vec![agent.clone()],
        }
    }

    fn insert_answerer(&self, scope: Scope, a: Arc<dyn Answerer>, front: bool) -> ListenerHandle {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        {
            let mut list = self.inner.answerers.write();
            let mut v: Vec<Slot<dyn Answerer>> = list.to_vec();
            let slot = Slot { id, scope, item: a };
            if front {
                v.insert(0, slot);
            } else {
                v.push(slot);
            }
            *list = Arc::from(v);
        }
        let weak: Weak<ServiceInner> = Arc::downgrade(&self.inner);
        ListenerHandle::new(move || {
            if let Some(inner) = weak.upgrade() {
                let mut list = inner.answerers.write();
                let v: Vec<Slot<dyn Answerer>> =
                    list.iter().filter(|s| s.id != id).cloned().collect();
                *list = Arc::from(v);
            }
        })
    }

    /// Adds an answerer after the existing ones.
    pub fn add_answerer(&self, scope: Scope, answerer: impl Answerer) -> ListenerHandle {
        self.insert_answerer(scope, Arc::new(answerer), false)
    }

    /// Adds an answerer in front of the existing ones.
    pub fn prepend_answerer(&self, scope: Scope, answerer: impl Answerer) -> ListenerHandle {
        self.insert_answerer(scope, Arc::new(answerer), true)
    }

    /// Attaches a session: [`Scope::Global`] for every agent without a nearer one, or one
    /// agent's (and, with a registry, its nested agents'). The latest attachment of a scope wins
    /// until its handle is dropped.
    pub fn attach_session(&self, scope: Scope, session: Arc<AuditSession>) -> ListenerHandle {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        self.inner
            .sessions
            .write()
            .entry(scope.clone())
            .or_default()
            .push((id, session));
        let weak: Weak<ServiceInner> = Arc::downgrade(&self.inner);
        ListenerHandle::new(move || {
            if let Some(inner) = weak.upgrade() {
                let mut sessions = inner.sessions.write();
                if let Some(v) = sessions.get_mut(&scope) {
                    v.retain(|(sid, _)| *sid != id);
                    if v.is_empty() {
                        sessions.remove(&scope);
                    }
                }
            }
        })
    }

    /// The session questions of `agent` are audited to, if one is attached.
    pub fn session_for(&self, agent: &AgentId) -> Option<Arc<AuditSession>> {
        let chain = self.chain(agent);
        let sessions = self.inner.sessions.read();
        chain
            .into_iter()
            .map(Scope::Agent)
            .chain(std::iter::once(Scope::Global))
            .find_map(|s| {
                sessions
                    .get(&s)
                    .and_then(|v| v.last())
                    .map(|(_, s)| s.clone())
            })
    }

    fn answerers_for(&self, agent: &AgentId) -> Vec<Arc<dyn Answerer>> {
        let chain = self.chain(agent);
        let list = self.inner.answerers.read().clone();
        list.iter()
            .filter(|s| s.scope.reaches(&chain))
            .map(|s| s.item.clone())
            .collect()
    }

    /// The configured default policy.
    pub fn default_policy(&self) -> ApprovalPolicy {
        *self.inner.default_policy.read()
    }

    /// Replaces the configured default policy (configuration reload; not audited).
    pub fn set_default_policy(&self, policy: ApprovalPolicy) {
        *self.inner.default_policy.write() = policy;
    }

    /// The session override of `agent`'s session, without the configured default (APR-36).
    pub fn override_of(&self, agent: &AgentId) -> Option<ApprovalPolicy> {
        self.session_for(agent).and_then(|s| s.override_policy())
    }

    /// The policy questions of `agent` are decided under now: its session's override, else the
    /// configured default.
    pub fn policy_for(&self, agent: &AgentId) -> ApprovalPolicy {
        self.override_of(agent)
            .unwrap_or_else(|| self.default_policy())
    }

    /// Switches a live agent's session policy (APR-37). A switch to the policy already in effect
    /// changes nothing and returns `None`; otherwise `approval/policy` is appended and the
    /// returned notice (source `{kind: "plugin", plugin: "user-approval"}`) is for the host to
    /// inject into that agent's next step.
    pub async fn set_policy(
        &self,
        agent: &AgentId,
        policy: ApprovalPolicy,
    ) -> Result<Option<ContextMessage>, GuardError> {
        let session = self
            .session_for(agent)
            .ok_or_else(|| GuardError::NoSession(agent.clone()))?;
        let _lane = session.switching.lock().await;
        let previous = session
            .override_policy()
            .unwrap_or_else(|| self.default_policy());
        if previous == policy {
            return Ok(None);
        }
        session.write_policy_locked(policy).await?;
        Ok(Some(ContextMessage::plugin_text(
            APPROVAL_PLUGIN,
            format!(
                "The approval policy changed from \"{previous}\" to \"{policy}\" (changed by the user)."
            ),
        )))
    }

    /// [`ApprovalService::set_policy`] from an untrusted string: a value outside the vocabulary
    /// fails with `approval policy must be one of "ask" or "never"` before anything is
    /// appended (APR-30).
    pub async fn set_policy_str(
        &self,
        agent: &AgentId,
        policy: &str,
    ) -> Result<Option<ContextMessage>, GuardError> {
        let policy: ApprovalPolicy = policy.parse()?;
        self.set_policy(agent, policy).await
    }

    /// The `approval:policy` prompt context for `agent` (APR-38): a fixed sentence per policy,
    /// byte-identical while the policy is unchanged; the empty string with no agent.
    pub fn policy_context(&self, agent: Option<&AgentId>) -> String {
        match agent {
            None => String::new(),
            Some(a) => match self.policy_for(a) {
                ApprovalPolicy::Ask => ASK_POLICY_TEXT.to_owned(),
                ApprovalPolicy::Never => NEVER_POLICY_TEXT.to_owned(),
            },
        }
    }

    /// A prompt-context source that lives only as long as the service: once every handle to
    /// the service is dropped (the service is unloaded), it yields nothing (APR-40).
    pub fn prompt_context(&self) -> PolicyPrompt {
        PolicyPrompt {
            inner: Arc::downgrade(&self.inner),
        }
    }

    /// Asks one question (APR-09..36): requires an open turn in the agent's session, appends
    /// `approval/asked {id, toolName, callId?, reason?}`, decides, appends
    /// `approval/decided {id, outcome}`, and returns the outcome.
    ///
    /// Deciding: an already-aborted signal is `cancelled` without asking; the `never` policy is
    /// `rejected` without asking; otherwise the answerer chain decides, raced against the
    /// signal (an abort answers `cancelled` at once and the pending answer is dropped); an
    /// answerer error or panic, or the chain's end, is `unavailable`.
    ///
    /// Errors: no open turn (nothing appended); no session attached; an audit append that did
    /// not commit (that same error). A decision is never returned unaudited.
    pub async fn request(&self, req: ApprovalRequest) -> Result<ApprovalOutcome, GuardError> {
        let session = self
            .session_for(&req.agent)
            .ok_or_else(|| GuardError::NoSession(req.agent.clone()))?;
        if session.sink.open_turn().is_none() {
            return Err(GuardError::OutsideOpenTurn);
        }
        let id: Arc<str> = fresh_message_id();
        let mut asked = Map::new();
        asked.insert("id".into(), Value::String(id.to_string()));
        asked.insert("toolName".into(), Value::String(req.tool_name.to_string()));
        if let Some(c) = &req.call_id {
            asked.insert("callId".into(), Value::String(c.to_string()));
        }
        if let Some(r) = &req.reason {
            asked.insert("reason".into(), Value::String(r.to_string()));
        }
        session
            .append(APPROVAL_ASKED, Json::from_shallow(Value::Object(asked)))
            .await?;
        let outcome = self.decide(&req, &session).await;
        let mut decided = Map::new();
        decided.insert("id".into(), Value::String(id.to_string()));
        decided.insert("outcome".into(), Value::String(outcome.as_str().into()));
        session
            .append(APPROVAL_DECIDED, Json::from_shallow(Value::Object(decided)))
            .await?;
        tracing::debug!(
            agent = %req.agent,
            tool = %req.tool_name,
            id = %id,
            outcome = outcome.as_str(),
            "approval decided"
        );
        Ok(outcome)
    }

    async fn decide(&self, req: &ApprovalRequest, session: &AuditSession) -> ApprovalOutcome {
        if req.signal.is_aborted() {
            return ApprovalOutcome::Cancelled;
        }
        let policy = session
            .override_policy()
            .unwrap_or_else(|| self.default_policy());
        if policy == ApprovalPolicy::Never {
            return ApprovalOutcome::Rejected;
        }
        let chain = self.answerers_for(&req.agent);
        let answer = async {
            match AnswerNext::new(&chain).run(req).await {
                Ok(outcome) => outcome,
                Err(e) => {
                    tracing::warn!(tool = %req.tool_name, error = %e, "approval answerer failed; the question fails closed");
                    ApprovalOutcome::Unavailable
                }
            }
        };
        tokio::select! {
            biased;
            _ = req.signal.aborted() => ApprovalOutcome::Cancelled,
            outcome = answer => outcome,
        }
    }
}

impl fmt::Debug for ApprovalService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApprovalService")
            .field("default_policy", &self.default_policy())
            .finish_non_exhaustive()
    }
}

/// The `approval:policy` prompt context, tied to the service's lifetime.
#[derive(Clone)]
pub struct PolicyPrompt {
    inner: Weak<ServiceInner>,
}

impl PolicyPrompt {
    /// The context's name.
    pub const NAME: &'static str = "approval:policy";

    /// The context text for `agent`, or `None` once the service is gone.
    pub fn text(&self, agent: Option<&AgentId>) -> Option<String> {
        let inner = self.inner.upgrade()?;
        Some(ApprovalService { inner }.policy_context(agent))
    }
}

/// Maps an outcome to the registry's gate: `Ok` only for `allowed-once`; every other outcome is
/// a denial with the exact message of the conformance quick reference.
pub fn gate_outcome(tool_name: &str, outcome: ApprovalOutcome) -> Result<(), Failure> {
    match outcome {
        ApprovalOutcome::AllowedOnce => Ok(()),
        ApprovalOutcome::Rejected => Err(Failure::new(messages::approval_rejected(tool_name))),
        ApprovalOutcome::Cancelled => Err(Failure::new(messages::approval_cancelled(tool_name))),
        ApprovalOutcome::Unavailable => {
            Err(Failure::new(messages::approval_unavailable(tool_name)))
        }
    }
}

/// [`gate_outcome`] for an outcome decoded from outside (APR-08): a value outside the
/// vocabulary is a denial whose message says it is unreachable, never an allow.
pub fn gate_wire_outcome(tool_name: &str, raw: &str) -> Result<(), Failure> {
    match raw.parse::<ApprovalOutcome>() {
        Ok(outcome) => gate_outcome(tool_name, outcome),
        Err(e) => Err(Failure::new(e.to_string())),
    }
}

/// The registry-level routing of a pre-execute `ask` (APR-01..08): `Ok(())` only when the
/// service answers `allowed-once`.
///
/// - no service: a denial with the ask's reason, or `tool "<name>" requires approval (not yet
///   supported)`;
/// - no agent on the call: `tool "<name>" requires approval, but the call has no agent to route
///   it through` (no answerer is asked);
/// - a service with a registry ([`ApprovalService::with_registry`]) asks nobody about a tool the
///   agent cannot see: the call fails `UNKNOWN_TOOL` at once, as its dispatch would;
/// - otherwise the service is asked with `{agent, toolName, callId, reason?, arguments,
///   subject?, signal}` where the signal is the caller's own, and the outcome is mapped by
///   [`gate_outcome`];
/// - a service error (no open turn, the log could not be written) is a failure with its message.
pub async fn resolve_ask(
    service: Option<&ApprovalService>,
    exec: &ToolExecution,
    reason: Option<&str>,
) -> Result<(), Failure> {
    let Some(service) = service else {
        return Err(Failure::new(match reason {
            Some(r) => r.to_owned(),
            None => messages::approval_not_supported(exec.name()),
        }));
    };
    let Some(agent) = exec.agent() else {
        return Err(Failure::new(messages::approval_no_agent(exec.name())));
    };
    let mut req = ApprovalRequest::new(agent.clone(), exec.name())
        .with_call_id(exec.call_id_arc().clone())
        .with_arguments(exec.arguments().clone())
        .with_signal(exec.signal().clone());
    if let Some(registry) = &service.inner.registry {
        // Nobody is asked about a call that could not run: a tool outside the agent's view is
        // `UNKNOWN_TOOL`, as dispatch would find it (the outcome of an approval was moot).
        let Some(def) = registry.get(exec.name(), Some(agent)) else {
            return Err(Failure::unknown_tool(exec.name()));
        };
        if let Some(subject) = def.permission_subjects(exec.arguments(), Some(agent)) {
            req = req.with_subject(subject);
        }
    }
    if let Some(r) = reason {
        req = req.with_reason(r);
    }
    let subject = req.subject.clone();
    let feedback = req.feedback.clone();
    match service.request(req).await {
        Ok(outcome) => {
            gate_outcome(exec.name(), outcome).map_err(|refused| {
                match (outcome, feedback.get()) {
                    (ApprovalOutcome::Rejected, Some(words)) => {
                        Failure::new(format!("{}; the user said: {words}", refused.message()))
                    }
                    _ => refused,
                }
            })?;
            // What was approved, for the body's own last check (a read re-checks its file).
            if let Some(subject) = subject {
                exec.record_approval(subject);
            }
            Ok(())
        }
        Err(e) => Err(Failure::new(e.to_string())),
    }
}
