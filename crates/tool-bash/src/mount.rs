//! Mounting: the `bash` definition in a registry, its sandbox policy in front of every other
//! pre-execute listener, and the observer that forgets each call's decision.

use dsh_core::ToolRegistry;
use dsh_guard::{HookHandle, Hooks, Scope};

use crate::error::BashError;
use crate::tool::BashTool;

/// What [`mount`] registered; dropping it unregisters everything, [`BashMount::keep`] keeps it.
pub struct BashMount {
    registration: Option<dsh_core::Registration>,
    hooks: Vec<HookHandle>,
}

impl BashMount {
    /// Keeps everything for the registry's and hooks' lifetime.
    pub fn keep(mut self) {
        if let Some(r) = self.registration.take() {
            r.keep();
        }
        for h in self.hooks.drain(..) {
            h.keep();
        }
    }

    /// Unregisters everything now.
    pub fn dispose(self) {}
}

/// Registers `tool` globally in `registry`, prepends its sandbox policy to `hooks`' pre-execute
/// listeners and adds its decision janitor as a result observer.
pub fn mount(
    tool: &BashTool,
    registry: &ToolRegistry,
    hooks: &Hooks,
) -> Result<BashMount, BashError> {
    let registration = registry.register(tool.definition()?)?;
    let policy = hooks.prepend_pre_execute(Scope::Global, tool.policy());
    let janitor = hooks.on_result(Scope::Global, tool.decision_janitor());
    Ok(BashMount {
        registration: Some(registration),
        hooks: vec![policy, janitor],
    })
}
