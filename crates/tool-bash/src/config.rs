//! `BashConfig`: the tool's settings, with the defaults a harness wants.

use std::path::PathBuf;
use std::time::Duration;

use dsh_tool_fs::Workspace;

use crate::helper::SandboxHelper;

/// Default budget of one command (2 minutes).
pub const DEFAULT_TIMEOUT_MS: u64 = 120_000;
/// Largest budget a call may ask for (10 minutes).
pub const MAX_TIMEOUT_MS: u64 = 600_000;
/// Default number of output bytes shown to the model.
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 30_000;
/// Default limit of the spooled full output, per stream (64 MiB).
pub const DEFAULT_MAX_SPOOL_BYTES: u64 = 64 * 1024 * 1024;
/// Default limit of live processes in one command's group.
pub const DEFAULT_MAX_PROCESSES: usize = 512;
/// Default grace between `SIGTERM` and `SIGKILL`.
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_millis(1_000);

/// The settings of a `bash` tool.
#[derive(Clone, Debug)]
pub struct BashConfig {
    /// The workspace: its roots are writable in `workspace-write`, and commands run inside them.
    pub workspace: Workspace,
    /// The sandbox helper (`None`: contained modes fail closed with `SANDBOX_UNAVAILABLE`).
    pub helper: Option<SandboxHelper>,
    /// The shell (`bash`, looked up on `PATH`).
    pub shell: PathBuf,
    /// Budget of a call that does not say `timeoutMs`.
    pub default_timeout_ms: u64,
    /// Cap of `timeoutMs`.
    pub max_timeout_ms: u64,
    /// Grace between `SIGTERM` and `SIGKILL` when a command is stopped.
    pub kill_grace: Duration,
    /// Output bytes shown to the model (the tail is kept).
    pub max_output_bytes: usize,
    /// Bytes of each stream kept in the full-output file.
    pub max_spool_bytes: u64,
    /// Live processes a command's group may have before it is killed (`None`: no limit).
    pub max_processes: Option<usize>,
    /// `RLIMIT_FSIZE` of the command, in bytes (applied by the helper; `None`: inherited).
    pub max_file_size: Option<u64>,
    /// Where full outputs of truncated results are kept.
    pub output_dir: PathBuf,
    /// Where each call's private temp dir is made.
    pub temp_parent: PathBuf,
    /// Act as if the kernel had no Landlock (tests of the fail-closed path).
    #[doc(hidden)]
    pub simulate_no_landlock: bool,
}

impl BashConfig {
    /// Defaults over `workspace`, with the helper of the running `dsh` binary if this is it.
    pub fn new(workspace: Workspace) -> BashConfig {
        let tmp = std::env::temp_dir();
        BashConfig {
            workspace,
            helper: SandboxHelper::current_dsh(),
            shell: PathBuf::from("bash"),
            default_timeout_ms: DEFAULT_TIMEOUT_MS,
            max_timeout_ms: MAX_TIMEOUT_MS,
            kill_grace: DEFAULT_KILL_GRACE,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            max_spool_bytes: DEFAULT_MAX_SPOOL_BYTES,
            max_processes: Some(DEFAULT_MAX_PROCESSES),
            max_file_size: None,
            output_dir: tmp.join("dsh-bash-output"),
            temp_parent: tmp,
            simulate_no_landlock: false,
        }
    }

    /// With this helper.
    pub fn with_helper(mut self, helper: Option<SandboxHelper>) -> BashConfig {
        self.helper = helper;
        self
    }
}
