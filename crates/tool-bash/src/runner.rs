//! Running one command: a fresh `bash -c` in its own process group (started by the session
//! supervisor of its mode, else through a helper of its own), output pumped into
//! [`crate::capture`], and supervision until it ends, times out, is cancelled, or spawns too
//! many processes.
//!
//! Guarantees: whatever ends the call, the whole group is gone (`SIGTERM`, a grace period,
//! `SIGKILL`) before [`run`] returns, including anything the shell left running after it
//! exited; what was captured up to then is returned; the private temp dir is removed.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use dsh_core::{AbortReason, Signal};
use dsh_process::{Ended, KillOnDrop, ProcessGroup};

use crate::capture::{self, SharedStream, SpoolPaths};
use crate::config::BashConfig;
use crate::mode::SandboxMode;
use crate::sandbox::{SETUP_FAILED_EXIT, SETUP_MARKER, SandboxArgs};
use crate::supervisor::{Pool, SupervisedError, Supervisor};

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
    /// The session supervisor failed the call.
    #[error("{0}")]
    Supervisor(String),
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

/// Runs `spec` under `config`: through the session supervisor of its mode from `pool` when
/// there is one (started on first use), else through a helper of its own (or, without a helper,
/// the shell alone in `danger-full-access`).
pub async fn run(
    config: &BashConfig,
    pool: &Pool,
    spec: RunSpec,
) -> Result<RunOutcome, SpawnError> {
    if spec.command.len() <= MAX_SUPERVISED_COMMAND
        && let Some(sup) = pool.get(config, spec.mode, &spec.roots).await
    {
        return run_supervised(config, &sup, spec).await;
    }
    run_per_call(config, spec).await
}

/// Longest command sent to a supervisor (a message must fit its socket's buffer); a longer one
/// takes the per-call path.
const MAX_SUPERVISED_COMMAND: usize = 64 * 1024;

/// The environment every command gets on top of dsh's.
fn command_env(
    mode: SandboxMode,
    tmp: &std::path::Path,
    roots: &[PathBuf],
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = ["TMPDIR", "TMP", "TEMP"]
        .into_iter()
        .map(|k| (k.into(), tmp.as_os_str().to_owned()))
        .collect();
    env.push(("DSH_SANDBOX_MODE".into(), mode.as_str().into()));
    if let Some(root) = roots.first() {
        env.push(("DSH_WORKSPACE".into(), root.as_os_str().to_owned()));
    }
    env
}

/// Checks the group's size every [`WATCH_INTERVAL`]; resolves with the count once it passes
/// `max` (never, without a group or a limit).
async fn watchdog(group: Option<ProcessGroup>, max: Option<usize>) -> usize {
    match (group, max) {
        (Some(g), Some(max)) => loop {
            tokio::time::sleep(WATCH_INTERVAL).await;
            let n = g.live_members().await;
            if n > max {
                return n;
            }
        },
        _ => std::future::pending().await,
    }
}

/// Waits for the output pumps to reach end-of-file, each for at most [`DRAIN_LIMIT`].
async fn drain(pumps: impl IntoIterator<Item = Option<tokio::task::JoinHandle<()>>>) {
    for pump in pumps.into_iter().flatten() {
        let abort = pump.abort_handle();
        if tokio::time::timeout(DRAIN_LIMIT, pump).await.is_err() {
            abort.abort();
        }
    }
}

/// The helper's reason when it could not contain the command (nothing ran).
fn setup_failure(mode: SandboxMode, code: Option<i32>, stderr: &SharedStream) -> Option<String> {
    if !(mode.is_contained() && code == Some(SETUP_FAILED_EXIT)) {
        return None;
    }
    let err = stderr.lock();
    let text = String::from_utf8_lossy(err.tail(4096)).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix(SETUP_MARKER))
        .map(str::to_owned)
}

/// The shell, its arguments (`shell -c command`), and the name it starts under when it was
/// found on `PATH`.
fn shell_command(config: &BashConfig, command: &str) -> (Vec<OsString>, Option<OsString>) {
    let shell = shell_path(&config.shell);
    // Found on `PATH`: the shell still starts under the name it was configured with.
    let arg0 = (shell != config.shell).then(|| config.shell.clone().into_os_string());
    (
        vec![shell.into_os_string(), "-c".into(), command.into()],
        arg0,
    )
}

/// [`run`] through the session supervisor `sup`: one `exec`, the shell's, in every mode, and no
/// fork of dsh.
async fn run_supervised(
    config: &BashConfig,
    sup: &Arc<Supervisor>,
    spec: RunSpec,
) -> Result<RunOutcome, SpawnError> {
    use rustix::pipe::{PipeFlags, pipe_with};
    // A few system calls: made here rather than on a blocking thread (a hop costs more).
    let tmp = tempfile::Builder::new()
        .prefix("dsh-bash-")
        .tempdir_in(sup.tmp_root())
        .map_err(|e| SpawnError::TempDir(e.to_string()))?;
    let pipe_error = |e: rustix::io::Errno| SpawnError::Spawn {
        program: "bash".to_owned(),
        error: format!("pipe: {e}"),
    };
    let (out_r, out_w) = pipe_with(PipeFlags::CLOEXEC).map_err(pipe_error)?;
    let (err_r, err_w) = pipe_with(PipeFlags::CLOEXEC).map_err(pipe_error)?;
    // The supervisor carries the mode's containment; a contained command's child installs the
    // seccomp filter itself before the shell's `exec`.
    let (argv, arg0) = shell_command(config, &spec.command);
    let env = command_env(spec.mode, tmp.path(), &spec.roots);
    let stdout = capture::stream(config.max_output_bytes);
    let stderr = capture::stream(config.max_output_bytes);
    let spool = SpoolPaths::new(&config.output_dir, &spec.stem);
    let (spool_out, spool_err) = spool.spools(config.max_spool_bytes);
    let reader = |fd| {
        tokio::net::unix::pipe::Receiver::from_owned_fd(fd).map_err(|e| SpawnError::Spawn {
            program: "bash".to_owned(),
            error: format!("pipe: {e}"),
        })
    };
    let (out_r, err_r) = (reader(out_r)?, reader(err_r)?);
    let pumps = [
        Some(tokio::spawn(capture::pump(
            out_r,
            stdout.clone(),
            Some(spool_out),
        ))),
        Some(tokio::spawn(capture::pump(
            err_r,
            stderr.clone(),
            Some(spool_err),
        ))),
    ];
    let start = sup.run(spec.cwd.clone(), arg0, env, argv, [out_w, err_w]);
    // A start that never answers (a stopped supervisor) still honours the call's signal; the
    // abandoned request tells the supervisor to kill the group if it started.
    let started = tokio::select! {
        r = start => Some(r),
        _ = spec.signal.aborted() => None,
    };
    let mut call = match started {
        Some(Ok(call)) => call,
        None => {
            drain(pumps).await;
            remove_tmp(tmp).await;
            return Err(SpawnError::Supervisor(
                "the call was cancelled before the sandbox supervisor started its command"
                    .to_owned(),
            ));
        }
        Some(Err(e)) => {
            drain(pumps).await;
            return Err(match e {
                SupervisedError::Spawn(error) => SpawnError::Spawn {
                    program: "bash".to_owned(),
                    error,
                },
                other => SpawnError::Supervisor(other.to_string()),
            });
        }
    };
    // Started by the supervisor, led by the shell: owned here from now on.
    let mut guard = ProcessGroup::new(call.pid()).map(KillOnDrop::new);
    let group = guard.as_ref().and_then(KillOnDrop::group);
    let mut status = None;
    let mut died = false;
    let stop = tokio::select! {
        s = call.exit() => { died = s.is_none(); status = s; Stop::Exited }
        _ = tokio::time::sleep(spec.timeout) => Stop::TimedOut,
        r = spec.signal.aborted() => Stop::Aborted(r),
        n = watchdog(group, config.max_processes) => Stop::ProcessLimit(n),
    };
    // Seen empty, the guard is disarmed: nothing is left for its drop to kill.
    let ended = match guard.as_mut() {
        None => Ended::Empty,
        Some(g) if died => g.kill().await,
        Some(g) => match stop {
            Stop::ProcessLimit(_) => g.kill().await,
            _ => g.terminate(config.kill_grace).await,
        },
    };
    if status.is_none() && !died {
        // The group is gone: the supervisor reports the leader's exit at once.
        status = tokio::time::timeout(DRAIN_LIMIT, call.exit())
            .await
            .ok()
            .flatten();
        died = status.is_none();
    }
    drop(call);
    drop(guard);
    drain(pumps).await;
    remove_tmp(tmp).await;
    if died {
        spool.discard(&stdout, &stderr).await;
        return Err(SpawnError::Supervisor(SupervisedError::Died.to_string()));
    }
    let (code, signal) = status.unwrap_or((None, None));
    let setup_failure = setup_failure(spec.mode, code, &stderr);
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

/// Removes a call's temp dir: at once when it is empty (the usual case), else on a blocking
/// thread.
async fn remove_tmp(tmp: tempfile::TempDir) {
    if std::fs::remove_dir(tmp.path()).is_ok() {
        // Its own removal now finds nothing, which it ignores.
        drop(tmp);
        return;
    }
    let _ = tokio::task::spawn_blocking(move || drop(tmp)).await;
}

/// [`run`] through a helper of its own (or the shell alone).
async fn run_per_call(config: &BashConfig, spec: RunSpec) -> Result<RunOutcome, SpawnError> {
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
    let (shell_args, arg0) = shell_command(config, &spec.command);
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
    for var in dsh_process::WITHHELD_ENV {
        cmd.env_remove(var);
    }
    if program == shell
        && let Some(arg0) = &arg0
    {
        cmd.arg0(arg0);
    }
    cmd.args(&args)
        .current_dir(&spec.cwd)
        .envs(command_env(spec.mode, tmp.path(), &spec.roots))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let (mut child, mut guard) = dsh_process::lead(&mut cmd).map_err(|e| SpawnError::Spawn {
        program: program.display().to_string(),
        error: e.to_string(),
    })?;
    let group = guard.group();

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

    let mut status = None;
    let stop = tokio::select! {
        s = child.wait() => { status = s.ok(); Stop::Exited }
        _ = tokio::time::sleep(spec.timeout) => Stop::TimedOut,
        r = spec.signal.aborted() => Stop::Aborted(r),
        n = watchdog(group, config.max_processes) => Stop::ProcessLimit(n),
    };
    let ended = match stop {
        Stop::ProcessLimit(_) => guard.kill().await,
        _ => guard.terminate(config.kill_grace).await,
    };
    if status.is_none() {
        status = child.wait().await.ok();
    }
    drop(guard);
    drain(pumps).await;
    let (code, signal) = match status {
        Some(s) => {
            use std::os::unix::process::ExitStatusExt;
            (s.code(), s.signal())
        }
        None => (None, None),
    };
    let setup_failure = setup_failure(spec.mode, code, &stderr);
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
