//! Running one command: a fresh `bash -c` in its own process group (through the sandbox helper
//! for a contained mode), output pumped into [`crate::capture`], and supervision until it ends,
//! times out, is cancelled, or spawns too many processes.
//!
//! Guarantees: whatever ends the call, the whole group is gone (`SIGTERM`, a grace period,
//! `SIGKILL`) before [`run`] returns, including anything the shell left running after it
//! exited; what was captured up to then is returned; the private temp dir is removed.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use dsh_core::{AbortReason, Signal};

use crate::capture::{self, SharedStream, SpoolPaths};
use crate::config::BashConfig;
use crate::group::{Ended, KillOnDrop, ProcessGroup};
use crate::mode::SandboxMode;
use crate::sandbox::{SETUP_FAILED_EXIT, SETUP_MARKER, SandboxArgs};

/// One command to run.
#[derive(Clone, Debug)]
pub struct RunSpec {
    /// The mode it runs under.
    pub mode: SandboxMode,
    /// The shell command.
    pub command: String,
    /// Its working directory (inside a root).
    pub cwd: PathBuf,
    /// The workspace roots.
    pub roots: Vec<PathBuf>,
    /// Its budget.
    pub timeout: Duration,
    /// The call's signal.
    pub signal: Signal,
    /// A file-name stem for its spooled output.
    pub stem: String,
}

/// What stopped the command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stop {
    /// It exited (or was killed by a signal it did not get from us).
    Exited,
    /// Its own budget elapsed.
    TimedOut,
    /// The call was cancelled (or the tool's deadline fired).
    Aborted(AbortReason),
    /// Its group grew past the process limit.
    ProcessLimit(usize),
}

/// What happened.
pub struct RunOutcome {
    /// The exit code, if it exited.
    pub code: Option<i32>,
    /// The signal that killed the shell, if one did.
    pub signal: Option<i32>,
    /// What stopped it.
    pub stop: Stop,
    /// stdout as captured.
    pub stdout: SharedStream,
    /// stderr as captured.
    pub stderr: SharedStream,
    /// Where the output is spooled (files exist only for a stream that outgrew its tail).
    pub spool: SpoolPaths,
    /// Whether the group was fully ended.
    pub ended: Ended,
    /// The helper could not contain the command (nothing ran): why.
    pub setup_failure: Option<String>,
}

/// Why a command could not be started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpawnError {
    /// The private temp dir could not be made.
    #[error("cannot create the command's temp dir: {0}")]
    TempDir(String),
    /// A contained mode was asked for without a helper.
    #[error("no sandbox helper program is configured")]
    NoHelper,
    /// The process could not be spawned.
    #[error("cannot start {program}: {error}")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        error: String,
    },
}

/// How often the process count is checked.
const WATCH_INTERVAL: Duration = Duration::from_millis(50);
/// How long output is drained after the group ended (a process that left the group may hold a
/// pipe open forever).
const DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// Shells named without a `/`, as found on `PATH` the first time each was run.
static SHELLS: parking_lot::Mutex<Vec<(PathBuf, PathBuf)>> = parking_lot::Mutex::new(Vec::new());

/// `shell` as a path: a name without a `/` is looked up on `PATH` once per process (as `execvp`
/// would: the first executable file of that name), so that each call's spawn (and the helper's)
/// does not try every `PATH` entry again; a failed `execve` costs tens of µs. A name not found
/// is left as it is: the spawn then reports it.
fn shell_path(shell: &std::path::Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    if shell.as_os_str().is_empty() || shell.components().count() != 1 || shell.is_absolute() {
        return shell.to_path_buf();
    }
    if let Some((_, found)) = SHELLS.lock().iter().find(|(name, _)| name == shell) {
        return found.clone();
    }
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .filter(|dir| dir.is_absolute())
            .map(|dir| dir.join(shell))
            .find(|p| {
                std::fs::metadata(p)
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
    });
    match found {
        Some(found) => {
            SHELLS.lock().push((shell.to_path_buf(), found.clone()));
            found
        }
        None => shell.to_path_buf(),
    }
}

/// Runs `spec` under `config`.
pub async fn run(config: &BashConfig, spec: RunSpec) -> Result<RunOutcome, SpawnError> {
    let parent = config.temp_parent.clone();
    let tmp = tokio::task::spawn_blocking(move || {
        tempfile::Builder::new()
            .prefix("dsh-bash-")
            .tempdir_in(parent)
    })
    .await
    .map_err(|e| SpawnError::TempDir(e.to_string()))?
    .map_err(|e| SpawnError::TempDir(e.to_string()))?;
    let shell = shell_path(&config.shell);
    // Found on `PATH`: the shell still starts under the name it was configured with.
    let arg0 = (shell != config.shell).then(|| config.shell.clone().into_os_string());
    let shell_args: Vec<OsString> = vec![
        shell.clone().into_os_string(),
        "-c".into(),
        spec.command.clone().into(),
    ];
    let (program, args): (PathBuf, Vec<OsString>) = match (&config.helper, spec.mode) {
        (Some(helper), mode) => {
            let mut sa = SandboxArgs::new(mode, shell_args);
            sa.roots = spec.roots.clone();
            sa.tmp = Some(tmp.path().to_path_buf());
            sa.max_file_size = config.max_file_size;
            sa.simulate_no_landlock = config.simulate_no_landlock;
            sa.parent_pid = Some(std::process::id());
            sa.arg0 = arg0.clone();
            (helper.program().to_path_buf(), helper.command_args(&sa))
        }
        (None, SandboxMode::DangerFullAccess) => (shell.clone(), shell_args[1..].to_vec()),
        (None, _) => return Err(SpawnError::NoHelper),
    };
    let mut cmd = tokio::process::Command::new(&program);
    if program == shell
        && let Some(arg0) = &arg0
    {
        cmd.arg0(arg0);
    }
    cmd.args(&args)
        .current_dir(&spec.cwd)
        .env("TMPDIR", tmp.path())
        .env("TMP", tmp.path())
        .env("TEMP", tmp.path())
        .env("DSH_SANDBOX_MODE", spec.mode.as_str())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(root) = spec.roots.first() {
        cmd.env("DSH_WORKSPACE", root);
    }
    let mut child = cmd.spawn().map_err(|e| SpawnError::Spawn {
        program: program.display().to_string(),
        error: e.to_string(),
    })?;
    let group = child.id().and_then(ProcessGroup::new);
    let mut guard = group.map(KillOnDrop::new);

    let stdout = capture::stream(config.max_output_bytes);
    let stderr = capture::stream(config.max_output_bytes);
    let spool = SpoolPaths::new(&config.output_dir, &spec.stem);
    let (spool_out, spool_err) = spool.spools(config.max_spool_bytes);
    let pumps = [
        child
            .stdout
            .take()
            .map(|r| tokio::spawn(capture::pump(r, stdout.clone(), Some(spool_out)))),
        child
            .stderr
            .take()
            .map(|r| tokio::spawn(capture::pump(r, stderr.clone(), Some(spool_err)))),
    ];

    let watchdog = async {
        match (group, config.max_processes) {
            (Some(g), Some(max)) => loop {
                tokio::time::sleep(WATCH_INTERVAL).await;
                let n = g.live_members().await;
                if n > max {
                    return n;
                }
            },
            _ => std::future::pending().await,
        }
    };
    let mut status = None;
    let stop = tokio::select! {
        s = child.wait() => { status = s.ok(); Stop::Exited }
        _ = tokio::time::sleep(spec.timeout) => Stop::TimedOut,
        r = spec.signal.aborted() => Stop::Aborted(r),
        n = watchdog => Stop::ProcessLimit(n),
    };
    let ended = match group {
        None => Ended::Empty,
        Some(g) => match stop {
            Stop::ProcessLimit(_) => g.kill().await,
            _ => g.terminate(config.kill_grace).await,
        },
    };
    if status.is_none() {
        status = child.wait().await.ok();
    }
    if ended == Ended::Empty
        && let Some(g) = guard.as_mut()
    {
        g.disarm();
    }
    drop(guard);
    for pump in pumps.into_iter().flatten() {
        let abort = pump.abort_handle();
        if tokio::time::timeout(DRAIN_LIMIT, pump).await.is_err() {
            abort.abort();
        }
    }
    let (code, signal) = match status {
        Some(s) => {
            use std::os::unix::process::ExitStatusExt;
            (s.code(), s.signal())
        }
        None => (None, None),
    };
    let setup_failure = if spec.mode.is_contained() && code == Some(SETUP_FAILED_EXIT) {
        let err = stderr.lock();
        let text = String::from_utf8_lossy(err.tail(4096)).into_owned();
        text.lines()
            .find_map(|l| l.strip_prefix(SETUP_MARKER))
            .map(str::to_owned)
    } else {
        None
    };
    // The temp dir goes now that nothing can be writing to it.
    let _ = tokio::task::spawn_blocking(move || drop(tmp)).await;
    Ok(RunOutcome {
        code,
        signal,
        stop,
        stdout,
        stderr,
        spool,
        ended,
        setup_failure,
    })
}
