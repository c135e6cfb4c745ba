//! What a [`HarnessBuilder`] registers besides its own layers: your tools, hooks, guards and
//! permission rules, installed by [`HarnessBuilder::build`] in the order its docs give.

use std::sync::Arc;

use dsh_core::{
    Guard, PostExecuteHook, PreExecuteHook, PreExecuteObserver, ResultObserver, ToolDefinition,
    ToolRegistry,
};
use dsh_guard::{Hooks, PermissionRules, Scope};

use crate::HarnessBuilder;
use crate::harness::HarnessError;

/// The builder's list of things to register, kept until `build()`.
#[derive(Default)]
pub(crate) struct Registrations {
    tools: Vec<ToolDefinition>,
    pub(crate) permissions: Option<PermissionRules>,
    observers: Vec<Arc<dyn PreExecuteObserver>>,
    pre: Vec<Arc<dyn PreExecuteHook>>,
    guards: Vec<Arc<dyn Guard>>,
    post: Vec<Arc<dyn PostExecuteHook>>,
    results: Vec<Arc<dyn ResultObserver>>,
}

struct SharedPre(Arc<dyn PreExecuteHook>);

#[async_trait::async_trait]
impl PreExecuteHook for SharedPre {
    async fn pre_execute(
        &self,
        exec: &dsh_core::ToolExecution,
        next: dsh_core::PreNext<'_>,
    ) -> Result<dsh_core::PreToolDecision, dsh_core::Failure> {
        self.0.pre_execute(exec, next).await
    }
}

struct SharedPost(Arc<dyn PostExecuteHook>);

#[async_trait::async_trait]
impl PostExecuteHook for SharedPost {
    async fn post_execute(
        &self,
        exec: &dsh_core::ToolExecution,
        result: &dsh_core::ToolResult,
        next: dsh_core::PostNext<'_>,
    ) -> Result<dsh_core::PostToolDecision, dsh_core::Failure> {
        self.0.post_execute(exec, result, next).await
    }
}

impl Registrations {
    /// Registers the tools for the registry's lifetime.
    pub(crate) fn register_tools(&mut self, registry: &ToolRegistry) -> Result<(), HarnessError> {
        for def in self.tools.drain(..) {
            registry.add(def)?;
        }
        Ok(())
    }

    /// Installs the observers (in front of every pre-execute listener).
    pub(crate) fn install_observers(&mut self, hooks: &Hooks) {
        for o in self.observers.drain(..) {
            hooks
                .observe_pre_execute(Scope::Global, move |e: &dsh_core::ToolExecution| {
                    o.observe(e)
                })
                .keep();
        }
    }

    /// Installs the listeners, guards and observers, each after what `build()` installed.
    pub(crate) fn install_hooks(&mut self, hooks: &Hooks) {
        for h in self.pre.drain(..) {
            hooks.on_pre_execute(Scope::Global, SharedPre(h)).keep();
        }
        for g in self.guards.drain(..) {
            hooks
                .add_guard(Scope::Global, move |e: &dsh_core::ToolExecution| g.check(e))
                .keep();
        }
        for h in self.post.drain(..) {
            hooks.on_post_execute(Scope::Global, SharedPost(h)).keep();
        }
        for o in self.results.drain(..) {
            hooks
                .on_result(
                    Scope::Global,
                    move |e: &dsh_core::ToolExecution, r: &dsh_core::ToolResult| o.on_result(e, r),
                )
                .keep();
        }
    }
}

impl HarnessBuilder {
    /// Registers `tool` for the harness's lifetime (no handle to keep). See
    /// [`HarnessBuilder::build`] for where it sits among the tools the harness mounts itself.
    pub fn tool(mut self, tool: ToolDefinition) -> Self {
        self.extra.tools.push(tool);
        self
    }

    /// Registers each of `tools`, as [`HarnessBuilder::tool`].
    pub fn tools(mut self, tools: impl IntoIterator<Item = ToolDefinition>) -> Self {
        self.extra.tools.extend(tools);
        self
    }

    /// Permission rules written in code (`allow`/`ask`/`deny` over `tool` or `tool(glob)`),
    /// bound to the harness's registry at `build()`. They take the place of a policy file's
    /// `[permissions]` table: `build()` refuses a policy that has one as well.
    ///
    /// ```
    /// # fn demo() -> Result<(), dsh::guard::GuardError> {
    /// use dsh::guard::{PermissionAction, PermissionRules};
    /// let rules = PermissionRules::new(dsh::core::ToolRegistry::new())
    ///     .allow("read")?
    ///     .ask("write")?
    ///     .deny("read(*secrets*)")?
    ///     .with_default(PermissionAction::Deny);
    /// # let _ = rules; Ok(()) }
    /// ```
    pub fn permissions(mut self, rules: PermissionRules) -> Self {
        self.extra.permissions = Some(rules);
        self
    }

    /// Adds a `tools/pre-execute` listener that may decide (`allow`, `deny`, `ask`) or delegate,
    /// inside everything `build()` installs (permission rules and user hooks decide first, so a
    /// call they deny or send to approval never reaches it: use
    /// [`HarnessBuilder::observe_pre_execute`] to see every call). Listeners given here run in
    /// the order given. [`dsh::core::pre_execute_fn`](dsh_core::pre_execute_fn) makes one from a
    /// closure.
    pub fn pre_execute(mut self, hook: impl PreExecuteHook) -> Self {
        self.extra.pre.push(Arc::new(hook));
        self
    }

    /// Adds an observer that sees every call before any pre-execute listener decides, whatever
    /// they answer (for logging and metrics). A closure `|exec: &ToolExecution| ...` is one.
    pub fn observe_pre_execute(mut self, observer: impl PreExecuteObserver) -> Self {
        self.extra.observers.push(Arc::new(observer));
        self
    }

    /// Adds a deny-only guard, run after pre-execute and approval for a call still allowed
    /// (spec P3). A closure `|exec: &ToolExecution| -> Option<String>` is one: `Some(reason)`
    /// denies.
    pub fn guard(mut self, guard: impl Guard) -> Self {
        self.extra.guards.push(Arc::new(guard));
        self
    }

    /// Adds a `tools/post-execute` listener, inside every one `build()` installs.
    /// [`dsh::core::post_execute_fn`](dsh_core::post_execute_fn) makes one from a closure.
    pub fn post_execute(mut self, hook: impl PostExecuteHook) -> Self {
        self.extra.post.push(Arc::new(hook));
        self
    }

    /// Adds a `tools/result` observer: sees every final result. A closure
    /// `|exec: &ToolExecution, result: &ToolResult| ...` is one.
    pub fn on_result(mut self, observer: impl ResultObserver) -> Self {
        self.extra.results.push(Arc::new(observer));
        self
    }
}
