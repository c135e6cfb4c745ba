//! Presentation (spec CM5): which tools an agent is shown (`native`, `code`, `both`), the
//! generated SDK, and the admission check that refuses direct calls a presentation hides.
//!
//! [`CodeMode`] is the mount: it registers the reserved `run_code` with the registry, binds the
//! pipeline runtime that runs sub-calls, keeps per-agent mode declarations, and answers the
//! presented view. Dropping the last handle unmounts `run_code`.
//!
//! Guarantees: a mode is resolved along the agent's scope chain (nearest declaration first,
//! then the deployment's); `run_code` is never filtered by restrictions and never callable from
//! inside a program; a call under `code` that names another tool directly is `UNKNOWN_TOOL`
//! with the route hint, before any policy; a sub-call is recognised only by the token of a
//! `run_code` run that is live right now, so a forged parent token buys nothing.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use dsh_core::RUN_CODE;
use dsh_core::codes::{self, messages};
use dsh_core::{
    AgentId, Arguments, ExecutionMode, ExecutionToken, Failure, Registration, ToolDefinition,
    ToolExecution, ToolRegistry, ToolSchema,
};
use dsh_scheduler::{Admission, Runtime};
use dsh_session::Session;
use parking_lot::{Mutex, RwLock};

use crate::config::CodeModeConfig;
use crate::dispatch_log::DispatchLog;
use crate::error::CodeModeError;
use crate::flavor::{DEFAULT_LANGUAGE, Flavor, flavor};
use crate::limits::Limits;
use crate::runtime::CodeRuntime;
use crate::sdk::render_sdk;

/// The tool-order placeholder for every tool the order does not name.
pub const UNLISTED_TOOLS: &str = "<unlisted-tools>";

/// How tools are presented to an agent's model (spec CM5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PresentationMode {
    /// Every tool is sent to the model; no `run_code`.
    Native,
    /// Only `run_code`, plus the generated SDK of `tools`.
    Code,
    /// The native tools, then `run_code`, plus the SDK.
    Both,
}

impl PresentationMode {
    /// `native`, `code` or `both`.
    pub fn as_str(&self) -> &'static str {
        match self {
            PresentationMode::Native => "native",
            PresentationMode::Code => "code",
            PresentationMode::Both => "both",
        }
    }

    /// Parses `native`, `code` or `both`.
    pub fn parse(s: &str) -> Option<PresentationMode> {
        match s {
            "native" => Some(PresentationMode::Native),
            "code" => Some(PresentationMode::Code),
            "both" => Some(PresentationMode::Both),
            _ => None,
        }
    }

    fn shows_run_code(self) -> bool {
        self != PresentationMode::Native
    }
}

impl fmt::Display for PresentationMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One section of the system prompt Code Mode contributes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    /// `tools:code-only` or `tools:sdk`.
    pub id: &'static str,
    /// Where it goes among the prompt's sections (lower first): `tools:code-only` comes before
    /// per-tool guidance (100), `tools:sdk` after it.
    pub order: i32,
    /// The text (sections with empty text are dropped from an [`Assembly`]).
    pub text: String,
}

/// The id of the section saying only `run_code` is directly callable.
pub const CODE_ONLY_SECTION: &str = "tools:code-only";
/// The id of the generated SDK section.
pub const SDK_SECTION: &str = "tools:sdk";

/// What Code Mode contributes to one agent's request: the tools to send and the prompt
/// sections (non-empty only).
#[derive(Clone, Debug, PartialEq)]
pub struct Assembly {
    /// The presented tools, in order.
    pub tools: Vec<ToolSchema>,
    /// The sections, by increasing order.
    pub sections: Vec<Section>,
}

impl Assembly {
    /// The names of the presented tools.
    pub fn tool_names(&self) -> Vec<String> {
        self.tools.iter().map(|t| t.name.to_string()).collect()
    }

    /// The section with this id, if present.
    pub fn section(&self, id: &str) -> Option<&Section> {
        self.sections.iter().find(|s| s.id == id)
    }
}

pub(crate) struct Inner {
    registry: ToolRegistry,
    config: CodeModeConfig,
    flavor: Flavor,
    runtime: OnceLock<Arc<Runtime>>,
    declared: RwLock<HashMap<AgentId, (u64, PresentationMode)>>,
    next_declaration: AtomicU64,
    live_runs: Mutex<HashSet<ExecutionToken>>,
    registration: Mutex<Option<Registration>>,
    overflow: crate::shown::Overflow,
}

/// Marks a run as live for the admission check while it exists.
pub(crate) struct LiveRun {
    inner: Weak<Inner>,
    token: ExecutionToken,
}

impl Drop for LiveRun {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.upgrade() {
            inner.live_runs.lock().remove(&self.token);
        }
    }
}

impl Inner {
    pub(crate) fn code_runtime(&self) -> Option<Arc<dyn CodeRuntime>> {
        self.config.runtime.clone()
    }
    pub(crate) fn runtime(&self) -> Option<Arc<Runtime>> {
        self.runtime.get().cloned()
    }
    pub(crate) fn overflow(&self) -> &crate::shown::Overflow {
        &self.overflow
    }
    pub(crate) fn limits(&self) -> Limits {
        self.config.limits.clone()
    }
    pub(crate) fn max_parallel_sub_calls(&self) -> usize {
        self.config.max_parallel_sub_calls
    }
    pub(crate) fn dispatch_log(&self) -> DispatchLog {
        self.config.dispatch_log.clone()
    }
    pub(crate) fn session_for(&self, exec: &ToolExecution) -> Option<Session> {
        self.config.sessions.as_ref()?.session_for(exec)
    }
    pub(crate) fn enter_run(self: &Arc<Self>, token: ExecutionToken) -> LiveRun {
        self.live_runs.lock().insert(token);
        LiveRun {
            inner: Arc::downgrade(self),
            token,
        }
    }

    /// The tools a program of `agent` may call: its registry view without `run_code`.
    pub(crate) fn binding_names(&self, agent: Option<&AgentId>) -> Vec<Arc<str>> {
        self.registry
            .schemas(agent)
            .into_iter()
            .filter(|s| &*s.name != RUN_CODE)
            .map(|s| s.name)
            .collect()
    }

    fn mode_for(&self, agent: Option<&AgentId>) -> PresentationMode {
        let declared = self.declared.read();
        if !declared.is_empty() {
            for a in self.registry.scope_chain(agent) {
                if let Some((_, mode)) = declared.get(&a) {
                    return *mode;
                }
            }
        }
        self.config.mode
    }

    fn check_direct_call(&self, exec: &ToolExecution) -> Option<Failure> {
        if exec.signal().is_aborted() {
            // The runtime's own cancellation check decides these.
            return None;
        }
        let live_parent = exec
            .parent()
            .is_some_and(|p| self.live_runs.lock().contains(&p));
        if live_parent {
            // A sub-call of a live run: any visible tool but run_code itself.
            return (exec.name() == RUN_CODE).then(|| Failure::unknown_tool(RUN_CODE));
        }
        let mode = self.mode_for(exec.agent());
        match (exec.name() == RUN_CODE, mode) {
            (true, PresentationMode::Native) => Some(Failure::unknown_tool(RUN_CODE)),
            (false, PresentationMode::Code) => Some(Failure::typed(
                codes::TOOL_NOT_FOUND_ERROR,
                codes::UNKNOWN_TOOL,
                messages::code_mode_only(exec.name()),
            )),
            _ => None,
        }
    }
}

/// Removes one agent's presentation-mode declaration when disposed or dropped.
#[must_use = "dropping a declaration removes it; call `keep()` to keep it"]
pub struct ModeDeclaration {
    inner: Weak<Inner>,
    agent: Option<(AgentId, u64)>,
}

impl ModeDeclaration {
    /// Removes the declaration now.
    pub fn dispose(mut self) {
        self.remove();
    }
    /// Keeps the declaration for the mount's lifetime.
    pub fn keep(mut self) {
        self.agent = None;
    }
    fn remove(&mut self) {
        if let (Some(inner), Some((agent, id))) = (self.inner.upgrade(), self.agent.take()) {
            let mut declared = inner.declared.write();
            if declared.get(&agent).is_some_and(|(i, _)| *i == id) {
                declared.remove(&agent);
            }
        }
    }
}

impl Drop for ModeDeclaration {
    fn drop(&mut self) {
        self.remove();
    }
}

/// The Code Mode mount of one pipeline. Cheap to clone; the last handle dropped unmounts
/// `run_code`.
#[derive(Clone)]
pub struct CodeMode {
    inner: Arc<Inner>,
}

impl fmt::Debug for CodeMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CodeMode")
            .field("config", &self.inner.config)
            .field("language", &self.inner.flavor.language)
            .finish_non_exhaustive()
    }
}

impl CodeMode {
    /// Validates the configuration and registers the reserved `run_code` tool with `registry`.
    ///
    /// `run_code` is registered in every mode, so `registry.schemas(agent)` lists it even for a
    /// `native` agent: what a model is sent must come from [`CodeMode::tools`] or
    /// [`CodeMode::assemble`], which apply the agent's presentation.
    ///
    /// Then install [`CodeMode::admission`] on the pipeline runtime and [`CodeMode::bind`] that
    /// runtime (sub-calls run through it):
    ///
    /// ```ignore
    /// let code = CodeMode::new(&registry, config)?;
    /// let runtime = Runtime::new(registry, hooks).with_admission(code.admission());
    /// code.bind(&runtime)?;
    /// ```
    pub fn new(registry: &ToolRegistry, config: CodeModeConfig) -> Result<CodeMode, CodeModeError> {
        config.validate()?;
        let language = config
            .runtime
            .as_ref()
            .map_or(DEFAULT_LANGUAGE.to_owned(), |r| r.language().to_owned());
        let flavor = flavor(&language)?;
        let max_shown = config.shown.max_bytes;
        let overflow = crate::shown::Overflow::new(config.shown.clone());
        let inner = Arc::new(Inner {
            registry: registry.clone(),
            config,
            flavor: flavor.clone(),
            runtime: OnceLock::new(),
            declared: RwLock::new(HashMap::new()),
            next_declaration: AtomicU64::new(1),
            live_runs: Mutex::new(HashSet::new()),
            registration: Mutex::new(None),
            overflow,
        });
        let def = crate::run_code::definition(&flavor, Arc::downgrade(&inner), max_shown)?;
        let registration = registry.register_reserved(def)?;
        *inner.registration.lock() = Some(registration);
        Ok(CodeMode { inner })
    }

    /// Binds the pipeline runtime that runs sub-calls (the one the model's calls run through,
    /// fully configured). Binding twice is an error.
    pub fn bind(&self, runtime: &Runtime) -> Result<(), CodeModeError> {
        self.inner
            .runtime
            .set(Arc::new(runtime.clone()))
            .map_err(|_| CodeModeError::AlreadyBound)
    }

    /// The admission check to install with [`Runtime::with_admission`]: it refuses, before any
    /// policy, the direct calls a presentation hides. It holds the mount weakly.
    pub fn admission(&self) -> Admission {
        let weak = Arc::downgrade(&self.inner);
        Arc::new(move |exec: &ToolExecution| weak.upgrade()?.check_direct_call(exec))
    }

    /// The same check, as a function: `Some(failure)` when `exec` is a direct call its agent's
    /// presentation hides (`UNKNOWN_TOOL` with the route hint under `code`; `run_code` itself
    /// under `native`), or a call of `run_code` from inside a program. Calls whose signal has
    /// already fired are left to the runtime's cancellation check.
    pub fn check_direct_call(&self, exec: &ToolExecution) -> Option<Failure> {
        self.inner.check_direct_call(exec)
    }

    /// Removes `run_code` from the registry now (dropping the last handle does the same).
    pub fn unmount(&self) {
        if let Some(r) = self.inner.registration.lock().take() {
            r.dispose();
        }
    }

    /// Whether `run_code` is still registered (see [`CodeMode::unmount`]).
    pub fn is_mounted(&self) -> bool {
        self.inner.registration.lock().is_some()
    }

    /// The registry this mount presents.
    pub fn registry(&self) -> &ToolRegistry {
        &self.inner.registry
    }

    /// The `run_code` flavor in use (its language, description and parameters).
    pub fn flavor(&self) -> &Flavor {
        &self.inner.flavor
    }

    /// The `tools/code-dispatch-log` waterfall.
    pub fn dispatch_log(&self) -> DispatchLog {
        self.inner.dispatch_log()
    }

    /// Declares `agent`'s presentation mode (it and the scopes nested under it). Fails without
    /// an agent (*requires a scoped context*) and for an agent that already declared one.
    pub fn declare_mode(
        &self,
        agent: Option<&AgentId>,
        mode: PresentationMode,
    ) -> Result<ModeDeclaration, CodeModeError> {
        let agent = agent.ok_or(CodeModeError::NeedsScope)?;
        let mut declared = self.inner.declared.write();
        if let Some((_, existing)) = declared.get(agent) {
            return Err(CodeModeError::ModeConflict {
                agent: agent.to_string(),
                existing: existing.as_str(),
                new: mode.as_str(),
            });
        }
        let id = self.inner.next_declaration.fetch_add(1, Ordering::Relaxed);
        declared.insert(agent.clone(), (id, mode));
        Ok(ModeDeclaration {
            inner: Arc::downgrade(&self.inner),
            agent: Some((agent.clone(), id)),
        })
    }

    /// The mode in force for `agent`: the nearest declaration along its scope chain, else the
    /// deployment's.
    pub fn mode_for(&self, agent: Option<&AgentId>) -> PresentationMode {
        self.inner.mode_for(agent)
    }

    fn require_runtime(&self, mode: PresentationMode) -> Result<(), CodeModeError> {
        if mode.shows_run_code() && self.inner.config.runtime.is_none() {
            return Err(CodeModeError::NoRuntime(mode.as_str()));
        }
        Ok(())
    }

    /// The definitions presented to `agent`, in order (tool order applied).
    pub fn presented(
        &self,
        agent: Option<&AgentId>,
    ) -> Result<Vec<Arc<ToolDefinition>>, CodeModeError> {
        let mode = self.mode_for(agent);
        self.require_runtime(mode)?;
        let registry = &self.inner.registry;
        let mut out: Vec<Arc<ToolDefinition>> = Vec::new();
        if mode == PresentationMode::Native || mode == PresentationMode::Both {
            for name in self.inner.binding_names(agent) {
                if let Some(def) = registry.get(&name, agent) {
                    out.push(def);
                }
            }
        }
        if mode.shows_run_code()
            && let Some(def) = registry.get(RUN_CODE, None)
        {
            out.push(def);
        }
        match &self.inner.config.tool_order {
            None => Ok(out),
            Some(order) => apply_order(out, order),
        }
    }

    /// The tool schemas presented to `agent`: what its model request carries.
    pub fn tools(&self, agent: Option<&AgentId>) -> Result<Vec<ToolSchema>, CodeModeError> {
        Ok(self
            .presented(agent)?
            .into_iter()
            .map(|d| ToolSchema {
                name: Arc::from(d.name()),
                description: Arc::from(d.description()),
                parameters: d.parameters().clone(),
            })
            .collect())
    }

    /// The definition `name` resolves to in `agent`'s presented view (`run_code` only where
    /// a mode shows it; other tools hidden under `code`).
    pub fn get(&self, name: &str, agent: Option<&AgentId>) -> Option<Arc<ToolDefinition>> {
        let mode = self.mode_for(agent);
        if name == RUN_CODE {
            return if mode.shows_run_code() {
                self.inner.registry.get(RUN_CODE, None)
            } else {
                None
            };
        }
        if mode == PresentationMode::Code {
            return None;
        }
        self.inner.registry.get(name, agent)
    }

    /// How a direct call from `agent` is scheduled: `exclusive` for a call the presentation
    /// refuses (it never runs), otherwise the registry's classification.
    pub fn execution_mode(
        &self,
        name: &str,
        agent: Option<&AgentId>,
        args: &Arguments,
    ) -> ExecutionMode {
        if self.get(name, agent).is_none() {
            return ExecutionMode::Exclusive;
        }
        self.inner.registry.execution_mode(name, agent, args)
    }

    /// The names a program of `agent` may call (its registry view, without `run_code`).
    pub fn binding_names(&self, agent: Option<&AgentId>) -> Vec<String> {
        self.inner
            .binding_names(agent)
            .into_iter()
            .map(|n| n.to_string())
            .collect()
    }

    /// The generated SDK text for `agent` (`None` under `native`).
    pub fn sdk(&self, agent: Option<&AgentId>) -> Result<Option<String>, CodeModeError> {
        let mode = self.mode_for(agent);
        if !mode.shows_run_code() || !self.is_mounted() {
            return Ok(None);
        }
        self.require_runtime(mode)?;
        let language = self
            .inner
            .config
            .runtime
            .as_ref()
            .map_or(DEFAULT_LANGUAGE.to_owned(), |r| r.language().to_owned());
        let registry = &self.inner.registry;
        let defs: Vec<Arc<ToolDefinition>> = self
            .inner
            .binding_names(agent)
            .into_iter()
            .filter_map(|n| registry.get(&n, agent))
            .collect();
        render_sdk(&language, &defs).map(Some)
    }

    /// Everything Code Mode contributes to `agent`'s request: the presented tools, the
    /// `tools:code-only` section (under `code`) and the `tools:sdk` section (under `code` and
    /// `both`).
    pub fn assemble(&self, agent: Option<&AgentId>) -> Result<Assembly, CodeModeError> {
        let mode = self.mode_for(agent);
        let tools = self.tools(agent)?;
        let code_only = if mode == PresentationMode::Code && self.is_mounted() {
            "Only `run_code` is callable directly. Call every other tool from inside a \
             `run_code` program, through the `tools` object described below."
                .to_owned()
        } else {
            String::new()
        };
        let sdk = self.sdk(agent)?.unwrap_or_default();
        let sections = [
            Section {
                id: CODE_ONLY_SECTION,
                order: 50,
                text: code_only,
            },
            Section {
                id: SDK_SECTION,
                order: 900,
                text: sdk,
            },
        ]
        .into_iter()
        .filter(|s| !s.text.is_empty())
        .collect();
        Ok(Assembly { tools, sections })
    }
}

/// Orders `tools` by `order`: listed names first, in list order; `<unlisted-tools>` stands for
/// every other tool, in their own order (appended at the end when the list has no placeholder).
fn apply_order(
    tools: Vec<Arc<ToolDefinition>>,
    order: &[String],
) -> Result<Vec<Arc<ToolDefinition>>, CodeModeError> {
    let listed: HashSet<&str> = order
        .iter()
        .map(String::as_str)
        .filter(|n| *n != UNLISTED_TOOLS)
        .collect();
    for name in &listed {
        if !tools.iter().any(|t| t.name() == *name) {
            return Err(CodeModeError::OrderUnknown((*name).to_owned()));
        }
    }
    let unlisted: Vec<Arc<ToolDefinition>> = tools
        .iter()
        .filter(|t| !listed.contains(t.name()))
        .cloned()
        .collect();
    let mut out = Vec::with_capacity(tools.len());
    let mut placed = false;
    for name in order {
        if name == UNLISTED_TOOLS {
            if !placed {
                out.extend(unlisted.iter().cloned());
                placed = true;
            }
        } else if let Some(t) = tools.iter().find(|t| t.name() == name.as_str())
            && !out.iter().any(|o| Arc::ptr_eq(o, t))
        {
            out.push(t.clone());
        }
    }
    if !placed {
        out.extend(unlisted);
    }
    Ok(out)
}
