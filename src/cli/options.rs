//! The policy options `dsh run`, `dsh tools` and `dsh agent` share: `--policy`, `--max-parallel`, `--mode`,
//! `--preset`, applied over the policy file in that order.

use std::path::Path;

use dsh::{Mode, Policy};

use super::Exit;
use super::run::{ModeArg, PresetArg};

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
