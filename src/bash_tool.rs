//! The `bash` tool in the harness (feature `bash`): how it is mounted over the workspace, in the
//! sandbox mode of the policy's permission preset, and how that preset is announced in the log.

use dsh_core::ToolRegistry;
use dsh_guard::{ApprovalPolicy, AuditSession, Hooks};
use dsh_session::Session;
use dsh_tool_bash::preset::{Recorded, announce};
use dsh_tool_bash::{BashConfig, BashTool, SandboxHelper, SandboxSettings, Unavailable};
use dsh_tool_fs::Workspace;

use crate::HarnessError;
use crate::policy::Policy;

/// How the harness mounts the `bash` tool ([`crate::HarnessBuilder::bash`]).
#[derive(Clone, Debug, Default)]
pub struct BashOptions {
    /// The sandbox helper; `None`: the running `dsh` binary when this is it, else no helper
    /// (contained calls then fail closed with `SANDBOX_UNAVAILABLE`).
    pub helper: Option<SandboxHelper>,
    /// What to do when the kernel cannot contain a command (default: fail closed).
    pub unavailable: Unavailable,
}

/// Mounts `bash` over `workspace`: its mode is the preset's (`workspace-write` without one), its
/// escalation hint follows the effective approval policy; then writes `permission/preset` (when
/// a preset was chosen), `sandbox/mode` and `approval/policy` (with a preset) to the session,
/// skipping what its log already records.
// The harness's parts, each borrowed once; a struct for them would only be built to be taken apart.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn mount_bash(
    options: &BashOptions,
    workspace: &Workspace,
    registry: &ToolRegistry,
    hooks: &Hooks,
    session: &Session,
    audit: &AuditSession,
    policy: &Policy,
    approval: ApprovalPolicy,
) -> Result<BashTool, HarnessError> {
    let mut config = BashConfig::new(workspace.clone());
    if options.helper.is_some() {
        config.helper = options.helper.clone();
    }
    let preset = policy.preset;
    let mode = preset.unwrap_or_default().sandbox_mode();
    let tool = BashTool::with_settings(
        config,
        SandboxSettings {
            mode,
            escalation: approval == ApprovalPolicy::Ask,
            unavailable: options.unavailable,
        },
    );
    dsh_tool_bash::mount(&tool, registry, hooks)?.keep();
    let events = session.events();
    let recorded = Recorded::from_events(events.iter().map(|(_, e)| (e.event_type(), e.data())));
    announce(audit, &recorded, preset, mode, preset.map(|_| approval)).await?;
    Ok(tool)
}
