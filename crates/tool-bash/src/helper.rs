//! Where the sandbox helper is and how to call it, and the probe that asks it, once, whether
//! this kernel can contain a command.
//!
//! Guarantees: a probe that cannot run, times out, or does not print the helper's success line
//! is "unavailable" (fail closed); the answer is computed once per tool and shared.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use crate::mode::SandboxMode;
use crate::sandbox::{PROBE_MARKER, SandboxArgs};

/// The program that contains a command: `program prefix... <SandboxArgs>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SandboxHelper {
    program: PathBuf,
    prefix: Vec<OsString>,
}

impl SandboxHelper {
    /// A helper run as `program prefix... --mode ...`.
    pub fn new(program: impl Into<PathBuf>, prefix: Vec<OsString>) -> SandboxHelper {
        SandboxHelper {
            program: program.into(),
            prefix,
        }
    }

    /// The `dsh` binary's hidden subcommand: `<dsh> __sandbox-exec --mode ...`.
    pub fn dsh(program: impl Into<PathBuf>) -> SandboxHelper {
        SandboxHelper::new(program, vec![OsString::from(DSH_SUBCOMMAND)])
    }

    /// The helper of the running program, when it is the `dsh` binary (its file name is
    /// `dsh`): see [`SandboxHelper::for_dsh`].
    pub fn current_dsh() -> Option<SandboxHelper> {
        let exe = std::env::current_exe().ok()?;
        (exe.file_name()? == "dsh").then(|| SandboxHelper::for_dsh(&exe))
    }

    /// The helper for the `dsh` binary at `dsh`: the stand-alone [`HELPER_PROGRAM`] installed
    /// beside it when there is one (an executable file), else `dsh __sandbox-exec`. Both run the
    /// same code ([`crate::sandbox::exec_sandboxed`]); the small program starts in about half
    /// the time, since the loader maps and relocates a fraction of what `dsh` holds, and every
    /// contained `bash` call starts one (its seccomp step).
    pub fn for_dsh(dsh: &Path) -> SandboxHelper {
        use std::os::unix::fs::PermissionsExt;
        let beside = dsh.with_file_name(HELPER_PROGRAM);
        match std::fs::metadata(&beside) {
            Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => {
                SandboxHelper::new(beside, Vec::new())
            }
            _ => SandboxHelper::dsh(dsh),
        }
    }

    /// The program.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// The full argument list for `args`.
    pub fn command_args(&self, args: &SandboxArgs) -> Vec<OsString> {
        let mut v = self.prefix.clone();
        v.extend(args.to_args());
        v
    }
}

/// The hidden subcommand of the `dsh` binary that runs the helper.
pub const DSH_SUBCOMMAND: &str = "__sandbox-exec";

/// The stand-alone helper program, installed beside `dsh` (`cargo install` installs both).
pub const HELPER_PROGRAM: &str = "dsh-sandbox-exec";

/// What the probe found.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Probe {
    /// The helper contained itself; its report line.
    Available(String),
    /// The kernel (or the setup) cannot contain a command; why.
    Unavailable(String),
}

impl Probe {
    /// Whether contained modes can run.
    pub fn is_available(&self) -> bool {
        matches!(self, Probe::Available(_))
    }
}

/// Runs the helper with `--probe` in `workspace-write` over a throwaway root.
pub async fn probe(helper: Option<&SandboxHelper>, simulate_no_landlock: bool) -> Probe {
    let Some(helper) = helper else {
        return Probe::Unavailable("no sandbox helper program is configured".to_owned());
    };
    let root = match tokio::task::spawn_blocking(|| {
        tempfile::Builder::new().prefix("dsh-probe-").tempdir()
    })
    .await
    {
        Ok(Ok(d)) => d,
        Ok(Err(e)) => return Probe::Unavailable(format!("probe temp dir: {e}")),
        Err(e) => return Probe::Unavailable(format!("probe temp dir: {e}")),
    };
    let mut args = SandboxArgs::new(SandboxMode::WorkspaceWrite, Vec::new());
    args.roots.push(root.path().to_path_buf());
    args.probe = true;
    args.simulate_no_landlock = simulate_no_landlock;
    let run = tokio::process::Command::new(helper.program())
        .args(helper.command_args(&args))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let out = match tokio::time::timeout(Duration::from_secs(10), run).await {
        Err(_) => return Probe::Unavailable("the sandbox probe timed out".to_owned()),
        Ok(Err(e)) => {
            return Probe::Unavailable(format!(
                "cannot run the sandbox helper {}: {e}",
                helper.program().display()
            ));
        }
        Ok(Ok(out)) => out,
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    match stdout.lines().find(|l| l.starts_with(PROBE_MARKER)) {
        Some(line) if out.status.success() => Probe::Available(line.to_owned()),
        _ => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let why = stderr
                .lines()
                .find_map(|l| l.strip_prefix(crate::sandbox::SETUP_MARKER))
                .map(str::to_owned)
                .unwrap_or_else(|| format!("the sandbox probe failed ({})", out.status));
            Probe::Unavailable(why)
        }
    }
}
