//! The pre-execute sandbox policy: chooses each `bash` call's sandbox mode before it runs, and
//! turns a request to widen it (`sandbox_permissions`) into a fresh approval question.
//!
//! Rules, in order: the session's mode (from its permission preset) is the default; a call may
//! narrow it freely; a call that asks for a wider mode is an `ask` with the reason
//! `escalate sandbox to <mode>: <justification>` — every time, since only `allowed-once`
//! exists; when the kernel cannot contain a command, [`Unavailable`] says what happens (by
//! default the call fails closed with `SANDBOX_UNAVAILABLE`). The policy runs first (it is
//! prepended) but never overrides what the listeners after it decide: a `deny` stays a `deny`,
//! and their `ask` is merged with its own.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use dsh_core::{ExecutionToken, Failure, PreNext, PreToolDecision, ToolExecution, ToolResult};
use parking_lot::{Mutex, RwLock};
use serde_json::Value;

use crate::config::BashConfig;
use crate::helper::{self, Probe};
use crate::mode::SandboxMode;

/// What to do when the kernel cannot contain a command in its mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unavailable {
    /// Fail the call with `SANDBOX_UNAVAILABLE` (the default: fail closed).
    #[default]
    Fail,
    /// Ask for approval to run it uncontained (`danger-full-access`) this once.
    Ask,
    /// Run it uncontained and say so in its result.
    RunUncontained,
}

/// The session-wide sandbox settings the policy applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SandboxSettings {
    /// The session's mode.
    pub mode: SandboxMode,
    /// Whether results may suggest escalation (the approval policy is `ask`).
    pub escalation: bool,
    /// What to do without kernel support.
    pub unavailable: Unavailable,
}

impl Default for SandboxSettings {
    fn default() -> Self {
        SandboxSettings {
            mode: SandboxMode::WorkspaceWrite,
            escalation: true,
            unavailable: Unavailable::Fail,
        }
    }
}

/// One call's sandbox, as decided before it ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallSandbox {
    /// The mode it runs under.
    pub mode: SandboxMode,
    /// Whether an approval widened it.
    pub escalated: bool,
    /// Whether a denial should be followed by the escalation hint.
    pub hint: bool,
    /// It runs uncontained because the sandbox is unavailable: why.
    pub fallback: Option<String>,
}

impl CallSandbox {
    /// The default decision under `settings` (no request, no policy).
    pub fn default_for(settings: SandboxSettings) -> CallSandbox {
        CallSandbox {
            mode: settings.mode,
            escalated: false,
            hint: settings.escalation && settings.mode < SandboxMode::DangerFullAccess,
            fallback: None,
        }
    }
}

/// State shared by the tool body and its policy.
pub(crate) struct Shared {
    pub(crate) name: Arc<str>,
    pub(crate) config: BashConfig,
    settings: RwLock<SandboxSettings>,
    decisions: Mutex<HashMap<ExecutionToken, CallSandbox>>,
    probe: tokio::sync::OnceCell<Probe>,
    /// The session supervisors of this tool's calls, one per mode.
    pub(crate) supervisors: crate::supervisor::Pool,
}

impl Shared {
    pub(crate) fn new(name: &str, config: BashConfig, settings: SandboxSettings) -> Shared {
        Shared {
            name: Arc::from(name),
            config,
            settings: RwLock::new(settings),
            decisions: Mutex::new(HashMap::new()),
            probe: tokio::sync::OnceCell::new(),
            supervisors: crate::supervisor::Pool::default(),
        }
    }

    pub(crate) fn settings(&self) -> SandboxSettings {
        *self.settings.read()
    }

    pub(crate) fn set_settings(&self, s: SandboxSettings) {
        *self.settings.write() = s;
    }

    pub(crate) async fn probe(&self) -> Probe {
        self.probe
            .get_or_init(|| {
                helper::probe(
                    self.config.helper.as_ref(),
                    self.config.simulate_no_landlock,
                )
            })
            .await
            .clone()
    }

    /// The decision for a call (the default when the policy did not see it).
    pub(crate) fn decision(&self, token: ExecutionToken) -> CallSandbox {
        self.decisions
            .lock()
            .get(&token)
            .cloned()
            .unwrap_or_else(|| CallSandbox::default_for(self.settings()))
    }

    pub(crate) fn forget(&self, token: ExecutionToken) {
        self.decisions.lock().remove(&token);
    }

    pub(crate) fn pending_decisions(&self) -> usize {
        self.decisions.lock().len()
    }
}

/// The pre-execute listener (see the module docs). Get it from [`crate::BashTool::policy`].
#[derive(Clone)]
pub struct SandboxPolicy {
    pub(crate) shared: Arc<Shared>,
}

fn join(a: Option<String>, b: Option<String>) -> Option<String> {
    match (a, b) {
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or(b),
    }
}

#[async_trait]
impl dsh_core::PreExecuteHook for SandboxPolicy {
    async fn pre_execute(
        &self,
        exec: &ToolExecution,
        next: PreNext<'_>,
    ) -> Result<PreToolDecision, Failure> {
        if exec.name() != &*self.shared.name {
            return next.run(exec).await;
        }
        let settings = self.shared.settings();
        let args = exec.arguments().json().map(|j| j.value());
        let requested = match args.and_then(|a| a.get("sandbox_permissions")) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => match s.parse::<SandboxMode>() {
                Ok(m) => Some(m),
                Err(e) => return Ok(PreToolDecision::deny(format!("sandbox_permissions: {e}"))),
            },
            Some(_) => {
                return Ok(PreToolDecision::deny(
                    "sandbox_permissions must be a sandbox mode name",
                ));
            }
        };
        let justification = args
            .and_then(|a| a.get("justification"))
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty());
        let mut call = CallSandbox::default_for(settings);
        let mut ask = None;
        match requested {
            Some(m) if m > settings.mode => {
                call.mode = m;
                call.escalated = true;
                call.hint = false;
                ask = Some(match justification {
                    Some(j) => format!("escalate sandbox to {m}: {j}"),
                    None => format!("escalate sandbox to {m}"),
                });
            }
            Some(m) => call.mode = m,
            None => {}
        }
        if call.mode.is_contained()
            && let Probe::Unavailable(why) = self.shared.probe().await
        {
            match settings.unavailable {
                Unavailable::Fail => {}
                Unavailable::Ask => {
                    ask = join(
                        ask,
                        Some(format!(
                            "the sandbox is unavailable ({why}): run without containment"
                        )),
                    );
                    call.mode = SandboxMode::DangerFullAccess;
                    call.hint = false;
                    call.fallback = Some(why);
                }
                Unavailable::RunUncontained => {
                    call.mode = SandboxMode::DangerFullAccess;
                    call.hint = false;
                    call.fallback = Some(why);
                }
            }
        }
        let decision = match next.run(exec).await? {
            d @ PreToolDecision::Deny { .. } => return Ok(d),
            PreToolDecision::Ask { reason } => PreToolDecision::Ask {
                reason: join(reason.map(|r| r.to_string()), ask).map(Arc::from),
            },
            PreToolDecision::Allow => match ask {
                Some(r) => PreToolDecision::ask(r),
                None => PreToolDecision::Allow,
            },
        };
        self.shared.decisions.lock().insert(exec.token(), call);
        Ok(decision)
    }
}

/// Forgets a call's decision once its result is final.
pub(crate) struct ForgetDecision(pub(crate) Arc<Shared>);

impl dsh_core::ResultObserver for ForgetDecision {
    fn on_result(&self, exec: &ToolExecution, _result: &ToolResult) {
        self.0.forget(exec.token());
    }
}
