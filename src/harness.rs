//! The `Harness`: registry, hooks, guards, approval, session and scheduler wired with sensible
//! defaults in a few lines (the example is on [`Harness`]).

#[cfg(any(feature = "fs", feature = "hooks"))]
use std::path::PathBuf;
use std::sync::Arc;

use dsh_core::{AgentId, ToolRegistry};
use dsh_guard::{
    AnswerNext, Answerer, ApprovalConfig, ApprovalOutcome, ApprovalRequest, AuditSession,
};
use dsh_guard::{ApprovalPolicy, ApprovalService, GuardError, Hooks, Scope, TimeoutPolicy};
use dsh_scheduler::{Runtime, RuntimeConfig, TurnDriver};
use dsh_session::Session;

use crate::policy::Policy;

/// Failures while wiring a harness.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HarnessError {
    /// The policy is invalid.
    #[error(transparent)]
    Policy(#[from] crate::policy::PolicyError),
    /// A tool could not be defined or registered.
    #[error(transparent)]
    Core(#[from] dsh_core::CoreError),
    /// A guard could not be configured.
    #[error(transparent)]
    Guard(#[from] GuardError),
    /// The session log failed.
    #[error(transparent)]
    Session(#[from] dsh_session::SessionError),
    /// The workspace is unusable.
    #[cfg(feature = "fs")]
    #[error(transparent)]
    Fs(#[from] dsh_tool_fs::FsError),
    /// Code Mode could not be mounted.
    #[cfg(feature = "code-mode")]
    #[error(transparent)]
    CodeMode(#[from] dsh_code_mode::CodeModeError),
    /// The configuration asks for something this build cannot do.
    #[error("{0}")]
    Unsupported(String),
    /// The `bash` tool could not be mounted or its preset announced.
    #[cfg(feature = "bash")]
    #[error(transparent)]
    Bash(#[from] dsh_tool_bash::BashError),
    /// The private directory for the `bash` tool's full outputs could not be made.
    #[cfg(feature = "bash")]
    #[error("cannot make the private output directory {path}: {source}")]
    OutputDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A grant could not be restored.
    #[error(transparent)]
    Grant(#[from] crate::grants::GrantError),
    /// A hook settings file could not be loaded.
    #[cfg(feature = "hooks")]
    #[error(transparent)]
    Hooks(#[from] dsh_hooks::HooksError),
    /// The blocking task reading the settings files panicked or was cancelled.
    #[cfg(feature = "hooks")]
    #[error("loading the {what} of the settings files did not finish")]
    SettingsTask {
        /// What was being loaded (`hooks`, `permission rules`).
        what: &'static str,
        /// The task's end.
        #[source]
        source: tokio::task::JoinError,
    },
}

/// Where `ask` decisions go (see "Approval, in one place" in the crate docs).
#[derive(Clone)]
#[non_exhaustive]
pub enum Approvals {
    /// No approval channel: every ask is denied (fail closed).
    NoChannel,
    /// Every ask is allowed once.
    Always,
    /// Every ask is rejected without asking anyone (`approval/policy never`).
    Never,
    /// Asks go to this answerer.
    Answerer(Arc<dyn Answerer>),
}

struct Shared(Arc<dyn Answerer>);

#[async_trait::async_trait]
impl Answerer for Shared {
    async fn answer(
        &self,
        req: &ApprovalRequest,
        next: AnswerNext<'_>,
    ) -> Result<ApprovalOutcome, GuardError> {
        self.0.answer(req, next).await
    }
}

struct AllowAll;

#[async_trait::async_trait]
impl Answerer for AllowAll {
    async fn answer(
        &self,
        _req: &ApprovalRequest,
        _next: AnswerNext<'_>,
    ) -> Result<ApprovalOutcome, GuardError> {
        Ok(ApprovalOutcome::AllowedOnce)
    }
}

/// Builds a [`Harness`].
pub struct HarnessBuilder {
    session: Session,
    agent: AgentId,
    policy: Policy,
    approvals: Approvals,
    grants: Option<Arc<crate::grants::Grants>>,
    config: RuntimeConfig,
    demo_tools: bool,
    #[cfg(feature = "fs")]
    workspace: Option<PathBuf>,
    #[cfg(feature = "bash")]
    bash: Option<crate::BashOptions>,
    #[cfg(feature = "hooks")]
    settings: Option<Option<PathBuf>>,
    #[cfg(feature = "hooks")]
    workspace_trusted: bool,
    pub(crate) extra: crate::registrations::Registrations,
}

/// A wired pipeline over one session: build one with [`Harness::builder`], then run the model's
/// calls with [`Harness::driver`] (a turn of assistant messages) or
/// [`Harness::runtime`]`.run_step(..)` (one message's calls).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use dsh::core::{Failure, Json, Signal, ToolDefinition, ToolOutput};
/// use dsh::{Approvals, Harness};
///
/// let ping = ToolDefinition::builder("ping", "Answers pong.")
///     .output(ToolOutput::string())
///     .execute(|_ctx| async { Ok(Json::string("pong")) })
///     .build()?;
/// let session = dsh::session::Session::in_memory("s1");
/// let harness = Harness::builder(session.clone())
///     .tool(ping)
///     .approvals(Approvals::Never)
///     .build()
///     .await?;
/// // One assistant message with one tool call, in the reference shape.
/// let message = Json::new(serde_json::json!({"role": "assistant", "content": [
///     {"type": "tool-call", "id": "c1", "name": "ping", "arguments": "{}"}
/// ]}))?;
/// let report = harness.driver().run_turn([message], Signal::never()).await?;
/// assert_eq!(report.steps[0].results[0].first_text(), Some("pong"));
/// assert!(dsh::session::check_events(&session.events()).is_empty());
/// # let _ = Failure::new("unused");
/// # Ok(()) }
/// ```
pub struct Harness {
    registry: ToolRegistry,
    hooks: Hooks,
    runtime: Arc<Runtime>,
    session: Session,
    agent: AgentId,
    approval: ApprovalService,
    policy: Policy,
    #[cfg(feature = "fs")]
    fs: Option<dsh_tool_fs::FsTools>,
    #[cfg(feature = "bash")]
    bash: Option<dsh_tool_bash::BashTool>,
    /// The private directory of the bash tool's full outputs, removed on drop if still empty.
    #[cfg(feature = "bash")]
    output_dir: Option<PathBuf>,
    #[cfg(feature = "code-mode")]
    code: Option<dsh_code_mode::CodeMode>,
    warnings: Vec<String>,
    /// The MCP servers whose tools are registered (dropping one ends its process).
    #[cfg(feature = "mcp")]
    mcp: Vec<dsh_mcp::McpServer>,
    policy_rules: Option<dsh_guard::PermissionRules>,
    #[cfg(feature = "hooks")]
    merged: Option<crate::permissions::MergedPermissions>,
}

#[cfg(feature = "bash")]
impl Drop for Harness {
    fn drop(&mut self) {
        // Only an empty directory goes: one holding outputs the log names stays.
        if let Some(dir) = &self.output_dir {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

impl Harness {
    /// What the configuration does not do that a user may think it does, one sentence each
    /// (a program prints them; see the README's sandbox section).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The MCP servers of the policy that started, whose tools are registered.
    #[cfg(feature = "mcp")]
    pub fn mcp_servers(&self) -> &[dsh_mcp::McpServer] {
        &self.mcp
    }

    /// Closes every MCP server as the MCP stdio transport asks a client to (its input closed,
    /// so it reads what was sent before it, then up to `within` to exit on its own before it is
    /// ended), all at once; returns once they have ended. For a program about to exit: a
    /// server killed with it could miss the `notifications/cancelled` of a call it abandoned.
    #[cfg(feature = "mcp")]
    pub async fn close_mcp_servers(&self, within: std::time::Duration) {
        futures::future::join_all(self.mcp.iter().map(|s| s.close(within))).await;
    }

    /// Starts wiring a harness over `session`.
    pub fn builder(session: Session) -> HarnessBuilder {
        HarnessBuilder {
            session,
            agent: AgentId::new("main"),
            policy: Policy::default(),
            approvals: Approvals::NoChannel,
            grants: None,
            config: RuntimeConfig::default(),
            demo_tools: false,
            #[cfg(feature = "fs")]
            workspace: None,
            #[cfg(feature = "bash")]
            bash: None,
            #[cfg(feature = "hooks")]
            settings: None,
            #[cfg(feature = "hooks")]
            workspace_trusted: false,
            extra: crate::registrations::Registrations::default(),
        }
    }
    /// The tool registry.
    pub fn registry(&self) -> &ToolRegistry {
        &self.registry
    }
    /// The hook points.
    pub fn hooks(&self) -> &Hooks {
        &self.hooks
    }
    /// The staged runtime.
    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }
    /// The session.
    pub fn session(&self) -> &Session {
        &self.session
    }
    /// The agent the harness's calls run as.
    pub fn agent(&self) -> &AgentId {
        &self.agent
    }
    /// The approval service.
    pub fn approval(&self) -> &ApprovalService {
        &self.approval
    }
    /// The policy in force.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }
    /// The file tools, when mounted.
    #[cfg(feature = "fs")]
    pub fn fs(&self) -> Option<&dsh_tool_fs::FsTools> {
        self.fs.as_ref()
    }
    /// The `bash` tool, when mounted.
    #[cfg(feature = "bash")]
    pub fn bash(&self) -> Option<&dsh_tool_bash::BashTool> {
        self.bash.as_ref()
    }
    /// Code Mode, when the policy's mode is `code` or `both`: its `tools(agent)` is the tool list
    /// to send to the model.
    #[cfg(feature = "code-mode")]
    pub fn code_mode(&self) -> Option<&dsh_code_mode::CodeMode> {
        self.code.as_ref()
    }
    /// Whether every call of `tool` is denied by the permission rules in force (the policy
    /// file's, merged with the settings files' when they have any).
    pub fn denies_every_call(&self, tool: &str) -> bool {
        #[cfg(feature = "hooks")]
        if let Some(m) = &self.merged {
            return m.denies_every_call(tool);
        }
        self.policy_rules
            .as_ref()
            .is_some_and(|r| r.denies_every_call(tool))
    }
    /// Whether this build can run `policy`: checks what [`HarnessBuilder::build`] would refuse
    /// for lack of a feature, so a caller can refuse before opening a session.
    pub fn supports(policy: &Policy) -> Result<(), HarnessError> {
        if policy.mode != crate::policy::Mode::Native && !cfg!(feature = "code-mode") {
            return Err(HarnessError::Unsupported(format!(
                "mode \"{}\" needs Code Mode, which this build does not include",
                policy.mode.as_str()
            )));
        }
        Ok(())
    }
    /// A turn driver for the harness's agent, with the policy's pool size.
    pub fn driver(&self) -> TurnDriver {
        TurnDriver::new(
            self.runtime.clone(),
            self.session.clone(),
            Some(self.agent.clone()),
        )
        .with_max_parallel(self.policy.max_parallel_tool_calls)
    }
}

impl HarnessBuilder {
    /// The agent calls run as (default `main`).
    pub fn agent(mut self, agent: AgentId) -> Self {
        self.agent = agent;
        self
    }
    /// The policy (default: pool 10, native, approval ask, no permission rules).
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }
    /// Where asks go (default: no channel, fail closed).
    pub fn approvals(mut self, approvals: Approvals) -> Self {
        self.approvals = approvals;
        self
    }

    /// Grants a person made broader than one call (see [`crate::grants`]): they answer, in
    /// front of the approvals, every question about a call they cover (never a sandbox
    /// escalation), and the session grants logged in this harness's session are restored.
    pub fn grants(mut self, grants: Arc<crate::grants::Grants>) -> Self {
        self.grants = Some(grants);
        self
    }
    /// Runtime settings (e.g. the hard backstop).
    pub fn runtime_config(mut self, config: RuntimeConfig) -> Self {
        self.config = config;
        self
    }
    /// Adds the `echo`, `sleep` and `fail` tools.
    pub fn demo_tools(mut self, yes: bool) -> Self {
        self.demo_tools = yes;
        self
    }
    /// Mounts the file tools over this workspace root, with the read-before-write policy.
    #[cfg(feature = "fs")]
    pub fn workspace(mut self, root: impl Into<PathBuf>) -> Self {
        self.workspace = Some(root.into());
        self
    }

    /// Loads user command hooks in the Claude Code format and installs them, outside the
    /// permission rules: the workspace's `.dsh/settings.json`, the user's `settings.json`
    /// (`$XDG_CONFIG_HOME/dsh` or `~/.config/dsh`), then `explicit`, hooks of all files
    /// concatenated in that order (see [`crate::hooks`]). Without this call no hook runs.
    #[cfg(feature = "hooks")]
    pub fn settings(mut self, explicit: Option<PathBuf>) -> Self {
        self.settings = Some(explicit);
        self
    }

    /// Whether the workspace's own `.dsh/settings.json` applies (default: no). Its hooks run
    /// commands with the user's rights: a program sets this only for a workspace the user
    /// trusted (see `dsh_hooks::TrustStore`).
    #[cfg(feature = "hooks")]
    pub fn workspace_trusted(mut self, trusted: bool) -> Self {
        self.workspace_trusted = trusted;
        self
    }

    /// Mounts the `bash` tool over the workspace (which it needs), in the sandbox mode of the
    /// policy's preset, with its sandbox policy in front of every pre-execute listener.
    #[cfg(feature = "bash")]
    pub fn bash(mut self, options: crate::BashOptions) -> Self {
        self.bash = Some(options);
        self
    }

    /// Wires everything, in this order (which decides who is asked first):
    ///
    /// 1. Tools: the demo tools ([`HarnessBuilder::demo_tools`]), your tools
    ///    ([`HarnessBuilder::tool`]), the file tools (`HarnessBuilder::workspace`, feature `fs`),
    ///    `bash`,
    ///    then `run_code` under Code Mode. Every permission rule and `[tools.<name>]` table must
    ///    then name a registered tool.
    /// 2. `tools/pre-execute`, outermost first: your observers
    ///    ([`HarnessBuilder::observe_pre_execute`], which see every call and cannot decide); the
    ///    `bash` sandbox policy; user command hooks (settings files); the permission rules (the
    ///    policy file's, merged with the settings files', or [`HarnessBuilder::permissions`]);
    ///    your listeners ([`HarnessBuilder::pre_execute`]) in the order given. The first that
    ///    decides ends the waterfall: a rule that denies or asks hides the call from the
    ///    listeners after it.
    /// 3. An `ask` goes to the approval answerer ([`HarnessBuilder::approvals`]); then the guards
    ///    ([`HarnessBuilder::guard`]) may still deny.
    /// 4. `tools/execute`: the timeout policy (and, for `bash`, its wrappers).
    /// 5. `tools/post-execute`: user command hooks, then your listeners
    ///    ([`HarnessBuilder::post_execute`]); then `tools/result` observers
    ///    ([`HarnessBuilder::on_result`]).
    pub async fn build(mut self) -> Result<Harness, HarnessError> {
        let registry = ToolRegistry::new();
        let hooks = Hooks::new();
        Harness::supports(&self.policy)?;
        let mut extra = std::mem::take(&mut self.extra);
        if self.demo_tools {
            for def in crate::demo_tools::demo_tools()? {
                registry.add(def)?;
            }
        }
        extra.register_tools(&registry)?;
        extra.install_observers(&hooks);
        #[cfg(feature = "mcp")]
        let (mcp, mcp_warnings) =
            crate::mcp_tools::connect(&self.policy, &registry, &hooks).await?;
        // The bash tool's full outputs go to a private per-session directory that is also a
        // root of the file tools, so the model can `read` the path a truncated result names.
        #[cfg(feature = "bash")]
        let (output_root, output_dir) = match (&self.bash, &self.workspace) {
            (Some(_), Some(_)) => {
                let (root, session) = crate::bash_tool::private_output_dir(self.session.id())?;
                (Some(root), Some(session))
            }
            _ => (None, None),
        };
        // So does the whole text of an MCP result too long to show.
        #[cfg(all(feature = "mcp", feature = "bash"))]
        if let Some(dir) = &output_dir {
            for server in &mcp {
                server.save_long_results_in(dir.clone());
            }
        }
        #[cfg(all(feature = "fs", not(feature = "bash")))]
        let output_root: Option<std::path::PathBuf> = None;
        #[cfg(feature = "fs")]
        let fs = match &self.workspace {
            None => None,
            Some(root) => Some(mount_fs(
                &registry,
                &self.session,
                root,
                output_root.as_deref(),
            )?),
        };
        // A file call that asks to reach a file outside the workspace is asked about, every
        // time (FS-36..39); prepended, so it sees the call before the rules and hooks do.
        #[cfg(feature = "fs")]
        if let Some(policy) = fs.as_ref().and_then(|f| f.escalation_policy()) {
            hooks
                .prepend_pre_execute(Scope::Global, policy.clone())
                .keep();
            hooks.on_result(Scope::Global, policy).keep();
        }
        #[cfg(feature = "hooks")]
        if let Some(explicit) = self.settings.clone() {
            let trusted = self.workspace_trusted;
            #[cfg(feature = "fs")]
            let root = self.workspace.clone();
            #[cfg(not(feature = "fs"))]
            let root: Option<PathBuf> = None;
            let claude = tokio::task::spawn_blocking(move || {
                dsh_hooks::ClaudeHooks::load_standard(root.as_deref(), trusted, explicit.as_deref())
            })
            .await
            .map_err(|source| HarnessError::SettingsTask {
                what: "hooks",
                source,
            })??;
            claude.install(&hooks, self.session.clone()).keep();
        }
        let policy_rules = match (self.policy.has_permissions(), extra.permissions.take()) {
            (true, Some(_)) => {
                return Err(HarnessError::Unsupported(
                    "permission rules given twice: in the policy's [permissions] table and to HarnessBuilder::permissions; keep one".to_owned(),
                ));
            }
            (true, None) => Some(self.policy.permissions(registry.clone())?),
            (false, Some(rules)) => Some(rules.bind(registry.clone())),
            (false, None) => None,
        };
        #[cfg(feature = "hooks")]
        let merged = match self.settings.clone() {
            None => None,
            Some(explicit) => {
                let trusted = self.workspace_trusted;
                #[cfg(feature = "fs")]
                let root = self.workspace.clone();
                #[cfg(not(feature = "fs"))]
                let root: Option<PathBuf> = None;
                let claude = tokio::task::spawn_blocking(move || {
                    dsh_hooks::ClaudePermissions::load_standard(
                        root.as_deref(),
                        trusted,
                        explicit.as_deref(),
                    )
                })
                .await
                .map_err(|source| HarnessError::SettingsTask {
                    what: "permission rules",
                    source,
                })??;
                (!claude.is_empty()).then(|| {
                    crate::permissions::MergedPermissions::new(policy_rules.clone(), claude)
                })
            }
        };
        #[cfg(not(feature = "hooks"))]
        let merged: Option<()> = None;
        match (&merged, &policy_rules) {
            #[cfg(feature = "hooks")]
            (Some(m), _) => hooks.on_pre_execute(Scope::Global, m.clone()).keep(),
            (None, Some(rules)) => hooks.on_pre_execute(Scope::Global, rules.clone()).keep(),
            _ => {}
        }
        extra.install_hooks(&hooks);
        let rules = policy_rules.clone();
        // A rule refusing to `read` a file keeps it out of every search too.
        #[cfg(feature = "fs")]
        if let (Some(rules), Some(fs)) = (&rules, &fs) {
            fs.hooks().set_read_gate(read_gate(rules.clone()));
        }
        TimeoutPolicy::new(registry.clone())
            .with_overrides(
                self.policy
                    .tool_timeouts
                    .iter()
                    .map(|(k, v)| (k.as_str(), *v)),
            )?
            .install(&hooks)
            .keep();

        let policy = match self.approvals {
            Approvals::Never => ApprovalPolicy::Never,
            _ => self.policy.approval,
        };
        let approval = ApprovalService::with_registry(ApprovalConfig { policy }, registry.clone());
        let audit = AuditSession::new(Arc::new(dsh_scheduler::SessionAudit(self.session.clone())));
        approval.attach_session(Scope::Global, audit.clone()).keep();
        #[cfg(feature = "bash")]
        let bash = match (&self.bash, &fs) {
            (None, _) => None,
            (Some(options), Some(fs)) => Some(
                crate::bash_tool::mount_bash(
                    options,
                    output_dir.as_deref(),
                    fs.workspace(),
                    &registry,
                    &hooks,
                    &self.session,
                    &audit,
                    &self.policy,
                    policy,
                )
                .await?,
            ),
            (Some(_), None) => {
                return Err(HarnessError::Unsupported(
                    "the bash tool needs a workspace".to_owned(),
                ));
            }
        };
        match self.approvals {
            Approvals::Always => approval.add_answerer(Scope::Global, AllowAll).keep(),
            Approvals::Answerer(a) => approval.add_answerer(Scope::Global, Shared(a)).keep(),
            Approvals::Never | Approvals::NoChannel => {}
        }
        if let Some(grants) = &self.grants {
            grants.restore(self.session.events().pairs().map(|(_, e)| e))?;
            grants.attach(self.session.clone());
            approval
                .prepend_answerer(Scope::Global, crate::grants::GrantAnswerer(grants.clone()))
                .keep();
        }
        #[cfg(feature = "code-mode")]
        let code = mount_code_mode(&registry, &self.session, &self.agent, self.policy.mode)?;
        let runtime = Runtime::new(registry.clone(), hooks.clone())
            .with_approver(Arc::new(approval.clone()))
            .with_config(self.config);
        #[cfg(feature = "code-mode")]
        let runtime = match &code {
            Some(c) => runtime.with_admission(c.admission()),
            None => runtime,
        };
        let runtime = Arc::new(runtime);
        #[cfg(feature = "code-mode")]
        if let Some(c) = &code {
            c.bind(&runtime)?;
        }
        #[cfg(feature = "bash")]
        let warnings = match (&rules, &bash) {
            (Some(rules), Some(_)) => bash_read_warning(rules).into_iter().collect(),
            _ => Vec::new(),
        };
        #[cfg(not(feature = "bash"))]
        let warnings = Vec::new();
        #[cfg(feature = "mcp")]
        let warnings = {
            let mut warnings = warnings;
            warnings.extend(mcp_warnings);
            warnings
        };
        // Every tool is registered now: a rule or a `[tools.<name>]` table naming none would
        // silently never apply.
        let known = registry.names(Some(&self.agent));
        if let Some(rules) = &rules {
            rules
                .check_tools(&known)
                .map_err(|source| crate::policy::PolicyError::Permissions { path: None, source })?;
        }
        for name in self.policy.tool_timeouts.keys() {
            if !known.contains(name) {
                let hint = dsh_core::names::closest(name, known.iter().map(String::as_str))
                    .map(|c| format!("did you mean \"{c}\"? "))
                    .unwrap_or_default();
                return Err(HarnessError::Unsupported(format!(
                    "policy: [tools.{name}] names no tool; {hint}known tools: {}",
                    known.join(", ")
                )));
            }
        }
        Ok(Harness {
            registry,
            hooks,
            runtime,
            session: self.session,
            agent: self.agent,
            approval,
            policy: self.policy,
            #[cfg(feature = "fs")]
            fs,
            #[cfg(feature = "bash")]
            bash,
            #[cfg(feature = "bash")]
            output_dir,
            #[cfg(feature = "code-mode")]
            code,
            warnings,
            #[cfg(feature = "mcp")]
            mcp,
            policy_rules,
            #[cfg(feature = "hooks")]
            merged,
        })
    }
}

/// The warning for read rules `bash` is not held to: the kernel sandbox confines writes; it
/// cannot hide single files from reads.
#[cfg(feature = "bash")]
fn bash_read_warning(rules: &dsh_guard::PermissionRules) -> Option<String> {
    let read_rules: Vec<String> = rules
        .rules()
        .filter(|(a, r)| {
            *a != dsh_guard::PermissionAction::Allow && r.tool() == "read" && r.has_pattern()
        })
        .map(|(a, r)| format!("{a} \"{}\"", r.text()))
        .collect();
    (!read_rules.is_empty()).then(|| {
        format!(
            "bash commands can still read files that `read` may not ({}): the sandbox confines writes, not reads of single files; deny or ask `bash` to keep them out of reach",
            read_rules.join(", ")
        )
    })
}

/// The file tools' read gate over the permission rules: a file a rule (not the default) denies
/// or asks to `read` is one a search must not read either.
#[cfg(feature = "fs")]
fn read_gate(rules: dsh_guard::PermissionRules) -> dsh_tool_fs::ReadGate {
    use dsh_guard::{PermissionAction, PermissionMatch};
    Arc::new(
        move |subject, approved| match rules.decide_subject("read", Some(subject)) {
            // A person approved reading exactly this file for this call.
            PermissionMatch::Rule {
                action: PermissionAction::Ask,
                ..
            } if approved == Some(subject) => None,
            PermissionMatch::Rule { action, rule } if action != PermissionAction::Allow => {
                Some(format!("{action} \"{rule}\""))
            }
            _ => None,
        },
    )
}

/// Mounts `run_code` on QuickJS for modes other than `native`, logging sub-calls to `session`.
#[cfg(feature = "code-mode")]
fn mount_code_mode(
    registry: &ToolRegistry,
    session: &Session,
    agent: &AgentId,
    mode: crate::policy::Mode,
) -> Result<Option<dsh_code_mode::CodeMode>, HarnessError> {
    use dsh_code_mode::{AgentSessions, CodeMode, CodeModeConfig, PresentationMode, QuickJs};
    let mode = match mode {
        crate::policy::Mode::Native => return Ok(None),
        crate::policy::Mode::Code => PresentationMode::Code,
        crate::policy::Mode::Both => PresentationMode::Both,
    };
    let sessions = AgentSessions::new();
    sessions.insert(Some(agent.clone()), session.clone());
    sessions.insert(None, session.clone());
    let code = CodeMode::new(
        registry,
        CodeModeConfig {
            mode,
            runtime: Some(Arc::new(QuickJs::new())),
            sessions: Some(Arc::new(sessions)),
            ..CodeModeConfig::default()
        },
    )?;
    Ok(Some(code))
}

#[cfg(feature = "fs")]
fn mount_fs(
    registry: &ToolRegistry,
    session: &Session,
    root: &std::path::Path,
    extra_root: Option<&std::path::Path>,
) -> Result<dsh_tool_fs::FsTools, HarnessError> {
    use dsh_tool_fs::{FsContext, FsTools, Workspace, register_fs_tools};
    let workspace = Workspace::new(std::iter::once(root).chain(extra_root))?;
    let cwd = workspace.default_cwd().to_path_buf();
    let tools = FsTools::new(workspace).with_escalation();
    tools
        .sessions()
        .set_default(FsContext::new(session.id(), cwd));
    let policy = tools.mount_policy();
    // Resuming: rebuild what this session observed from its own log (spec FS3).
    let events = session.events();
    policy.replay(
        session.id(),
        events
            .iter()
            .filter_map(|(_, e)| e.as_tool_result().and_then(|r| r.meta)),
    );
    policy.keep();
    register_fs_tools(registry, &tools)?.keep();
    Ok(tools)
}
