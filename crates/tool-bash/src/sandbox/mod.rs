//! The sandbox helper: a small program (the `dsh` binary re-executed as `dsh __sandbox-exec`, or
//! the `dsh-sandbox-exec` program) that contains itself and then `exec`s the command, so no
//! `unsafe` `pre_exec` code is needed anywhere.
//!
//! Order of steps: file-size limit, `no_new_privs`, capabilities dropped, Landlock, seccomp,
//! `exec`. Any step that fails ends the helper with [`SETUP_FAILED_EXIT`] and one stderr line
//! starting with [`SETUP_MARKER`]: the command never runs uncontained.
//!
//! Three ways to run it: a per-call helper (`-- PROGRAM ARGS`: every step, then it starts the
//! command and watches it), the session supervisor (`--serve`: every step but seccomp on itself,
//! then it starts each command dsh sends it, installing the filter in each command's child
//! before its `exec`).

mod args;
mod fs_rules;
mod net_filter;
mod orphans;
mod privileges;
mod serve;
pub(crate) mod wire;

use std::ffi::OsString;
use std::path::PathBuf;

pub use args::SandboxArgs;
pub use fs_rules::LandlockReport;

use crate::mode::SandboxMode;

/// The helper's exit code when it could not contain the command (nothing was run).
pub const SETUP_FAILED_EXIT: i32 = 121;
/// The start of the helper's one stderr line when it could not contain the command.
pub const SETUP_MARKER: &str = "dsh-sandbox: cannot enforce the sandbox: ";
/// The start of a successful probe's stdout line.
pub const PROBE_MARKER: &str = "dsh-sandbox: enforced ";

/// What a contained setup enforced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Enforced {
    /// The mode.
    pub mode: SandboxMode,
    /// Landlock's report (`None` for `danger-full-access`).
    pub landlock: Option<LandlockReport>,
}

impl Enforced {
    /// The probe's line: `dsh-sandbox: enforced <mode> landlock-abi=<n> full=<bool>`.
    pub fn line(&self) -> String {
        match &self.landlock {
            None => format!("{PROBE_MARKER}{} landlock=none", self.mode),
            Some(l) => format!(
                "{PROBE_MARKER}{} landlock-abi={} full={}",
                self.mode, l.abi, l.fully_enforced
            ),
        }
    }
}

/// Contains the calling thread as `args` asks (without running anything).
pub fn apply(args: &SandboxArgs) -> Result<Enforced, SetupError> {
    let (enforced, filter) = restrict(args)?;
    if let Some(filter) = filter {
        install_filter(filter)?;
    }
    Ok(enforced)
}

/// Which calls the seccomp filter of a contained mode refuses beyond the fixed set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FilterChoice {
    /// Permission-bit changes (`read-only`, or a root caller).
    pub deny_chmod: bool,
    /// `AF_UNIX` sockets (Landlock cannot confine which socket files a command reaches).
    pub deny_unix_sockets: bool,
}

/// Every step but the seccomp filter: file-size limit, `no_new_privs`, capabilities dropped,
/// Landlock. Returns the filter a contained mode still needs (`None` for
/// `danger-full-access`). Each of these is inherited by every child and kept across `exec`.
pub fn restrict(args: &SandboxArgs) -> Result<(Enforced, Option<FilterChoice>), SetupError> {
    if let Some(n) = args.max_file_size {
        privileges::limit_file_size(n).map_err(|e| SetupError::new("limit the file size", e))?;
    }
    if !args.mode.is_contained() {
        let enforced = Enforced {
            mode: args.mode,
            landlock: None,
        };
        return Ok((enforced, None));
    }
    if args.simulate_no_landlock {
        return Err(SetupError::new(
            "restrict the filesystem",
            "Landlock is not supported by this kernel (simulated)",
        ));
    }
    privileges::no_new_privs().map_err(|e| SetupError::new("set no_new_privs", e))?;
    privileges::drop_capabilities().map_err(|e| SetupError::new("drop capabilities", e))?;
    let mut writable: Vec<PathBuf> = Vec::new();
    if args.mode.writes_workspace() {
        writable.extend(args.roots.iter().cloned());
    }
    writable.extend(args.tmp.iter().cloned());
    let report =
        fs_rules::restrict(&writable).map_err(|e| SetupError::new("restrict the filesystem", e))?;
    let filter = filter_choice(args.mode, !report.confines_unix_sockets);
    let enforced = Enforced {
        mode: args.mode,
        landlock: Some(report),
    };
    Ok((enforced, Some(filter)))
}

/// The filter for `mode` in this process (`deny_unix_sockets` as Landlock's report says).
pub fn filter_choice(mode: SandboxMode, deny_unix_sockets: bool) -> FilterChoice {
    FilterChoice {
        deny_chmod: mode == SandboxMode::ReadOnly || rustix::process::geteuid().is_root(),
        deny_unix_sockets,
    }
}

/// Installs the seccomp filter of a contained mode on the calling thread (`no_new_privs` must
/// be set already; it is inherited).
pub fn install_filter(choice: FilterChoice) -> Result<(), SetupError> {
    let filter = net_filter::build(choice.deny_chmod, choice.deny_unix_sockets)
        .map_err(|e| SetupError::new("build the network filter", e))?;
    net_filter::install(&filter).map_err(|e| SetupError::new("install the network filter", e))
}

/// A containment step that failed: which one, and why. The helper reports it and runs nothing.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("cannot {step}: {message}")]
pub struct SetupError {
    /// The step, e.g. `restrict the filesystem`.
    pub step: &'static str,
    /// Why it failed.
    pub message: String,
}

impl SetupError {
    pub(crate) fn new(step: &'static str, why: impl std::fmt::Display) -> SetupError {
        SetupError {
            step,
            message: why.to_string(),
        }
    }
}

/// The helper's whole life: parse, contain, then `exec` the command (or, for `--probe`, print
/// what was enforced and exit 0). Never returns.
pub fn exec_sandboxed<I, S>(args: I) -> !
where
    I: IntoIterator<Item = S>,
    S: Into<OsString>,
{
    let args = match SandboxArgs::parse(args) {
        Ok(a) => a,
        Err(e) => fail(&e.to_string()),
    };
    if args.serve {
        serve::serve(&args);
    }
    let enforced = match apply(&args) {
        Ok(e) => e,
        Err(e) => fail(&e.message),
    };
    if args.probe {
        println!("{}", enforced.line());
        std::process::exit(0);
    }
    let Some((program, rest)) = args.command.split_first() else {
        fail("no command");
    };
    supervise(program, args.arg0.as_deref(), rest, args.parent_pid)
}

/// How often the supervisor checks that dsh is still its parent.
const PARENT_POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// Runs the command as a child in this process group (it inherits the containment) and waits
/// for it, while a thread watches the parent: when dsh dies (even by `SIGKILL`, which it cannot
/// catch), this process is re-parented, and the watcher kills the whole group with `SIGKILL`,
/// so no command outlives dsh. The command's exit code (or its signal) becomes this process's.
/// `expected_parent` is dsh's pid as dsh passed it: a dsh that died before this process looked
/// at its parent is caught too (its orphan's parent is already someone else).
///
/// Why a supervisor rather than `PR_SET_PDEATHSIG` alone: the parent-death signal reaches one
/// process, not the group the command forks into, and catching it to kill the group would need
/// a signal handler; polling the parent id needs neither, at one wake-up per 50 ms.
///
/// The supervisor outlives the `SIGTERM` that a timeout or a cancellation sends the group (it
/// catches it and keeps waiting; the command, with its own dispositions, gets it as before), so
/// it still watches during the grace that follows, until the command exits or `SIGKILL` comes.
fn supervise(
    program: &std::ffi::OsStr,
    arg0: Option<&std::ffi::OsStr>,
    rest: &[OsString],
    expected_parent: Option<u32>,
) -> ! {
    use std::os::unix::process::CommandExt;
    let parent = expected_parent.unwrap_or_else(std::os::unix::process::parent_id);
    // Installed before the command is spawned; its exec restores the default disposition.
    let _term = survive_sigterm();
    orphans::adopt();
    let mut command = std::process::Command::new(program);
    if let Some(arg0) = arg0 {
        command.arg0(arg0);
    }
    let mut child = match command.args(rest).spawn() {
        Ok(c) => c,
        Err(err) => {
            eprintln!(
                "dsh-sandbox: cannot run {}: {err}",
                program.to_string_lossy()
            );
            std::process::exit(127);
        }
    };
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(PARENT_POLL);
            if std::os::unix::process::parent_id() != parent {
                let _ = rustix::process::kill_current_process_group(rustix::process::Signal::KILL);
            }
        }
    });
    let status = match child.wait() {
        Ok(s) => s,
        Err(err) => {
            eprintln!("dsh-sandbox: cannot wait for the command: {err}");
            std::process::exit(127);
        }
    };
    // What left the command's group and outlived it was adopted here: it ends with the call.
    orphans::end_adopted();
    use std::os::unix::process::ExitStatusExt;
    if let Some(code) = status.code() {
        std::process::exit(code);
    }
    // Killed by a signal: end the same way, so dsh sees what the command saw. This process's
    // own handlers (Rust's for SIGSEGV and SIGBUS, SIGPIPE ignored) would swallow the signal, so
    // the process image is replaced by a shell that sends it to itself (an `exec` restores the
    // default dispositions; the pid, which dsh waits on, stays the same).
    let signal = status.signal().unwrap_or(0);
    if signal > 0 {
        let _ = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(format!("kill -{signal} $$"))
            .exec();
    }
    std::process::exit(128 + signal);
}

/// Catches `SIGTERM` for the rest of this process's life (a caught signal does not end it);
/// keep the result alive. `None` when the handler cannot be installed: the supervisor then dies
/// of `SIGTERM` as before, which ends nothing that was not ending anyway.
fn survive_sigterm() -> Option<(tokio::runtime::Runtime, tokio::signal::unix::Signal)> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    let term = rt
        .block_on(async {
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        })
        .ok()?;
    Some((rt, term))
}

fn fail(reason: &str) -> ! {
    eprintln!("{SETUP_MARKER}{reason}");
    std::process::exit(SETUP_FAILED_EXIT);
}
