//! Permission presets: a sandbox mode and an approval policy chosen together, and their
//! announcement in the session log as `permission/preset {preset}`, `sandbox/mode {mode}` and
//! `approval/policy {policy}` (the reference's shapes).
//!
//! | preset | sandbox mode | approval |
//! |---|---|---|
//! | `read-only` | `read-only` | `ask` |
//! | `workspace-write` (default) | `workspace-write` | `ask` |
//! | `danger-full-access` | `danger-full-access` | `never` |

use std::fmt;
use std::str::FromStr;

use dsh_core::Json;
use dsh_guard::{ApprovalPolicy, AuditSession};
use serde_json::{Map, Value};

use crate::error::BashError;
use crate::mode::SandboxMode;

/// Event type of a preset switch (`{preset}`).
pub const PERMISSION_PRESET: &str = "permission/preset";
/// Event type of a sandbox mode switch (`{mode}`).
pub const SANDBOX_MODE: &str = "sandbox/mode";

/// A permission preset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Preset {
    /// Commands may read but not write the workspace; approval questions are asked.
    ReadOnly,
    /// Commands may write the workspace; approval questions are asked (the default).
    #[default]
    WorkspaceWrite,
    /// No containment, and no approval prompts: every ask is rejected.
    DangerFullAccess,
}

impl Preset {
    /// Every preset, narrowest first.
    pub const ALL: [Preset; 3] = [
        Preset::ReadOnly,
        Preset::WorkspaceWrite,
        Preset::DangerFullAccess,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        self.sandbox_mode().as_str()
    }

    /// The sandbox mode it sets.
    pub fn sandbox_mode(self) -> SandboxMode {
        match self {
            Preset::ReadOnly => SandboxMode::ReadOnly,
            Preset::WorkspaceWrite => SandboxMode::WorkspaceWrite,
            Preset::DangerFullAccess => SandboxMode::DangerFullAccess,
        }
    }

    /// The approval policy it sets.
    pub fn approval(self) -> ApprovalPolicy {
        match self {
            Preset::ReadOnly | Preset::WorkspaceWrite => ApprovalPolicy::Ask,
            Preset::DangerFullAccess => ApprovalPolicy::Never,
        }
    }
}

impl fmt::Display for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Preset {
    type Err = BashError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Preset::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| BashError::UnknownPreset(s.to_owned()))
    }
}

/// The preset and mode a session's log last recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecordedPreset {
    /// The last `permission/preset`.
    pub preset: Option<Preset>,
    /// The last `sandbox/mode`.
    pub mode: Option<SandboxMode>,
}

impl RecordedPreset {
    /// Folds a session's events `(type, data)`: the last valid value of each kind wins.
    pub fn from_events<'a>(
        events: impl IntoIterator<Item = (&'a str, &'a Json)>,
    ) -> RecordedPreset {
        let mut r = RecordedPreset::default();
        for (ty, data) in events {
            let field = |k: &str| data.value().get(k).and_then(Value::as_str);
            match ty {
                PERMISSION_PRESET => {
                    if let Some(p) = field("preset").and_then(|s| s.parse().ok()) {
                        r.preset = Some(p);
                    }
                }
                SANDBOX_MODE => {
                    if let Some(m) = field("mode").and_then(|s| s.parse().ok()) {
                        r.mode = Some(m);
                    }
                }
                _ => {}
            }
        }
        r
    }
}

fn one(key: &str, value: &str) -> Json {
    let mut m = Map::new();
    m.insert(key.into(), Value::String(value.into()));
    Json::from_shallow(Value::Object(m))
}

/// Records what is in force in the session log, writing only what differs from `recorded`:
/// `permission/preset` (when a preset was chosen), `sandbox/mode`, and `approval/policy` (when
/// given; it becomes the session's approval override). Returns how many events were appended.
pub async fn announce_preset(
    audit: &AuditSession,
    recorded: &RecordedPreset,
    preset: Option<Preset>,
    mode: SandboxMode,
    approval: Option<ApprovalPolicy>,
) -> Result<usize, BashError> {
    let mut n = 0;
    if let Some(p) = preset
        && recorded.preset != Some(p)
    {
        audit
            .sink()
            .append(PERMISSION_PRESET, one("preset", p.as_str()))
            .await?;
        n += 1;
    }
    if recorded.mode != Some(mode) {
        audit
            .sink()
            .append(SANDBOX_MODE, one("mode", mode.as_str()))
            .await?;
        n += 1;
    }
    if let Some(a) = approval
        && audit.override_policy() != Some(a)
    {
        audit.write_policy(a).await?;
        n += 1;
    }
    Ok(n)
}
