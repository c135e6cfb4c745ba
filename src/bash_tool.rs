//! The `bash` tool in the harness (feature `bash`): how it is mounted over the workspace, in the
//! sandbox mode of the policy's permission preset, and how that preset is announced in the log;
//! and the private (0700) per-session directory its full outputs go to.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use dsh_core::ToolRegistry;
use dsh_guard::{ApprovalPolicy, AuditSession, Hooks};
use dsh_session::Session;
use dsh_tool_bash::{BashConfig, BashTool, SandboxHelper, SandboxSettings, Unavailable};
use dsh_tool_bash::{RecordedPreset, announce_preset};
use dsh_tool_fs::Workspace;

use crate::HarnessError;
use crate::policy::Policy;

/// How the harness mounts the `bash` tool ([`crate::HarnessBuilder::bash`]).
#[derive(Clone, Debug, Default)]
pub struct BashOptions {
    /// The sandbox helper; `None`: when this is the `dsh` binary, the `dsh-sandbox-exec`
    /// installed beside it or else the binary itself, otherwise no helper (contained calls then
    /// fail closed with `SANDBOX_UNAVAILABLE`).
    pub helper: Option<SandboxHelper>,
    /// What to do when the kernel cannot contain a command (default: fail closed).
    pub unavailable: Unavailable,
}

/// Where a session's full bash outputs go: `(root, session)`, with `root` =
/// `<temp>/dsh-output-<uid>` (made here with mode 0700; the file tools' extra root) and `session`
/// = `root/<session id>` (made 0700 by the tool when its first output is spooled, so a process
/// killed before that leaves nothing behind). An existing `root` is kept only if it is a real
/// directory (not a link) of this user that nobody else may enter; anything else is refused
/// rather than written into.
pub(crate) fn private_output_dir(session_id: &str) -> Result<(PathBuf, PathBuf), HarnessError> {
    use std::os::unix::fs::MetadataExt;
    let safe: String = session_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .take(80)
        .collect();
    // The owner of `/proc/self` is this process's effective user (no `unsafe` needed).
    let uid = std::fs::metadata("/proc/self").map(|m| m.uid()).ok();
    let name = match uid {
        Some(uid) => format!("dsh-output-{uid}"),
        None => format!("dsh-output-{safe}"),
    };
    let root = std::env::temp_dir().join(name);
    let fail = |source: std::io::Error| HarnessError::OutputDir {
        path: root.clone(),
        source,
    };
    match std::fs::DirBuilder::new().mode(0o700).create(&root) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let meta = std::fs::symlink_metadata(&root).map_err(fail)?;
            let mine = uid.is_none_or(|uid| meta.uid() == uid);
            if !meta.is_dir() || !mine || meta.permissions().mode() & 0o077 != 0 {
                return Err(fail(std::io::Error::other(
                    "it exists but is not a directory of this user that only they may open",
                )));
            }
        }
        Err(e) => return Err(fail(e)),
    }
    // The umask may have narrowed the mode further; it must not have widened it.
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700)).map_err(fail)?;
    let session = root.join(safe);
    Ok((root, session))
}

/// Mounts `bash` over `workspace`: its mode is the preset's (`workspace-write` without one), its
/// escalation hint follows the effective approval policy; then writes `permission/preset` (when
/// a preset was chosen), `sandbox/mode` and `approval/policy` (with a preset) to the session,
/// skipping what its log already records.
// The harness's parts, each borrowed once; a struct for them would only be built to be taken apart.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn mount_bash(
    options: &BashOptions,
    output_dir: Option<&Path>,
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
    if let Some(dir) = output_dir {
        config.output_dir = dir.to_path_buf();
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
    let recorded =
        RecordedPreset::from_events(events.iter().map(|(_, e)| (e.event_type(), e.data())));
    announce_preset(audit, &recorded, preset, mode, preset.map(|_| approval)).await?;
    Ok(tool)
}
