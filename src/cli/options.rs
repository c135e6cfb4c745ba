//! The policy options `dsh run`, `dsh tools` and `dsh agent` share: `--policy`, `--max-parallel`, `--mode`,
//! `--preset`, applied over the policy file in that order.

use std::path::Path;

use std::path::PathBuf;

use clap::Args;
use dsh::{Mode, Policy};

use super::Exit;
use super::run::{ModeArg, PresetArg};

/// The options of every command that runs the pipeline: where, under which policy and with
/// which settings.
#[derive(Args, Debug)]
pub struct PipelineArgs {
    /// The workspace the file tools may touch (default: the current directory).
    #[arg(long)]
    pub workspace: Option<PathBuf>,
    /// A policy file (TOML).
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// The permission preset: the `bash` tool's sandbox mode and the approval policy together
    /// (overrides the policy file's `preset` and `approval`).
    #[arg(long, value_enum)]
    pub preset: Option<PresetArg>,
    /// A hook settings file (Claude Code format), merged after the workspace's
    /// `.dsh/settings.json` (once the workspace is trusted) and the user's `settings.json`
    /// (`$XDG_CONFIG_HOME/dsh` or `~/.config/dsh`).
    #[arg(long, value_name = "FILE")]
    pub settings: Option<PathBuf>,
    /// Apply the workspace's own `.dsh/settings.json` (its hooks run commands) and
    /// `.dsh/config.toml` without asking; for automation. On a terminal dsh asks once and
    /// remembers the answer.
    #[arg(long)]
    pub trust_workspace: bool,
    #[command(flatten)]
    pub store: super::store::StoreArg,
}

/// `--workspace`, else the current directory.
pub fn workspace_or_cwd(given: Option<&PathBuf>) -> Result<PathBuf, Exit> {
    match given {
        Some(w) => Ok(w.clone()),
        None => {
            std::env::current_dir().map_err(|e| Exit::internal(format!("current directory: {e}")))
        }
    }
}

/// The policy file (or the default policy) with the command line's overrides applied.
pub fn load_policy(
    file: Option<&Path>,
    max_parallel: Option<usize>,
    mode: Option<ModeArg>,
    preset: Option<PresetArg>,
) -> Result<Policy, Exit> {
    load_policy_or(file, None, max_parallel, mode, preset)
}

/// [`load_policy`] with `fallback` (a configuration file's policy keys) in place of the default
/// policy when no file is given.
pub fn load_policy_or(
    file: Option<&Path>,
    fallback: Option<Policy>,
    max_parallel: Option<usize>,
    mode: Option<ModeArg>,
    preset: Option<PresetArg>,
) -> Result<Policy, Exit> {
    let mut policy = match file {
        Some(p) => Policy::load(p).map_err(|e| Exit::usage(e.to_string()))?,
        None => fallback.unwrap_or_default(),
    };
    if let Some(n) = max_parallel {
        policy.max_parallel_tool_calls = dsh::scheduler::validate_max_parallel(n)
            .map_err(|e| Exit::usage(format!("--max-parallel: {e}")))?;
    }
    if let Some(m) = mode {
        policy.mode = match m {
            ModeArg::Native => Mode::Native,
            ModeArg::Code => Mode::Code,
            ModeArg::Both => Mode::Both,
        };
    }
    if let Some(p) = preset {
        let preset = match p {
            PresetArg::ReadOnly => dsh::bash::Preset::ReadOnly,
            PresetArg::WorkspaceWrite => dsh::bash::Preset::WorkspaceWrite,
            PresetArg::DangerFullAccess => dsh::bash::Preset::DangerFullAccess,
        };
        policy.preset = Some(preset);
        policy.approval = preset.approval();
    }
    Ok(policy)
}
