//! Sandbox modes: what a command may touch. Ordered from narrowest to widest, so "a wider mode"
//! is a comparison; the wire names are the reference's.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::BashError;

/// How a `bash` call is contained.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Read everywhere; write only to the call's private temp dir and `/dev/null`; no network.
    ReadOnly,
    /// Read everywhere; write under the workspace roots, the private temp dir and `/dev/null`;
    /// no network.
    WorkspaceWrite,
    /// No containment: the command runs with the harness's own rights.
    DangerFullAccess,
}

impl SandboxMode {
    /// Every mode, narrowest first.
    pub const ALL: [SandboxMode; 3] = [
        SandboxMode::ReadOnly,
        SandboxMode::WorkspaceWrite,
        SandboxMode::DangerFullAccess,
    ];

    /// The wire name: `read-only`, `workspace-write` or `danger-full-access`.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::DangerFullAccess => "danger-full-access",
        }
    }

    /// Whether the kernel contains the command in this mode (Landlock + seccomp).
    pub fn is_contained(self) -> bool {
        self != SandboxMode::DangerFullAccess
    }

    /// Whether the workspace roots are writable in this mode.
    pub fn writes_workspace(self) -> bool {
        self != SandboxMode::ReadOnly
    }
}

impl fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SandboxMode {
    type Err = BashError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SandboxMode::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| BashError::UnknownMode(s.to_owned()))
    }
}
