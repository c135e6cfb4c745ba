//! The helper's command line: `--mode M [--root R]... [--tmp T] [--max-file-size N]
//! [--simulate-no-landlock] [--parent-pid P] [--arg0 NAME]
//! (--probe | --serve | -- PROGRAM ARGS...)`. Parsing and printing round-trip, so
//! the tool builds exactly what the helper reads.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use crate::error::BashError;
use crate::mode::SandboxMode;

/// What the sandbox helper is asked to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SandboxArgs {
    /// The mode to enforce.
    pub mode: SandboxMode,
    /// The workspace roots (writable in `workspace-write`).
    pub roots: Vec<PathBuf>,
    /// The call's private temp dir (writable in both contained modes).
    pub tmp: Option<PathBuf>,
    /// `RLIMIT_FSIZE` for the command, in bytes.
    pub max_file_size: Option<u64>,
    /// Act as if the kernel had no Landlock (tests of the fail-closed path).
    pub simulate_no_landlock: bool,
    /// Apply the sandbox to the helper itself, report, and exit instead of running a command.
    pub probe: bool,
    /// Run as a session supervisor (the `sandbox::serve` module) instead of one command.
    pub serve: bool,
    /// The pid of the process that started the helper: when the helper's parent is any other
    /// (that process died, even before the helper started), the command's group is killed.
    /// `None`: whatever parent the helper finds when it starts.
    pub parent_pid: Option<u32>,
    /// The name the program is started under (its `argv[0]`; `None`: the program as given).
    /// Lets the tool pass a shell already found on `PATH` while the shell still calls itself
    /// `bash` in its messages.
    pub arg0: Option<OsString>,
    /// The program and its arguments (empty for a probe).
    pub command: Vec<OsString>,
}

impl SandboxArgs {
    /// Arguments for running `command` under `mode`.
    pub fn new(mode: SandboxMode, command: Vec<OsString>) -> SandboxArgs {
        SandboxArgs {
            mode,
            roots: Vec::new(),
            tmp: None,
            max_file_size: None,
            simulate_no_landlock: false,
            probe: false,
            serve: false,
            parent_pid: None,
            arg0: None,
            command,
        }
    }

    /// Parses the helper's arguments (without the program name or any subcommand word).
    pub fn parse<I, S>(args: I) -> Result<SandboxArgs, BashError>
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        let mut it = args.into_iter().map(Into::into);
        let mut mode = None;
        let mut out = SandboxArgs::new(SandboxMode::ReadOnly, Vec::new());
        let bad = |m: String| BashError::HelperArgs(m);
        while let Some(arg) = it.next() {
            let text = arg.to_str().map(str::to_owned);
            match text.as_deref() {
                Some("--") => {
                    out.command = it.by_ref().collect();
                    break;
                }
                Some("--mode") => {
                    let v = value(&mut it, "--mode")?;
                    let v = v
                        .to_str()
                        .ok_or_else(|| bad("--mode is not UTF-8".into()))?;
                    mode = Some(v.parse::<SandboxMode>()?);
                }
                Some("--root") => out.roots.push(PathBuf::from(value(&mut it, "--root")?)),
                Some("--tmp") => out.tmp = Some(PathBuf::from(value(&mut it, "--tmp")?)),
                Some("--max-file-size") => {
                    let v = value(&mut it, "--max-file-size")?;
                    let n = v
                        .to_str()
                        .and_then(|s| s.parse::<u64>().ok())
                        .ok_or_else(|| bad("--max-file-size needs a number of bytes".into()))?;
                    out.max_file_size = Some(n);
                }
                Some("--simulate-no-landlock") => out.simulate_no_landlock = true,
                Some("--arg0") => out.arg0 = Some(value(&mut it, "--arg0")?),
                Some("--probe") => out.probe = true,
                Some("--serve") => out.serve = true,
                Some("--parent-pid") => {
                    let v = value(&mut it, "--parent-pid")?;
                    let n = v
                        .to_str()
                        .and_then(|s| s.parse::<u32>().ok())
                        .filter(|n| *n > 0)
                        .ok_or_else(|| bad("--parent-pid needs a process id".into()))?;
                    out.parent_pid = Some(n);
                }
                _ => {
                    return Err(bad(format!(
                        "unexpected argument \"{}\"",
                        arg.to_string_lossy()
                    )));
                }
            }
        }
        out.mode = mode.ok_or_else(|| bad("--mode is required".into()))?;
        let no_command = out.probe || out.serve;
        if out.probe && out.serve {
            return Err(bad("--probe and --serve exclude each other".into()));
        }
        if no_command != out.command.is_empty() {
            return Err(bad(if no_command {
                "--probe and --serve take no command".into()
            } else {
                "a command is required after --".into()
            }));
        }
        Ok(out)
    }

    /// The command line the helper parses back into `self`.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut v: Vec<OsString> = vec!["--mode".into(), self.mode.as_str().into()];
        for r in &self.roots {
            v.push("--root".into());
            v.push(r.clone().into_os_string());
        }
        if let Some(t) = &self.tmp {
            v.push("--tmp".into());
            v.push(t.clone().into_os_string());
        }
        if let Some(n) = self.max_file_size {
            v.push("--max-file-size".into());
            v.push(n.to_string().into());
        }
        if self.simulate_no_landlock {
            v.push("--simulate-no-landlock".into());
        }
        if let Some(p) = self.parent_pid {
            v.push("--parent-pid".into());
            v.push(p.to_string().into());
        }
        if let Some(a) = &self.arg0 {
            v.push("--arg0".into());
            v.push(a.clone());
        }
        if self.probe {
            v.push("--probe".into());
        } else if self.serve {
            v.push("--serve".into());
        } else {
            v.push("--".into());
            v.extend(self.command.iter().cloned());
        }
        v
    }
}

fn value(it: &mut impl Iterator<Item = OsString>, flag: &str) -> Result<OsString, BashError> {
    match it.next() {
        Some(v) if v.as_os_str() != OsStr::new("--") => Ok(v),
        _ => Err(BashError::HelperArgs(format!("{flag} needs a value"))),
    }
}
