//! [`ClaudeHooks`]: loaded settings, and their installation on a pipeline's hook points as one
//! `tools/pre-execute` listener, one `tools/post-execute` listener and one `tools/result`
//! observer.
//!
//! Guarantees: PreToolUse deny → `deny`, ask → `ask` (still denied if a listener further in
//! denies), allow → no objection (the rest of the waterfall, approval and guards still decide);
//! PostToolUse block → `block` with the reason as the feedback the model sees, and only for a
//! successful result (as in Claude Code); every hook's additional context reaches the model as a
//! context of the call's result, delivered after all the results of its batch.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use dsh_core::{
    Failure, PostExecuteHook, PostNext, PostToolDecision, PreExecuteHook, PreNext, PreToolDecision,
    ToolExecution, ToolResult, text_content,
};
use dsh_guard::{HookHandle, Hooks, Scope};
use dsh_session::Session;

use crate::bridge::{Bridge, contexts_of};
use crate::error::HooksError;
use crate::protocol::Verdict;
use crate::settings::{
    HookEvent, HookSettings, SETTINGS_FILE, WORKSPACE_SETTINGS, user_config_dir,
};

/// Hooks in the Claude Code format, ready to install on a pipeline.
#[derive(Clone, Debug)]
pub struct ClaudeHooks {
    settings: Arc<HookSettings>,
    cwd: PathBuf,
}

impl ClaudeHooks {
    /// Loads and merges, in this order (hooks of all files concatenated, each file's in its own
    /// order): `<workspace>/.dsh/settings.json` (only when `workspace_trusted`: a workspace's own
    /// settings run commands, see [`crate::TrustStore`]), `<user_dir>/settings.json`, then
    /// `explicit`. The first two may be absent; the explicit file must exist. Hooks run in
    /// `workspace` (else the current directory). This reads files: call it off async threads
    /// (e.g. in `spawn_blocking`).
    pub fn load(
        workspace: Option<&Path>,
        workspace_trusted: bool,
        user_dir: Option<&Path>,
        explicit: Option<&Path>,
    ) -> Result<ClaudeHooks, HooksError> {
        let mut settings = HookSettings::empty();
        if let Some(w) = workspace.filter(|_| workspace_trusted) {
            settings.extend(HookSettings::read_optional(&w.join(WORKSPACE_SETTINGS))?);
        }
        if let Some(u) = user_dir {
            settings.extend(HookSettings::read_optional(&u.join(SETTINGS_FILE))?);
        }
        if let Some(e) = explicit {
            settings.extend(HookSettings::read(e)?);
        }
        let cwd = workspace
            .map(Path::to_path_buf)
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_else(|| PathBuf::from("."));
        Ok(ClaudeHooks::new(settings, cwd))
    }

    /// [`ClaudeHooks::load`] with the standard user directory ([`user_config_dir`]).
    pub fn load_standard(
        workspace: Option<&Path>,
        workspace_trusted: bool,
        explicit: Option<&Path>,
    ) -> Result<ClaudeHooks, HooksError> {
        ClaudeHooks::load(
            workspace,
            workspace_trusted,
            user_config_dir().as_deref(),
            explicit,
        )
    }

    /// Hooks from settings already read, run in `cwd`.
    pub fn new(settings: HookSettings, cwd: impl Into<PathBuf>) -> ClaudeHooks {
        ClaudeHooks {
            settings: Arc::new(settings),
            cwd: cwd.into(),
        }
    }

    /// The merged settings.
    pub fn settings(&self) -> &HookSettings {
        &self.settings
    }

    /// The directory hooks run in.
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// Installs the hooks for every call ([`Scope::Global`]), logging to `session`.
    pub fn install(&self, hooks: &Hooks, session: Session) -> Installed {
        self.install_scoped(hooks, session, Scope::Global)
    }

    /// Installs the hooks for the calls `scope` reaches, logging to `session`. Installs nothing
    /// when no hook is configured. Registered inside the listeners already there.
    pub fn install_scoped(&self, hooks: &Hooks, session: Session, scope: Scope) -> Installed {
        let mut handles = Vec::new();
        if self.settings.is_empty() {
            return Installed {
                handles,
                bridge: None,
            };
        }
        let bridge = Arc::new(Bridge::new(
            self.settings.clone(),
            self.cwd.clone(),
            session,
        ));
        handles.push(hooks.on_pre_execute(scope.clone(), PreBridge(bridge.clone())));
        handles.push(hooks.on_post_execute(scope.clone(), PostBridge(bridge.clone())));
        // Contexts held for a call that never reached post-execute are dropped with its result.
        let b = bridge.clone();
        handles.push(
            hooks.on_result(scope, move |exec: &ToolExecution, _: &ToolResult| {
                b.take_contexts(exec.token());
            }),
        );
        Installed {
            handles,
            bridge: Some(bridge),
        }
    }
}

/// The registrations of one [`ClaudeHooks::install`]: dropping it removes them.
#[must_use = "dropping the handles removes the hooks; call `keep()` to keep them"]
pub struct Installed {
    handles: Vec<HookHandle>,
    bridge: Option<Arc<Bridge>>,
}

impl Installed {
    /// Keeps the hooks for the lifetime of the hook set.
    pub fn keep(self) {
        for h in self.handles {
            h.keep();
        }
    }
    /// Removes the hooks now.
    pub fn dispose(self) {
        for h in self.handles {
            h.dispose();
        }
    }
    /// Whether anything was registered (false when no hook is configured).
    pub fn is_active(&self) -> bool {
        !self.handles.is_empty()
    }
    /// How many calls still have PreToolUse contexts waiting for delivery (0 between calls).
    pub fn pending_contexts(&self) -> usize {
        self.bridge.as_ref().map_or(0, |b| b.pending_len())
    }
}

impl std::fmt::Debug for Installed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Installed")
            .field("handles", &self.handles.len())
            .finish()
    }
}

struct PreBridge(Arc<Bridge>);

#[async_trait]
impl PreExecuteHook for PreBridge {
    async fn pre_execute(
        &self,
        exec: &ToolExecution,
        next: PreNext<'_>,
    ) -> Result<PreToolDecision, Failure> {
        let bridge = &self.0;
        if !bridge.has_match(HookEvent::PreToolUse, exec.name()) {
            return next.run(exec).await;
        }
        let folded = bridge.run_point(HookEvent::PreToolUse, exec, None).await;
        bridge.hold_contexts(exec.token(), contexts_of(&folded.contexts));
        match folded.verdict {
            Verdict::Deny => {
                Ok(PreToolDecision::deny(folded.reason().unwrap_or_else(
                    || "denied by a PreToolUse hook".to_owned(),
                )))
            }
            Verdict::Ask => {
                let inner = next.run(exec).await?;
                Ok(match inner {
                    PreToolDecision::Deny { .. } => inner,
                    _ => PreToolDecision::Ask {
                        reason: folded.reason().map(Arc::from),
                    },
                })
            }
            Verdict::Allow | Verdict::Pass => next.run(exec).await,
        }
    }
}

struct PostBridge(Arc<Bridge>);

#[async_trait]
impl PostExecuteHook for PostBridge {
    async fn post_execute(
        &self,
        exec: &ToolExecution,
        result: &ToolResult,
        next: PostNext<'_>,
    ) -> Result<PostToolDecision, Failure> {
        let bridge = &self.0;
        let mut contexts = bridge.take_contexts(exec.token());
        // As in Claude Code, PostToolUse runs after a tool succeeded.
        let run = !result.is_error() && bridge.has_match(HookEvent::PostToolUse, exec.name());
        if run {
            let folded = bridge
                .run_point(HookEvent::PostToolUse, exec, result.value())
                .await;
            contexts.extend(contexts_of(&folded.contexts));
            if folded.verdict == Verdict::Deny {
                let reason = folded
                    .reason()
                    .unwrap_or_else(|| "tool result blocked by a PostToolUse hook".to_owned());
                return Ok(PostToolDecision::Block {
                    feedback: text_content(reason),
                    contexts,
                });
            }
        }
        let mut decision = next.run(exec, result).await?;
        for ctx in contexts.into_iter().rev() {
            decision = decision.prepend_context(ctx);
        }
        Ok(decision)
    }
}
