//! One permission decision over the policy file's rules and the `permissions` blocks of the
//! Claude Code settings files: the strictest rule that matches in either wins (deny > ask >
//! allow across both); when none matches, the policy's `default` applies (allow without one).
//! A denial or question names the rule and where it came from.

use async_trait::async_trait;
use dsh_core::{Failure, PreExecuteHook, PreNext, PreToolDecision, ToolExecution};
use dsh_guard::{PermissionAction, PermissionMatch, PermissionRules};
use dsh_hooks::ClaudePermissions;

/// The merged rules, as one `tools/pre-execute` listener.
#[derive(Clone, Debug)]
pub struct MergedPermissions {
    policy: Option<PermissionRules>,
    claude: ClaudePermissions,
}

fn rank(a: PermissionAction) -> u8 {
    match a {
        PermissionAction::Deny => 2,
        PermissionAction::Ask => 1,
        PermissionAction::Allow => 0,
    }
}

impl MergedPermissions {
    /// The policy file's rules (if it has a `[permissions]` table) and the settings' rules.
    pub fn new(policy: Option<PermissionRules>, claude: ClaudePermissions) -> MergedPermissions {
        MergedPermissions { policy, claude }
    }

    /// Whether every call of `tool` is denied by either set of rules.
    pub fn denies_every_call(&self, tool: &str) -> bool {
        self.claude.denies_every_call(tool)
            || self
                .policy
                .as_ref()
                .is_some_and(|p| p.denies_every_call(tool))
    }

    /// The action for `exec` and why (`None` reason: allowed by a rule or the default).
    pub fn decide(&self, exec: &ToolExecution) -> (PermissionAction, String) {
        let name = exec.name();
        let from_policy = self.policy.as_ref().map(|p| p.decide(exec));
        let mut best: Option<(PermissionAction, String)> = match &from_policy {
            Some(PermissionMatch::Rule { action, rule }) => {
                Some((*action, format!("by permission rule {action} \"{rule}\"")))
            }
            Some(PermissionMatch::UncheckedPattern { action, rule }) => Some((
                PermissionAction::Ask,
                format!(
                    ": its permission subject could not be read to check rule {action} \"{rule}\""
                ),
            )),
            _ => None,
        };
        if let Some(m) = self.claude.decide(exec) {
            let action = m.rule.action();
            if best.as_ref().is_none_or(|(a, _)| rank(action) > rank(*a)) {
                best = Some((
                    action,
                    format!(
                        "by permission rule {action} \"{}\" ({})",
                        m.rule.text(),
                        m.rule.origin().display()
                    ),
                ));
            }
        }
        match best {
            Some((action, why)) => {
                let verb = match action {
                    PermissionAction::Deny => "is denied",
                    PermissionAction::Ask => "requires approval",
                    PermissionAction::Allow => "is allowed",
                };
                let sep = if why.starts_with(':') { "" } else { " " };
                (action, format!("tool \"{name}\" {verb}{sep}{why}"))
            }
            None => {
                let d = self
                    .policy
                    .as_ref()
                    .map_or(PermissionAction::Allow, PermissionRules::default_action);
                let verb = match d {
                    PermissionAction::Deny => "is denied",
                    PermissionAction::Ask => "requires approval",
                    PermissionAction::Allow => "is allowed",
                };
                (
                    d,
                    format!("tool \"{name}\" {verb} by the default permission (no rule matched)"),
                )
            }
        }
    }
}

#[async_trait]
impl PreExecuteHook for MergedPermissions {
    async fn pre_execute(
        &self,
        exec: &ToolExecution,
        next: PreNext<'_>,
    ) -> Result<PreToolDecision, Failure> {
        match self.decide(exec) {
            (PermissionAction::Deny, why) => Ok(PreToolDecision::deny(why)),
            (PermissionAction::Ask, why) => Ok(PreToolDecision::ask(why)),
            (PermissionAction::Allow, _) => next.run(exec).await,
        }
    }
}
