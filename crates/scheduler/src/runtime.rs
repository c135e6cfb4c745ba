//! The staged runtime for one call: `prepare` → `dispatch` → `finalize` (spec sections 3-5).
//! [`Runtime::execute`] runs all three; the step scheduler drives them one stage at a time.
//!
//! Guarantees: every outcome goes through `finalize_content` exactly once and `tools/result`
//! exactly once; a started body is awaited, never abandoned (unless the host opted into the hard
//! backstop of D4); the arguments are never rewritten.

use std::sync::Arc;
use std::time::Duration;

use dsh_core::{
    AgentId, Failure, ToolDefinition, ToolExecution, ToolExecutionInput, ToolRegistry, ToolResult,
};
use dsh_guard::{CallHooks, Hooks};

use crate::approval::Approver;

/// Settings of the runtime.
#[derive(Clone, Debug, Default)]
pub struct RuntimeConfig {
    /// The hard backstop of spec D4: after the call's signal fires, wait this long for a body
    /// that ignores it, then stop awaiting it (its future is dropped). `None` (the default):
    /// bodies are always awaited.
    pub hard_backstop: Option<Duration>,
    /// Record when each call of a step entered each stage and write it as one
    /// `dsh/step-timing` event after the step's last `tool/result` (see [`crate::STEP_TIMING`]).
    /// Off by default: the log then holds only the reference harness's event types.
    pub step_timing: bool,
}

/// A registry lookup: the definition found for a name and agent (if any) and the registry's
/// generation when it was read ([`dsh_core::ToolRegistry::get_at`]).
pub type Lookup = (Option<Arc<ToolDefinition>>, u64);

/// A host-installed admission check, consulted in prepare right after the cancellation check and
/// before any policy: `Some(failure)` refuses the call with that failure as a final result (no
/// policy, no body, no post-execute; finalize and `tools/result` still run). Code Mode installs
/// its presentation check here; the runtime knows nothing about what the check means.
pub type Admission = Arc<dyn Fn(&ToolExecution) -> Option<Failure> + Send + Sync>;

/// The pipeline for single calls: registry, hooks, approval and configuration.
#[derive(Clone)]
pub struct Runtime {
    pub(crate) registry: ToolRegistry,
    pub(crate) hooks: Hooks,
    pub(crate) approver: Option<Arc<dyn Approver>>,
    pub(crate) admission: Option<Admission>,
    pub(crate) config: RuntimeConfig,
    /// Code Mode sub-calls' stage marks waiting for their root call's step (timing on only).
    pub(crate) sub_timings: crate::timing::SubTimings,
}

/// A call that has been frozen and bound to its hooks, ready for the stages.
pub(crate) struct Call {
    pub(crate) exec: Arc<ToolExecution>,
    /// The definition resolved when the call was created (its `finalize_content` is used even if
    /// the tool is unregistered meanwhile, FIN-14).
    pub(crate) def: Option<Arc<ToolDefinition>>,
    /// The registry generation `def` was resolved under (a later stage that must resolve the
    /// tool "now" reuses `def` while the generation is unchanged).
    pub(crate) generation: u64,
    pub(crate) hooks: Arc<CallHooks>,
    pub(crate) chain: Vec<AgentId>,
    /// The stages this call has entered (spec order, checked in debug builds).
    pub(crate) stages: crate::invariants::StageLog,
    /// The call's tracing span (`execute_tool`): its stages' spans are inside it.
    pub(crate) span: tracing::Span,
    /// When the call entered each stage (recorded only with [`RuntimeConfig::step_timing`]).
    pub(crate) marks: crate::timing::Marks,
}

impl Call {
    /// The execution.
    pub fn exec(&self) -> &Arc<ToolExecution> {
        &self.exec
    }
}

impl Runtime {
    /// The tool `exec` resolves to now: the call's own resolution while the registry has not
    /// changed since, a fresh lookup otherwise.
    pub(crate) fn resolve_now<'c>(&self, call: &'c Call, exec: &ToolExecution) -> Option<Def<'c>> {
        let same_call = std::ptr::eq(exec, Arc::as_ptr(&call.exec));
        if same_call && self.registry.generation() == call.generation {
            call.def.as_ref().map(Def::Call)
        } else {
            self.registry.get(exec.name(), exec.agent()).map(Def::Fresh)
        }
    }
}

/// A tool resolved now: the call's own definition, borrowed, or a fresh lookup's.
pub(crate) enum Def<'c> {
    /// The definition the call resolved when it was created (the registry has not changed).
    Call(&'c Arc<ToolDefinition>),
    /// Looked up now.
    Fresh(Arc<ToolDefinition>),
}

impl std::ops::Deref for Def<'_> {
    type Target = ToolDefinition;

    fn deref(&self) -> &ToolDefinition {
        match self {
            Def::Call(def) => def,
            Def::Fresh(def) => def,
        }
    }
}

/// What prepare decided.
pub(crate) enum Prepared {
    /// Allowed: go on to dispatch.
    Ready,
    /// Decided already (denied, aborted, or failed): go straight to finalize.
    Decided(Candidate),
}

/// A result on its way through the stages.
pub(crate) struct Candidate {
    pub(crate) result: ToolResult,
    /// Whether post-execute sees it (a prepare or wrapper failure skips it, spec P5/D5).
    pub(crate) run_post: bool,
    /// Whether the body was invoked (decides ABORTED vs ABORTED_BEFORE_DISPATCH, spec C1).
    pub(crate) body_invoked: bool,
}

impl Candidate {
    pub(crate) fn final_failure(result: ToolResult) -> Candidate {
        Candidate {
            result,
            run_post: false,
            body_invoked: false,
        }
    }
}

impl Runtime {
    /// A runtime over a registry and a hook set, with no approver.
    pub fn new(registry: ToolRegistry, hooks: Hooks) -> Runtime {
        Runtime {
            registry,
            hooks,
            approver: None,
            admission: None,
            config: RuntimeConfig::default(),
            sub_timings: Default::default(),
        }
    }

    /// Mounts an approver.
    pub fn with_approver(mut self, approver: Arc<dyn Approver>) -> Runtime {
        self.approver = Some(approver);
        self
    }

    /// Installs the admission check (see [`Admission`]).
    pub fn with_admission(mut self, admission: Admission) -> Runtime {
        self.admission = Some(admission);
        self
    }

    /// Sets the configuration.
    pub fn with_config(mut self, config: RuntimeConfig) -> Runtime {
        self.config = config;
        self
    }

    /// The registry.
    pub fn registry(&self) -> &ToolRegistry {
        &self.registry
    }

    /// The hooks.
    pub fn hooks(&self) -> &Hooks {
        &self.hooks
    }

    /// Freezes an input into a call: token, arguments snapshot, resolved definition and the
    /// hooks it will run with.
    pub(crate) fn call(&self, input: ToolExecutionInput) -> Call {
        self.call_found(input, None)
    }

    /// [`Runtime::call`] with the definition the adapter already looked up for the same name
    /// and agent (its lookup at a registry generation), used while the registry is still at
    /// that generation.
    pub(crate) fn call_found(&self, input: ToolExecutionInput, found: Option<Lookup>) -> Call {
        let exec = ToolExecution::new(input);
        let chain = self.registry.scope_chain(exec.agent());
        let (def, generation) = match found {
            Some(found) if found.1 == self.registry.generation() => found,
            _ => self.registry.get_at(exec.name(), exec.agent()),
        };
        let hooks = self.hooks.snapshot(&chain);
        let span = crate::trace::call(&exec);
        Call {
            span,
            exec,
            def,
            generation,
            hooks,
            chain,
            stages: Default::default(),
            marks: crate::timing::Marks::new(self.config.step_timing),
        }
    }

    /// Runs one call through every stage and returns the frozen result.
    pub async fn execute(&self, input: ToolExecutionInput) -> Arc<ToolResult> {
        let call = self.call(input);
        let candidate = match self.prepare(&call).await {
            Prepared::Ready => self.dispatch(&call).await,
            Prepared::Decided(c) => c,
        };
        let result = self.finalize(&call, candidate).await;
        // No step writes this call's timing: its sub-calls' marks are not kept.
        if self.config.step_timing {
            self.sub_timings.take(call.exec.call_id());
        }
        result
    }
}
