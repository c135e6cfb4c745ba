//! Mounting the file tools: [`FsTools`] bundles the workspace, the fs hooks and the session
//! bindings; [`register_fs_tools`] registers the five tools and returns the handle that removes
//! them (with their prompt sections) again.

use dsh_core::{CoreError, Registration, ToolDefinition, ToolRegistry};

use crate::intent::FsHooks;
use crate::policy::ObservationPolicy;
use crate::seam::Workspace;
use crate::session::{FsContext, FsSessions};
use crate::tools::{self, ToolEnv};

/// The system-prompt section of each file tool, in registration order (the reference's text for
/// `read`, `write` and `edit`).
pub const PROMPT_SECTIONS: [(&str, &str); 5] = [
    (
        tools::read::NAME,
        "Use the read tool — not shell commands like cat — to inspect text files. Results include line numbers. Use offset and limit to continue reading large files.",
    ),
    (
        tools::write::NAME,
        "Use the write tool to create files or completely replace file contents. Existing files are overwritten, so read an existing file first (the default fs-observation-policy requires it) and prefer edit for targeted changes.",
    ),
    (
        tools::edit::NAME,
        "Use the edit tool for targeted changes to existing UTF-8 text files. It replaces literal old_string with new_string; by default old_string must appear exactly once. If old_string appears multiple times, provide a more specific old_string or set replace_all to true. Read the file first (the default fs-observation-policy requires it), unless you just created or edited it in this session.",
    ),
    (
        tools::glob::NAME,
        "Use the glob tool to find files by name pattern (newest first) instead of shell commands like find or ls.",
    ),
    (
        tools::grep::NAME,
        "Use the grep tool to search file contents with a regular expression instead of shell commands like grep or rg; narrow it with path and include.",
    ),
];

/// The file tools of one workspace: the seam, the hook points and the agent-to-session map the
/// tools consult. Cloning gives another handle to the same parts.
#[derive(Clone)]
pub struct FsTools {
    env: ToolEnv,
}

impl FsTools {
    /// Tools over `workspace` with fresh hooks (no policy: writes unconditional) and a default
    /// context with no session, working in the first root.
    pub fn new(workspace: Workspace) -> FsTools {
        let default = FsContext::anonymous(workspace.default_cwd().to_path_buf());
        FsTools {
            env: ToolEnv {
                workspace,
                hooks: FsHooks::new(),
                sessions: FsSessions::new(default),
                escalations: None,
            },
        }
    }

    /// The same tools, offering `read`, `write` and `edit` the arguments to ask to reach a file
    /// outside the roots (FS-36..39); install [`FsTools::escalation_policy`] as a
    /// `tools/pre-execute` listener and a result observer so that such a call is asked about.
    pub fn with_escalation(mut self) -> FsTools {
        self.env.escalations = Some(crate::escalation::Escalations::default());
        self
    }

    /// The policy that turns a call asking to reach a file outside the roots into a fresh
    /// approval question (`None` without [`FsTools::with_escalation`]).
    pub fn escalation_policy(&self) -> Option<crate::escalation::EscalationPolicy> {
        self.env.escalations.as_ref().map(|e| {
            crate::escalation::EscalationPolicy::new(
                e.clone(),
                self.env.workspace.clone(),
                self.env.sessions.clone(),
            )
        })
    }

    /// The same tools on other hooks (shared with whoever else holds them).
    pub fn with_hooks(mut self, hooks: FsHooks) -> FsTools {
        self.env.hooks = hooks;
        self
    }

    /// The same tools on other session bindings.
    pub fn with_sessions(mut self, sessions: FsSessions) -> FsTools {
        self.env.sessions = sessions;
        self
    }

    /// The workspace.
    pub fn workspace(&self) -> &Workspace {
        &self.env.workspace
    }

    /// The hook points (`fs/write-intent`, `fs/edit-intent`, `fs/observed`).
    pub fn hooks(&self) -> &FsHooks {
        &self.env.hooks
    }

    /// The agent-to-session bindings.
    pub fn sessions(&self) -> &FsSessions {
        &self.env.sessions
    }

    /// Mounts the read-before-write observation policy on these tools' hooks.
    pub fn mount_policy(&self) -> ObservationPolicy {
        ObservationPolicy::mount(&self.env.hooks)
    }

    /// The five definitions, in order: `read`, `write`, `edit`, `glob`, `grep`.
    pub fn definitions(&self) -> Result<Vec<ToolDefinition>, CoreError> {
        Ok(vec![
            tools::read::definition(self.env.clone())?,
            tools::write::definition(self.env.clone())?,
            tools::edit::definition(self.env.clone())?,
            tools::glob::definition(self.env.clone())?,
            tools::grep::definition(self.env.clone())?,
        ])
    }
}

/// The registered file tools. Disposing or dropping it unregisters them.
#[must_use = "dropping the handle unregisters the tools; call `keep()` to keep them"]
pub struct FsToolsHandle {
    registrations: Vec<Registration>,
}

impl FsToolsHandle {
    /// The names registered.
    pub fn names(&self) -> Vec<&'static str> {
        PROMPT_SECTIONS.iter().map(|(n, _)| *n).collect()
    }

    /// The prompt sections of the registered tools (name, text).
    pub fn prompt_sections(&self) -> &'static [(&'static str, &'static str)] {
        &PROMPT_SECTIONS
    }

    /// Unregisters the tools now.
    pub fn dispose(self) {
        for r in self.registrations {
            r.dispose();
        }
    }

    /// Keeps the tools for the registry's lifetime.
    pub fn keep(self) {
        for r in self.registrations {
            r.keep();
        }
    }
}

/// Registers `read`, `write`, `edit`, `glob` and `grep` globally in `registry`. If one fails
/// (a name already taken), the ones registered before it are removed again.
pub fn register_fs_tools(
    registry: &ToolRegistry,
    tools: &FsTools,
) -> Result<FsToolsHandle, CoreError> {
    let mut registrations = Vec::new();
    for def in tools.definitions()? {
        registrations.push(registry.register(def)?);
    }
    Ok(FsToolsHandle { registrations })
}
